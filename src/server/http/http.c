/* HTTP/1.1 connections (http.h): each one's life from accept to close,
 * its bytes read and handed to http-parser (whose callbacks, in request.c,
 * fill the request), the handlers that own a request, and the responses
 * written through libuv: whole, chunked, or raw after a switch. */

#include "http/http.h"

#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "util.h"
#include "http/accept.h"
#include "http/body.h"
#include "http/errors.h"
#include "http/request.h"

struct wreq {
  uv_write_t w;
  struct http_conn *c;
  size_t len;
  char data[];
};

static void conn_closed(uv_handle_t *h);
static void start_reading(struct http_conn *c);
static void next_request(uv_timer_t *t);
static void close_later(uv_timer_t *t);
static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf);
static void send_raw(struct http_conn *c, const void *data, size_t len);

#define CONTINUE "HTTP/1.1 100 Continue\r\n\r\n"

/* ---- connection lifetime ---- */

/* The handler that keeps c past its request (ops NULL: none any more),
 * for tenant: each tenant's held connections are counted as they come
 * and go (handlers.held), which its share of descriptors is judged by. */
static void own(struct http_conn *c, const char *tenant, const struct http_stream_ops *ops,
                void *ctx) {
  bool held = ops && tenant[0];
  if (c->holder[0] && (!held || strcmp(c->holder, tenant) != 0)) {
    c->hs->h->held(c->hs->owner, c->holder, false);
    c->holder[0] = '\0';
  }
  if (held && !c->holder[0]) {
    str_copy(c->holder, sizeof c->holder, tenant);
    c->hs->h->held(c->hs->owner, c->holder, true);
  }
  c->ops = ops;
  c->ctx = ctx;
}

static void conn_close(struct http_conn *c) {
  if (c->state == HC_CLOSING)
    return;
  bool owned = c->ops && c->ops->abort;
  c->state = HC_CLOSING;
  if (owned)
    c->ops->abort(c->ctx);

  /* An action whose client left before its answer (a DELETE answered once
   * the teardown is done, a pause once frozen) goes on, and is audited
   * now, as nginx logs such a request: status 499. */
  if (c->action) {
    c->last_status = 499;
    c->last_error = "client_closed";
    c->hs->h->done(c->hs->owner, c);
  }

  own(c, "", NULL, NULL);
  uv_timer_stop(&c->timer);
  /* Both handles live in c: it is freed when the second has closed (libuv
   * calls close callbacks in no order to rely on). */
  c->open_handles = 2;
  uv_close((uv_handle_t *)&c->timer, conn_closed);
  uv_close((uv_handle_t *)&c->tcp, conn_closed);
}

static void conn_closed(uv_handle_t *h) {
  struct http_conn *c = h->data;
  struct http_server *srv = c->hs;
  if (--c->open_handles > 0)
    return;
  if (c->prev)
    c->prev->next = c->next;
  else
    srv->conns = c->next;
  if (c->next)
    c->next->prev = c->prev;
  srv->nconns--;
  http_request_free(&c->req);
  free(c->leftover);
  free(c);
}

static void on_timeout(uv_timer_t *t) {
  struct http_conn *c = t->data;
  if (c->state == HC_BODY || c->state == HC_DRAINING) { /* a body stopped coming; or enough */
    conn_close(c);
    return;
  }
  if (c->state != HC_READING)
    return;
  /* Mid-request: say why; idle between requests: just close. */
  if (c->req.started_ns && !c->complete)
    http_error(c, HUTCH_ERR_TIMEOUT, "timeout", "the request was not sent in time");
  else
    conn_close(c);
}

static void alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
  (void)suggested;
  struct http_conn *c = h->data;
  /* One buffer for the whole server: every read is consumed (or its rest
   * copied) before the next one can happen. */
  *buf = uv_buf_init(c->hs->rbuf, sizeof c->hs->rbuf);
}

static void dispatch_ready(struct http_conn *c) {
  c->complete = false;
  c->state = HC_HANDLING;
  uv_read_stop((uv_stream_t *)&c->tcp);
  uv_timer_stop(&c->timer);
  c->hs->h->dispatch(c->hs->owner, c);
}

/* Keep what the parser did not take, for when it goes on. */
static void stash(struct http_conn *c, const char *rest, size_t n) {
  char *buf = xmalloc(n + c->leftover_len + 1);
  memcpy(buf, rest, n);
  if (c->leftover_len)
    memcpy(buf + n, c->leftover, c->leftover_len);
  free(c->leftover);
  c->leftover = buf;
  c->leftover_len += n;
}

static void parse(struct http_conn *c, const char *data, size_t n) {
  size_t used = http_parser_execute(&c->parser, &http_request_settings, data, n);
  enum http_errno e = HTTP_PARSER_ERRNO(&c->parser);
  if (c->state == HC_CLOSING)
    return;
  if (used < n && e == HPE_PAUSED)
    stash(c, data + used, n - used);

  if (c->state == HC_BODY) {
    if (e != HPE_OK && e != HPE_PAUSED) { /* a malformed body: its handler hears abort */
      conn_close(c);
      return;
    }
    if (c->complete) { /* the whole streamed body has been handed over */
      c->state = HC_HANDLING;
      uv_read_stop((uv_stream_t *)&c->tcp);
      uv_timer_stop(&c->timer);
      c->ops->body_end(c->ctx);
    } else if (e == HPE_PAUSED) { /* the handler cannot take more yet */
      uv_read_stop((uv_stream_t *)&c->tcp);
      uv_timer_stop(&c->timer);
    }
    return;
  }

  if (c->complete) {
    dispatch_ready(c);
    return;
  }
  if (c->headers_done && e == HPE_PAUSED && c->state == HC_READING) {
    c->keep_alive = false; /* unless the handler takes the whole body */
    dispatch_ready(c);
    return;
  }

  if (e != HPE_OK && e != HPE_PAUSED) {
    if (c->fail_status == 431)
      http_error(c, HUTCH_ERR_HEADERS_TOO_LARGE, "headers_too_large",
                 "request line and headers exceed %u bytes", HTTP_HEADER_MAX);
    else if (c->fail_status == 413)
      http_error(c, HUTCH_ERR_TOO_LARGE, "body_too_large", "request body exceeds %u bytes",
                 HTTP_BODY_MAX);
    else if (c->fail_why)
      http_error(c, HUTCH_ERR_INVALID, "bad_request", "%s", c->fail_why);
    else
      http_error(c, HUTCH_ERR_INVALID, "bad_request", "malformed HTTP request: %s",
                 http_errno_name(e));
  }
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf) {
  struct http_conn *c = s->data;
  if (n < 0) {
    conn_close(c);
    return;
  }
  if (n == 0 || c->state == HC_DRAINING)
    return; /* draining: dropped */

  if (c->state == HC_RAW) {
    c->ops->raw(c->ctx, buf->base, (size_t)n);
    return;
  }

  if (c->state == HC_STREAMING || (c->state == HC_HANDLING && c->watching)) {
    /* Read while streaming (or waiting, http_watch) only to learn that the
     * client went away; what it sent meanwhile waits for the end of this
     * response. */
    if (c->leftover_len + (size_t)n > HTTP_HEADER_MAX) {
      conn_close(c);
      return;
    }
    c->leftover = xrealloc(c->leftover, c->leftover_len + (size_t)n);
    memcpy(c->leftover + c->leftover_len, buf->base, (size_t)n);
    c->leftover_len += (size_t)n;
    return;
  }

  if (c->state == HC_BODY) {
    uv_timer_start(&c->timer, on_timeout, HTTP_BODY_TIMEOUT_MS, 0);
    parse(c, buf->base, (size_t)n);
    return;
  }

  if (c->state != HC_READING)
    return;
  if (!c->req.started_ns && !c->header_bytes) /* first bytes of a request */
    uv_timer_start(&c->timer, on_timeout, HTTP_HEADER_TIMEOUT_MS, 0);
  parse(c, buf->base, (size_t)n);
}

static void start_reading(struct http_conn *c) {
  c->state = HC_READING;
  c->watching = false;
  memset(&c->req, 0, sizeof c->req);
  c->fail_status = 0;
  c->fail_why = NULL;
  c->headers_done = false;
  c->complete = false;
  http_parser_pause(&c->parser, 0);
  uv_timer_start(&c->timer, on_timeout, HTTP_IDLE_TIMEOUT_MS, 0);

  if (c->leftover) {
    char *rest = c->leftover;
    size_t n = c->leftover_len;
    c->leftover = NULL;
    c->leftover_len = 0;
    uv_timer_start(&c->timer, on_timeout, HTTP_HEADER_TIMEOUT_MS, 0);
    parse(c, rest, n);
    free(rest);
    if (c->state != HC_READING)
      return;
  }

  uv_read_stop((uv_stream_t *)&c->tcp); /* it may still read from a stream */
  if (uv_read_start((uv_stream_t *)&c->tcp, alloc_cb, on_read) < 0)
    conn_close(c);
}

void http_server_init(struct http_server *hs, uv_loop_t *loop, struct server *owner,
                      const struct http_handlers *h, unsigned max_conns) {
  memset(hs, 0, sizeof *hs);
  hs->loop = loop;
  hs->owner = owner;
  hs->h = h;
  hs->max_conns = max_conns;
  hs->listen_fd = hs->spare_fd = -1;
}

void http_accept(struct http_server *srv, int fd) {
  struct http_conn *c = xcalloc(1, sizeof *c);
  c->hs = srv;
  c->srv = srv->owner;
  uv_tcp_init(srv->loop, &c->tcp);
  uv_timer_init(srv->loop, &c->timer);
  c->tcp.data = c->timer.data = c;

  c->next = srv->conns;
  if (srv->conns)
    srv->conns->prev = c;
  srv->conns = c;
  srv->nconns++;

  if (uv_tcp_open(&c->tcp, fd) < 0) {
    close(fd);
    conn_close(c);
    return;
  }
  uv_tcp_nodelay(&c->tcp, 1);
  http_parser_init(&c->parser, HTTP_REQUEST);
  c->parser.data = c;
  c->timer.timer_cb = on_timeout;

  /* Past max_conns, or with no descriptors to spare for the requests a
   * connection makes (fds.c), the client hears so at once. */
  if (srv->nconns > srv->max_conns || !srv->h->room(srv->owner)) {
    /* At capacity: answer at once rather than hold the client (and read
     * what it sent before closing, or its kernel may drop the answer). */
    c->state = HC_HANDLING;
    c->keep_alive = false;
    c->linger = true;
    http_error(c, HUTCH_ERR_UNAVAILABLE, "overloaded", "too many connections; try again");
    return;
  }

  start_reading(c);
}

void http_close_all(struct http_server *srv) {
  srv->stopping = true;
  http_accept_stop(srv);
  for (struct http_conn *c = srv->conns; c; c = c->next)
    conn_close(c);
}

/* ---- handlers that own a request ---- */

void http_own(struct http_conn *c, const struct http_stream_ops *ops, void *ctx) {
  own(c, c->tenant, ops, ctx);
}

static void wait_gone(void *ctx) {
  struct http_wait *w = ctx;
  w->c = NULL;
}

static const struct http_stream_ops wait_ops = {.abort = wait_gone};

void http_wait_begin(struct http_wait *w, struct http_conn *c) {
  w->c = c;
  http_own(c, &wait_ops, w);
  http_watch(c);
}

struct http_conn *http_wait_end(struct http_wait *w) {
  struct http_conn *c = w->c;
  if (c)
    http_own(c, NULL, NULL);
  w->c = NULL;
  return c;
}

void http_watch(struct http_conn *c) {
  if (c->state != HC_HANDLING || c->watching)
    return;
  c->watching = true;
  if (uv_read_start((uv_stream_t *)&c->tcp, alloc_cb, on_read) < 0)
    c->watching = false; /* the end is then learnt when the answer is written */
}

/* Feed what was read after the headers, then read on (unless the handler
 * paused again meanwhile). */
static void body_go_on(struct http_conn *c) {
  http_parser_pause(&c->parser, 0);
  if (c->leftover) {
    char *rest = c->leftover;
    size_t n = c->leftover_len;
    c->leftover = NULL;
    c->leftover_len = 0;
    parse(c, rest, n);
    free(rest);
  }
  if (c->state != HC_BODY || HTTP_PARSER_ERRNO(&c->parser) == HPE_PAUSED)
    return;
  uv_timer_start(&c->timer, on_timeout, HTTP_BODY_TIMEOUT_MS, 0);
  uv_read_stop((uv_stream_t *)&c->tcp);
  if (uv_read_start((uv_stream_t *)&c->tcp, alloc_cb, on_read) < 0)
    conn_close(c);
}

void http_body_start(struct http_conn *c, const struct http_stream_ops *ops, void *ctx) {
  http_own(c, ops, ctx);
  /* A client that waits to hear that the body is wanted (curl does for a
   * body over 1 MiB, a second long) hears it now. */
  const char *expect = http_header(&c->req, "expect");
  if (expect && strcasecmp(expect, "100-continue") == 0 && c->parser.http_major == 1 &&
      c->parser.http_minor >= 1)
    send_raw(c, CONTINUE, sizeof CONTINUE - 1);
  c->state = HC_BODY;
  c->keep_alive = http_should_keep_alive(&c->parser);
  body_go_on(c);
}

void http_body_pause(struct http_conn *c) {
  if (c->state == HC_BODY)
    http_parser_pause(&c->parser, 1);
}

void http_body_resume(struct http_conn *c) {
  if (c->state == HC_BODY && HTTP_PARSER_ERRNO(&c->parser) == HPE_PAUSED)
    body_go_on(c);
}

/* ---- writing ---- */

static void write_done(uv_write_t *w, int status) {
  struct wreq *r = (struct wreq *)w;
  struct http_conn *c = r->c;
  c->queued -= r->len;
  free(r);
  if (status < 0) {
    conn_close(c);
    return;
  }
  if (c->wait_drain && c->queued < HTTP_STREAM_HIGH / 2 && c->state == HC_HANDLING) {
    c->wait_drain = false;
    uv_timer_start(&c->timer, next_request, 0, 0);
  }
  if (c->above_high && c->queued < HTTP_STREAM_HIGH / 2) {
    c->above_high = false;
    if (c->state == HC_STREAMING && c->ops && c->ops->drain)
      c->ops->drain(c->ctx);
  }
}

/* Write the parts in order. While nothing waits before them, what the
 * socket takes at once goes from the caller's memory; only the rest is
 * copied, to wait for the socket. */
static void send_parts(struct http_conn *c, const uv_buf_t *parts, unsigned nparts) {
  size_t len = 0, done = 0;
  for (unsigned i = 0; i < nparts; i++)
    len += parts[i].len;
  if (c->state == HC_CLOSING || c->failed || len == 0)
    return;

  if (c->queued == 0) {
    int w = uv_try_write((uv_stream_t *)&c->tcp, parts, nparts);
    done = w > 0 ? (size_t)w : 0; /* a failure: uv_write below meets it again */
  }
  if (done == len)
    return;

  struct wreq *r = xmalloc(sizeof *r + len - done);
  r->c = c;
  r->len = len - done;
  for (unsigned i = 0, off = 0, skip = (unsigned)done; i < nparts; i++) {
    size_t part = parts[i].len, from = skip < part ? skip : part;
    memcpy(r->data + off, parts[i].base + from, part - from);
    off += (unsigned)(part - from);
    skip -= (unsigned)from;
  }

  uv_buf_t b = uv_buf_init(r->data, (unsigned)r->len);
  c->queued += r->len;
  if (c->queued >= HTTP_STREAM_HIGH)
    c->above_high = true;

  if (uv_write(&r->w, (uv_stream_t *)&c->tcp, &b, 1, write_done) < 0) {
    c->queued -= r->len;
    free(r);
    c->failed = true;
    uv_timer_start(&c->timer, close_later, 0, 0);
  }
}

static void send_raw(struct http_conn *c, const void *data, size_t len) {
  uv_buf_t b = uv_buf_init((char *)data, (unsigned)len);
  send_parts(c, &b, 1);
}

static void shutdown_done(uv_shutdown_t *s, int status) {
  struct http_conn *c = s->data;
  free(s);
  /* Draining: the client's EOF (or the timer) closes, not our own. */
  if (status < 0 || c->state != HC_DRAINING)
    conn_close(c);
}

/* The next request of a kept-alive connection is read on the next turn of
 * the loop, never from inside the handler that just answered (a pipelined
 * request would otherwise run within its predecessor's callbacks), and
 * only once the client has taken most of what it was sent. */
static void next_request(uv_timer_t *t) {
  struct http_conn *c = t->data;
  if (c->state != HC_HANDLING || !c->want_next)
    return;
  if (c->queued >= HTTP_STREAM_HIGH) {
    c->wait_drain = true; /* write_done comes back here */
    return;
  }
  c->want_next = false;
  start_reading(c);
}

/* A write that failed at once closes the connection on the next turn, not
 * inside the handler that wrote. */
static void close_later(uv_timer_t *t) {
  conn_close(t->data);
}

/* The response is complete: read the next request, or close. */
static void finish(struct http_conn *c) {
  if (c->state == HC_CLOSING)
    return;
  own(c, "", NULL, NULL);
  c->last_error = NULL;
  c->dialect = DIALECT_HUTCH;
  http_request_free(&c->req);

  if (c->keep_alive && !c->hs->stopping && !c->failed) {
    c->state = HC_HANDLING;
    c->want_next = true;
    uv_timer_start(&c->timer, next_request, 0, 0);
    return;
  }

  /* Close once what is queued has been written. A client still sending a
   * request we answered early would get a reset instead of our answer if
   * we closed at once: read and drop what it sends, for a while. */
  c->state = c->linger ? HC_DRAINING : HC_HANDLING;
  uv_read_stop((uv_stream_t *)&c->tcp);
  if (c->linger) {
    uv_timer_start(&c->timer, on_timeout, HTTP_LINGER_MS, 0);
    if (uv_read_start((uv_stream_t *)&c->tcp, alloc_cb, on_read) < 0) {
      conn_close(c);
      return;
    }
  }

  uv_shutdown_t *s = xmalloc(sizeof *s);
  s->data = c;
  if (uv_shutdown(s, (uv_stream_t *)&c->tcp, shutdown_done) < 0) {
    free(s);
    conn_close(c);
  }
}

static void head(struct http_conn *c, int status, const char *ctype, const char *length,
                 const char *extra) {
  char *h = xasprintf("HTTP/1.1 %d %s\r\nContent-Type: %s\r\n%s%sConnection: %s\r\n\r\n", status,
                      http_status_text(status), ctype, length, extra ? extra : "",
                      c->keep_alive ? "keep-alive" : "close");
  send_raw(c, h, strlen(h));
  free(h);
}

void http_respond(struct http_conn *c, int status, const char *ctype, const void *body, size_t len,
                  const char *extra) {
  if (c->state == HC_CLOSING)
    return;
  if (c->state == HC_READING || c->state == HC_BODY || (c->headers_done && !c->complete)) {
    /* Answered before the whole request was read: the rest cannot be
     * parsed, so the connection ends with this response. */
    c->keep_alive = false;
    c->linger = true;
    uv_read_stop((uv_stream_t *)&c->tcp);
    uv_timer_stop(&c->timer);
  }
  c->last_status = status;
  /* Recorded before the client can see the answer (the line is written
   * off the loop, moments later: audit.c). */
  c->hs->h->done(c->hs->owner, c);
  char length[48];
  snprintf(length, sizeof length, "Content-Length: %zu\r\n", len);
  head(c, status, ctype, length, extra);
  send_raw(c, body, len);
  finish(c);
}

char *http_json_line(json_t *j, size_t *len) {
  char *s = json_dumps(j, SERVE_JSON_FLAGS);
  json_decref(j);
  /* No JSON: out of memory, or a json_pack given what is not UTF-8, which
   * cannot be, as every string of a request was checked as it came
   * (on_headers_complete, query.c) and a sandbox's text goes through
   * http_json_text. A broken invariant, then (http_json answers it). */
  if (!s)
    abort();
  size_t n = strlen(s);
  s = xrealloc(s, n + 2);
  s[n++] = '\n';
  s[n] = '\0';
  *len = n;
  return s;
}

void http_json(struct http_conn *c, int status, json_t *j) {
  if (!j) { /* a json_pack that failed: no answer is better than a crash */
    http_error(c, HUTCH_ERR_SYSTEM, "internal", "the answer could not be written as JSON");
    return;
  }
  size_t n;
  char *s = http_json_line(j, &n);
  http_respond(c, status, "application/json", s, n, NULL);
  free(s);
}

void http_stream_start(struct http_conn *c, int status, const char *ctype,
                       const struct http_stream_ops *ops, void *ctx) {
  http_stream_start_with(c, status, ctype, NULL, ops, ctx);
}

void http_stream_start_with(struct http_conn *c, int status, const char *ctype, const char *extra,
                            const struct http_stream_ops *ops, void *ctx) {
  c->last_status = status;
  own(c, c->tenant, ops, ctx);
  head(c, status, ctype, "Transfer-Encoding: chunked\r\nCache-Control: no-store\r\n", extra);
  if (c->state == HC_CLOSING)
    return;
  c->state = HC_STREAMING;
  /* A client that closes its connection abandons the stream. (It may be
   * read already, watched while the stream waited to start.) */
  uv_read_stop((uv_stream_t *)&c->tcp);
  if (uv_read_start((uv_stream_t *)&c->tcp, alloc_cb, on_read) < 0)
    conn_close(c);
}

/* One write per chunk: size line, data and CRLF together, and the last
 * chunk's end with them when it is the last. */
static void send_chunk(struct http_conn *c, const void *data, size_t len, bool last) {
  char size[24];
  snprintf(size, sizeof size, "%zx\r\n", len);
  uv_buf_t parts[] = {uv_buf_init(size, (unsigned)strlen(size)),
                      uv_buf_init((char *)data, (unsigned)len), uv_buf_init("\r\n", 2),
                      uv_buf_init("0\r\n\r\n", 5)};
  send_parts(c, parts, last ? 4 : 3);
}

void http_stream_send(struct http_conn *c, const void *data, size_t len) {
  if (c->state != HC_STREAMING || len == 0)
    return;
  send_chunk(c, data, len, false);
}

void http_stream_end_with(struct http_conn *c, const void *data, size_t len) {
  if (c->state != HC_STREAMING)
    return;
  c->hs->h->done(c->hs->owner, c);
  if (len)
    send_chunk(c, data, len, true);
  else
    send_raw(c, "0\r\n\r\n", 5);
  finish(c);
}

void http_stream_end(struct http_conn *c) {
  http_stream_end_with(c, NULL, 0);
}

size_t http_queued(const struct http_conn *c) {
  return c->queued;
}

void http_raw_send(struct http_conn *c, const void *data, size_t n) {
  send_raw(c, data, n);
}

void http_raw_start(struct http_conn *c, const struct http_stream_ops *ops, void *ctx) {
  if (c->state == HC_CLOSING)
    return;
  c->last_status = 101;
  /* Held for the tenant the request was for: its audit line, written
   * now, forgets it. */
  own(c, c->tenant, ops, ctx);
  c->hs->h->done(c->hs->owner, c); /* the request's part ends here */
  c->state = HC_RAW;
  uv_timer_stop(&c->timer);

  if (c->leftover) { /* sent right after the request */
    char *rest = c->leftover;
    size_t n = c->leftover_len;
    c->leftover = NULL;
    c->leftover_len = 0;
    ops->raw(ctx, rest, n);
    free(rest);
    if (c->state != HC_RAW)
      return;
  }

  uv_read_stop((uv_stream_t *)&c->tcp);
  if (uv_read_start((uv_stream_t *)&c->tcp, alloc_cb, on_read) < 0)
    conn_close(c);
}

void http_abort(struct http_conn *c) {
  conn_close(c);
}

char *http_head_write(const char *line, const struct http_header *h, size_t n,
                      bool (*drop)(const struct http_header *h, void *arg), void *arg,
                      const char *extra, size_t *len) {
  char *out = NULL;
  FILE *f = open_memstream(&out, len);
  if (!f)
    abort();
  fprintf(f, "%s\r\n", line);
  for (size_t i = 0; i < n; i++)
    if (!drop(&h[i], arg))
      fprintf(f, "%s: %s\r\n", h[i].name, h[i].value);
  fprintf(f, "%s\r\n", extra ? extra : "");
  fclose(f);
  return out;
}

int http_detach(struct http_conn *c, char **rest, size_t *nrest) {
  uv_os_fd_t fd;
  int dup_fd = -1;
  if (c->state != HC_CLOSING && uv_fileno((uv_handle_t *)&c->tcp, &fd) == 0)
    dup_fd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
  *rest = c->leftover;
  *nrest = c->leftover_len;
  /* Paused at the end of the head, the parser left the head's last LF. */
  if (c->headers_done && *nrest && (*rest)[0] == '\n')
    memmove(*rest, *rest + 1, --*nrest);
  c->leftover = NULL;
  c->leftover_len = 0;
  own(c, "", NULL, NULL);
  c->action = NULL;
  conn_close(c);
  return dup_fd;
}
