/* The native API's code contexts and /code (contexts.c): the route
 * handlers, and the cell runner E2B's interpreter answers with too. */
#ifndef HUTCH_API_CONTEXTS_H
#define HUTCH_API_CONTEXTS_H

#include <jansson.h>
#include <stdbool.h>

struct sbx;
struct http_conn;
struct principal;

/* Run the cell of a native /code body o on c (NDJSON); e2b: only the
 * lines E2B's interpreter sends (no "artifacts"). */
void api_contexts_code(struct http_conn *c, struct sbx *sb, json_t *o, bool e2b);

/* The native API's route handlers (routes.c). */
void api_contexts_create(struct http_conn *c, const struct principal *p);
void api_contexts_list(struct http_conn *c, const struct principal *p);
void api_contexts_delete(struct http_conn *c, const struct principal *p);
void api_contexts_restart(struct http_conn *c, const struct principal *p);
void api_contexts_interrupt(struct http_conn *c, const struct principal *p);
void api_contexts_fork(struct http_conn *c, const struct principal *p);
void api_code(struct http_conn *c, const struct principal *p);

#endif
