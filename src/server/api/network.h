/* A sandbox's network settings changed (network.c): PATCH
 * /v1/sandboxes/{id}/network, and the request both APIs parse alike. */
#ifndef HUTCH_API_NETWORK_H
#define HUTCH_API_NETWORK_H

#include <jansson.h>

struct sbx;
struct http_conn;
struct principal;

/* The sandbox and the body object of a request that changes its network
 * (fields of known only); NULL after an error answer. */
json_t *api_network_request(struct http_conn *c, const struct principal *p,
                            const char *const *known, struct sbx **sb);

/* The native API's route handler (routes.c). */
void api_sandboxes_network(struct http_conn *c, const struct principal *p);

#endif
