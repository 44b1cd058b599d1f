/* The Streamable HTTP transport (transport.h).
 *
 * Who may reach it, in order, before any message is read:
 *  - A request from a browser page of another site (an Origin that is not
 *    this server's own host, nor loopback) is refused 403: a page that
 *    rebinds a DNS name to 127.0.0.1 must not drive a local hutch.
 *  - An API key (Authorization: Bearer, or X-API-Key), else 401 with
 *    WWW-Authenticate. The key is the session's: its tools call the native
 *    API with it, so they can do what the key can and nothing more.
 *  - A session is found only by its id and its tenant together: another
 *    tenant's session id is "not found", not "forbidden". */
#include "mcp/transport.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "engine.h"
#include "mcp/sessions.h"
#include "util.h"
#include "api/keys.h"
#include "core/base/server.h"
#include "http/http.h"
#include "http/request.h"
#include "state/store.h"

#define SERVER_ERROR (-32000) /* the transport's refusals, as JSON-RPC errors */

/* A refusal before any message is handled: the status, and a JSON-RPC
 * error body (whose error object is also the API's {"code","message"}). */
static void refuse(struct http_conn *c, int status, int code, const char *extra, const char *msg) {
  json_t *e = mcp_rpc_error(NULL, code, "%s", msg);
  size_t len;
  char *body = http_json_line(e, &len);
  c->last_error = status == 401 ? "unauthorized" : status == 403 ? "forbidden" : "mcp_refused";
  http_respond(c, status, "application/json", body, len, extra);
  free(body);
}

/* Whether host (a Host or Origin's host[:port]) is loopback. */
static bool loopback(const char *host, size_t n) {
  static const char *const names[] = {"localhost", "127.0.0.1", "[::1]"};
  for (size_t i = 0; i < ARRAY_SIZE(names); i++) {
    size_t k = strlen(names[i]);
    if (n >= k && strncasecmp(host, names[i], k) == 0 && (n == k || host[k] == ':'))
      return true;
  }
  size_t k = strlen(".localhost");
  const char *colon = memchr(host, ':', n);
  size_t hn = colon ? (size_t)(colon - host) : n;
  return hn > k && strncasecmp(host + hn - k, ".localhost", k) == 0;
}

/* DNS rebinding: an Origin must be this server's host or loopback. */
static bool origin_ok(const struct http_req *req) {
  const char *origin = http_header(req, "Origin");
  if (!origin)
    return true; /* not a browser: nothing to rebind */
  const char *host = strstr(origin, "://");
  if (!host)
    return false;
  host += 3;
  size_t n = strcspn(host, "/");
  const char *own = http_header(req, "Host");
  if (own && strlen(own) == n && strncasecmp(own, host, n) == 0)
    return true;
  return loopback(host, n);
}

/* The key the request presents (already authenticated), or NULL. */
static const char *key_of(const struct http_req *req) {
  const char *auth = http_header(req, "Authorization");
  if (auth && strncasecmp(auth, "Bearer ", 7) == 0)
    return auth + 7;
  return http_header(req, "X-API-Key");
}

/* The checks every method shares; the caller's principal into p. */
static bool admitted(struct http_conn *c, struct principal *p) {
  if (!origin_ok(&c->req)) {
    refuse(c, 403, SERVER_ERROR, NULL, "forbidden: a request from a foreign Origin");
    return false;
  }
  const char *key = key_of(&c->req);
  if (!key || strlen(key) >= 256 || !api_keys_authenticate(c->srv, &c->req, p)) {
    refuse(c, 401, SERVER_ERROR, "WWW-Authenticate: Bearer realm=\"hutch\"\r\n",
           "a valid API key is required (Authorization: Bearer KEY or X-API-Key: KEY)");
    return false;
  }
  str_copy(c->tenant, sizeof c->tenant, p->tenant);
  return true;
}

/* The session a later request names, checked with its protocol version. */
static struct mcp_hsession *session_of(struct http_conn *c, const struct principal *p) {
  const char *id = http_header(&c->req, "Mcp-Session-Id");
  if (!id) {
    refuse(c, 400, SERVER_ERROR, NULL, "bad request: no Mcp-Session-Id (initialize first)");
    return NULL;
  }
  struct mcp_hsession *hs = mcp_hsession_find(mcp_front_get(c->srv), id, p->tenant);
  if (!hs) {
    refuse(c, 404, SERVER_ERROR, NULL,
           "session not found (it ended, or never was): initialize again");
    return NULL;
  }
  const char *v = http_header(&c->req, "Mcp-Protocol-Version");
  if (v && !mcp_version_known(v)) {
    char msg[160];
    snprintf(msg, sizeof msg,
             "bad request: unsupported MCP-Protocol-Version '%.32s' (this server speaks %s)", v,
             MCP_LATEST);
    refuse(c, 400, SERVER_ERROR, NULL, msg);
    return NULL;
  }
  return hs;
}

static bool accepts(const struct http_req *req, const char *type) {
  const char *a = http_header(req, "Accept");
  return a && (strcasestr(a, type) || strstr(a, "*/*"));
}

/* --- answering --------------------------------------------------------- */

static void gone(void *ctx) {
  mcp_hreq_gone(ctx);
}

static const struct http_stream_ops ops = {.abort = gone};

static void sse_event(struct http_conn *c, json_t *msg) {
  char *s = json_dumps(msg, JSON_COMPACT);
  if (!s)
    return;
  char *ev = xasprintf("event: message\ndata: %s\n\n", s);
  http_stream_send(c, ev, strlen(ev));
  free(ev);
  free(s);
}

/* What a request's thread sends, on the loop. */
static void deliver(struct mcp_hreq *r, json_t *msg, bool final) {
  struct http_conn *c = r->c;
  if (!c) {
    json_decref(msg);
    return;
  }
  if (r->sse) {
    if (msg)
      sse_event(c, msg);
    else if (!final)
      http_stream_send(c, ": keep-alive\n\n", 14);
    if (final)
      http_stream_end(c);
  } else if (final) {
    http_own(c, NULL, NULL);
    if (!msg) {
      http_respond(c, 202, "application/json", "", 0, NULL);
    } else {
      char extra[96] = "";
      if (r->initialize && json_object_get(msg, "result"))
        snprintf(extra, sizeof extra, "Mcp-Session-Id: %s\r\n", r->hs->id);
      size_t len;
      char *body = http_json_line(json_incref(msg), &len);
      http_respond(c, 200, "application/json", body, len, extra[0] ? extra : NULL);
      free(body);
    }
  }
  json_decref(msg);
  if (final)
    r->c = NULL;
}

/* A message of a request that may take long: an event stream. */
static bool streams(const json_t *msg) {
  const char *m = json_string_value(json_object_get(msg, "method"));
  return m && (strcmp(m, "tools/call") == 0 || strcmp(m, "tasks/result") == 0);
}

void mcp_transport_post(struct http_conn *c, const struct principal *unused) {
  (void)unused;
  struct principal p;
  if (!admitted(c, &p))
    return;
  if (!accepts(&c->req, "application/json") || !accepts(&c->req, "text/event-stream")) {
    refuse(c, 406, SERVER_ERROR, NULL,
           "not acceptable: Accept must list application/json and text/event-stream");
    return;
  }
  const char *ct = http_header(&c->req, "Content-Type");
  if (!ct || strncasecmp(ct, "application/json", 16) != 0) {
    refuse(c, 415, SERVER_ERROR, NULL, "unsupported media type: send application/json");
    return;
  }
  json_error_t jerr;
  json_t *msg = json_loadb(c->req.body ? c->req.body : "", c->req.body_len, 0, &jerr);
  if (!msg) {
    char why[256];
    snprintf(why, sizeof why, "parse error: %s", jerr.text);
    refuse(c, 400, RPC_PARSE_ERROR, NULL, why);
    return;
  }
  if (!json_is_object(msg)) {
    refuse(c, 400, RPC_INVALID_REQUEST, NULL,
           json_is_array(msg) ? "JSON-RPC batches are not accepted" : "a message is a JSON object");
    json_decref(msg);
    return;
  }

  struct mcp_front *f = mcp_front_get(c->srv);
  const char *method = json_string_value(json_object_get(msg, "method"));
  bool init = method && strcmp(method, "initialize") == 0;
  struct mcp_hsession *hs;
  if (init) {
    hs = mcp_hsession_new(f, p.tenant, key_of(&c->req));
    if (!hs) {
      refuse(c, 429, SERVER_ERROR, "Retry-After: 60\r\n",
             "too many MCP sessions (64 per tenant): end one (DELETE /mcp) or let one expire");
      json_decref(msg);
      return;
    }
  } else if (!(hs = session_of(c, &p))) {
    json_decref(msg);
    return;
  }

  /* Notifications and responses are taken at once (202). */
  if (!mcp_is_request(msg)) {
    json_t *res = mcp_handle(&hs->s, msg, NULL);
    json_decref(msg);
    if (res) { /* a malformed one */
      size_t len;
      char *body = http_json_line(res, &len);
      http_respond(c, 400, "application/json", body, len, NULL);
      free(body);
      return;
    }
    http_respond(c, 202, "application/json", "", 0, NULL);
    return;
  }

  struct mcp_hreq *r = mcp_hreq_new(hs, msg, deliver);
  r->initialize = init;
  r->sse = streams(msg);
  r->c = c;
  if (!mcp_hreq_run(r)) {
    r->c = NULL;
    mcp_hreq_free(r);
    if (init)
      mcp_hsession_end(hs);
    refuse(c, 503, SERVER_ERROR, "Retry-After: 1\r\n", "overloaded: too many MCP requests run now");
    return;
  }
  if (r->sse)
    http_stream_start_with(c, 200, "text/event-stream", "X-Accel-Buffering: no\r\n", &ops, r);
  else {
    http_own(c, &ops, r);
    http_watch(c);
  }
}

void mcp_transport_get(struct http_conn *c, const struct principal *unused) {
  (void)unused;
  struct principal p;
  if (!admitted(c, &p) || !session_of(c, &p))
    return;
  refuse(c, 405, SERVER_ERROR, "Allow: POST, DELETE\r\n",
         "method not allowed: this server opens no stream of its own (GET)");
}

void mcp_transport_delete(struct http_conn *c, const struct principal *unused) {
  (void)unused;
  struct principal p;
  if (!admitted(c, &p))
    return;
  struct mcp_hsession *hs = session_of(c, &p);
  if (!hs)
    return;
  mcp_hsession_end(hs);
  http_respond(c, 204, "application/json", "", 0, NULL);
}
