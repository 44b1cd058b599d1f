/* The event ring (events.h): events kept in order of their numbers, so
 * the one numbered seq is found by arithmetic; the oldest go first when
 * the ring is full, holds too many bytes, or they pass the retention. */
#include "core/events/events.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"
#include "core/base/server.h"
#include "state/store_hooks.h"

#define SEQ_COUNTER "events.seq"

int events_open(struct server *srv, size_t cap, int64_t retention_s, struct hutch_err *err) {
  struct events *ev = xcalloc(1, sizeof *ev);
  ev->cap = cap;
  ev->ring = xcalloc(cap, sizeof *ev->ring);
  ev->retention_ms = retention_s * 1000;

  /* Numbers go on from the last block the store reserved: those a
   * killed server handed out are below it, so none is handed out twice. */
  uint64_t reserved = 0;
  if (srv->store && store_counter_get(srv->store, SEQ_COUNTER, &reserved, err) < 0) {
    free(ev->ring);
    free(ev);
    return -1;
  }
  ev->next_seq = ev->reserved = reserved + 1;
  srv->events = ev;
  return 0;
}

static void drop_oldest(struct events *ev) {
  struct event *e = &ev->ring[ev->head];
  ev->bytes -= e->len;
  free(e->line);
  memset(e, 0, sizeof *e);
  ev->head = (ev->head + 1) % ev->cap;
  ev->n--;
}

void events_free(struct server *srv) {
  struct events *ev = srv->events;
  if (!ev)
    return;
  while (ev->n)
    drop_oldest(ev);
  free(ev->ring);
  free(ev);
  srv->events = NULL;
}

/* Those past the retention go, oldest first. */
static void expire(struct events *ev, int64_t now) {
  while (ev->n && ev->ring[ev->head].ms < now - ev->retention_ms)
    drop_oldest(ev);
}

/* The next block of numbers is the store's before one of it is used. A
 * store that cannot write leaves the numbers going on from memory: the
 * next start may then reuse some, which a reader learns as a gap only. */
static void reserve(struct server *srv, struct events *ev) {
  if (ev->next_seq < ev->reserved || !srv->store)
    return;
  struct hutch_err err = {0};
  ev->reserved = ev->next_seq + EVENTS_SEQ_BLOCK;
  if (store_counter_put(srv->store, SEQ_COUNTER, ev->reserved - 1, &err) < 0)
    fprintf(stderr, "hutch serve: events: %s\n", err.msg);
}

/* s cut to at most max bytes, at a character's start (the ring's strings
 * are UTF-8): how many bytes are kept. */
static size_t utf8_cut(const char *s, size_t len, size_t max) {
  if (len <= max)
    return len;
  while (max > 0 && ((unsigned char)s[max] & 0xc0) == 0x80)
    max--;
  return max;
}

/* Every string in v (nested objects and arrays too) at most
 * EVENTS_STRING_MAX bytes: whether one was cut. */
static bool cut_strings(json_t *v, int depth) {
  bool cut = false;
  if (json_is_string(v)) {
    size_t len = json_string_length(v), keep = utf8_cut(json_string_value(v), len,
                                                         EVENTS_STRING_MAX);
    if (keep < len) {
      json_string_setn(v, json_string_value(v), keep); /* jansson copies it first */
      cut = true;
    }
  } else if (json_is_object(v) && depth < 8) {
    const char *k;
    json_t *x;
    json_object_foreach(v, k, x) cut = cut_strings(x, depth + 1) || cut;
  } else if (json_is_array(v) && depth < 8) {
    size_t i;
    json_t *x;
    json_array_foreach(v, i, x) cut = cut_strings(x, depth + 1) || cut;
  }
  return cut;
}

/* An exec's argv (data.cmd) kept to EVENTS_CMD_MAX bytes in all, the
 * argument that crosses it cut and those after it left out: whether it
 * was cut. */
static bool cut_cmd(json_t *cmd) {
  size_t used = 0, i;
  json_t *arg;
  json_array_foreach(cmd, i, arg) {
    const char *s = json_string_value(arg);
    size_t len = s ? json_string_length(arg) : 0, keep = utf8_cut(s, len, EVENTS_CMD_MAX - used);
    used += keep;
    if (keep == len)
      continue;
    if (keep) {
      json_string_setn(arg, s, keep);
      i++;
    }
    while (json_array_size(cmd) > i)
      json_array_remove(cmd, i);
    return true;
  }
  return false;
}

/* The size of what one event carries is bounded before it is kept: the
 * ring is every tenant's, and one tenant's large events (an exec's whole
 * argv, long strings in metadata or messages) would push the others'
 * out sooner. An exec's argv is cut to EVENTS_CMD_MAX ("cmd_cut": true),
 * any other string to EVENTS_STRING_MAX ("cut": true). It is cut in a
 * copy: data's values may be the caller's (an exec's argv, a sandbox's
 * metadata). Takes data's reference, returns the copy's. */
static json_t *bound(json_t *data) {
  json_t *d = json_deep_copy(data);
  json_decref(data);
  json_t *cmd = json_object_get(d, "cmd");
  if (json_is_array(cmd) && cut_cmd(cmd))
    json_object_set_new(d, "cmd_cut", json_true());
  if (cut_strings(d, 0))
    json_object_set_new(d, "cut", json_true());
  return d;
}

/* The event's line; data too large for EVENTS_LINE_MAX is replaced by
 * {"truncated":true} (metadata a tenant chose may be large). */
static char *render(const struct event *e, json_t *data, size_t *len) {
  char t[32];
  iso8601(e->ms, t);
  json_t *o = json_pack("{s:I,s:s,s:s,s:s,s:o,s:O}", "seq", (json_int_t)e->seq, "time", t, "type",
                        e->type, "tenant", e->tenant, "sandbox",
                        e->sandbox[0] ? json_string(e->sandbox) : json_null(), "data", data);
  char *s = json_dumps(o, JSON_COMPACT);
  if (strlen(s) > EVENTS_LINE_MAX) {
    free(s);
    json_object_set_new(o, "data", json_pack("{s:b}", "truncated", 1));
    s = json_dumps(o, JSON_COMPACT);
  }
  json_decref(o);
  *len = strlen(s) + 1;
  char *line = xmalloc(*len + 1);
  memcpy(line, s, *len - 1);
  line[*len - 1] = '\n';
  line[*len] = '\0';
  free(s);
  return line;
}

void events_emit(struct server *srv, const char *type, const char *tenant, const char *sandbox,
                 json_t *data) {
  struct events *ev = srv->events;
  if (!ev) {
    json_decref(data);
    return;
  }
  if (!data)
    data = json_object();
  int64_t now = wall_ms();
  expire(ev, now);
  reserve(srv, ev);

  struct event e = {.seq = ev->next_seq++, .ms = now};
  str_copy(e.type, sizeof e.type, type);
  str_copy(e.tenant, sizeof e.tenant, tenant ? tenant : "");
  str_copy(e.sandbox, sizeof e.sandbox, sandbox ? sandbox : "");
  data = bound(data);
  e.line = render(&e, data, &e.len);
  json_decref(data);

  while (ev->n == ev->cap || (ev->n && ev->bytes + e.len > EVENTS_BYTES_MAX))
    drop_oldest(ev);
  ev->ring[(ev->head + ev->n) % ev->cap] = e;
  ev->n++;
  ev->bytes += e.len;

  /* A subscriber may unsubscribe itself while it hears (a follower cut
   * off): the next is taken first. */
  for (struct events_sub *s = ev->subs, *next; s; s = next) {
    next = s->next;
    s->notify(s);
  }
}

uint64_t events_first(struct server *srv) {
  struct events *ev = srv->events;
  expire(ev, wall_ms());
  return ev->n ? ev->ring[ev->head].seq : ev->next_seq;
}

uint64_t events_next(const struct server *srv) {
  return srv->events->next_seq;
}

const struct event *events_at(const struct server *srv, uint64_t seq) {
  const struct events *ev = srv->events;
  if (!ev->n || seq < ev->ring[ev->head].seq || seq >= ev->next_seq)
    return NULL;
  return &ev->ring[(ev->head + (seq - ev->ring[ev->head].seq)) % ev->cap];
}

void events_subscribe(struct server *srv, struct events_sub *s) {
  struct events *ev = srv->events;
  s->prev = NULL;
  s->next = ev->subs;
  if (ev->subs)
    ev->subs->prev = s;
  ev->subs = s;
}

void events_unsubscribe(struct server *srv, struct events_sub *s) {
  struct events *ev = srv->events;
  if (s->prev)
    s->prev->next = s->next;
  else if (ev->subs == s)
    ev->subs = s->next;
  if (s->next)
    s->next->prev = s->prev;
  s->prev = s->next = NULL;
}

/* A type names [a-z_] words joined by dots; a filter's may end ".*". */
static bool type_ok(const char *t, size_t n) {
  if (n == 0 || n > EVENTS_TYPE_MAX)
    return false;
  if (n >= 2 && t[n - 2] == '.' && t[n - 1] == '*')
    n -= 2;
  bool word = false; /* in a word: a dot may follow */
  for (size_t i = 0; i < n; i++) {
    if (t[i] == '.' && !word)
      return false;
    if (t[i] != '.' && t[i] != '_' && (t[i] < 'a' || t[i] > 'z'))
      return false;
    word = t[i] != '.';
  }
  return word;
}

int events_filter_types(struct events_filter *f, const char *list, struct hutch_err *err) {
  /* Each piece between commas is a type: an empty one is refused. */
  for (const char *p = list;; p++) {
    size_t n = strcspn(p, ",");
    if (!type_ok(p, n) || f->ntypes == EVENTS_TYPES_MAX)
      return hutch_err_fail(err, HUTCH_ERR_INVALID, "invalid_argument",
                            "type: at most %d types (a.b, or a prefix a.*), comma-separated",
                            EVENTS_TYPES_MAX);
    memcpy(f->types[f->ntypes], p, n);
    f->types[f->ntypes++][n] = '\0';
    p += n;
    if (*p != ',')
      return 0;
  }
}

bool events_filter_type(const struct events_filter *f, const char *type) {
  if (!f->ntypes)
    return true;
  for (size_t i = 0; i < f->ntypes; i++) {
    const char *t = f->types[i];
    size_t n = strlen(t);
    bool prefix = n >= 2 && strcmp(t + n - 2, ".*") == 0;
    if (prefix ? strncmp(type, t, n - 1) == 0 : strcmp(type, t) == 0)
      return true;
  }
  return false;
}

bool events_filter_match(const struct events_filter *f, const struct event *ev) {
  if (f->tenant && strcmp(f->tenant, ev->tenant) != 0)
    return false;
  if (f->sandbox[0] && strcmp(f->sandbox, ev->sandbox) != 0)
    return false;
  return events_filter_type(f, ev->type);
}

char *events_gap_line(uint64_t after, uint64_t before, const char *why, size_t *len) {
  char t[32];
  iso8601(wall_ms(), t);
  char *s = xasprintf("{\"seq\":null,\"time\":\"%s\",\"type\":\"events.gap\",\"tenant\":null,"
                      "\"sandbox\":null,\"data\":{\"after\":%llu,\"next\":%llu,\"reason\":\"%s\"}}\n",
                      t, (unsigned long long)after, (unsigned long long)before, why);
  *len = strlen(s);
  return s;
}
