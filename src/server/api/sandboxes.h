/* /v1/sandboxes (sandboxes.c): create, list, get, delete, timeout; and
 * the create and the timeout body both APIs answer alike. */
#ifndef HUTCH_API_SANDBOXES_H
#define HUTCH_API_SANDBOXES_H

struct sbx;
struct http_conn;
struct principal;

/* A create both APIs make (core/life/sbx_create.h): c waits for the
 * sandbox, render answers with it; an error is answered as the request's
 * dialect writes it. A client that leaves meanwhile leaves no sandbox
 * behind. */
struct create_req;
typedef void (*sandbox_render_fn)(struct http_conn *c, struct sbx *sb);
void api_sandboxes_make(struct http_conn *c, const struct principal *p, const struct create_req *r,
                        sandbox_render_fn render);
/* The sandbox and the optional {timeout_s} of its request body (t < 0
 * when absent); NULL after an error answer. */
struct sbx *api_sandboxes_timeout_body(struct http_conn *c, const struct principal *p, double *t);

/* The native API's route handlers (routes.c). */
void api_sandboxes_create(struct http_conn *c, const struct principal *p);
void api_sandboxes_list(struct http_conn *c, const struct principal *p);
void api_sandboxes_get(struct http_conn *c, const struct principal *p);
void api_sandboxes_delete(struct http_conn *c, const struct principal *p);
void api_sandboxes_timeout(struct http_conn *c, const struct principal *p);

#endif
