/* The native API's volumes (volumes.c), and the volume make both APIs
 * answer alike. */
#ifndef HUTCH_API_VOLUMES_H
#define HUTCH_API_VOLUMES_H

#include <jansson.h>
#include <stdint.h>

struct http_conn;
struct principal;

/* Make p's volume of size_mb for the request c; render answers with it
 * (the caller's for the call), unless the client left: then the volume
 * goes too. */
typedef void (*volume_render_fn)(struct http_conn *c, json_t *vol, const struct principal *p);
void api_volumes_make(struct http_conn *c, const struct principal *p, const char *name,
                      uint64_t size_mb, volume_render_fn render);

/* The native API's route handlers (routes.c). */
void api_volumes_create(struct http_conn *c, const struct principal *p);
void api_volumes_list(struct http_conn *c, const struct principal *p);
void api_volumes_get(struct http_conn *c, const struct principal *p);
void api_volumes_delete(struct http_conn *c, const struct principal *p);

#endif
