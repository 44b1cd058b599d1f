/* The route tables of every front end (the native API, E2B's REST API,
 * envd and the code interpreter), and what runs around every request:
 * the caller's key, the audit line, the metrics. */
#ifndef HUTCH_ROUTES_H
#define HUTCH_ROUTES_H

#include <stdbool.h>
#include <stdio.h>

#include "http/http.h"

struct server;

/* Find the route, check the caller's key, call the handler. */
void routes_dispatch(struct server *srv, struct http_conn *c);
/* Whether the route for req takes its body streamed (file uploads). */
bool routes_streams_body(struct server *srv, const struct http_req *req);
/* Called when a response has ended: audit line and metrics. */
void routes_request_done(struct server *srv, struct http_conn *c);
/* `hutch serve --routes=TABLE`: the table's routes, one "METHOD PATH" a
 * line; -1 when there is no such table. */
int routes_print(FILE *out, const char *table);
/* The transport's handlers: the four above and the descriptor check. */
extern const struct http_handlers routes_http;
/* The front ends' part in a sandbox's end (core/server.h). */
extern const struct serve_fronts routes_fronts;

#endif
