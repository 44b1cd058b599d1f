/* A sandbox's network settings and egress proxy. */
#ifndef HUTCH_CORE_EGRESS_NETWORK_H
#define HUTCH_CORE_EGRESS_NETWORK_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include "err.h"

struct server;
struct sbx;
struct hutch_err;

/* network.c: a sandbox's network policy (netpolicy.h) from a create's
 * "network" and "secrets", set on sb; -1 and invalid_argument when they
 * are not usable. */
int network_set(struct sbx *sb, json_t *network, json_t *secrets, struct hutch_err *err);
/* The same, checking only. */
int network_check(json_t *network, json_t *secrets, struct hutch_err *err);
/* A running sandbox's change: set, connections rechecked, stored. */
int network_change(struct sbx *sb, json_t *network, json_t *secrets, struct hutch_err *err);
/* PATCH /v1/sandboxes/{id}/network's change: what o gives of {mode,
 * allow, public_ports, public, secrets} replaces what was; the rest
 * stays. */
int network_patch(struct sbx *sb, json_t *o, struct hutch_err *err);
/* After a restart: the policy the store kept; -1 when it is unusable. */
int network_restore(struct sbx *sb, json_t *network, json_t *secrets, struct hutch_err *err);
void network_free(struct sbx *sb);

/* A stream socket (nonblocking) in the sandbox's network namespace, to
 * reach a service listening in it (its ports: api/ports.c). */
int network_socket(struct sbx *sb, int family, struct hutch_err *err);

#endif
