/* The event stream (docs/events.md): what happens to sandboxes, execs,
 * templates and quotas, as typed events every action reports here once,
 * kept in memory for the readers of /v1/events and the webhooks.
 *
 * An event has a sequence number (per server, strictly increasing, and
 * kept across restarts: events_open reserves numbers in the store a
 * block at a time, so a restart starts past every number handed out),
 * a time, a type, a tenant, a sandbox (or none) and its data. It is
 * rendered once, as the NDJSON line every reader sends.
 *
 * The ring keeps the newest: at most --events-max of them, at most
 * EVENTS_BYTES_MAX of lines, none older than --events-retention. A reader
 * that asks for older ones is told of the gap (events_gap_line).
 *
 * Subscribers (a follower of /v1/events, the webhooks) hear that a new
 * event is kept and read it from the ring at their own pace: emitting
 * never waits for a reader, and a reader that falls behind the ring's
 * oldest learns it from events_at returning NULL. */
#ifndef HUTCH_CORE_EVENTS_EVENTS_H
#define HUTCH_CORE_EVENTS_EVENTS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"

struct server;

#define EVENTS_DEFAULT_MAX 100000
#define EVENTS_DEFAULT_RETENTION_S 3600
#define EVENTS_BYTES_MAX (64u << 20) /* of lines kept, every tenant's */
#define EVENTS_LINE_MAX (8u << 10)   /* one event's line; longer data is cut */
#define EVENTS_CMD_MAX 1024     /* bytes of an exec's argv an event keeps */
#define EVENTS_STRING_MAX 1024  /* bytes of any other string in an event's data */
#define EVENTS_TYPE_MAX 31
#define EVENTS_SEQ_BLOCK 10000 /* sequence numbers reserved in the store at a time */

struct event {
  uint64_t seq;
  int64_t ms;
  char type[EVENTS_TYPE_MAX + 1];
  char tenant[65];
  char sandbox[17]; /* "" when none */
  char *line;       /* {"seq",...}\n */
  size_t len;
};

struct events_sub {
  struct events_sub *prev, *next;
  /* A new event is kept: read it (and what else is new) with events_at. */
  void (*notify)(struct events_sub *s);
};

struct events {
  struct event *ring;
  size_t cap, head, n; /* head: the oldest's slot */
  size_t bytes;
  uint64_t next_seq, reserved; /* the next number; numbers below reserved are the store's */
  int64_t retention_ms;
  struct events_sub *subs;
};

/* Which events a reader wants: a tenant's (NULL: every tenant's, the
 * admin's), a sandbox's, and types (exact, or a prefix ending ".*"). */
#define EVENTS_TYPES_MAX 16
struct events_filter {
  const char *tenant;
  char sandbox[17];
  char types[EVENTS_TYPES_MAX][EVENTS_TYPE_MAX + 1];
  size_t ntypes;
};

/* The ring, sized by cap and retention, its numbers after the store's. */
int events_open(struct server *srv, size_t cap, int64_t retention_s, struct hutch_err *err);
void events_free(struct server *srv);

/* Keep one event: type a string literal, sandbox NULL for none; takes
 * data's reference (NULL: {}). */
void events_emit(struct server *srv, const char *type, const char *tenant, const char *sandbox,
                 json_t *data);

/* The oldest number kept (the next one when none is), and the next. */
uint64_t events_first(struct server *srv);
uint64_t events_next(const struct server *srv);
/* The event numbered seq, or NULL: not kept (gone, or not yet). */
const struct event *events_at(const struct server *srv, uint64_t seq);

void events_subscribe(struct server *srv, struct events_sub *s);
void events_unsubscribe(struct server *srv, struct events_sub *s);

/* A comma-separated list of types into f (at most EVENTS_TYPES_MAX);
 * -1 with err (invalid_argument) when one is malformed. */
int events_filter_types(struct events_filter *f, const char *list, struct hutch_err *err);
bool events_filter_type(const struct events_filter *f, const char *type);
bool events_filter_match(const struct events_filter *f, const struct event *ev);

/* The line that says events from after to before (exclusive) are not
 * there (malloc'd, with its newline): {"type":"events.gap",...}. */
char *events_gap_line(uint64_t after, uint64_t before, const char *why, size_t *len);

#endif
