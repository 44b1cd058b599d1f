/* The MCP protocol, transport aside: one JSON-RPC message of a session's
 * client in, its answer out. serve_stdio.c and the HTTP front end
 * (src/server/mcp/) read and write the messages; everything they mean
 * is here and in tools.c.
 *
 * Revisions spoken: 2025-11-25 (with its tasks utility), and the earlier
 * 2025-06-18 and 2025-03-26 a client may ask for. */
#ifndef HUTCH_MCP_ENGINE_H
#define HUTCH_MCP_ENGINE_H

#include <jansson.h>
#include <stdbool.h>

#include "session.h"
#include "tools.h"

#define MCP_LATEST "2025-11-25"

/* JSON-RPC's error codes. */
#define RPC_PARSE_ERROR (-32700)
#define RPC_INVALID_REQUEST (-32600)
#define RPC_METHOD_NOT_FOUND (-32601)
#define RPC_INVALID_PARAMS (-32602)
#define RPC_INTERNAL (-32603)
#define RPC_RESOURCE_NOT_FOUND (-32002)

/* Answer msg (a request, a notification, or a response to us). Returns
 * the response, or NULL when none is due (notifications). May block for
 * as long as the tool runs: call it on a thread of its own. out carries
 * what the request sends before its response (progress). */
json_t *mcp_handle(struct mcp_session *s, json_t *msg, const struct mcp_sink *out);

/* A JSON-RPC error response (id may be NULL: null). */
json_t *mcp_rpc_error(json_t *id, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Shared by engine.c and modern.c. */
json_t *mcp_reply(json_t *id, json_t *result); /* takes result's reference */
json_t *mcp_tools_list(void);
/* tools/call's tool and its arguments (a reference in *args); NULL with
 * the error response in *error when there is no such tool or the
 * arguments are not an object. */
const struct mcp_tool *mcp_call_tool(json_t *id, json_t *params, json_t **args, json_t **error);
/* Run t with args checked against its schema; the audit hook hears it. */
json_t *mcp_run_tool(struct mcp_session *s, const struct mcp_tool *t, json_t *args,
                     json_t *progress, const atomic_bool *cancel, const struct mcp_sink *out);
/* t on a thread of its own as a task of s; NULL when s has its maximum. */
struct mcp_task *mcp_task_start(struct mcp_session *s, const struct mcp_tool *t, json_t *args,
                                int64_t ttl_ms, const struct mcp_sink *out);

/* resources/list, resources/templates/list, resources/read. */
json_t *mcp_resources_method(struct mcp_session *s, json_t *id, const char *method, json_t *params);

/* Whether msg is a JSON-RPC request (has a method and an id). */
bool mcp_is_request(const json_t *msg);
/* The revision a client asked for, if hutch speaks it, else NULL. */
const char *mcp_version_known(const char *v);

#endif
