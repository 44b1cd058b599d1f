/* An intercepted connection as the loop holds it (egress_tls_mitm.c):
 * what its thread is handed (struct mitm_spec), what it holds while it
 * runs (struct egress_mitm, which egress_tls.c's thread works on), and
 * how it ends (struct mitm_result). egress_tls.h says what interception
 * is for. */
#ifndef HUTCH_CORE_EGRESS_EGRESS_TLS_MITM_H
#define HUTCH_CORE_EGRESS_EGRESS_TLS_MITM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include <http_parser.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "err.h"
#include "core/egress/egress_tls.h"
#include "http/http.h"
#include "state/store.h"

struct server;
struct tls_ca;
struct egress_mitm;
struct scrub;

/* A header the proxy adds to the intercepted request. */
struct mitm_header {
  const char *name, *value;
};

/* How an interception ended: bytes each way (decrypted), and, when it
 * failed before relaying, a status (0: it relayed) and why. */
struct mitm_result {
  uint64_t bytes_out, bytes_in;
  int status;
  char reason[256];
};

typedef void (*mitm_done_fn)(struct egress_mitm *m, const struct mitm_result *res, void *arg);

/* What a thread is handed: the client (the sandbox's side) and upstream
 * (connected to host:port) descriptors, both taken; the secrets (copied).
 * With ca (the sandbox's), a CONNECT's tunnel is intercepted: the thread
 * answers its 200, terminates its TLS, adds the secrets to the first
 * request and sends it on over TLS to a host that must prove its name.
 * Without (a plain request whose secrets' rules name its port for plain
 * HTTP), pre (copied) is that request as it goes on, secrets included,
 * and both sides are in clear. Either way the answer's head is scrubbed
 * of the secrets (egress_scrub.h) before the client sees it. */
struct mitm_spec {
  const char *tenant;
  const struct tls_ca *ca;
  int client, upstream;
  const char *host;
  uint16_t port;
  const struct mitm_header *hdrs;
  size_t nhdrs;
  const char *pre;
  size_t npre;
  uint64_t idle_ms;
  mitm_done_fn done;
  void *arg;
};

/* Start a thread for sp. done is called on the loop once the thread has
 * ended, after which m is freed. NULL and err when the server's threads,
 * or the tenant's share of them (EGRESS_TLS_TENANT), are all taken (the
 * caller still owns nothing: the descriptors are closed). */
struct egress_mitm *egress_tls_mitm_start(struct server *srv, const struct mitm_spec *sp,
                                          struct hutch_err *err);
/* End it soon (the sandbox went, its policy changed, it idled): done
 * still comes. */
void egress_tls_mitm_stop(struct egress_mitm *m);

/* The server's threads of intercepted connections, and whose they are. */
struct egress_tls {
  SSL_CTX *upstream; /* verifies the hosts connected to */
  unsigned running;  /* threads (on the loop's count) */
  /* Whose they are: one slot per tenant with a thread running (at most
   * one per thread), n 0 when free. */
  struct mitm_owner {
    char tenant[SERVE_TENANT_LEN + 1];
    unsigned n;
  } owners[EGRESS_TLS_THREADS];
};

/* An intercepted connection: the loop makes it, its thread works on it
 * alone until it tells the loop it is done (async), and the loop frees it. */
struct egress_mitm {
  struct server *srv;
  struct mitm_owner *owner; /* counted there while the thread runs */
  uv_async_t async;
  int stop;    /* eventfd: the loop asks the thread to end */
  int fd[2];   /* 0: the sandbox's client, 1: the host */
  SSL *ssl[2]; /* NULL: that side is in clear (a plain request, both sides) */
  bool plain;  /* a plain request: in clear both ways, its head given (pre) */
  char *pre;   /* plain: the request as it goes on, secrets included */
  size_t npre;
  struct scrub *scrub;         /* the answer's head, until it has gone by (egress_scrub.h) */
  X509 *leaf, *ca_cert;        /* ca_*: the sandbox's, referenced */
  EVP_PKEY *leaf_key, *ca_key; /* referenced */
  SSL_CTX *client_ctx;
  char host[256];
  uint16_t port;
  char *extra; /* the header lines added */
  uint64_t idle_ms;
  mitm_done_fn done;
  void *arg;
  struct mitm_result res;
  /* The head, as read. */
  http_parser parser;
  char *url;
  struct http_header *headers;
  size_t nheaders, head_bytes;
  bool in_value, head_done;
};

#endif
