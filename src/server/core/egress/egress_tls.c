/* Secrets over HTTPS: the interception of a CONNECT to a host and port
 * that carry a secret, and of a plain request that carries one
 * (egress_tls.h); the sandbox's CA is egress_ca.c's.
 *
 * What a thread here does is the sandbox's doing, and hostile: its
 * handshake and its request head have a deadline (EGRESS_TLS_HEAD_MS),
 * the head a size cap, the relay an idle limit; the thread ends when the
 * loop asks (its stop eventfd). The CA's key and each leaf's key stay in
 * the server's memory. The upstream host must prove its name with a
 * certificate the host trusts, or the request is not sent: the secret
 * never goes to a host that merely answers at the address.
 *
 * This file holds the server's TLS context and what a thread does; the
 * loop's side of an intercepted connection (making, starting, stopping and
 * freeing it) is egress_tls_mitm.c's. */
#include "core/egress/egress_tls.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <http_parser.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "util.h"
#include "core/egress/egress_ca.h"
#include "core/egress/egress_scrub.h"
#include "core/egress/egress_tls_mitm.h"
#include "core/base/server.h"
#include "http/errors.h"
#include "http/http.h"
#include "http/request.h"

#define EGRESS_TLS_HEAD_MS 10000 /* the handshakes and the first request's head */
#define EGRESS_TLS_HEAD_MAX (16u << 10)
#define EGRESS_TLS_BUF (16u << 10) /* one TLS record each way */

/* ---- the server's context ---- */

int egress_tls_init(struct server *srv, const char *extra_ca, struct hutch_err *err) {
  SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
  if (!ctx)
    return hutch_err_set(err, 0, "the egress proxy's TLS context");

  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
  SSL_CTX_set_default_verify_paths(ctx);
  if (extra_ca && SSL_CTX_load_verify_locations(ctx, extra_ca, NULL) != 1) {
    SSL_CTX_free(ctx);
    return hutch_err_fail(err, HUTCH_ERR_INVALID, "invalid_argument",
                          "--egress-ca %s: no PEM certificate could be read", extra_ca);
  }
  static const unsigned char alpn[] = "\x08http/1.1";
  SSL_CTX_set_alpn_protos(ctx, alpn, sizeof alpn - 1);

  srv->egress_tls = xcalloc(1, sizeof *srv->egress_tls);
  srv->egress_tls->upstream = ctx;
  return 0;
}

void egress_tls_free(struct server *srv) {
  if (!srv->egress_tls)
    return;
  SSL_CTX_free(srv->egress_tls->upstream);
  free(srv->egress_tls);
  srv->egress_tls = NULL;
}

/* ---- on the thread: waiting, with the loop's stop and a deadline ---- */

/* Wait for fd to be ready for ev (or fd2 for ev2, when ev2), the stop
 * eventfd or ms: 1 ready, 0 timed out, -1 stopped. */
static int wait_for(struct egress_mitm *m, int fd, short ev, int fd2, short ev2, int ms) {
  /* A side waited on for nothing is left out: poll would report its
   * hang-up again and again, and the thread would spin. */
  struct pollfd p[3] = {{.fd = m->stop, .events = POLLIN},
                        {.fd = ev ? fd : -1, .events = ev},
                        {.fd = ev2 ? fd2 : -1, .events = ev2}};
  int n;
  do
    n = poll(p, ev2 ? 3 : 2, ms);
  while (n < 0 && errno == EINTR);

  if (n < 0 || (p[0].revents & POLLIN))
    return -1;
  return n > 0;
}

static int left_ms(uint64_t deadline_ns) {
  uint64_t now = now_ns();
  return now >= deadline_ns ? 0 : (int)((deadline_ns - now) / 1000000 + 1);
}

/* What an SSL call that failed with e waits for: POLLIN, POLLOUT, or 0
 * when it waits for nothing (it failed, or the peer ended). */
static short wanted(int e) {
  if (e == SSL_ERROR_WANT_READ)
    return POLLIN;
  if (e == SSL_ERROR_WANT_WRITE)
    return POLLOUT;
  return 0;
}

/* One TLS step of side i that may want to wait (handshake, read, write):
 * done when step returns > 0; 0 on the peer's end, -1 failed. */
static int step(struct egress_mitm *m, int i, uint64_t deadline_ns,
                int (*fn)(SSL *s, void *buf, int n), void *buf, int n) {
  for (;;) {
    int r = fn(m->ssl[i], buf, n);
    if (r > 0)
      return r;
    int e = SSL_get_error(m->ssl[i], r);
    short ev = wanted(e);
    if (!ev)
      return e == SSL_ERROR_ZERO_RETURN ? 0 : -1;
    if (wait_for(m, m->fd[i], ev, -1, 0, left_ms(deadline_ns)) <= 0)
      return -1;
  }
}

static int do_accept(SSL *s, void *buf, int n) {
  (void)buf, (void)n;
  return SSL_accept(s);
}
static int do_connect(SSL *s, void *buf, int n) {
  (void)buf, (void)n;
  return SSL_connect(s);
}

/* One read (wr false) or write of side i, over TLS or in clear: the bytes
 * moved (> 0), 0 when the peer has ended, else -1 with *ev what it waits
 * for (0: it failed). */
static int side_io(struct egress_mitm *m, int i, bool wr, void *buf, int n, short *ev) {
  *ev = 0;
  if (!m->ssl[i]) {
    ssize_t r =
        wr ? send(m->fd[i], buf, (size_t)n, MSG_NOSIGNAL) : recv(m->fd[i], buf, (size_t)n, 0);
    if (r >= 0)
      return (int)r;
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
      *ev = wr ? POLLOUT : POLLIN;
    return -1;
  }

  int r = wr ? SSL_write(m->ssl[i], buf, n) : SSL_read(m->ssl[i], buf, n);
  if (r > 0)
    return r;
  int e = SSL_get_error(m->ssl[i], r);
  if (e == SSL_ERROR_ZERO_RETURN)
    return 0;
  *ev = wanted(e);
  return -1;
}

/* side_io, waiting until deadline_ns: > 0 moved; 0 the peer's end; -1
 * failed or timed out. */
static int step_io(struct egress_mitm *m, int i, bool wr, void *buf, int n, uint64_t deadline_ns) {
  for (;;) {
    short ev;
    int r = side_io(m, i, wr, buf, n, &ev);
    if (r >= 0 || !ev)
      return r;
    if (wait_for(m, m->fd[i], ev, -1, 0, left_ms(deadline_ns)) <= 0)
      return -1;
  }
}

/* All n bytes at buf to side i by deadline_ns (a socket in clear takes
 * them in parts): false when it could not. */
static bool side_write_all(struct egress_mitm *m, int i, const char *buf, size_t n,
                           uint64_t deadline_ns) {
  for (size_t done = 0; done < n;) {
    int r = step_io(m, i, true, (char *)buf + done, (int)(n - done), deadline_ns);
    if (r <= 0)
      return false;
    done += (size_t)r;
  }
  return true;
}

static void fail(struct egress_mitm *m, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void fail(struct egress_mitm *m, int status, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(m->res.reason, sizeof m->res.reason, fmt, ap);
  va_end(ap);

  m->res.status = status;
}

/* The answer to the client, inside its TLS: the proxy's own refusal. */
static void answer(struct egress_mitm *m, uint64_t deadline_ns) {
  char *msg = xasprintf("HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\n"
                        "Content-Length: %zu\r\nConnection: close\r\n\r\nhutch egress: %s\n",
                        m->res.status, http_status_text(m->res.status), strlen(m->res.reason) + 15,
                        m->res.reason);

  side_write_all(m, 0, msg, strlen(msg), deadline_ns);
  if (m->ssl[0])
    SSL_shutdown(m->ssl[0]);
  free(msg);
}

/* ---- the client's side ---- */

static struct egress_mitm *mitm_of(http_parser *p) {
  return (struct egress_mitm *)((char *)p - offsetof(struct egress_mitm, parser));
}

static int count(struct egress_mitm *m, size_t n) {
  m->head_bytes += n;
  return m->head_bytes > EGRESS_TLS_HEAD_MAX ? -1 : 0;
}

static int on_url(http_parser *p, const char *at, size_t n) {
  struct egress_mitm *m = mitm_of(p);
  if (count(m, n) < 0)
    return -1;
  str_append(&m->url, at, n);
  return 0;
}

static int on_field(http_parser *p, const char *at, size_t n) {
  struct egress_mitm *m = mitm_of(p);
  if (count(m, n) < 0)
    return -1;
  return http_header_piece(&m->headers, &m->nheaders, &m->in_value, false, at, n);
}

static int on_value(http_parser *p, const char *at, size_t n) {
  struct egress_mitm *m = mitm_of(p);
  if (count(m, n) < 0)
    return -1;
  return http_header_piece(&m->headers, &m->nheaders, &m->in_value, true, at, n);
}

static int on_head_done(http_parser *p) {
  struct egress_mitm *m = mitm_of(p);
  m->head_done = true;
  http_parser_pause(p, 1);
  return 0;
}

static const http_parser_settings head_settings = {
    .on_url = on_url,
    .on_header_field = on_field,
    .on_header_value = on_value,
    .on_headers_complete = on_head_done,
};

/* The client's handshake, with a certificate for the host it asked for. */
static bool client_tls(struct egress_mitm *m, uint64_t deadline_ns) {
  m->ssl[0] = SSL_new(m->client_ctx);
  if (!m->ssl[0] || SSL_set_fd(m->ssl[0], m->fd[0]) != 1) {
    fail(m, 500, "setting up TLS for the client failed");
    return false;
  }

  if (step(m, 0, deadline_ns, do_accept, NULL, 0) <= 0) {
    unsigned long e = ERR_peek_last_error();
    fail(m, 502, "the client's TLS handshake failed (does it trust the sandbox's CA?)%s%s",
         e ? ": " : "", e ? ERR_reason_error_string(e) : "");
    return false;
  }
  return true;
}

/* The first request's head: 0 read (what followed it in rest), -1 not. */
static int read_head(struct egress_mitm *m, uint64_t deadline_ns, char *buf, size_t *rest,
                     size_t *nrest) {
  http_parser_init(&m->parser, HTTP_REQUEST);
  while (!m->head_done) {
    int n = step_io(m, 0, false, buf, EGRESS_TLS_BUF, deadline_ns);
    if (n <= 0) {
      fail(m, 408, "no request came in time");
      return -1;
    }
    m->res.bytes_out += (uint64_t)n;

    size_t used = http_parser_execute(&m->parser, &head_settings, buf, (size_t)n);
    if (m->head_done) {
      if (used < (size_t)n && buf[used] == '\n')
        used++;
      *rest = used;
      *nrest = (size_t)n - used;
      return 0;
    }

    if (HTTP_PARSER_ERRNO(&m->parser) != HPE_OK) {
      if (m->head_bytes > EGRESS_TLS_HEAD_MAX || m->nheaders == HTTP_MAX_HEADERS)
        fail(m, 431, "the request head exceeds %u bytes or %d headers", EGRESS_TLS_HEAD_MAX,
             HTTP_MAX_HEADERS);
      else
        fail(m, 400, "malformed request: %s", http_errno_name(HTTP_PARSER_ERRNO(&m->parser)));
      return -1;
    }
  }
  return -1;
}

/* What of the client's head does not go on: hop-by-hop and proxy headers,
 * Host (the host's own is sent: the secret goes to the host the policy
 * let through, whatever the client names), and what the secrets set. */
static bool dropped(const struct http_header *h, void *arg) {
  const char *extra = arg, *n = h->name;
  if (strcasecmp(n, "Host") == 0 || strcasecmp(n, "Proxy-Connection") == 0 ||
      strcasecmp(n, "Proxy-Authorization") == 0 || strcasecmp(n, "Connection") == 0 ||
      strcasecmp(n, "Keep-Alive") == 0)
    return true;

  size_t len = strlen(n);
  for (const char *l = extra; *l; l = strchr(l, '\n') + 1)
    if (strncasecmp(l, n, len) == 0 && l[len] == ':')
      return true;
  return false;
}

/* ---- the host's side ---- */

/* What the host's certificate must prove, the host's address or its
 * name (then also sent as the SNI): false when it could not be set. */
static bool expect_host(SSL *s, const char *host) {
  bool ip = strchr(host, ':') || strspn(host, "0123456789.") == strlen(host);
  if (ip)
    return X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(s), host) == 1;
  if (SSL_set_tlsext_host_name(s, host) != 1)
    return false;
  return SSL_set1_host(s, host) == 1;
}

static bool upstream_tls(struct egress_mitm *m, uint64_t deadline_ns) {
  struct egress_tls *t = m->srv->egress_tls;
  m->ssl[1] = SSL_new(t->upstream);
  if (!m->ssl[1] || SSL_set_fd(m->ssl[1], m->fd[1]) != 1) {
    fail(m, 500, "setting up TLS for %s failed", m->host);
    return false;
  }
  if (!expect_host(m->ssl[1], m->host)) {
    fail(m, 500, "setting up TLS for %s failed", m->host);
    return false;
  }

  if (step(m, 1, deadline_ns, do_connect, NULL, 0) <= 0) {
    long v = SSL_get_verify_result(m->ssl[1]);
    if (v != X509_V_OK)
      fail(m, 502, "%s:%u's certificate is not trusted: %s", m->host, m->port,
           X509_verify_cert_error_string(v));
    else
      fail(m, 502, "the TLS handshake with %s:%u failed", m->host, m->port);
    return false;
  }
  return true;
}

/* ---- both ways ---- */

/* What the host sent (n bytes at buf) as it may go on to the sandbox:
 * through the scrubber until its answer's heads and trailers have gone
 * by, so that no header hands a secret back (egress_scrub.h). *data and
 * *len: what to write (a new buffer when scrubbed, in *own). 1 to go
 * on; 0 when the answer is no HTTP the scrubber can read (nothing of it
 * has gone on: the client is to be told); -1 to cut the connection. */
static int from_host(struct egress_mitm *m, char *buf, size_t n, char **data, size_t *len,
                     char **own) {
  *data = buf;
  *len = n;
  if (!m->scrub)
    return 1;

  char *out = NULL;
  size_t nout = 0;
  int rc = egress_scrub_feed(m->scrub, buf, n, &out, &nout);
  if (rc < 0) {
    free(out);
    if (rc == -1)
      fail(m, 502,
           "%s:%u answered no HTTP head (of at most %u bytes) the proxy could check for "
           "its secrets",
           m->host, m->port, SCRUB_HEAD_MAX);
    else
      fail(m, 0, "cut: %s:%u sent a chunked body the proxy could not follow to its trailers",
           m->host, m->port);
    return rc == -1 ? 0 : -1;
  }

  if (rc == 1) {
    egress_scrub_free(m->scrub);
    m->scrub = NULL;
  }
  *own = *data = out;
  *len = nout;
  return 1;
}

/* Move bytes both ways until both have ended, one is cut, the loop asks,
 * or nothing moves for idle_ms. false when the host's answer could not
 * be checked (nothing of it has gone to the client). */
static bool pump(struct egress_mitm *m) {
  char *buf[2] = {xmalloc(EGRESS_TLS_BUF), xmalloc(EGRESS_TLS_BUF)};
  char *data[2] = {NULL, NULL}, *own[2] = {NULL, NULL};
  size_t len[2] = {0, 0}, off[2] = {0, 0};
  bool eof[2] = {false, false}, shut[2] = {false, false}, ok = true;
  /* Idle is since the last byte moved, not since the last wake-up. */
  uint64_t last_ns = now_ns();

  for (;;) {
    bool moved = false;
    short ev[2] = {0, 0}, want;
    for (int d = 0; d < 2; d++) { /* The bytes go from side d to side t. */
      int t = 1 - d;

      /* Side d is read once all it sent before has gone on. */
      if (!eof[d] && !len[d]) {
        free(own[d]);
        own[d] = NULL;
        int n = side_io(m, d, false, buf[d], EGRESS_TLS_BUF, &want);
        if (n > 0) {
          moved = true;
          if (d == 0)
            m->res.bytes_out += (uint64_t)n;
          else
            m->res.bytes_in += (uint64_t)n;
          off[d] = 0;
          data[d] = buf[d];
          len[d] = (size_t)n;
          int go = 1;
          if (d == 1)
            go = from_host(m, buf[d], (size_t)n, &data[d], &len[d], &own[d]);
          /* When cut, part of the answer went on: no answer of the proxy's
           * follows. */
          if (go < 1) {
            ok = go < 0;
            goto out;
          }
        } else if (n < 0 && want) {
          ev[d] |= want;
        } else {
          eof[d] = moved = true;
        }
      }

      /* What side d sent goes on to side t. */
      if (len[d]) {
        int n = side_io(m, t, true, data[d] + off[d], (int)(len[d] - off[d]), &want);
        if (n > 0) {
          off[d] += (size_t)n;
          if (off[d] == len[d])
            len[d] = off[d] = 0;
          moved = true;
        } else if (n < 0 && want) {
          ev[t] |= want;
        } else {
          goto out;
        }
      }

      /* Side d ended and all it sent has gone: side t hears the end. */
      if (eof[d] && !len[d] && !shut[t]) {
        if (m->ssl[t])
          SSL_shutdown(m->ssl[t]);
        shutdown(m->fd[t], SHUT_WR);
        shut[t] = moved = true;
      }
    }

    if ((eof[0] && eof[1]) || (shut[0] && shut[1]))
      break;
    if (moved) {
      last_ns = now_ns();
      continue;
    }

    int r =
        wait_for(m, m->fd[0], ev[0], m->fd[1], ev[1], left_ms(last_ns + m->idle_ms * 1000000ull));
    if (r <= 0) {
      if (r == 0)
        fail(m, 0, "closed: no byte either way for %llu s",
             (unsigned long long)(m->idle_ms / 1000));
      break;
    }
  }

out:
  for (int d = 0; d < 2; d++) {
    free(buf[d]);
    free(own[d]);
  }
  return ok;
}

static bool leaf_for(struct egress_mitm *m);

char *egress_tls_origin_target(const char *url, const struct http_parser_url *u, bool options) {
  /* Where the path begins, else the query with its '?'; 0 when neither. */
  size_t off = 0;
  if (u->field_set & (1 << UF_PATH))
    off = u->field_data[UF_PATH].off;
  else if (u->field_set & (1 << UF_QUERY))
    off = u->field_data[UF_QUERY].off - 1;

  char *target;
  if (!off)
    target = xstrdup(options ? "*" : "/");
  else if (url[off] == '?')
    target = xasprintf("/%s", url + off);
  else
    target = xstrdup(url + off);

  char *frag = strchr(target, '#');
  if (frag)
    *frag = '\0';
  return target;
}

/* Whether the absolute URI url, parsed into u, is https:// on the proven
 * host and port itself (no user part; the port 443 may go unsaid). */
static bool names_proven_host(const struct egress_mitm *m, const char *url,
                              const struct http_parser_url *u) {
  if (!(u->field_set & (1 << UF_SCHEMA)) || !(u->field_set & (1 << UF_HOST)) ||
      (u->field_set & (1 << UF_USERINFO)))
    return false;

  size_t sl = u->field_data[UF_SCHEMA].len, hl = u->field_data[UF_HOST].len;
  const char *sch = url + u->field_data[UF_SCHEMA].off, *h = url + u->field_data[UF_HOST].off;
  bool port_ok = (u->field_set & (1 << UF_PORT)) ? u->port == m->port : m->port == 443;
  return sl == 5 && strncasecmp(sch, "https", 5) == 0 && hl == strlen(m->host) &&
         strncasecmp(h, m->host, hl) == 0 && port_ok;
}

/* The target the intercepted request goes on with (malloc'd), or NULL
 * with the client's answer in m->res. Every request here gets a secret.
 *
 * The attack: CONNECT api.example.com:443, whose host proves that name,
 * then inside the TLS "GET https://victim-b.example/ HTTP/1.1". A shared
 * front (nginx, a CDN) routes on the request line's authority before
 * Host, so the secret added for api.example.com would go to a virtual
 * host that never proved its name. Host is the CONNECT's own (tls_extra);
 * the target must not name another: origin-form (/...), "*" for OPTIONS,
 * or an absolute https URI on exactly the proven host[:port], which goes
 * on in origin form. Any other (another host or port, a user part, an
 * authority-form, a CONNECT inside) is refused and nothing is sent.
 *
 * TRACE makes a host (Apache's default) echo the request, the secret
 * included, in its body, which the scrubber does not read (it reads
 * heads): refused, 405. TRACK, which IIS echoes alike, is no method the
 * parser knows: its head is refused as malformed (read_head), 400. */
static char *target_of(struct egress_mitm *m) {
  const char *url = m->url ? m->url : "";
  if (m->parser.method == HTTP_TRACE) {
    fail(m, 405, "TRACE would echo the secret added for %s back: the proxy does not send it",
         m->host);
    return NULL;
  }
  if (url[0] == '/' || (strcmp(url, "*") == 0 && m->parser.method == HTTP_OPTIONS))
    return xstrdup(url);

  struct http_parser_url u;
  http_parser_url_init(&u);
  bool proven = false;
  if (m->parser.method != HTTP_CONNECT && http_parser_parse_url(url, strlen(url), 0, &u) == 0)
    proven = names_proven_host(m, url, &u);
  if (proven)
    return egress_tls_origin_target(url, &u, m->parser.method == HTTP_OPTIONS);

  fail(m, 400,
       "the request target '%.200s' is not this connection's host %s:%u: inside a "
       "CONNECT with a secret, send an origin-form target (/path), or an https:// URI on "
       "%s:%u itself",
       url, m->host, m->port, m->host, m->port);
  return NULL;
}

/* A CONNECT's TLS, terminated: the 200, the client's handshake with a
 * leaf for the host, its first request's head, the host's handshake
 * (which proves its name), and that request sent on with the secrets.
 * false when the relay is not to start (the client has its answer). */
static bool intercept_tls(struct egress_mitm *m, uint64_t deadline_ns, char *buf) {
  static const char ok[] = "HTTP/1.1 200 Connection established\r\n\r\n";
  size_t rest = 0, nrest = 0;
  if (!side_write_all(m, 0, ok, sizeof ok - 1, deadline_ns))
    return false;

  if (!leaf_for(m)) {
    fail(m, 500, "making a certificate for %s failed", m->host);
    return false;
  }
  if (!client_tls(m, deadline_ns))
    return false;

  /* From here on a failure is answered to the client, inside its TLS. */
  if (read_head(m, deadline_ns, buf, &rest, &nrest) < 0) {
    answer(m, deadline_ns);
    return false;
  }
  char *target = target_of(m);
  if (!target) {
    answer(m, deadline_ns);
    return false;
  }
  if (!upstream_tls(m, deadline_ns)) {
    free(target);
    answer(m, deadline_ns);
    return false;
  }

  char *line = xasprintf("%s %s HTTP/%d.%d", http_method_str(m->parser.method), target,
                         m->parser.http_major, m->parser.http_minor);
  free(target);
  size_t hlen;
  char *head = http_head_write(line, m->headers, m->nheaders, dropped, m->extra, m->extra, &hlen);
  free(line);

  bool sent = side_write_all(m, 1, head, hlen, deadline_ns);
  if (sent)
    sent = side_write_all(m, 1, buf + rest, nrest, deadline_ns);
  explicit_bzero(head, hlen);
  free(head);
  if (!sent)
    fail(m, 502, "%s:%u closed the connection", m->host, m->port);
  return sent;
}

void *egress_tls_run(void *arg) {
  struct egress_mitm *m = arg;
  uint64_t deadline_ns = now_ns() + (uint64_t)EGRESS_TLS_HEAD_MS * 1000000;
  char *buf = xmalloc(EGRESS_TLS_BUF);
  for (int i = 0; i < 2; i++)
    fcntl(m->fd[i], F_SETFL, fcntl(m->fd[i], F_GETFL) | O_NONBLOCK);

  bool go;
  if (m->plain)
    go = side_write_all(m, 1, m->pre, m->npre, deadline_ns);
  else
    go = intercept_tls(m, deadline_ns, buf);
  if (m->plain && !go) {
    fail(m, 502, "%s:%u closed the connection", m->host, m->port);
    answer(m, deadline_ns);
  }
  if (go && !pump(m))
    answer(m, now_ns() + (uint64_t)EGRESS_TLS_HEAD_MS * 1000000);

  free(buf);
  ERR_clear_error();
  /* The last thing it does: after this the loop may free m. */
  uv_async_send(&m->async);
  return NULL;
}

/* ---- the client's certificate, on the thread ---- */

/* HTTP/1.1 only, so that the head can be read. */
static int select_alpn(SSL *s, const unsigned char **out, unsigned char *outlen,
                       const unsigned char *in, unsigned inlen, void *arg) {
  (void)s, (void)arg;
  static const unsigned char h1[] = "\x08http/1.1";
  unsigned char *o;
  if (SSL_select_next_proto(&o, outlen, h1, sizeof h1 - 1, in, inlen) != OPENSSL_NPN_NEGOTIATED)
    return SSL_TLSEXT_ERR_NOACK;
  *out = o;
  return SSL_TLSEXT_ERR_OK;
}

/* The client's context, on the thread: a leaf for host (a name, or an
 * address) signed by the sandbox's CA, for a week. */
static bool leaf_for(struct egress_mitm *m) {
  m->leaf = egress_ca_leaf(m->host, m->leaf_key, m->ca_cert, m->ca_key);
  m->client_ctx = SSL_CTX_new(TLS_server_method());
  if (!m->leaf || !m->client_ctx)
    return false;
  if (SSL_CTX_use_certificate(m->client_ctx, m->leaf) != 1)
    return false;
  if (SSL_CTX_use_PrivateKey(m->client_ctx, m->leaf_key) != 1)
    return false;

  SSL_CTX_set_min_proto_version(m->client_ctx, TLS1_2_VERSION);
  SSL_CTX_set_alpn_select_cb(m->client_ctx, select_alpn, NULL);
  return true;
}
