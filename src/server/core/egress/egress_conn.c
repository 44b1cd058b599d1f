/* One connection through a sandbox's egress proxy, once egress.c has
 * accepted it and found its request allowed: its host resolved and
 * connected out, then relayed, or handed to a thread of egress_tls.c when
 * it carries secrets; and its end, with its audit line. egress.c holds
 * the listener and the request head (the top of egress.c says what the
 * proxy lets through, and why). */
#include "core/egress/egress_conn.h"

#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "util.h"
#include "core/sandbox/audit.h"
#include "core/egress/egress.h"
#include "core/egress/egress_tls_mitm.h"
#include "core/sandbox/sbx.h"
#include "http/body.h"
#include "core/egress/egress_trust.h"
#include "http/errors.h"

#define EGRESS_CONNECT_TIMEOUT_MS 10000 /* to resolve and connect out */
#define EGRESS_LOOKUPS 4                /* a sandbox's name lookups under way */
/* A sandbox's intercepted connections at once (each a thread of the
 * server's EGRESS_TLS_THREADS): one sandbox cannot take them all. */
#define EGRESS_MITMS 16

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
  /* While a lookup or a thread is under way, its end frees it. */
  if (!e->resolving && !e->mitm)
    econn_free(e);
}

static void uncount_mitm(struct econn *e) {
  if (e->mitm_counted && e->eg)
    e->eg->mitms--;
  e->mitm_counted = false;
}

void egress_conn_unlink(struct econn *e) {
  uncount_mitm(e);
  relay_set_leave(&e->relay);
  e->eg = NULL;
}

static void relay_done(struct relay *r) {
  struct econn *e = (struct econn *)r;
  /* A lookup that has not started is cancelled, and its callback comes
   * sooner. */
  if (e->resolving) {
    uv_cancel((uv_req_t *)&e->gai);
    if (e->eg)
      e->eg->lookups--;
  }
  egress_conn_unlink(e);
  e->ended = true;

  /* An intercepted connection is audited when its thread has ended. */
  if (e->mitm)
    egress_tls_mitm_stop(e->mitm);
  else if (e->status)
    audit(e);

  uv_close((uv_handle_t *)&e->timer, timer_closed);
}

/* Answer the sandbox's client with a status and why (text), then close.
 * The status comes from the one table of kinds (http/errors.c), as every
 * answer of the server's does. */
void egress_conn_refuse(struct econn *e, enum hutch_errkind kind, const char *fmt, ...) {
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
    egress_conn_refuse(e, HUTCH_ERR_UNAVAILABLE,
                       "the sandbox has %d connections with secrets already", EGRESS_MITMS);
    return;
  }

  struct mitm_header hdrs[NETPOLICY_MAX_SECRETS];
  size_t n = 0;
  for (const struct np_secret *sec = NULL;
       n < ARRAY_SIZE(hdrs) &&
       (sec = netpolicy_next_secret(&sb->policy, e->host, e->port, ca != NULL, sec));)
    hdrs[n++] = (struct mitm_header){sec->header, sec->value};

  uv_os_fd_t fd;
  int client = -1;
  if (uv_fileno((uv_handle_t *)&e->relay.side[0], &fd) == 0)
    client = fcntl(fd, F_DUPFD_CLOEXEC, 3);
  if (client < 0) {
    egress_conn_refuse(e, HUTCH_ERR_UNAVAILABLE, "out of descriptors");
    return;
  }

  struct mitm_spec sp = {.tenant = sb->tenant,
                         .ca = ca,
                         .client = client,
                         .upstream = e->relay.fd[1],
                         .host = e->host,
                         .port = e->port,
                         .hdrs = hdrs,
                         .nhdrs = n,
                         .pre = pre,
                         .npre = npre,
                         .idle_ms = e->srv->cfg.relay_idle_ms,
                         .done = mitm_done,
                         .arg = e};
  e->relay.fd[1] = -1;

  struct hutch_err err = {0};
  e->mitm = egress_tls_mitm_start(e->srv, &sp, &err);
  if (!e->mitm) {
    egress_conn_refuse(e, hutch_err_class(&err), "%s", err.msg);
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
      egress_conn_refuse(e, HUTCH_ERR_METHOD,
                         "TRACE would echo the secret added for %s:%u back: the proxy does not "
                         "send it",
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
  if (e->phase == E_ENDING) /* It was refused meanwhile (timed out): its answer is going. */
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
  const struct sockaddr *server = NULL;
  if (e->srv->listen_addr.ss_family)
    server = (const struct sockaddr *)&e->srv->listen_addr;
  struct np_target t = {.addr = sa, .host_own = egress_host_own(e->srv, sa), .server = server};
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
    egress_conn_refuse(e, HUTCH_ERR_UPSTREAM, "%s:%u refused the connection", e->host, e->port);
  else if (why[0])
    egress_conn_refuse(e, HUTCH_ERR_FORBIDDEN, "%s:%u is not allowed: %s", e->host, e->port, why);
  else
    egress_conn_refuse(e, HUTCH_ERR_UPSTREAM, "%s:%u cannot be reached", e->host, e->port);
}

static void on_resolved(uv_getaddrinfo_t *req, int status, struct addrinfo *res) {
  struct econn *e = req->data;
  e->resolving = false;
  e->srv->lookups--;

  if (e->relay_done) { /* It ended while the lookup ran. */
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
    egress_conn_refuse(e, HUTCH_ERR_UPSTREAM, "cannot resolve %s: %s", e->host,
                       uv_strerror(status));
    return;
  }

  e->ai = e->next_ai = res;
  try_next_address(e);
}

static void on_timeout(uv_timer_t *t) {
  struct econn *e = t->data;
  if (e->phase == E_HEAD)
    egress_conn_refuse(e, HUTCH_ERR_TIMEOUT, "the request was not sent in time");
  else if (e->phase == E_RESOLVING || e->phase == E_CONNECTING) {
    /* A new socket cannot be connected on a handle whose connect is under
     * way: the client hears why, and the connection ends. */
    egress_conn_refuse(e, HUTCH_ERR_UPSTREAM_TIMEOUT, "%s:%u did not answer in time", e->host,
                       e->port);
  }
}

struct econn *egress_conn_new(struct egress *eg) {
  struct sbx *sb = eg->sb;
  struct econn *e = xcalloc(1, sizeof *e);
  e->srv = sb->srv;
  e->started_ns = now_ns();
  relay_init(&e->relay, sb->srv->loop, relay_done);
  e->relay.side[0].data = e; /* An econn starts with its relay: they are one pointer. */
  e->relay.side[1].data = e;
  uv_timer_init(sb->srv->loop, &e->timer);
  e->timer.data = e;
  str_copy(e->tenant, sizeof e->tenant, sb->tenant);
  str_copy(e->sandbox, sizeof e->sandbox, sb->id);
  e->eg = eg;
  relay_set_join(&eg->conns, &e->relay);
  return e;
}

void egress_conn_deadline(struct econn *e, uint64_t ms) {
  uv_timer_start(&e->timer, on_timeout, ms, 0);
}

void egress_conn_resolve(struct econn *e) {
  uv_timer_start(&e->timer, on_timeout, EGRESS_CONNECT_TIMEOUT_MS, 0);

  /* An address has nothing to look up. */
  if (e->match == NP_BY_ADDR) {
    struct sockaddr_storage ss;
    bool v6 = strchr(e->host, ':') != NULL;
    int parsed;
    if (v6)
      parsed = uv_ip6_addr(e->host, e->port, (struct sockaddr_in6 *)&ss);
    else
      parsed = uv_ip4_addr(e->host, e->port, (struct sockaddr_in *)&ss);
    if (parsed == 0) {
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
    egress_conn_refuse(e, HUTCH_ERR_UNAVAILABLE, "too many name lookups under way; try again");
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
    egress_conn_refuse(e, HUTCH_ERR_UPSTREAM, "cannot resolve %s: %s", e->host, uv_strerror(rc));
  }
}
