/* E2B's lists, a page at a time (lists.c): sandboxes and snapshots, and
 * the RFC 3339 times their filters and pages are read in. */
#ifndef HUTCH_E2B_LISTS_H
#define HUTCH_E2B_LISTS_H

#include <stdbool.h>
#include <stdint.h>

struct http_conn;
struct principal;

/* Route handlers (routes.c). */
void e2b_sandboxes_list(struct http_conn *c, const struct principal *p);
void e2b_snapshots_list(struct http_conn *c, const struct principal *p);
/* An RFC 3339 time, as JavaScript's toISOString writes it
 * ("2026-11-26T17:30:00.123Z", or with an offset), in ms since the epoch. */
bool e2b_parse_time(const char *s, int64_t *ms);

#endif
