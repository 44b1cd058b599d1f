/* GET /metrics (metrics.c): the server's counters in Prometheus' text
 * format. */
#ifndef HUTCH_API_METRICS_H
#define HUTCH_API_METRICS_H

struct http_conn;
struct principal;

/* The native API's route handler (routes.c). */
void api_metrics(struct http_conn *c, const struct principal *p);

#endif
