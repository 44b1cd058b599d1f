/* envd's process.Process service over Connect RPC (process.c), and
 * envd's health. */
#ifndef HUTCH_E2B_PROCESS_H
#define HUTCH_E2B_PROCESS_H

struct http_conn;
struct principal;

/* Route handlers (routes.c). */
void e2b_envd_health(struct http_conn *c, const struct principal *p);
void e2b_process_start(struct http_conn *c, const struct principal *p);
void e2b_process_connect(struct http_conn *c, const struct principal *p);
void e2b_process_list(struct http_conn *c, const struct principal *p);
void e2b_process_input(struct http_conn *c, const struct principal *p);
void e2b_process_close_stdin(struct http_conn *c, const struct principal *p);
void e2b_process_signal(struct http_conn *c, const struct principal *p);
void e2b_process_update(struct http_conn *c, const struct principal *p);

#endif
