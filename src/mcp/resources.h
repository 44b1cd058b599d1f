/* MCP resources: what a client can show a user or attach to a prompt
 * without a tool call. The caller's sandboxes are listed as resources
 * (hutch://sandboxes/ID, their JSON), and any file of one is read through
 * the template hutch://sandboxes/{sandbox_id}/files/{+path} (text, or a
 * blob in base64). Reads are native API calls with the session's key, as
 * the tools' are. */
#ifndef HUTCH_MCP_RESOURCES_H
#define HUTCH_MCP_RESOURCES_H

#include <jansson.h>

#include "session.h"

/* resources/list, resources/templates/list and resources/read: the
 * result, or a JSON-RPC error response (then *is_error). */
json_t *mcp_resources_list(struct mcp_session *s, bool *is_error, char *why, size_t n);
json_t *mcp_resources_templates(void);
json_t *mcp_resources_read(struct mcp_session *s, json_t *params, bool *is_error, char *why,
                           size_t n);

#endif
