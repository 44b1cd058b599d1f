/* hutch mcp over stdio: newline-delimited JSON-RPC on stdin and stdout,
 * logs on stderr only (the 2025-11-25 revision's stdio transport). */
#ifndef HUTCH_MCP_SERVE_STDIO_H
#define HUTCH_MCP_SERVE_STDIO_H

#include "client.h"

#define MCP_STDIO_LINE_MAX (16u << 20) /* one message: write_file's 8 MiB as base64, and more */

/* Serve one session until stdin ends; then end it (its sandboxes go).
 * Returns the exit status. */
int mcp_stdio_serve(const struct hc_client *n);

#endif
