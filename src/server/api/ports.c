/* Inbound ports: a service listening inside a sandbox, reached through the
 * server (docs/network.md). Two ways name it:
 *   /v1/sandboxes/{id}/ports/{port}/PATH   the rest of the path goes on
 *   /sandboxes/{id}/ports/{port}/PATH      the same, in E2B's API
 *   Host: {port}-{id}.{domain}             E2B's getHost(); the path as is
 * The last two answer as E2B's proxy does: {"code", "message"}, a sandbox
 * that is not there a 502 "The sandbox was not found", a port nothing
 * listens on a 502 "The sandbox is running but port is not open".
 * A port is private unless the sandbox makes it public: a private one
 * needs the owner's API key or the sandbox's traffic token, and the
 * credential is taken off the request before it goes in.
 *
 * The connection in is made from a socket the server opens in the
 * sandbox's network namespace, to 127.0.0.1 (then ::1) there: the sandbox
 * gets no route to the host, and sees every request come from its own
 * loopback. The request head goes in rewritten; after it the client's
 * connection is handed to a relay, so bodies, responses and WebSocket
 * frames stream both ways as they come. A second request on the same
 * connection would skip the checks above (a private port; a path that
 * must be rewritten; hutch's credentials to take off, which any request
 * may carry), so every head asks for Connection: close, and the client
 * may send the one request's body and no more: a service that keeps the
 * connection open gets no second request, with its credentials,
 * unchecked. Such a body must come with a Content-Length.
 * An Upgrade there (a WebSocket) is held to the same until the service
 * answers 101: bytes a client pipelines behind the request would
 * otherwise reach the service raw, a second request among them. */
#include "api/ports.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "util.h"
#include "api/keys.h"
#include "api/lifecycle.h"
#include "core/sandbox/audit.h"
#include "core/sandbox/fds.h"
#include "core/tenancy/keys.h"
#include "core/egress/network.h"
#include "core/sandbox/sbx.h"
#include "http/body.h"
#include "http/errors.h"
#include "http/http.h"
#include "http/request.h"

#define PORTS_MAX_CONNS 256 /* a sandbox's connections through its ports */

struct pconn {
  struct relay relay;  /* side 0: the client; side 1: the service in the sandbox */
  struct sbx *sb;      /* NULL once the sandbox has gone */
  struct http_conn *c; /* until the service answers the connect */
  struct server *srv;
  char tenant[SERVE_TENANT_LEN + 1], sandbox[17];
  uint16_t port;
  bool tried_v6, relayed;
  bool upgrade; /* an Upgrade on a checked connection: one request until a 101 */
  bool by_path; /* named by its path: served from the API's (the console's) origin */
  /* One request only (see the top): its body's length, all the client
   * may send; else UINT64_MAX. */
  uint64_t one_body;
  char *head;
  size_t sent; /* head and what came with it: bytes in not seen by the relay */
  uint64_t started_ns;
};

/* "{port}-{id}.{domain}[:listen port]": the port and id, or false. */
static bool host_route(const struct server *srv, const char *host, unsigned *port, char id[17]) {
  if (!host || !srv->cfg.domain)
    return false;
  const char *dash = strchr(host, '-');
  const char *dot = dash ? strchr(dash, '.') : NULL;
  if (!dash || !dot || dash == host || dash - host > 5 || dot - dash - 1 != 16)
    return false;
  for (const char *p = host; p < dash; p++)
    if (!isdigit((unsigned char)*p))
      return false;
  size_t dl = strlen(srv->cfg.domain);
  const char *rest = dot + 1;
  if (strncasecmp(rest, srv->cfg.domain, dl) != 0 || (rest[dl] && rest[dl] != ':'))
    return false;
  *port = (unsigned)strtoul(host, NULL, 10);
  memcpy(id, dash + 1, 16);
  id[16] = '\0';
  return true;
}

bool api_ports_routed_by_host(const struct server *srv, const struct http_req *req) {
  unsigned port;
  char id[17];
  return host_route(srv, http_header(req, "Host"), &port, id);
}

/* ---- the end ---- */

static void unlink_conn(struct pconn *pc) {
  relay_set_leave(&pc->relay);
  pc->sb = NULL;
}

static void relay_done(struct relay *r) {
  struct pconn *pc = (struct pconn *)r;
  unlink_conn(pc);
  if (pc->relayed) {
    double ms = (double)(now_ns() - pc->started_ns) / 1e6;
    audit_record(pc->srv, json_pack("{s:s,s:s,s:s,s:i,s:I,s:I,s:f}", "tenant", pc->tenant, "action",
                                    "sandbox.port", "sandbox", pc->sandbox, "port", pc->port,
                                    "bytes_in", (json_int_t)(pc->sent + r->bytes[0]), "bytes_out",
                                    (json_int_t)r->bytes[1], "duration_ms", ms));
  }
  free(pc->head);
  free(pc);
}

/* The client left while the service was being reached. */
static void client_gone(void *ctx) {
  struct pconn *pc = ctx;
  pc->c = NULL;
  relay_close(&pc->relay);
}

static const struct http_stream_ops own_ops = {.abort = client_gone};

void api_ports_sweep(struct sbx *sb, uint64_t idle_ms) {
  for (struct relay *r = sb->ports.first, *next; r; r = next) {
    next = r->next;
    if (relay_idle(r, idle_ms))
      relay_close(r);
  }
}

void api_ports_close_all(struct sbx *sb) {
  while (sb->ports.first) {
    struct pconn *pc = (struct pconn *)sb->ports.first;
    unlink_conn(pc);
    if (pc->c) {
      struct http_conn *c = pc->c;
      pc->c = NULL;
      http_own(c, NULL, NULL);
      http_error(c, HUTCH_ERR_UPSTREAM, "sandbox_gone", "the sandbox ended");
    }
    relay_close(&pc->relay);
  }
}

/* ---- reaching the service ---- */

/* The service's status line, on a connection that carries one request.
 * "HTTP/1.x 101" to an Upgrade switches it to the other protocol, and the
 * client may send as it likes from then on. Any other answer leaves it at
 * the one request, and the client is told so: "Connection: close" goes in
 * after the status line, first of the headers, whatever the service says
 * of the connection after it (a "close" token anywhere ends it, RFC 9110
 * 7.6.1; clients that read one Connection header read the first). A
 * client that pools connections (Node's keep-alive agent, Python's
 * http.client) would otherwise send its next request on a connection the
 * server is about to end, and lose it.
 *
 * A port named by its path is served from the API's own origin, the web
 * console's (/ui, whose page keeps its key in the origin's session
 * storage). A hostile service's page there could read that storage, or
 * register a service worker over the whole origin and see every request
 * the console makes after, its key among them. So such an answer comes
 * with "Content-Security-Policy: sandbox ...": the browser gives the page
 * an origin of its own (opaque: no storage, no worker, no cookie of
 * hutch's origin), scripts and forms still running. A service that needs
 * an origin of its own is reached by its host, {port}-{id}.DOMAIN, which
 * is one. The policy must be in the final answer, so an interim one (1xx
 * but an asked-for 101; Expect is not passed in, nothing asks for 100) or
 * a status line that does not end within RELAY_FIRST_MAX bytes ends the
 * connection instead: it could carry the real answer unmarked after it. */
static bool answered(struct relay *r, const char *data, size_t n) {
  struct pconn *pc = (struct pconn *)r;
  static const char close_it[] = "Connection: close\r\n";
  static const char sandbox_it[] = "Content-Security-Policy: sandbox allow-scripts allow-forms "
                                   "allow-popups allow-modals allow-downloads\r\n";
  const char *nl = memchr(data, '\n', n);
  if (!nl)
    return n == 0; /* nothing came: the relay ends as it would */
  size_t line = (size_t)(nl - data) + 1;
  bool http = line >= 13 && memcmp(data, "HTTP/1.", 7) == 0 && data[8] == ' ';
  bool interim = !http || data[9] == '1';
  bool upgraded = pc->upgrade && http && memcmp(data + 9, "101", 3) == 0;
  if (interim && !upgraded)
    return false;

  relay_send(r, 0, data, line);
  if (upgraded) {
    relay_limit(r, 0, UINT64_MAX);
  } else {
    relay_send(r, 0, close_it, sizeof close_it - 1);
    if (pc->by_path)
      relay_send(r, 0, sandbox_it, sizeof sandbox_it - 1);
  }
  relay_send(r, 0, data + line, n - line);
  return true;
}

static void connect_in(struct pconn *pc, int family);

/* Nothing answered on the port (status): the client hears so, and the
 * relay ends. */
static void connect_failed(struct pconn *pc, struct http_conn *c, int status) {
  pc->c = NULL;
  http_own(c, NULL, NULL);
  if (c->dialect == DIALECT_E2B) { /* as E2B's proxy says it */
    c->last_error = "port_closed";
    http_json(c, 502,
              json_pack("{s:i,s:s,s:s,s:i}", "code", 502, "message",
                        "The sandbox is running but port is not open", "sandboxId", pc->sandbox,
                        "port", pc->port));
  } else {
    http_error(c, HUTCH_ERR_UPSTREAM, "port_closed",
               "nothing in sandbox %s answers on port %u (%s)", pc->sandbox, pc->port,
               uv_strerror(status));
  }
  relay_close(&pc->relay);
}

static void on_connected(struct relay *r, int status) {
  struct pconn *pc = (struct pconn *)r;
  struct http_conn *c = pc->c;
  if (status == UV_ECONNREFUSED && !pc->tried_v6 && pc->sb) {
    connect_in(pc, AF_INET6); /* a service listening on ::1 alone */
    return;
  }
  if (status < 0) {
    connect_failed(pc, c, status);
    return;
  }

  /* The client's connection leaves the HTTP server for the relay. */
  char *rest = NULL;
  size_t nrest = 0;
  http_own(c, NULL, NULL);
  pc->c = NULL;
  int fd = http_detach(c, &rest, &nrest);
  if (fd < 0) {
    free(rest);
    relay_close(&pc->relay);
    return;
  }
  relay_adopt(&pc->relay, 0, fd);
  pc->relayed = true;

  if (pc->one_body != UINT64_MAX) {
    /* What follows the one request's body is another request: not passed
     * on, and any more ends the connection. */
    if (nrest > pc->one_body)
      nrest = (size_t)pc->one_body;
    relay_limit(&pc->relay, 0, pc->one_body - nrest);
    relay_first(&pc->relay, 1, answered);
  }

  pc->sent = strlen(pc->head) + nrest;
  relay_send(&pc->relay, 1, pc->head, strlen(pc->head));
  relay_send(&pc->relay, 1, rest, nrest);
  free(rest);
  relay_start(&pc->relay);
}

static void connect_in(struct pconn *pc, int family) {
  struct hutch_err err = {0};
  struct sockaddr_in a4 = {.sin_family = AF_INET,
                           .sin_port = htons(pc->port),
                           .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  struct sockaddr_in6 a6 = {
      .sin6_family = AF_INET6, .sin6_port = htons(pc->port), .sin6_addr = IN6ADDR_LOOPBACK_INIT};
  pc->tried_v6 = family == AF_INET6;
  int fd = network_socket(pc->sb, family, &err);
  if (fd < 0) {
    on_connected(&pc->relay, UV_EIO);
    return;
  }
  relay_connect(&pc->relay, fd, family == AF_INET ? (struct sockaddr *)&a4 : (struct sockaddr *)&a6,
                on_connected);
}

/* ---- the request ---- */

/* Whether the request carries the owner's key or the traffic token. */
static bool may_enter(struct http_conn *c, const struct sbx *sb) {
  struct principal p;
  const char *tok = http_header(&c->req, "X-Hutch-Traffic-Token");
  if (!tok)
    tok = http_header(&c->req, "E2B-Traffic-Access-Token");
  if (tok)
    return strlen(tok) == SERVE_TOKEN_LEN &&
           CRYPTO_memcmp(tok, sb->traffic_token, SERVE_TOKEN_LEN) == 0;
  return api_keys_authenticate(c->srv, &c->req, &p) && sbx_find_own(c->srv, &p, sb->id) == sb;
}

/* A header that carries a credential of hutch's, never passed in: the
 * traffic token headers, X-API-Key, envd's X-Access-Token (with it, the
 * service could run commands as the sandbox's root through envd, or hand
 * it on), and an Authorization that holds something shaped as an API key
 * (any other is the service's own). */
static bool credential(const struct http_header *h) {
  static const char *const names[] = {"X-API-Key", "X-Access-Token", "X-Hutch-Traffic-Token",
                                      "E2B-Traffic-Access-Token", NULL};
  for (const char *const *n = names; *n; n++)
    if (strcasecmp(h->name, *n) == 0)
      return true;
  return strcasecmp(h->name, "Authorization") == 0 && keys_in_authorization(h->value);
}

static bool is_public(const struct sbx *sb, unsigned port) {
  if (json_is_true(json_object_get(sb->network, "public")))
    return true;
  size_t i;
  json_t *v;
  json_array_foreach(json_object_get(sb->network, "public_ports"), i, v) {
    if (json_integer_value(v) == (json_int_t)port)
      return true;
  }
  return false;
}

struct inner {
  bool one_request, masked;
};

/* What of the client's head does not go in: hutch's credentials, for one
 * request only what would keep the connection or ask for an interim
 * answer (Expect: answered() refuses a 1xx but 101), Host when the sandbox
 * masks it, and the subprotocols (they go in again without a key,
 * protocols_in). */
static bool dropped(const struct http_header *h, void *arg) {
  const struct inner *in = arg;
  return credential(h) || strcasecmp(h->name, "Sec-WebSocket-Protocol") == 0 ||
         (in->one_request &&
          (strcasecmp(h->name, "Connection") == 0 || strcasecmp(h->name, "Keep-Alive") == 0 ||
           strcasecmp(h->name, "Expect") == 0)) ||
         (in->masked && strcasecmp(h->name, "Host") == 0);
}

/* The client's WebSocket subprotocols as one header line, less any that
 * carries an API key (hutch.key.KEY, the web console's way to its
 * terminal: a console's page could be made to offer it to a sandbox's
 * port, whose service must never see it); "" when none is left. */
static char *protocols_in(const struct http_req *req) {
  char *line = xstrdup("");
  for (size_t i = 0; i < req->nheaders; i++) {
    if (strcasecmp(req->headers[i].name, "Sec-WebSocket-Protocol") != 0)
      continue;
    for (const char *s = req->headers[i].value; *s;) {
      s += strspn(s, " \t,");
      size_t n = strcspn(s, " \t,");
      if (n && !api_keys_ws_protocol(s, n)) {
        char *more = xasprintf("%s%s%.*s", line, line[0] ? ", " : "", (int)n, s);
        free(line);
        line = more;
      }
      s += n;
    }
  }
  if (!line[0])
    return line;
  char *out = xasprintf("Sec-WebSocket-Protocol: %s\r\n", line);
  free(line);
  return out;
}

/* The head the service gets: the client's, with target as the target,
 * and the sandbox's network.mask_host (${PORT}: the port) as its Host. */
static char *inner_head(struct http_conn *c, const struct sbx *sb, unsigned port,
                        const char *target, bool one_request) {
  const char *mask = json_string_value(json_object_get(sb->network, "mask_host"));
  struct inner in = {one_request, mask != NULL};
  char *line = xasprintf("%s %s HTTP/%d.%d", http_method_str(c->req.method), target,
                         c->parser.http_major, c->parser.http_minor);
  char *protocols = protocols_in(&c->req);
  char *extra = xasprintf("%s%s", one_request ? "Connection: close\r\n" : "", protocols);
  free(protocols);
  if (mask) {
    const char *at = strstr(mask, "${PORT}");
    char *more = at ? xasprintf("%sHost: %.*s%u%s\r\n", extra, (int)(at - mask), mask, port, at + 7)
                    : xasprintf("%sHost: %s\r\n", extra, mask);
    free(extra);
    extra = more;
  }
  size_t len;
  char *head = http_head_write(line, c->req.headers, c->req.nheaders, dropped, &in,
                               extra[0] ? extra : NULL, &len);
  free(extra);
  free(line);
  return head;
}

void api_ports_sandbox_missing(struct http_conn *c, const char *id) {
  char shown[33];
  str_copy(shown, sizeof shown, id);
  c->last_error = "sandbox_not_found";
  http_json(c, 502,
            json_pack("{s:i,s:s,s:o}", "code", 502, "message", "The sandbox was not found",
                      "sandboxId", http_json_text(shown)));
}

/* [/v1]/sandboxes/{id}/ports/{port}[/rest][?query]: the id, the port and
 * the target the service gets (malloc'd); -1 after an error answer. */
static int path_route(struct http_conn *c, bool native, unsigned *port, char id[17],
                      char **target) {
  const struct http_req *req = &c->req;
  const char *s = req->target + strlen(native ? "/v1/sandboxes/" : "/sandboxes/");
  const char *slash = strchr(s, '/');
  if (!slash || slash - s != 16 || strncmp(slash, "/ports/", 7) != 0 || !utf8_valid(s, 16)) {
    http_error(c, HUTCH_ERR_NOT_FOUND, "not_found", "no route %s", req->path);
    return -1;
  }
  memcpy(id, s, 16);
  id[16] = '\0';

  const char *ps = slash + 7;
  char *end;
  *port = (unsigned)strtoul(ps, &end, 10);
  if (!isdigit((unsigned char)*ps) || (*end && *end != '/' && *end != '?') || end - ps > 5) {
    http_error(c, HUTCH_ERR_INVALID, "invalid_argument", "the port must be a number 1..65535");
    return -1;
  }
  *target = *end == '/' ? xstrdup(end) : xasprintf("/%s", end);
  return 0;
}

/* A private port of a sandbox that is not the caller's: as if absent to a
 * key of another tenant, 401 without any credential. */
static void refuse_private(struct http_conn *c, const char *id, unsigned port, bool native) {
  const struct http_req *req = &c->req;
  bool any = http_header(req, "Authorization") || http_header(req, "X-API-Key") ||
             http_header(req, "X-Hutch-Traffic-Token") ||
             http_header(req, "E2B-Traffic-Access-Token");
  if (any && !native)
    api_ports_sandbox_missing(c, id);
  else if (any)
    http_error(c, HUTCH_ERR_NOT_FOUND, "not_found", "no sandbox %s", id);
  else
    http_error(c, HUTCH_ERR_UNAUTHENTICATED, "unauthorized",
               "port %u of this sandbox is private: send the API key or the "
               "sandbox's "
               "traffic token (X-Hutch-Traffic-Token)",
               port);
}

/* Whether the request may not go in: true once the refusal is answered (the
 * port, the sandbox, the caller's credentials, the sandbox's and the
 * tenant's room, the body's framing); false with the sandbox running (a
 * paused one woken). */
static bool refused(struct http_conn *c, struct sbx *sb, unsigned port, const char *id,
                    bool native) {
  struct hutch_err err = {0};
  if (port == 0 || port > 65535) {
    http_error(c, HUTCH_ERR_INVALID, "invalid_argument", "the port must be a number 1..65535");
    return true;
  }
  if (!sb && !native) {
    api_ports_sandbox_missing(c, id);
    return true;
  }
  if (!sb) {
    http_error(c, HUTCH_ERR_NOT_FOUND, "not_found", "no sandbox %s", id);
    return true;
  }

  if (!is_public(sb, port) && !may_enter(c, sb)) {
    refuse_private(c, id, port, native);
    return true;
  }
  if (sb->ports.n >= PORTS_MAX_CONNS) {
    http_error(c, HUTCH_ERR_QUOTA, "quota_exceeded",
               "sandbox %s has %d connections through its ports already, the most it may", id,
               PORTS_MAX_CONNS);
    return true;
  }
  if (fds_check(c->srv, sb->tenant, sb, FDS_RELAY, &err) < 0) {
    http_fail(c, &err);
    return true;
  }
  if (c->parser.flags & F_CHUNKED) {
    http_error(c, HUTCH_ERR_LENGTH_REQUIRED, "length_required",
               "a request to this port carries its body with a Content-Length (not chunked)");
    return true;
  }

  return !api_sbx_wake(c, sb);
}

/* All the client may send after a checked request's head: its body (none
 * without a Content-Length); unchecked, no limit. */
static uint64_t one_body(const struct http_conn *c, bool checked) {
  if (!checked)
    return UINT64_MAX;
  if (c->parser.flags & F_CONTENTLENGTH)
    return c->parser.content_length;
  return 0;
}

/* The request goes in: its relay joins the sandbox's, and the client waits
 * while the service is reached (connect_in). */
static void enter(struct http_conn *c, struct sbx *sb, unsigned port, const char *target,
                  bool by_path) {
  /* A private port, or a path to rewrite: one request a connection, so that
   * every request is checked and rewritten. An Upgrade turns it into
   * another protocol, nothing follows in HTTP, but only once the service
   * has agreed: until then the client may send the one request and no
   * more (answered). Even a public port named by its host, with
   * nothing to check or rewrite, gets one request a connection: the relay
   * does not read what follows the first head, so a later request's
   * credentials (an SDK's or a browser's, on a connection its pool reuses)
   * would reach the service untouched. */
  bool checked = sb != NULL;
  bool upgrade = checked && http_header(&c->req, "Upgrade");
  bool one_request = checked && !upgrade;

  str_copy(c->tenant, sizeof c->tenant, sb->tenant);
  struct pconn *pc = xcalloc(1, sizeof *pc);
  pc->srv = c->srv;
  pc->sb = sb;
  pc->c = c;
  pc->port = (uint16_t)port;
  pc->started_ns = c->req.started_ns;
  str_copy(pc->tenant, sizeof pc->tenant, sb->tenant);
  str_copy(pc->sandbox, sizeof pc->sandbox, sb->id);
  pc->head = inner_head(c, sb, port, target, one_request);
  pc->upgrade = upgrade;
  pc->by_path = by_path;
  pc->one_body = one_body(c, checked);

  relay_init(&pc->relay, c->srv->loop, relay_done);
  relay_set_join(&sb->ports, &pc->relay);
  http_own(c, &own_ops, pc);
  connect_in(pc, AF_INET);
}

void api_ports_forward(struct http_conn *c, const struct principal *unused) {
  (void)unused;
  struct server *srv = c->srv;
  struct http_req *req = &c->req;
  unsigned port;
  char id[17];
  char *target;
  bool by_host = host_route(srv, http_header(req, "Host"), &port, id);
  bool native = !by_host && strncmp(req->target, "/v1/", 4) == 0;
  if (!native)
    c->dialect = DIALECT_E2B;
  if (by_host)
    target = xstrdup(req->target);
  else if (path_route(c, native, &port, id, &target) < 0)
    return;

  c->action = "sandbox.port";
  str_copy(c->sandbox, sizeof c->sandbox, id);
  struct sbx *sb = sbx_find(srv, id);
  if (sb && sb->pool)
    sb = NULL;

  if (!refused(c, sb, port, id, native))
    enter(c, sb, port, target, !by_host);
  free(target);
}
