/* GET /v1/events: the event stream (core/events/events.h) as NDJSON or
 * SSE, filtered, the kept events then (follow=1) those to come. */
#ifndef HUTCH_API_EVENTS_H
#define HUTCH_API_EVENTS_H

struct http_conn;
struct principal;

void api_events(struct http_conn *c, const struct principal *p);

#endif
