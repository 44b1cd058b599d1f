/* MCP's 2026-07-28 revision, the stateless era: no initialize and no
 * session; every request names its protocol version, client and
 * capabilities in params._meta; every result says its resultType;
 * server/discover tells what the server speaks; long work is the
 * io.modelcontextprotocol/tasks extension (tasks/get, tasks/update,
 * tasks/cancel), offered only to a client that declares it. */
#ifndef HUTCH_MCP_MODERN_H
#define HUTCH_MCP_MODERN_H

#include <jansson.h>
#include <stdbool.h>

#include "session.h"

#define MCP_MODERN "2026-07-28"
#define MCP_TASK_INLINE_MS 5000 /* a call that ends within this is answered whole */

/* JSON-RPC error codes of the revision. */
#define RPC_HEADER_MISMATCH (-32020)
#define RPC_MISSING_CAPABILITY (-32021)
#define RPC_UNSUPPORTED_VERSION (-32022)

/* The protocol version a request's _meta names, or NULL when it names
 * none (a request of the earlier era). */
const char *mcp_modern_version(const json_t *msg);
/* Answer a request of the 2026-07-28 era (mcp_modern_version named one). */
json_t *mcp_modern_handle(struct mcp_session *s, json_t *msg, const struct mcp_sink *out);

#endif
