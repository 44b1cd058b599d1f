/* A WebSocket on a background process (ws.c): GET
 * /v1/sandboxes/{id}/exec/{pid}/ws, for interactive sessions. */
#ifndef HUTCH_API_WS_H
#define HUTCH_API_WS_H

struct http_conn;
struct principal;

/* The native API's route handler (routes.c). */
void api_procs_ws(struct http_conn *c, const struct principal *p);

#endif
