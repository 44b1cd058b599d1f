/* The sandbox a request names, for the caller (and running, for requests
 * that need it so), and the native pause and resume (lifecycle.c). */
#ifndef HUTCH_API_LIFECYCLE_H
#define HUTCH_API_LIFECYCLE_H

#include <stdbool.h>

struct sbx;
struct http_conn;
struct principal;

/* The sandbox the route's {id} names, for the caller; NULL after a 404. */
struct sbx *api_sbx_lookup(struct http_conn *c, const struct principal *p);
/* The same for a request that needs it running: a paused sandbox is
 * resumed (auto_resume) or NULL after a 409. */
struct sbx *api_sbx_lookup_live(struct http_conn *c, const struct principal *p);
/* A paused sandbox a request needs running: resumed, or false after an
 * answer (409 when it may not be resumed by traffic). */
bool api_sbx_wake(struct http_conn *c, struct sbx *sb);

/* The native API's route handlers (routes.c). */
void api_sandboxes_pause(struct http_conn *c, const struct principal *p);
void api_sandboxes_resume(struct http_conn *c, const struct principal *p);

#endif
