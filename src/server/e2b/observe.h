/* What E2B shows of a sandbox and a team while they run (observe.c):
 * metrics and logs. */
#ifndef HUTCH_E2B_OBSERVE_H
#define HUTCH_E2B_OBSERVE_H

struct http_conn;
struct principal;

/* Route handlers (routes.c). */
void e2b_sandboxes_metrics(struct http_conn *c, const struct principal *p);
void e2b_sandboxes_metrics_many(struct http_conn *c, const struct principal *p);
void e2b_team_metrics(struct http_conn *c, const struct principal *p);
void e2b_sandboxes_logs(struct http_conn *c, const struct principal *p);
void e2b_sandboxes_logs_v1(struct http_conn *c, const struct principal *p);

#endif
