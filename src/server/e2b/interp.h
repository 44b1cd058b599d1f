/* E2B's code interpreter (interp.c), on sandbox port 49999. */
#ifndef HUTCH_E2B_INTERP_H
#define HUTCH_E2B_INTERP_H

struct http_conn;
struct principal;

/* Route handlers (routes.c). */
void e2b_interp_health(struct http_conn *c, const struct principal *p);
void e2b_execute(struct http_conn *c, const struct principal *p);
void e2b_contexts_create(struct http_conn *c, const struct principal *p);
void e2b_contexts_list(struct http_conn *c, const struct principal *p);
void e2b_contexts_delete(struct http_conn *c, const struct principal *p);
void e2b_contexts_restart(struct http_conn *c, const struct principal *p);

#endif
