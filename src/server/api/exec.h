/* The native API's exec (exec.c): POST /v1/sandboxes/{id}/exec, and the
 * agent's exec request made from a native exec body. */
#ifndef HUTCH_API_EXEC_H
#define HUTCH_API_EXEC_H

#include <jansson.h>

struct sbx;
struct http_conn;
struct principal;

/* The agent's exec request from a native exec body o, or NULL after a
 * 400; *in: the stdin it gives, if any. */
json_t *api_exec_request(struct http_conn *c, const struct sbx *sb, json_t *o, const char **in);

/* The native API's route handler (routes.c). */
void api_exec(struct http_conn *c, const struct principal *p);

#endif
