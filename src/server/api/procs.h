/* The native API on background processes (procs.c): the process a route
 * names, and the routes that list, follow, signal, feed and kill them. */
#ifndef HUTCH_API_PROCS_H
#define HUTCH_API_PROCS_H

struct proc;
struct http_conn;
struct principal;

/* The background process of the route's {id} and {pid}, or NULL after a
 * 404. */
struct proc *api_proc(struct http_conn *c, const struct principal *p);

/* The native API's route handlers (routes.c). */
void api_procs_list(struct http_conn *c, const struct principal *p);
void api_procs_output(struct http_conn *c, const struct principal *p);
void api_procs_signal(struct http_conn *c, const struct principal *p);
void api_procs_stdin(struct http_conn *c, const struct principal *p);
void api_procs_kill(struct http_conn *c, const struct principal *p);

#endif
