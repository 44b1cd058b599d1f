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
 * not, is a line in the audit log.
 *
 * This file holds the proxy's listener, the request head and the decision
 * on it; egress_conn.c the connection from there on: connecting out,
 * relaying or handing over to egress_tls.c, and its end. */
#include "core/egress/egress.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "util.h"
#include "core/egress/egress_tls.h"
#include "core/sandbox/fds.h"
#include "core/sandbox/sbx.h"
#include "core/sandbox/tally.h"
#include "core/egress/egress_conn.h"
#include "http/http.h"
#include "http/request.h"
#include "core/egress/egress_trust.h"

#define EGRESS_MAX_CONNS 256         /* a sandbox's connections through the proxy */
#define EGRESS_HEAD_MAX (16u << 10)  /* request line and headers */
#define EGRESS_HEAD_TIMEOUT_MS 10000 /* to send them */

/* ---- the request head ---- */

/* What the head asks for: its method, host and port, and a plain
 * request's origin-form target and authority. false when it asks for
 * nothing the proxy serves, and the client was refused. */
static bool asked_for(struct econn *e) {
  struct http_parser_url u;
  http_parser_url_init(&u);
  const char *method = http_method_str(e->parser.method);
  str_copy(e->method, sizeof e->method, method);
  e->tunnel = e->parser.method == HTTP_CONNECT;

  if (!e->url || http_parser_parse_url(e->url, strlen(e->url), e->tunnel, &u) != 0 ||
      !(u.field_set & (1 << UF_HOST))) {
    egress_conn_refuse(e, HUTCH_ERR_INVALID,
                       "the request names no host: send CONNECT host:port, or a request for an "
                       "absolute http:// URI");
    return false;
  }
  if (!e->tunnel) {
    if (!(u.field_set & (1 << UF_SCHEMA)) || u.field_data[UF_SCHEMA].len != 4 ||
        strncasecmp(e->url + u.field_data[UF_SCHEMA].off, "http", 4) != 0) {
      egress_conn_refuse(e, HUTCH_ERR_INVALID,
                         "only http:// URIs are proxied as requests; https goes through CONNECT");
      return false;
    }
  }

  char host[NETPOLICY_HOST_MAX + 8];
  size_t hl = u.field_data[UF_HOST].len;
  if (hl >= sizeof host) {
    egress_conn_refuse(e, HUTCH_ERR_INVALID, "the host name is too long");
    return false;
  }
  memcpy(host, e->url + u.field_data[UF_HOST].off, hl);
  host[hl] = '\0';
  if (!netpolicy_host_ok(host, e->host)) {
    str_copy(e->host, sizeof e->host, "");
    egress_conn_refuse(e, HUTCH_ERR_INVALID, "'%.260s' is no host name or address", host);
    return false;
  }

  e->port = (u.field_set & (1 << UF_PORT)) ? u.port : 80;
  if (e->port == 0) {
    egress_conn_refuse(e, HUTCH_ERR_INVALID, "port 0 cannot be reached");
    return false;
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
  return true;
}

/* Whether the sandbox's policy, and the operator's floor, let it reach the
 * host it asks for. false when the client was refused. */
static bool allowed(struct econn *e) {
  const struct sbx *sb = e->eg->sb;
  if (!sb->policy.allowlist) {
    egress_conn_refuse(e, HUTCH_ERR_FORBIDDEN,
                       "%s:%u is not allowed: the sandbox's network mode is \"none\"", e->host,
                       e->port);
    return false;
  }

  e->match = netpolicy_check_host(&sb->policy, e->host, e->port);
  if (e->match == NP_DENIED) {
    egress_conn_refuse(e, HUTCH_ERR_FORBIDDEN,
                       "%s:%u is not allowed: it is not in the sandbox's allow-list%s", e->host,
                       e->port, sb->policy.ndeny ? ", or its deny list holds it" : "");
    return false;
  }

  /* A name the operator denies is not even looked up (connect_out checks
   * it again, with the address). */
  char why[384];
  if (!netpolicy_floor_check(&e->srv->cfg.floor, e->host, e->port, NULL, why, sizeof why)) {
    egress_conn_refuse(e, HUTCH_ERR_FORBIDDEN, "%s:%u is not allowed: %s", e->host, e->port, why);
    return false;
  }
  return true;
}

/* The head is read: what does it ask for, and may it have it? */
static void decide(struct econn *e) {
  if (!asked_for(e))
    return;
  if (!allowed(e))
    return;
  egress_conn_resolve(e);
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
  http_parser_pause(p, 1); /* The rest is the body, relayed as it is. */
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
      egress_conn_refuse(e, HUTCH_ERR_HEADERS_TOO_LARGE,
                         "the request head exceeds %u bytes or %d headers", EGRESS_HEAD_MAX,
                         HTTP_MAX_HEADERS);
    else
      egress_conn_refuse(e, HUTCH_ERR_INVALID, "malformed request: %s", http_errno_name(err));
  }
}

static void on_accept(uv_stream_t *listener, int status) {
  struct egress *eg = listener->data;
  if (status < 0 || !eg->sb)
    return;

  struct sbx *sb = eg->sb;
  struct econn *e = egress_conn_new(eg);
  http_parser_init(&e->parser, HTTP_REQUEST);
  if (uv_accept(listener, (uv_stream_t *)&e->relay.side[0]) < 0) {
    relay_close(&e->relay);
    return;
  }

  if (eg->conns.n > EGRESS_MAX_CONNS) {
    egress_conn_refuse(e, HUTCH_ERR_UNAVAILABLE,
                       "the sandbox has %d connections through the proxy already",
                       EGRESS_MAX_CONNS);
    return;
  }
  /* This one is counted already (want 0): within the sandbox's, its
   * tenant's and the server's descriptor budgets (fds.c). */
  struct hutch_err err = {0};
  if (fds_check(sb->srv, sb->tenant, sb, 0, &err) < 0) {
    egress_conn_refuse(e, hutch_err_class(&err), "%s", err.msg);
    return;
  }

  egress_conn_deadline(e, EGRESS_HEAD_TIMEOUT_MS);
  if (uv_read_start((uv_stream_t *)&e->relay.side[0], head_alloc, head_read) < 0)
    relay_close(&e->relay);
}

/* ---- the server's own addresses ---- */

/* The addresses of the host's interfaces, looked up again after 5 s: a
 * public one of them reaches whatever listens on the host's every
 * address (hutch's own API, if so started), so it counts as private. */
const struct sockaddr_storage *egress_own_addrs(struct server *srv, size_t *n) {
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
  *n = srv->nown_addrs;
  return srv->own_addrs;
}

bool egress_addr_among(const struct sockaddr *sa, const struct sockaddr_storage *list, size_t n) {
  /* Addresses are compared unwrapped: [::ffff:203.0.113.5] is the host's
   * 203.0.113.5. */
  int family, ofamily;
  unsigned char a[16], o[16];
  if (!netpolicy_addr_of(sa, &family, a))
    return false;

  for (size_t i = 0; i < n; i++)
    if (netpolicy_addr_of((const struct sockaddr *)&list[i], &ofamily, o) && ofamily == family &&
        memcmp(a, o, 16) == 0)
      return true;
  return false;
}

bool egress_host_own(struct server *srv, const struct sockaddr *sa) {
  size_t n;
  const struct sockaddr_storage *own = egress_own_addrs(srv, &n);
  return egress_addr_among(sa, own, n);
}

/* ---- a sandbox's proxy ---- */

static void listener_closed(uv_handle_t *h) {
  free(h->data);
}

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
  int r = bind(fd, (struct sockaddr *)&a, sizeof a);
  if (r == 0)
    r = listen(fd, 128);
  if (r < 0) {
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
  r = uv_tcp_open(&eg->listener, fd);
  if (r == 0)
    r = uv_listen((uv_stream_t *)&eg->listener, 128, on_accept);
  if (r < 0) {
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
    egress_conn_unlink(e);
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
