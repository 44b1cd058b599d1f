/* What sandboxes and tenants use, as the native API shows it (usage.c):
 * a sandbox's metrics, a tenant's usage, and the time range both APIs
 * read alike. */
#ifndef HUTCH_API_USAGE_H
#define HUTCH_API_USAGE_H

#include <stdint.h>

struct http_conn;
struct principal;

/* A metrics request's ?start=&end= (seconds since the epoch, as E2B's) in
 * ms; -1 after a 400. */
int api_usage_range(struct http_conn *c, int64_t *start_ms, int64_t *end_ms);

/* The native API's route handlers (routes.c). */
void api_sandboxes_metrics(struct http_conn *c, const struct principal *p);
void api_sandboxes_metrics_all(struct http_conn *c, const struct principal *p);
void api_usage(struct http_conn *c, const struct principal *p);

#endif
