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

#include <openssl/evp.h>

#include "engine.h"
#include "modern.h"
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

/* Whether host (an Origin's host[:port]) is loopback, by name or address. */
static bool loopback(const char *host, size_t n) {
  static const char *const names[] = {"localhost", "127.0.0.1", "[::1]"};
  for (size_t i = 0; i < ARRAY_SIZE(names); i++) {
    size_t k = strlen(names[i]);
    if (n >= k && strncasecmp(host, names[i], k) == 0 && (n == k || host[k] == ':'))
      return true;
  }
  return false;
}

/* DNS rebinding: a page of another site whose name the attacker points
 * at 127.0.0.1 sends its own name as Host and as Origin, so neither may
 * be compared with the other. A browser's request is taken only from a
 * page of loopback itself (by name or address); not from *.localhost
 * either, which are the sandboxes' own ports' pages. Clients that are not
 * browsers send no Origin. */
static bool origin_ok(const struct http_req *req) {
  const char *origin = http_header(req, "Origin");
  if (!origin)
    return true;
  const char *host = strstr(origin, "://");
  if (!host)
    return false;
  host += 3;
  return loopback(host, strcspn(host, "/"));
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
             "bad request: unsupported MCP-Protocol-Version '%.32s' (this server speaks %s, "
             "2025-11-25, 2025-06-18 and 2025-03-26)",
             v, MCP_MODERN);
    refuse(c, 400, SERVER_ERROR, NULL, msg);
    return NULL;
  }
  return hs;
}

static bool accepts(const struct http_req *req, const char *type) {
  const char *a = http_header(req, "Accept");
  return a && (strcasestr(a, type) || strstr(a, "*/*"));
}

/* --- the 2026-07-28 era --------------------------------------------------- */

/* A header value as the revision encodes it: plain ASCII, or
 * =?base64?...?= (decoded into out). false: malformed. */
static bool header_value(const char *v, char *out, size_t n) {
  size_t len = strlen(v);
  if (len >= 12 && strncmp(v, "=?base64?", 9) == 0 && strcmp(v + len - 2, "?=") == 0) {
    size_t b = len - 11;
    if (b % 4 || b / 4 * 3 + 1 > n)
      return false;
    int got = EVP_DecodeBlock((unsigned char *)out, (const unsigned char *)v + 9, (int)b);
    if (got < 0)
      return false;
    for (size_t i = b; i > 0 && v[9 + i - 1] == '='; i--)
      got--;
    out[got] = '\0';
    return strlen(out) == (size_t)got;
  }
  for (const char *p = v; *p; p++)
    if ((unsigned char)*p < 0x20 || (unsigned char)*p > 0x7e)
      return false;
  str_copy(out, n, v);
  return strlen(v) < n;
}

static void refuse_json(struct http_conn *c, int status, json_t *e) {
  size_t len;
  char *body = http_json_line(e, &len);
  c->last_error = "mcp_refused";
  http_respond(c, status, "application/json", body, len, NULL);
  free(body);
}

static bool mismatch(struct http_conn *c, json_t *msg, const char *what) {
  refuse_json(
      c, 400,
      mcp_rpc_error(json_object_get(msg, "id"), RPC_HEADER_MISMATCH, "Header mismatch: %s", what));
  return false;
}

/* The headers the revision mirrors from the body must match it: a proxy
 * that routes or limits by header must see what the server will run. */
static bool modern_headers(struct http_conn *c, json_t *msg) {
  const char *hv = http_header(&c->req, "Mcp-Protocol-Version");
  const char *bv = mcp_modern_version(msg);
  char what[256];
  if (!hv || !bv || strcmp(hv, bv) != 0) {
    snprintf(what, sizeof what, "MCP-Protocol-Version header '%.32s' and _meta's '%.32s'",
             hv ? hv : "(none)", bv ? bv : "(none)");
    return mismatch(c, msg, what);
  }
  const char *method = json_string_value(json_object_get(msg, "method"));
  const char *hm = http_header(&c->req, "Mcp-Method");
  if (method && (!hm || strcmp(hm, method) != 0)) {
    snprintf(what, sizeof what, "Mcp-Method header '%.64s' does not match body value '%.64s'",
             hm ? hm : "(none)", method);
    return mismatch(c, msg, what);
  }
  if (method && strcmp(method, "tools/call") == 0) {
    const char *name = json_string_value(json_object_get(json_object_get(msg, "params"), "name"));
    const char *hn = http_header(&c->req, "Mcp-Name");
    char decoded[256];
    if (!hn || !header_value(hn, decoded, sizeof decoded) || !name || strcmp(decoded, name) != 0) {
      snprintf(what, sizeof what, "Mcp-Name header '%.64s' does not match body value '%.64s'",
               hn ? hn : "(none)", name ? name : "(none)");
      return mismatch(c, msg, what);
    }
  }
  if (strcmp(bv, MCP_MODERN) != 0) {
    json_t *e = mcp_rpc_error(json_object_get(msg, "id"), RPC_UNSUPPORTED_VERSION,
                              "Unsupported protocol version");
    json_object_set_new(
        json_object_get(e, "error"), "data",
        json_pack("{s:[s,s], s:s}", "supported", MCP_MODERN, MCP_LATEST, "requested", bv));
    refuse_json(c, 400, e);
    return false;
  }
  return true;
}

/* A 2026-07-28 error's HTTP status. */
static int modern_status(json_t *msg) {
  json_int_t code = json_integer_value(json_object_get(json_object_get(msg, "error"), "code"));
  if (code == RPC_METHOD_NOT_FOUND)
    return 404;
  if (code == RPC_HEADER_MISMATCH || code == RPC_UNSUPPORTED_VERSION ||
      code == RPC_MISSING_CAPABILITY || code == RPC_INVALID_REQUEST || code == RPC_PARSE_ERROR)
    return 400;
  return 200;
}

/* Where the client reaches this server, for the URLs tools give back
 * (expose_port): the Host it sent, when that is a plain host[:port]. */
static void public_url(struct http_conn *c, struct mcp_hsession *hs) {
  const char *host = http_header(&c->req, "Host");
  if (!host || !*host || strlen(host) > 200 || hs->s.native.public_url[0])
    return;
  for (const char *p = host; *p; p++)
    if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-:[]", *p))
      return;
  snprintf(hs->s.native.public_url, sizeof hs->s.native.public_url, "http://%s", host);
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
      int status = r->modern ? modern_status(msg) : 200;
      http_respond(c, status, "application/json", body, len, extra[0] ? extra : NULL);
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
  /* An initialize sent as a notification makes no session: nothing
   * could name or end it. */
  bool init = method && strcmp(method, "initialize") == 0 && mcp_is_request(msg);
  const char *hv = http_header(&c->req, "Mcp-Protocol-Version");
  bool modern = mcp_modern_version(msg) || (hv && strcmp(hv, MCP_MODERN) == 0);
  struct mcp_hsession *hs;
  if (modern) {
    /* No session: any Mcp-Session-Id is ignored (the revision's rule). */
    if (!modern_headers(c, msg)) {
      json_decref(msg);
      return;
    }
    hs = mcp_hsession_stateless(f, p.tenant, p.key_id, key_of(&c->req));
    if (!hs) {
      refuse(c, 429, SERVER_ERROR, "Retry-After: 60\r\n",
             "too many MCP sessions (64 per tenant, 1024 on the server)");
      json_decref(msg);
      return;
    }
  } else if (init) {
    hs = mcp_hsession_new(f, p.tenant, key_of(&c->req), false);
    if (!hs) {
      refuse(c, 429, SERVER_ERROR, "Retry-After: 60\r\n",
             "too many MCP sessions with requests under way (64 per tenant, 1024 on the server): "
             "retry when one ends");
      json_decref(msg);
      return;
    }
  } else if (!(hs = session_of(c, &p))) {
    json_decref(msg);
    return;
  }

  public_url(c, hs);

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

  /* One tenant's flood waits its turn, with an answer, not a hang; the
   * other tenants' requests still find threads. */
  if (!mcp_tenant_room(f, p.tenant)) {
    refuse(c, 429, SERVER_ERROR, "Retry-After: 1\r\n",
           "too many MCP requests of this tenant run now (128): retry when some end");
    json_decref(msg);
    return;
  }
  struct mcp_hreq *r = mcp_hreq_new(hs, msg, deliver);
  r->initialize = init && !modern;
  r->modern = modern;
  r->sse = streams(msg);
  r->c = c;
  if (!mcp_hreq_run(r)) {
    r->c = NULL;
    mcp_hreq_free(r);
    if (init && !modern)
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

/* A GET or DELETE of the 2026-07-28 era, which has neither. */
static bool modern_method(struct http_conn *c) {
  const char *hv = http_header(&c->req, "Mcp-Protocol-Version");
  if (!hv || strcmp(hv, MCP_MODERN) != 0)
    return false;
  refuse(c, 405, SERVER_ERROR, "Allow: POST\r\n",
         "method not allowed: the 2026-07-28 revision has no GET stream and no sessions");
  return true;
}

void mcp_transport_get(struct http_conn *c, const struct principal *unused) {
  (void)unused;
  struct principal p;
  if (!admitted(c, &p) || modern_method(c) || !session_of(c, &p))
    return;
  refuse(c, 405, SERVER_ERROR, "Allow: POST, DELETE\r\n",
         "method not allowed: this server opens no stream of its own (GET)");
}

void mcp_transport_delete(struct http_conn *c, const struct principal *unused) {
  (void)unused;
  struct principal p;
  if (!admitted(c, &p) || modern_method(c))
    return;
  struct mcp_hsession *hs = session_of(c, &p);
  if (!hs)
    return;
  mcp_hsession_end(hs);
  http_respond(c, 204, "application/json", "", 0, NULL);
}
