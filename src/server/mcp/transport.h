/* /mcp on hutch serve: MCP's Streamable HTTP transport, revision
 * 2025-11-25 (docs/mcp.md). POST carries one JSON-RPC message (batches
 * are refused); initialize makes a session named by MCP-Session-Id, which
 * every later request carries with MCP-Protocol-Version; a request is
 * answered as JSON, or as an SSE stream when it may run long (tools/call,
 * tasks/result: progress and keep-alives go on it); GET is 405 (no
 * server-initiated stream); DELETE ends the session. */
#ifndef HUTCH_SERVER_MCP_TRANSPORT_H
#define HUTCH_SERVER_MCP_TRANSPORT_H

struct http_conn;
struct principal;

void mcp_transport_post(struct http_conn *c, const struct principal *p);
void mcp_transport_get(struct http_conn *c, const struct principal *p);
void mcp_transport_delete(struct http_conn *c, const struct principal *p);

#endif
