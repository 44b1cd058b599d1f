/* An intercepted connection on the loop (egress_tls_mitm.h): made from
 * what egress_conn.c hands over, counted against the server's threads and
 * its tenant's share of them, started on a thread of its own (whose work
 * is egress_tls.c's), stopped, and freed once the thread has ended. */
#include "core/egress/egress_tls_mitm.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/evp.h>

#include "util.h"
#include "core/egress/egress_ca.h"
#include "core/egress/egress_scrub.h"
#include "core/base/server.h"

static void mitm_free(struct egress_mitm *m) {
  for (int i = 0; i < 2; i++) {
    SSL_free(m->ssl[i]);
    if (m->fd[i] >= 0)
      close(m->fd[i]);
  }

  SSL_CTX_free(m->client_ctx);
  X509_free(m->leaf);
  X509_free(m->ca_cert);
  EVP_PKEY_free(m->leaf_key);
  EVP_PKEY_free(m->ca_key);
  if (m->stop >= 0)
    close(m->stop);

  /* What held secrets is wiped before it is freed. */
  if (m->extra) {
    explicit_bzero(m->extra, strlen(m->extra));
    free(m->extra);
  }
  free(m->url);
  for (size_t i = 0; i < m->nheaders; i++) {
    free(m->headers[i].name);
    if (m->headers[i].value)
      explicit_bzero(m->headers[i].value, strlen(m->headers[i].value));
    free(m->headers[i].value);
  }
  free(m->headers);
  if (m->pre) {
    explicit_bzero(m->pre, m->npre);
    free(m->pre);
  }
  egress_scrub_free(m->scrub);
  free(m);
}

static void async_closed(uv_handle_t *h) {
  struct egress_mitm *m = h->data;
  m->srv->egress_tls->running--;
  m->owner->n--;
  m->done(m, &m->res, m->arg);
  mitm_free(m);
}

static void never_ran(uv_handle_t *h) {
  mitm_free(h->data);
}

static void on_ended(uv_async_t *a) {
  uv_close((uv_handle_t *)a, async_closed);
}

/* The tenant's slot: its own, else a free one (there is always one while
 * a thread is free: a slot per running thread at most). */
static struct mitm_owner *owner_of(struct egress_tls *t, const char *tenant) {
  struct mitm_owner *free_slot = NULL;
  for (size_t i = 0; i < ARRAY_SIZE(t->owners); i++) {
    struct mitm_owner *o = &t->owners[i];
    if (o->n > 0 && strcmp(o->tenant, tenant) == 0)
      return o;
    if (o->n == 0 && !free_slot)
      free_slot = o;
  }
  str_copy(free_slot->tenant, sizeof free_slot->tenant, tenant);
  return free_slot;
}

/* The header lines an intercepted request gets: Host as the CONNECT
 * named it, the secrets, and Connection: close. */
static char *tls_extra(const struct mitm_spec *sp) {
  bool v6 = strchr(sp->host, ':') != NULL;
  const char *open_br = v6 ? "[" : "", *close_br = v6 ? "]" : "";
  char *extra;
  if (sp->port == 443)
    extra = xasprintf("Host: %s%s%s\r\n", open_br, sp->host, close_br);
  else
    extra = xasprintf("Host: %s%s%s:%u\r\n", open_br, sp->host, close_br, sp->port);

  for (size_t i = 0; i <= sp->nhdrs; i++) {
    char *more;
    if (i < sp->nhdrs)
      more = xasprintf("%s%s: %s\r\n", extra, sp->hdrs[i].name, sp->hdrs[i].value);
    else
      more = xasprintf("%sConnection: close\r\n", extra);
    explicit_bzero(extra, strlen(extra));
    free(extra);
    extra = more;
  }

  return extra;
}

/* What the thread is given: both sockets, the secrets (to add, over TLS,
 * and to scrub from the answer either way), and a plain request's head. */
static struct egress_mitm *mitm_new(struct server *srv, const struct mitm_spec *sp) {
  struct egress_mitm *m = xcalloc(1, sizeof *m);
  m->srv = srv;
  m->fd[0] = sp->client;
  m->fd[1] = sp->upstream;
  m->stop = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  str_copy(m->host, sizeof m->host, sp->host);
  m->port = sp->port;
  m->idle_ms = sp->idle_ms;
  m->done = sp->done;
  m->arg = sp->arg;

  const char *values[32];
  size_t n = 0;
  for (; n < sp->nhdrs && n < ARRAY_SIZE(values); n++)
    values[n] = sp->hdrs[n].value;
  m->scrub = egress_scrub_new(values, n);

  m->plain = !sp->ca;
  if (m->plain) {
    m->pre = xmalloc(sp->npre + 1);
    memcpy(m->pre, sp->pre, sp->npre);
    m->npre = sp->npre;
    return m;
  }

  const struct tls_ca *ca = sp->ca;
  m->extra = tls_extra(sp);
  m->leaf_key = ca->leaf_key;
  m->ca_key = ca->key;
  m->ca_cert = ca->cert;
  EVP_PKEY_up_ref(m->leaf_key);
  EVP_PKEY_up_ref(m->ca_key);
  X509_up_ref(m->ca_cert);
  return m;
}

struct egress_mitm *egress_tls_mitm_start(struct server *srv, const struct mitm_spec *sp,
                                          struct hutch_err *err) {
  struct egress_tls *t = srv->egress_tls;
  struct mitm_owner *owner = NULL;
  if (t && t->running < EGRESS_TLS_THREADS)
    owner = owner_of(t, sp->tenant);
  if (!owner || owner->n >= EGRESS_TLS_TENANT) {
    close(sp->client);
    close(sp->upstream);
    if (owner)
      hutch_err_fail(err, HUTCH_ERR_UNAVAILABLE, "overloaded",
                     "the tenant has %d connections with secrets under way", EGRESS_TLS_TENANT);
    else
      hutch_err_fail(err, HUTCH_ERR_UNAVAILABLE, "overloaded",
                     "%d connections with secrets are under way on the server", EGRESS_TLS_THREADS);
    return NULL;
  }

  struct egress_mitm *m = mitm_new(srv, sp);
  if (m->stop < 0) {
    ERR_clear_error();
    mitm_free(m);
    hutch_err_set(err, 0, "intercepting the connection to %s", sp->host);
    return NULL;
  }

  uv_async_init(srv->loop, &m->async, on_ended);
  m->async.data = m;
  pthread_attr_t attr;
  pthread_t th;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  pthread_attr_setstacksize(&attr, 256 << 10);
  int rc = pthread_create(&th, &attr, egress_tls_run, m);
  pthread_attr_destroy(&attr);
  if (rc != 0) {
    uv_close((uv_handle_t *)&m->async, never_ran);
    hutch_err_fail(err, HUTCH_ERR_UNAVAILABLE, "overloaded", "no thread for the connection to %s",
                   sp->host);
    return NULL;
  }

  t->running++;
  m->owner = owner;
  owner->n++;
  return m;
}

void egress_tls_mitm_stop(struct egress_mitm *m) {
  uint64_t one = 1;
  ssize_t n = write(m->stop, &one, sizeof one); /* fails only when asked already */
  (void)n;
}
