/* /v1/webhooks: a tenant's webhooks (core/hooks/webhooks.h) made, listed,
 * read with their delivery log, deleted. */
#ifndef HUTCH_API_WEBHOOKS_H
#define HUTCH_API_WEBHOOKS_H

struct http_conn;
struct principal;

void api_webhooks_create(struct http_conn *c, const struct principal *p);
void api_webhooks_list(struct http_conn *c, const struct principal *p);
void api_webhooks_get(struct http_conn *c, const struct principal *p);
void api_webhooks_delete(struct http_conn *c, const struct principal *p);

#endif
