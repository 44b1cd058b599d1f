/* GET /v1/events (docs/events.md): since=SEQ, follow=1, type=a,b.*,
 * sandbox=ID, and for the admin tenant=NAME; NDJSON, or SSE when the
 * client accepts text/event-stream (Last-Event-ID is since then).
 *
 * A tenant reads only its own tenant's events: the filter's tenant is the
 * key's, whatever the query says; only the admin key reads every
 * tenant's (or one it names).
 *
 * A reader is a cursor into the ring: it is sent what passes its filter
 * while its connection takes it (below HTTP_STREAM_HIGH queued), then
 * waits for the drain. So a slow reader holds no more than that, never
 * the loop; one the ring has left behind (its next event no longer kept)
 * is told so by a gap line and, when following, cut off there. */
#include "api/events.h"

#include <stdlib.h>
#include <string.h>

#include "cleanup.h"
#include "util.h"
#include "core/base/server.h"
#include "core/events/events.h"
#include "http/errors.h"
#include "http/http.h"
#include "http/request.h"

#define HEARTBEAT_MS 15000

struct reader {
  struct events_sub sub;
  struct http_conn *c;
  struct server *srv;
  struct events_filter f;
  char tenant[65];
  uint64_t next; /* the next event's number */
  uint64_t end;  /* without follow: where the answer ends */
  bool follow, sse, closing;
  uv_timer_t heartbeat;
};

static void reader_closed(uv_handle_t *h) {
  free(h->data);
}

/* The reader's end: no more events, its timer closed (which frees it,
 * after this turn of the loop: an abort heard while its answer ends
 * finds it still there, closing). */
static void reader_free(struct reader *r) {
  if (r->closing)
    return;
  r->closing = true;
  if (r->follow)
    events_unsubscribe(r->srv, &r->sub);
  uv_close((uv_handle_t *)&r->heartbeat, reader_closed);
}

static void on_abort(void *ctx) {
  reader_free(ctx);
}

static void send_event(struct reader *r, const struct event *ev) {
  if (!r->sse) {
    http_stream_send(r->c, ev->line, ev->len);
    return;
  }
  char *s = xasprintf("id: %llu\nevent: %s\ndata: %.*s\n\n", (unsigned long long)ev->seq,
                      ev->type, (int)(ev->len - 1), ev->line);
  http_stream_send(r->c, s, strlen(s));
  free(s);
}

static void send_gap(struct reader *r, uint64_t after, uint64_t before, const char *why) {
  size_t n;
  char *line = events_gap_line(after, before, why, &n);
  if (r->sse) {
    char *s = xasprintf("event: events.gap\ndata: %.*s\n\n", (int)(n - 1), line);
    http_stream_send(r->c, s, strlen(s));
    free(s);
  } else {
    http_stream_send(r->c, line, n);
  }
  free(line);
}

/* Send what is due while the connection takes it; the answer ends where
 * it should (without follow, at end; following, when left behind). */
static void pump(struct reader *r) {
  uint64_t until = r->follow ? events_next(r->srv) : r->end;
  while (r->next < until && http_queued(r->c) < HTTP_STREAM_HIGH) {
    const struct event *ev = events_at(r->srv, r->next);
    if (!ev) {
      /* Gone from the ring before this reader took it. */
      uint64_t first = events_first(r->srv);
      send_gap(r, r->next - 1, first, "behind");
      if (r->follow) {
        struct http_conn *c = r->c;
        reader_free(r);
        http_stream_end(c);
        return;
      }
      r->next = first;
      continue;
    }
    r->next++;
    if (events_filter_match(&r->f, ev))
      send_event(r, ev);
  }
  if (!r->follow && r->next >= r->end) {
    struct http_conn *c = r->c;
    reader_free(r);
    http_stream_end(c);
  }
}

static void on_drain(void *ctx) {
  pump(ctx);
}

static void on_event(struct events_sub *s) {
  struct reader *r = (struct reader *)((char *)s - offsetof(struct reader, sub));
  /* pump runs once the connection drains: a follower that reads nothing
   * while the ring moves past it is cut off here, its connection closed
   * (a last line would wait behind what it does not read). */
  if (http_queued(r->c) >= HTTP_STREAM_HIGH && !events_at(r->srv, r->next)) {
    struct http_conn *c = r->c;
    reader_free(r);
    http_abort(c);
    return;
  }
  pump(r);
}

static void on_heartbeat(uv_timer_t *t) {
  struct reader *r = t->data;
  if (r->sse)
    http_stream_send(r->c, ": heartbeat\n\n", 13);
  else
    http_stream_send(r->c, "{\"type\":\"heartbeat\"}\n", 21);
}

static const struct http_stream_ops reader_ops = {.abort = on_abort, .drain = on_drain};

static bool query_u64(struct http_conn *c, const char *name, const char *given, bool *has,
                      uint64_t *v) {
  *has = given != NULL;
  if (!given || parse_u64(given, v))
    return true;
  http_error(c, HUTCH_ERR_INVALID, "invalid_argument", "%s: a sequence number, not '%.32s'", name,
             given);
  return false;
}

/* The query into r; false after an error answer. */
static bool reader_query(struct http_conn *c, const struct principal *p, struct reader *r,
                         uint64_t *since, bool *has_since) {
  _cleanup_free_ char *s = http_query(&c->req, "since");
  _cleanup_free_ char *follow = http_query(&c->req, "follow");
  _cleanup_free_ char *types = http_query(&c->req, "type");
  _cleanup_free_ char *sandbox = http_query(&c->req, "sandbox");
  _cleanup_free_ char *tenant = http_query(&c->req, "tenant");
  const char *last = http_header(&c->req, "Last-Event-ID");
  struct hutch_err err = {0};

  if (!query_u64(c, "since", s ? s : (r->sse ? last : NULL), has_since, since))
    return false;
  if (follow && strcmp(follow, "1") != 0 && strcmp(follow, "true") != 0 &&
      strcmp(follow, "0") != 0 && strcmp(follow, "false") != 0) {
    http_error(c, HUTCH_ERR_INVALID, "invalid_argument", "follow: 1 or 0");
    return false;
  }
  r->follow = follow && (strcmp(follow, "1") == 0 || strcmp(follow, "true") == 0);
  if (types && events_filter_types(&r->f, types, &err) < 0) {
    http_fail(c, &err);
    return false;
  }
  if (sandbox && (strlen(sandbox) >= sizeof r->f.sandbox || !sandbox[0])) {
    http_error(c, HUTCH_ERR_INVALID, "invalid_argument", "sandbox: a sandbox id");
    return false;
  }
  if (sandbox)
    str_copy(r->f.sandbox, sizeof r->f.sandbox, sandbox);

  /* The boundary: a tenant's key reads its own tenant's events only. */
  if (tenant && !p->admin) {
    http_error(c, HUTCH_ERR_FORBIDDEN, "forbidden", "only the admin key may name a tenant");
    return false;
  }
  if (!p->admin || tenant) {
    str_copy(r->tenant, sizeof r->tenant, p->admin ? tenant : p->tenant);
    r->f.tenant = r->tenant;
  }
  return true;
}

static bool wants_sse(const struct http_req *req) {
  const char *a = http_header(req, "Accept");
  return a && strstr(a, "text/event-stream") != NULL;
}

void api_events(struct http_conn *c, const struct principal *p) {
  struct reader *r = xcalloc(1, sizeof *r);
  uint64_t since = 0;
  bool has_since;
  r->c = c;
  r->srv = c->srv;
  r->sse = wants_sse(&c->req);
  if (!reader_query(c, p, r, &since, &has_since)) {
    free(r);
    return;
  }

  uint64_t first = events_first(c->srv);
  r->next = has_since && since + 1 > first ? since + 1 : first;
  r->end = events_next(c->srv);
  http_stream_start(c, 200, r->sse ? "text/event-stream" : "application/x-ndjson", &reader_ops,
                    r);

  /* Asked for events no longer kept (or lost in a restart): said first. */
  if (has_since && since + 1 < first)
    send_gap(r, since, first, "not kept");

  uv_timer_init(c->srv->loop, &r->heartbeat);
  r->heartbeat.data = r;
  if (r->follow) {
    r->sub.notify = on_event;
    events_subscribe(c->srv, &r->sub);
    uv_timer_start(&r->heartbeat, on_heartbeat, HEARTBEAT_MS, HEARTBEAT_MS);
  }
  pump(r);
}
