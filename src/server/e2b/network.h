/* E2B's network settings on hutch's (network.c): a create's as hutch's
 * {network, secrets} (NULL after a 400); a sandbox's as E2B shows them
 * {allowInternetAccess, network}; PUT /sandboxes/{id}/network. */
#ifndef HUTCH_E2B_NETWORK_H
#define HUTCH_E2B_NETWORK_H

#include <jansson.h>

struct sbx;
struct http_conn;
struct principal;

json_t *e2b_network_request(struct http_conn *c, const struct principal *p, json_t *o);
json_t *e2b_network_json(const struct sbx *sb);
void e2b_sandboxes_network(struct http_conn *c, const struct principal *p);

#endif
