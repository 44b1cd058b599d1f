/* A request (http.h): read from its connection's bytes by http-parser's
 * callbacks here, which hold its head and body to their limits; then what
 * a handler reads of it, its headers and query, and whether they are text
 * a handler may put in JSON. */
#include "http/request.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "util.h"
#include "http/http.h"
#include "http/query.h"

/* ---- parsing a request ---- */

void http_request_free(struct http_req *r) {
  free(r->target);
  free(r->path);
  free(r->query);
  free(r->pbuf);
  for (size_t i = 0; i < r->nheaders; i++) {
    free(r->headers[i].name);
    free(r->headers[i].value);
  }
  free(r->headers);
  free(r->body);
  memset(r, 0, sizeof *r);
}

static struct http_conn *conn_of(http_parser *p) {
  return p->data;
}

/* Request line and headers together may not exceed HTTP_HEADER_MAX. */
static int count_header(struct http_conn *c, size_t n) {
  c->header_bytes += n;
  if (c->header_bytes > HTTP_HEADER_MAX) {
    c->fail_status = 431;
    return -1;
  }
  return 0;
}

static int on_message_begin(http_parser *p) {
  struct http_conn *c = conn_of(p);
  http_request_free(&c->req);
  c->req.started_ns = now_ns();
  c->header_bytes = 0;
  c->in_value = false;
  return 0;
}

static int on_url(http_parser *p, const char *at, size_t n) {
  struct http_conn *c = conn_of(p);
  if (count_header(c, n) < 0)
    return -1;
  str_append(&c->req.target, at, n);
  return 0;
}

int http_header_piece(struct http_header **h, size_t *n, bool *in_value, bool value, const char *at,
                      size_t len) {
  if (!value && (*n == 0 || *in_value)) {
    if (*n >= HTTP_MAX_HEADERS)
      return -1;
    *h = xrealloc(*h, (*n + 1) * sizeof **h);
    (*h)[(*n)++] = (struct http_header){xstrdup(""), xstrdup("")};
  }
  if (*n == 0)
    return -1;
  *in_value = value;
  str_append(value ? &(*h)[*n - 1].value : &(*h)[*n - 1].name, at, len);
  return 0;
}

static int on_header_field(http_parser *p, const char *at, size_t n) {
  struct http_conn *c = conn_of(p);
  if (count_header(c, n) < 0)
    return -1;
  if (http_header_piece(&c->req.headers, &c->req.nheaders, &c->in_value, false, at, n) < 0) {
    c->fail_status = 431;
    return -1;
  }
  return 0;
}

static int on_header_value(http_parser *p, const char *at, size_t n) {
  struct http_conn *c = conn_of(p);
  if (count_header(c, n) < 0)
    return -1;
  return http_header_piece(&c->req.headers, &c->req.nheaders, &c->in_value, true, at, n);
}

static int on_headers_complete(http_parser *p) {
  struct http_conn *c = conn_of(p);
  struct http_req *r = &c->req;

  r->method = p->method;
  if (!r->target || r->target[0] != '/') {
    c->fail_status = 400;
    return -1;
  }

  /* The target is UTF-8, or the request is refused here: it is routed,
   * and any part of it may go into JSON (json_pack refuses what is not
   * UTF-8), a message or the audit log. The headers and the query's
   * decoded values are checked by the router (http_request_text), except
   * on requests it relays to a sandbox's port untouched. */
  if (!utf8_valid(r->target, strlen(r->target))) {
    c->fail_status = 400;
    c->fail_why = "the request target must be UTF-8";
    return -1;
  }

  const char *q = strchr(r->target, '?');
  r->path = q ? strndup(r->target, (size_t)(q - r->target)) : xstrdup(r->target);
  r->query = q ? xstrdup(q + 1) : NULL;
  if (!r->path)
    abort();

  c->dialect = c->hs->h->dialect(c->hs->owner, r);
  if (c->hs->h->streams_body(c->hs->owner, r)) {
    /* The handler takes the body as it comes: stop here and dispatch. */
    c->headers_done = true;
    http_parser_pause(p, 1);
    return 0;
  }

  if ((p->flags & F_CONTENTLENGTH) && p->content_length > HTTP_BODY_MAX) {
    c->fail_status = 413;
    return -1;
  }
  uv_timer_start(&c->timer, c->timer.timer_cb, HTTP_BODY_TIMEOUT_MS, 0);
  return 0;
}

static int on_body(http_parser *p, const char *at, size_t n) {
  struct http_conn *c = conn_of(p);
  struct http_req *r = &c->req;
  if (c->headers_done) {
    if (c->state != HC_BODY)
      return -1; /* the handler answered already: the rest is not wanted */
    c->ops->body(c->ctx, at, n);
    return 0;
  }
  if (r->body_len + n > HTTP_BODY_MAX) {
    c->fail_status = 413;
    return -1;
  }
  r->body = xrealloc(r->body, r->body_len + n + 1);
  memcpy(r->body + r->body_len, at, n);
  r->body_len += n;
  r->body[r->body_len] = '\0';
  return 0;
}

static int on_message_complete(http_parser *p) {
  struct http_conn *c = conn_of(p);
  c->complete = true;
  c->keep_alive = http_should_keep_alive(p);
  http_parser_pause(p, 1);
  return 0;
}

const http_parser_settings http_request_settings = {
    .on_message_begin = on_message_begin,
    .on_url = on_url,
    .on_header_field = on_header_field,
    .on_header_value = on_header_value,
    .on_headers_complete = on_headers_complete,
    .on_body = on_body,
    .on_message_complete = on_message_complete,
};

/* ---- what a handler reads ---- */

const char *http_request_text(const struct http_req *req, const char **code) {
  *code = "bad_request";
  for (size_t i = 0; i < req->nheaders; i++)
    if (!utf8_valid(req->headers[i].name, strlen(req->headers[i].name)) ||
        !utf8_valid(req->headers[i].value, strlen(req->headers[i].value)))
      return "the request's headers must be UTF-8";
  *code = "invalid_argument";
  for (const char *q = req->query; q && *q;) {
    char *key, *value;
    q = http_query_next(q, &key, &value);
    bool bad = !key || !value;
    free(key);
    free(value);
    if (bad)
      return "the query must be key=value pairs, URL-encoded UTF-8";
  }
  return NULL;
}

const char *http_header(const struct http_req *req, const char *name) {
  for (size_t i = 0; i < req->nheaders; i++)
    if (strcasecmp(req->headers[i].name, name) == 0)
      return req->headers[i].value;
  return NULL;
}

char *http_query(const struct http_req *req, const char *name) {
  return http_query_get(req->query, name);
}
