/* Secrets over HTTPS (docs/network.md, "Secrets over HTTPS"): the egress
 * proxy terminates TLS for a CONNECT to a host and port that carry a
 * secret, with a certificate for that host signed by the sandbox's own
 * CA, reads the first request's head, adds the secrets and sends it on
 * over a TLS connection of its own to the host, whose certificate is
 * verified against the host's trust store (and --egress-ca). Every other
 * CONNECT stays a blind tunnel. A plain request whose secrets opt in to
 * plain HTTP on its port runs on such a thread too, in clear, so that its
 * answer is scrubbed the same way.
 *
 * Handshakes and record encryption run on a thread per intercepted
 * connection (at most EGRESS_TLS_THREADS at once on the server), never on
 * the event loop; the thread touches only what its struct egress_mitm
 * holds and tells the loop it is done through its uv_async_t. */
#ifndef HUTCH_CORE_EGRESS_TLS_H
#define HUTCH_CORE_EGRESS_TLS_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "err.h"

#define EGRESS_TLS_THREADS 64 /* intercepted connections at once, server-wide */
/* A tenant's at once, all its sandboxes together: one tenant's sandboxes
 * (16 each, egress.c) cannot take every thread the server has. */
#define EGRESS_TLS_TENANT (EGRESS_TLS_THREADS / 2)

struct server;
struct tls_ca;
struct egress_mitm;

/* The server's side of it: the context that verifies upstream hosts
 * (the host's trust store, and extra_ca, a PEM file, when given). */
int egress_tls_init(struct server *srv, const char *extra_ca, struct hutch_err *err);
void egress_tls_free(struct server *srv);

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

/* The origin-form target (path and query, "/" when neither; "*" for an
 * OPTIONS with neither) of an absolute URI url parsed into u; malloc'd.
 * A request that gets a secret goes on with its target in this form only
 * (egress_tls.c says why). */
struct http_parser_url;
char *egress_tls_origin_target(const char *url, const struct http_parser_url *u, bool options);


#endif
