/* The egress proxy: the only way out of a sandbox (docs/network.md).
 *
 * A sandbox's network namespace holds nothing but lo, so none of its
 * sockets reach past it. The server opens a listening socket inside that
 * namespace (127.0.0.1:3128 there) and serves HTTP proxy requests on it
 * from the host's side: CONNECT host:port, and plain requests to an
 * absolute http:// URI. Each names a host; the sandbox's policy
 * (netpolicy.h) says whether it may be reached, the name is resolved here,
 * on the host, and each address is checked again (a listed name may not
 * lead to the metadata service or, through a wildcard, to a private
 * network). The connection out is made from the host's namespace.
 *
 * Everything a sandbox sends here is hostile: the request head is read
 * with a size cap and a deadline, each sandbox may hold a bounded number
 * of connections, and a plain request is rewritten (origin-form target, a
 * Host header that is the URI's own, Connection: close so that the next
 * request on the connection cannot reach another host unchecked). A
 * secret goes only where its rule says (netpolicy.h): into a CONNECT's
 * TLS to a host that proves its name, on the rule's TLS ports, and into
 * a plain request only on a port the rule opts in for plain HTTP; every
 * request that carries one runs on a thread of egress_tls.c, which keeps
 * the answer's head from handing it back. Every attempt, let through or
 * not, is a line in the audit log. */
#include "core/egress/egress.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "util.h"
#include "core/sandbox/audit.h"
#include "core/egress/egress_tls.h"
#include "core/sandbox/fds.h"
#include "core/sandbox/sbx.h"
#include "core/sandbox/tally.h"
#include "http/body.h"
#include "http/errors.h"
#include "http/http.h"
#include "http/request.h"
#include "core/egress/egress_trust.h"

#define EGRESS_MAX_CONNS 256            /* a sandbox's connections through the proxy */
#define EGRESS_HEAD_MAX (16u << 10)     /* request line and headers */
#define EGRESS_HEAD_TIMEOUT_MS 10000    /* to send them */
#define EGRESS_CONNECT_TIMEOUT_MS 10000 /* to resolve and connect out */
#define EGRESS_LOOKUPS 4 /* a sandbox's name lookups under way */
/* A sandbox's intercepted connections at once (each a thread of the
 * server's EGRESS_TLS_THREADS): one sandbox cannot take them all. */
#define EGRESS_MITMS 16

struct egress {
  uv_tcp_t listener;
  struct sbx *sb; /* NULL once the sandbox has gone and the listener closes */
  struct relay_set conns;
  unsigned lookups; /* name lookups under way */
  unsigned mitms;   /* intercepted connections (EGRESS_MITMS) */
};

enum econn_phase { E_HEAD, E_RESOLVING, E_CONNECTING, E_RELAYING, E_ENDING };

struct econn {
  struct relay relay; /* side 0: the sandbox's client; side 1: the host out there */
  struct egress *eg;  /* NULL once the sandbox has gone */
  struct server *srv;
  char tenant[SERVE_TENANT_LEN + 1], sandbox[17];
  uv_timer_t timer;
  uv_getaddrinfo_t gai;
  bool resolving, relay_done, ended, audited;
  bool mitm_counted; /* in eg->mitms */
  struct egress_mitm *mitm; /* its TLS, terminated for the host's secrets (egress_tls.h) */
  enum econn_phase phase;
  http_parser parser;
  size_t head_bytes, head_read; /* counted for the cap; read from the client */
  char *url;
  struct http_header *headers;
  size_t nheaders;
  bool in_value, head_done, upgrade;
  char *rest; /* what followed the head */
  size_t nrest;
  /* What the head asked for. */
  bool tunnel; /* CONNECT */
  char method[16];
  char host[NETPOLICY_HOST_MAX + 1];
  uint16_t port;
  char *target; /* a plain request's origin-form target */
  char authority[NETPOLICY_HOST_MAX + 16];
  enum np_match match;
  struct addrinfo *ai, *next_ai;
  /* How it ended, for the audit log. */
  int status;
  char *reason;
  uint64_t started_ns;
};

/* ---- the end of a connection, and its audit line ---- */

static void audit(struct econn *e) {
  if (e->audited)
    return;
  e->audited = true;
  double ms = (double)(now_ns() - e->started_ns) / 1e6;
  json_t *j =
      json_pack("{s:s,s:s,s:s,s:s,s:s,s:i,s:b,s:i,s:I,s:I,s:f}", "tenant", e->tenant, "action",
                "sandbox.egress", "sandbox", e->sandbox, "method", e->method, "host", e->host,
                "port", e->port, "allowed", e->status == 200, "status", e->status, "bytes_out",
                (json_int_t)(e->head_read + e->nrest + e->relay.bytes[0]), "bytes_in",
                (json_int_t)e->relay.bytes[1], "duration_ms", ms);
  if (j && e->reason)
    json_object_set_new(j, "reason", http_json_text(e->reason));
  if (e->status == 200)
    e->srv->metrics.egress_allowed++;
  else
    e->srv->metrics.egress_denied++;
  audit_record(e->srv, j);
}

static void econn_free(struct econn *e) {
  free(e->url);
  for (size_t i = 0; i < e->nheaders; i++) {
    free(e->headers[i].name);
    free(e->headers[i].value);
  }
  free(e->headers);
  free(e->rest);
  free(e->target);
  free(e->reason);
  if (e->ai)
    uv_freeaddrinfo(e->ai);
  free(e);
}

static void timer_closed(uv_handle_t *h) {
  struct econn *e = h->data;
  e->relay_done = true;
  if (!e->resolving && !e->mitm) /* else the lookup's or the thread's end frees it */
    econn_free(e);
}

static void uncount_mitm(struct econn *e) {
  if (e->mitm_counted && e->eg)
    e->eg->mitms--;
  e->mitm_counted = false;
}

static void unlink_conn(struct econn *e) {
  uncount_mitm(e);
  relay_set_leave(&e->relay);
  e->eg = NULL;
}

static void relay_done(struct relay *r) {
  struct econn *e = (struct econn *)r;
  if (e->resolving) {
    uv_cancel((uv_req_t *)&e->gai); /* if it has not started: its callback comes sooner */
    if (e->eg)
      e->eg->lookups--;
  }
  unlink_conn(e);
  e->ended = true;
  if (e->mitm) /* audited when its thread has ended */
    egress_tls_mitm_stop(e->mitm);
  else if (e->status)
    audit(e);
  uv_close((uv_handle_t *)&e->timer, timer_closed);
}

/* Answer the sandbox's client with status and why (text), then close. */
/* The proxy's answer to the sandbox's client: its status from the one
 * table of kinds (http/errors.c), as every answer of the server's. */
static void refuse(struct econn *e, enum hutch_errkind kind, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void refuse(struct econn *e, enum hutch_errkind kind, const char *fmt, ...) {
  int status = http_error_status(kind);
  char why[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why, sizeof why, fmt, ap);
  va_end(ap);
  e->status = status;
  free(e->reason);
  e->reason = xstrdup(why);
  e->phase = E_ENDING;
  uv_timer_stop(&e->timer);
  char *msg = xasprintf("HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\n"
                        "Content-Length: %zu\r\nConnection: close\r\n\r\nhutch egress: %s\n",
                        status, http_status_text(status), strlen(why) + 15, why);
  relay_reply(&e->relay, 0, msg, strlen(msg));
  free(msg);
}

/* ---- connecting out ---- */

static void try_next_address(struct econn *e);

/* What of the sandbox's request does not go on: hop-by-hop and proxy
 * headers, Host (the URI's own is sent), and the headers its host's
 * secrets replace. */
static bool dropped(const struct http_header *h, void *arg) {
  struct econn *e = arg;
  const char *n = h->name;
  if (strcasecmp(n, "Host") == 0 || strcasecmp(n, "Proxy-Connection") == 0 ||
      strcasecmp(n, "Proxy-Authorization") == 0 || strcasecmp(n, "Connection") == 0 ||
      strcasecmp(n, "Keep-Alive") == 0)
    return true;
  for (const struct np_secret *sec = NULL;
       (sec = netpolicy_next_secret(&e->eg->sb->policy, e->host, e->port, false, sec));)
    if (strcasecmp(n, sec->header) == 0)
      return true;
  return false;
}

/* The plain request, rewritten for an origin server (see the top), with
 * the secrets whose rules name its port for plain HTTP (a request that
 * carries one is not upgraded: Connection: close); malloc'd, *len long. */
static char *plain_head(struct econn *e, size_t *len) {
  const struct netpolicy *pol = &e->eg->sb->policy;
  bool secrets = netpolicy_next_secret(pol, e->host, e->port, false, NULL) != NULL;
  char *line = xasprintf("%s %s HTTP/%d.%d", e->method, e->target, e->parser.http_major,
                         e->parser.http_minor);
  char *extra = xasprintf("Host: %s\r\nConnection: %s\r\n", e->authority,
                          e->upgrade && !secrets ? "Upgrade" : "close");
  for (const struct np_secret *sec = NULL;
       (sec = netpolicy_next_secret(pol, e->host, e->port, false, sec));) {
    char *more = xasprintf("%s%s: %s\r\n", extra, sec->header, sec->value);
    explicit_bzero(extra, strlen(extra));
    free(extra);
    extra = more;
  }
  char *head = http_head_write(line, e->headers, e->nheaders, dropped, e, extra, len);
  explicit_bzero(extra, strlen(extra));
  free(extra);
  free(line);
  return head;
}

/* An intercepted connection's thread has ended: its bytes and how it
 * ended are the connection's. */
static void mitm_done(struct egress_mitm *m, const struct mitm_result *res, void *arg) {
  (void)m;
  struct econn *e = arg;
  e->mitm = NULL;
  uncount_mitm(e);
  e->relay.bytes[0] += res->bytes_out;
  e->relay.bytes[1] += res->bytes_in;
  if (res->reason[0]) {
    free(e->reason);
    e->reason = xstrdup(res->reason);
  }
  if (res->status)
    e->status = res->status;
  if (!e->ended) {
    relay_close(&e->relay);
    return;
  }
  audit(e);
  if (e->relay_done)
    econn_free(e);
}

/* Hand the connection, once connected, to a thread of egress_tls.c that
 * adds the secrets for its host and port (over TLS when ca is given,
 * else in clear with pre, the plain request as it goes on) and scrubs
 * the answer of them: a request that carries a secret is never a relay
 * the proxy does not read. */
static void hand_over(struct econn *e, const struct tls_ca *ca, const char *pre, size_t npre) {
  struct sbx *sb = e->eg->sb;
  if (e->eg->mitms >= EGRESS_MITMS) {
    refuse(e, HUTCH_ERR_UNAVAILABLE, "the sandbox has %d connections with secrets already",
           EGRESS_MITMS);
    return;
  }
  struct mitm_header hdrs[NETPOLICY_MAX_SECRETS];
  size_t n = 0;
  for (const struct np_secret *sec = NULL;
       n < ARRAY_SIZE(hdrs) &&
       (sec = netpolicy_next_secret(&sb->policy, e->host, e->port, ca != NULL, sec));)
    hdrs[n++] = (struct mitm_header){sec->header, sec->value};
  uv_os_fd_t fd;
  int client = uv_fileno((uv_handle_t *)&e->relay.side[0], &fd) == 0
                   ? fcntl(fd, F_DUPFD_CLOEXEC, 3)
                   : -1;
  if (client < 0) {
    refuse(e, HUTCH_ERR_UNAVAILABLE, "out of descriptors");
    return;
  }
  struct mitm_spec sp = {.tenant = sb->tenant, .ca = ca, .client = client,
                         .upstream = e->relay.fd[1], .host = e->host, .port = e->port,
                         .hdrs = hdrs, .nhdrs = n, .pre = pre, .npre = npre,
                         .idle_ms = e->srv->cfg.relay_idle_ms, .done = mitm_done, .arg = e};
  e->relay.fd[1] = -1;
  struct hutch_err err = {0};
  e->mitm = egress_tls_mitm_start(e->srv, &sp, &err);
  if (!e->mitm) {
    refuse(e, hutch_err_class(&err), "%s", err.msg);
    return;
  }
  e->eg->mitms++;
  e->mitm_counted = true;
  /* The relay's own handles stay as they are until the thread ends. */
  uv_read_stop((uv_stream_t *)&e->relay.side[0]);
}

/* A CONNECT to a host and port with secrets for TLS, once connected: its
 * TLS is terminated (egress_tls.h) when the sandbox trusts its CA, else
 * it is a tunnel as any other (its CA is made and installed now, for the
 * next). false when it is not intercepted. */
static bool intercept(struct econn *e) {
  struct sbx *sb = e->eg->sb;
  if (!netpolicy_next_secret(&sb->policy, e->host, e->port, true, NULL))
    return false;
  if (!sb->tls_ca)
    egress_trust(sb, NULL, NULL);
  if (!sb->tls_trusted)
    return false;
  hand_over(e, sb->tls_ca, NULL, 0);
  return true;
}

/* A plain request, once connected: sent on, or, when its port carries
 * secrets for plain HTTP, handed to a thread with them. The body's first
 * bytes (rest) go with the head. */
static void send_plain(struct econn *e) {
  size_t len;
  char *head = plain_head(e, &len);
  if (netpolicy_next_secret(&e->eg->sb->policy, e->host, e->port, false, NULL)) {
    /* A TRACE would come back with the secret in its body (egress_tls.c,
     * target_of): refused. Its target and Host are the URI's own, as any
     * plain request's (plain_head), so it names no other host. */
    if (e->parser.method == HTTP_TRACE) {
      explicit_bzero(head, len);
      free(head);
      refuse(e, HUTCH_ERR_METHOD,
             "TRACE would echo the secret added for %s:%u back: the proxy does not send it",
             e->host, e->port);
      return;
    }
    head = xrealloc(head, len + e->nrest + 1);
    memcpy(head + len, e->rest, e->nrest);
    hand_over(e, NULL, head, len + e->nrest);
    explicit_bzero(head, len + e->nrest);
    free(head);
    return;
  }
  relay_send(&e->relay, 1, head, len);
  relay_send(&e->relay, 1, e->rest, e->nrest);
  explicit_bzero(head, len);
  free(head);
  relay_start(&e->relay);
}

static void on_connected(struct relay *r, int status) {
  struct econn *e = (struct econn *)r;
  if (e->phase == E_ENDING) /* refused meanwhile (timed out): its answer is going */
    return;
  if (status < 0) {
    try_next_address(e);
    return;
  }
  uv_timer_stop(&e->timer);
  e->status = 200;
  e->phase = E_RELAYING;
  if (e->tunnel) {
    static const char ok[] = "HTTP/1.1 200 Connection established\r\n\r\n";
    /* Bytes sent before the 200 (a client that did not wait for it) are
     * no TLS the proxy could read from their start: a tunnel. */
    if (!e->nrest && intercept(e))
      return;
    relay_send(&e->relay, 0, ok, sizeof ok - 1);
    relay_send(&e->relay, 1, e->rest, e->nrest);
    relay_start(&e->relay);
  } else {
    send_plain(e);
  }
}

/* The one place the proxy connects out, for every kind of request: the
 * operator's deny floor is checked here, on the address itself
 * (netpolicy_floor_check says why), so that no path out can miss it.
 * false with why filled when the floor holds sa. */
static bool connect_out(struct econn *e, const struct sockaddr *sa, char *why, size_t whylen) {
  struct np_target t = {.addr = sa,
                        .host_own = egress_host_own(e->srv, sa),
                        .server = e->srv->listen_addr.ss_family
                                      ? (const struct sockaddr *)&e->srv->listen_addr
                                      : NULL};
  if (!netpolicy_floor_check(&e->srv->cfg.floor, e->host, e->port, &t, why, whylen))
    return false;
  e->phase = E_CONNECTING;
  relay_connect(&e->relay, -1, sa, on_connected);
  return true;
}

static void try_next_address(struct econn *e) {
  char why[384] = "";
  const struct netpolicy *pol = e->eg ? &e->eg->sb->policy : NULL;
  for (struct addrinfo *ai = e->next_ai; ai; ai = ai->ai_next) {
    e->next_ai = ai->ai_next;
    if (!pol || !netpolicy_check_addr(pol, e->match, ai->ai_addr, e->port,
                                      egress_host_own(e->srv, ai->ai_addr), why, sizeof why))
      continue;
    if (connect_out(e, ai->ai_addr, why, sizeof why))
      return;
  }
  if (e->phase == E_CONNECTING)
    refuse(e, HUTCH_ERR_UPSTREAM, "%s:%u refused the connection", e->host, e->port);
  else if (why[0])
    refuse(e, HUTCH_ERR_FORBIDDEN, "%s:%u is not allowed: %s", e->host, e->port, why);
  else
    refuse(e, HUTCH_ERR_UPSTREAM, "%s:%u cannot be reached", e->host, e->port);
}

static void on_resolved(uv_getaddrinfo_t *req, int status, struct addrinfo *res) {
  struct econn *e = req->data;
  e->resolving = false;
  e->srv->lookups--;
  if (e->relay_done) { /* it ended while the lookup ran */
    if (res)
      uv_freeaddrinfo(res);
    econn_free(e);
    return;
  }
  if (e->eg)
    e->eg->lookups--;
  if (e->relay.closing || e->phase == E_ENDING) {
    if (res)
      uv_freeaddrinfo(res);
    return;
  }
  if (status < 0) {
    refuse(e, HUTCH_ERR_UPSTREAM, "cannot resolve %s: %s", e->host, uv_strerror(status));
    return;
  }
  e->ai = e->next_ai = res;
  try_next_address(e);
}

static void on_timeout(uv_timer_t *t) {
  struct econn *e = t->data;
  if (e->phase == E_HEAD)
    refuse(e, HUTCH_ERR_TIMEOUT, "the request was not sent in time");
  else if (e->phase == E_RESOLVING || e->phase == E_CONNECTING) {
    /* A new socket cannot be connected on a handle whose connect is under
     * way: the client hears why, and the connection ends. */
    refuse(e, HUTCH_ERR_UPSTREAM_TIMEOUT, "%s:%u did not answer in time", e->host, e->port);
  }
}

/* ---- the request head ---- */

/* The head is read: what does it ask for, and may it have it? */
static void decide(struct econn *e) {
  struct http_parser_url u;
  http_parser_url_init(&u);
  const char *method = http_method_str(e->parser.method);
  str_copy(e->method, sizeof e->method, method);
  e->tunnel = e->parser.method == HTTP_CONNECT;
  if (!e->url || http_parser_parse_url(e->url, strlen(e->url), e->tunnel, &u) != 0 ||
      !(u.field_set & (1 << UF_HOST))) {
    refuse(e, HUTCH_ERR_INVALID,
           "the request names no host: send CONNECT host:port, or a request "
           "for an "
           "absolute http:// URI");
    return;
  }
  if (!e->tunnel) {
    if (!(u.field_set & (1 << UF_SCHEMA)) || u.field_data[UF_SCHEMA].len != 4 ||
        strncasecmp(e->url + u.field_data[UF_SCHEMA].off, "http", 4) != 0) {
      refuse(e, HUTCH_ERR_INVALID,
             "only http:// URIs are proxied as requests; https goes through "
             "CONNECT");
      return;
    }
  }
  char host[NETPOLICY_HOST_MAX + 8];
  size_t hl = u.field_data[UF_HOST].len;
  if (hl >= sizeof host) {
    refuse(e, HUTCH_ERR_INVALID, "the host name is too long");
    return;
  }
  memcpy(host, e->url + u.field_data[UF_HOST].off, hl);
  host[hl] = '\0';
  if (!netpolicy_host_ok(host, e->host)) {
    str_copy(e->host, sizeof e->host, "");
    refuse(e, HUTCH_ERR_INVALID, "'%.260s' is no host name or address", host);
    return;
  }
  e->port = (u.field_set & (1 << UF_PORT)) ? u.port : 80;
  if (e->port == 0) {
    refuse(e, HUTCH_ERR_INVALID, "port 0 cannot be reached");
    return;
  }
  if (!e->tunnel) {
    /* The path and query as sent ("/", or "*" for OPTIONS, when neither). */
    e->target = egress_tls_origin_target(e->url, &u, e->parser.method == HTTP_OPTIONS);
    bool v6 = strchr(e->host, ':') != NULL;
    snprintf(e->authority, sizeof e->authority, "%s%s%s", v6 ? "[" : "", e->host, v6 ? "]" : "");
    if (u.field_set & (1 << UF_PORT))
      snprintf(e->authority + strlen(e->authority), sizeof e->authority - strlen(e->authority),
               ":%u", e->port);
  }
  const struct sbx *sb = e->eg->sb;
  if (!sb->policy.allowlist) {
    refuse(e, HUTCH_ERR_FORBIDDEN, "%s:%u is not allowed: the sandbox's network mode is \"none\"", e->host,
           e->port);
    return;
  }
  e->match = netpolicy_check_host(&sb->policy, e->host, e->port);
  if (e->match == NP_DENIED) {
    refuse(e, HUTCH_ERR_FORBIDDEN, "%s:%u is not allowed: it is not in the sandbox's allow-list%s",
           e->host, e->port, sb->policy.ndeny ? ", or its deny list holds it" : "");
    return;
  }
  /* A name the operator denies is not even looked up (connect_out checks
   * it again, with the address). */
  char why[384];
  if (!netpolicy_floor_check(&e->srv->cfg.floor, e->host, e->port, NULL, why, sizeof why)) {
    refuse(e, HUTCH_ERR_FORBIDDEN, "%s:%u is not allowed: %s", e->host, e->port, why);
    return;
  }
  uv_timer_start(&e->timer, on_timeout, EGRESS_CONNECT_TIMEOUT_MS, 0);
  if (e->match == NP_BY_ADDR) { /* an address: nothing to look up */
    struct sockaddr_storage ss;
    bool v6 = strchr(e->host, ':') != NULL;
    if ((v6 ? uv_ip6_addr(e->host, e->port, (struct sockaddr_in6 *)&ss)
            : uv_ip4_addr(e->host, e->port, (struct sockaddr_in *)&ss)) == 0) {
      struct addrinfo one = {
          .ai_family = ss.ss_family, .ai_socktype = SOCK_STREAM, .ai_addr = (struct sockaddr *)&ss};
      e->next_ai = &one;
      try_next_address(e);
      e->next_ai = NULL; /* one lived on this stack */
      return;
    }
  }
  /* Lookups run on libuv's few threads, shared with snapshot copies: a
   * sandbox may have a few under way, and the server a few more. */
  if (e->eg->lookups >= EGRESS_LOOKUPS || e->srv->lookups >= SERVE_LOOKUPS) {
    refuse(e, HUTCH_ERR_UNAVAILABLE, "too many name lookups under way; try again");
    return;
  }
  e->phase = E_RESOLVING;
  struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
  e->gai.data = e;
  char port[8];
  snprintf(port, sizeof port, "%u", e->port);
  e->resolving = true;
  e->eg->lookups++;
  e->srv->lookups++;
  int rc = uv_getaddrinfo(e->srv->loop, &e->gai, on_resolved, e->host, port, &hints);
  if (rc < 0) {
    e->resolving = false;
    e->eg->lookups--;
    e->srv->lookups--;
    refuse(e, HUTCH_ERR_UPSTREAM, "cannot resolve %s: %s", e->host, uv_strerror(rc));
  }
}

static struct econn *econn_of(http_parser *p) {
  return (struct econn *)((char *)p - offsetof(struct econn, parser));
}

static int count(struct econn *e, size_t n) {
  e->head_bytes += n;
  return e->head_bytes > EGRESS_HEAD_MAX ? -1 : 0;
}

static int on_url(http_parser *p, const char *at, size_t n) {
  struct econn *e = econn_of(p);
  if (count(e, n) < 0)
    return -1;
  str_append(&e->url, at, n);
  return 0;
}

static int on_field(http_parser *p, const char *at, size_t n) {
  struct econn *e = econn_of(p);
  if (count(e, n) < 0)
    return -1;
  return http_header_piece(&e->headers, &e->nheaders, &e->in_value, false, at, n);
}

static int on_value(http_parser *p, const char *at, size_t n) {
  struct econn *e = econn_of(p);
  if (count(e, n) < 0)
    return -1;
  return http_header_piece(&e->headers, &e->nheaders, &e->in_value, true, at, n);
}

static int on_headers_complete(http_parser *p) {
  struct econn *e = econn_of(p);
  e->head_done = true;
  e->upgrade = p->upgrade;
  http_parser_pause(p, 1); /* the rest is the body: relayed as it is */
  return 0;
}

static const http_parser_settings head_settings = {
    .on_url = on_url,
    .on_header_field = on_field,
    .on_header_value = on_value,
    .on_headers_complete = on_headers_complete,
};

static void head_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
  (void)h;
  (void)suggested;
  *buf = uv_buf_init(xmalloc(EGRESS_HEAD_MAX), EGRESS_HEAD_MAX);
}

static void head_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf) {
  struct econn *e = s->data;
  if (n <= 0 || e->phase != E_HEAD) {
    free(buf->base);
    if (n < 0)
      relay_close(&e->relay);
    return;
  }
  size_t used = http_parser_execute(&e->parser, &head_settings, buf->base, (size_t)n);
  enum http_errno err = HTTP_PARSER_ERRNO(&e->parser);
  e->head_read += used;
  if (e->head_done) {
    /* Paused at the end of the head, the parser has not taken the
     * head's last LF: it is no part of what follows. */
    if (used < (size_t)n && buf->base[used] == '\n')
      used++, e->head_read++;
    e->rest = xmalloc((size_t)n - used + 1);
    e->nrest = (size_t)n - used;
    memcpy(e->rest, buf->base + used, e->nrest);
    free(buf->base);
    uv_read_stop(s);
    uv_timer_stop(&e->timer);
    decide(e);
    return;
  }
  free(buf->base);
  if (err != HPE_OK) {
    if (e->head_bytes > EGRESS_HEAD_MAX || e->nheaders == HTTP_MAX_HEADERS)
      refuse(e, HUTCH_ERR_HEADERS_TOO_LARGE, "the request head exceeds %u bytes or %d headers", EGRESS_HEAD_MAX,
             HTTP_MAX_HEADERS);
    else
      refuse(e, HUTCH_ERR_INVALID, "malformed request: %s", http_errno_name(err));
  }
}

static void on_accept(uv_stream_t *listener, int status) {
  struct egress *eg = listener->data;
  if (status < 0 || !eg->sb)
    return;
  struct sbx *sb = eg->sb;
  struct econn *e = xcalloc(1, sizeof *e);
  e->srv = sb->srv;
  e->started_ns = now_ns();
  relay_init(&e->relay, sb->srv->loop, relay_done);
  e->relay.side[0].data = e; /* econn starts with its relay: the same pointer */
  e->relay.side[1].data = e;
  uv_timer_init(sb->srv->loop, &e->timer);
  e->timer.data = e;
  str_copy(e->tenant, sizeof e->tenant, sb->tenant);
  str_copy(e->sandbox, sizeof e->sandbox, sb->id);
  e->eg = eg;
  relay_set_join(&eg->conns, &e->relay);
  http_parser_init(&e->parser, HTTP_REQUEST);
  if (uv_accept(listener, (uv_stream_t *)&e->relay.side[0]) < 0) {
    relay_close(&e->relay);
    return;
  }
  if (eg->conns.n > EGRESS_MAX_CONNS) {
    refuse(e, HUTCH_ERR_UNAVAILABLE, "the sandbox has %d connections through the proxy already", EGRESS_MAX_CONNS);
    return;
  }
  /* This one is counted already (want 0): within the sandbox's, its
   * tenant's and the server's descriptor budgets (fds.c). */
  struct hutch_err err = {0};
  if (fds_check(sb->srv, sb->tenant, sb, 0, &err) < 0) {
    refuse(e, hutch_err_class(&err), "%s", err.msg);
    return;
  }
  uv_timer_start(&e->timer, on_timeout, EGRESS_HEAD_TIMEOUT_MS, 0);
  if (uv_read_start((uv_stream_t *)&e->relay.side[0], head_alloc, head_read) < 0)
    relay_close(&e->relay);
}

/* ---- the server's own addresses ---- */

/* The addresses of the host's interfaces, looked up again after 5 s: a
 * public one of them reaches whatever listens on the host's every
 * address (hutch's own API, if so started), so it counts as private. */
bool egress_host_own(struct server *srv, const struct sockaddr *sa) {
  uint64_t now = uv_now(srv->loop);
  if (!srv->own_addrs_at || now - srv->own_addrs_at > 5000) {
    struct ifaddrs *all;
    srv->nown_addrs = 0;
    if (getifaddrs(&all) == 0) {
      for (struct ifaddrs *i = all; i; i = i->ifa_next) {
        if (!i->ifa_addr ||
            (i->ifa_addr->sa_family != AF_INET && i->ifa_addr->sa_family != AF_INET6))
          continue;
        srv->own_addrs = xrealloc(srv->own_addrs, (srv->nown_addrs + 1) * sizeof *srv->own_addrs);
        memcpy(&srv->own_addrs[srv->nown_addrs++], i->ifa_addr,
               i->ifa_addr->sa_family == AF_INET ? sizeof(struct sockaddr_in)
                                                 : sizeof(struct sockaddr_in6));
      }
      freeifaddrs(all);
    }
    srv->own_addrs_at = now ? now : 1;
  }
  /* Compared unwrapped: [::ffff:203.0.113.5] is the host's 203.0.113.5. */
  int family, ofamily;
  unsigned char a[16], o[16];
  if (!netpolicy_addr_of(sa, &family, a))
    return false;
  for (size_t i = 0; i < srv->nown_addrs; i++)
    if (netpolicy_addr_of((const struct sockaddr *)&srv->own_addrs[i], &ofamily, o) &&
        ofamily == family && memcmp(a, o, 16) == 0)
      return true;
  return false;
}

/* ---- a sandbox's proxy ---- */

static void listener_closed(uv_handle_t *h) { free(h->data); }

int egress_open(struct sbx *sb, struct hutch_err *err) {
  static const char *const vars[] = {"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY",
                                     "http_proxy", "https_proxy", "all_proxy"};
  char url[64];
  snprintf(url, sizeof url, "http://127.0.0.1:%d", EGRESS_PORT);
  /* Workloads find the proxy by the usual variables (a request's own env
   * may say otherwise). Set whatever the mode: a policy changed later
   * applies to processes already running. */
  for (size_t i = 0; i < ARRAY_SIZE(vars); i++)
    if (!json_object_get(sb->env, vars[i]))
      json_object_set_new(sb->env, vars[i], json_string(url));
  if (!json_object_get(sb->env, "NO_PROXY"))
    json_object_set_new(sb->env, "NO_PROXY", json_string("localhost,127.0.0.1,::1"));
  if (!json_object_get(sb->env, "no_proxy"))
    json_object_set_new(sb->env, "no_proxy", json_string("localhost,127.0.0.1,::1"));

  int fd =
      hutch_sandbox_socket(sb->hs, sb->srv->netns_fd, AF_INET, SOCK_STREAM | SOCK_NONBLOCK, err);
  if (fd < 0)
    return -1;
  struct sockaddr_in a = {.sin_family = AF_INET,
                          .sin_port = htons(EGRESS_PORT),
                          .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (bind(fd, (struct sockaddr *)&a, sizeof a) < 0 || listen(fd, 128) < 0) {
    /* Taken by the sandbox itself (possible only after a restart, when
     * the old listener had gone): its workloads reach no proxy. */
    int e = errno;
    close(fd);
    return hutch_err_set(err, e, "the egress proxy of sandbox %s at 127.0.0.1:%d", sb->id,
                         EGRESS_PORT);
  }
  struct egress *eg = xcalloc(1, sizeof *eg);
  eg->sb = sb;
  uv_tcp_init(sb->srv->loop, &eg->listener);
  eg->listener.data = eg;
  if (uv_tcp_open(&eg->listener, fd) < 0 ||
      uv_listen((uv_stream_t *)&eg->listener, 128, on_accept) < 0) {
    uv_close((uv_handle_t *)&eg->listener, listener_closed);
    return hutch_err_set(err, 0, "listening for the egress proxy of sandbox %s", sb->id);
  }
  tally_relays_like(&eg->conns, &sb->ports);
  sb->egress = eg;
  sb->egress_conns = &eg->conns;
  return 0;
}

/* A sandbox without its proxy still runs, with no way out: said, not fatal. */
void egress_start(struct sbx *sb) {
  struct hutch_err err = {0};
  if (egress_open(sb, &err) < 0)
    fprintf(stderr, "hutch serve: sandbox %s: no egress proxy: %s\n", sb->id, err.msg);
}

void egress_close(struct sbx *sb) {
  struct egress *eg = sb->egress;
  if (!eg)
    return;
  sb->egress = NULL;
  sb->egress_conns = NULL;
  while (eg->conns.first) {
    struct econn *e = (struct econn *)eg->conns.first;
    unlink_conn(e);
    relay_close(&e->relay);
  }
  eg->sb = NULL;
  uv_close((uv_handle_t *)&eg->listener, listener_closed);
}

void egress_sweep(struct sbx *sb, uint64_t idle_ms) {
  for (struct relay *r = sb->egress ? sb->egress->conns.first : NULL, *next; r; r = next) {
    next = r->next;
    struct econn *e = (struct econn *)r;
    if (!relay_idle(&e->relay, idle_ms))
      continue;
    free(e->reason);
    e->reason =
        xasprintf("closed: no byte either way for %llu s", (unsigned long long)(idle_ms / 1000));
    relay_close(&e->relay);
  }
}

void egress_recheck(struct sbx *sb) {
  struct egress *eg = sb->egress;
  if (!eg)
    return;
  /* Connections the new policy would not let through end now. */
  for (struct relay *r = eg->conns.first, *next; r; r = next) {
    next = r->next;
    struct econn *e = (struct econn *)r;
    if (e->phase != E_RELAYING && e->phase != E_CONNECTING && e->phase != E_RESOLVING)
      continue;
    /* What is still allowed goes on as the new policy lets it: an address
     * not yet tried is checked against it. */
    enum np_match m = netpolicy_check_host(&sb->policy, e->host, e->port);
    if (m != NP_DENIED) {
      e->match = m;
      continue;
    }
    free(e->reason);
    e->reason = xstrdup("cut: the sandbox's network policy changed");
    if (e->status != 200)
      e->status = 403;
    relay_close(&e->relay);
  }
}
