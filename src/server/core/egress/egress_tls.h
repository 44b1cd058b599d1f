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
#ifndef HUTCH_CORE_EGRESS_EGRESS_TLS_H
#define HUTCH_CORE_EGRESS_EGRESS_TLS_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "err.h"

#define EGRESS_TLS_THREADS 64 /* intercepted connections at once, server-wide */
/* A tenant's at once, all its sandboxes together: one tenant's sandboxes
 * (16 each, egress_conn.c) cannot take every thread the server has. */
#define EGRESS_TLS_TENANT (EGRESS_TLS_THREADS / 2)

struct server;

/* The server's side of it: the context that verifies upstream hosts
 * (the host's trust store, and extra_ca, a PEM file, when given). */
int egress_tls_init(struct server *srv, const char *extra_ca, struct hutch_err *err);
void egress_tls_free(struct server *srv);

/* The thread of an intercepted connection, m (a struct egress_mitm):
 * its handshakes, its request sent on with the secrets, and the relay
 * both ways, until its end; egress_tls_mitm.c starts it. */
void *egress_tls_run(void *m);

/* The origin-form target (path and query, "/" when neither; "*" for an
 * OPTIONS with neither) of an absolute URI url parsed into u; malloc'd.
 * A request that gets a secret goes on with its target in this form only
 * (egress_tls.c says why). */
struct http_parser_url;
char *egress_tls_origin_target(const char *url, const struct http_parser_url *u, bool options);

#endif
