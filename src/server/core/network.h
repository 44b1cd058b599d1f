/* A sandbox's network settings and egress proxy. */
#ifndef HUTCH_CORE_NETWORK_H
#define HUTCH_CORE_NETWORK_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include "err.h"

struct server;
struct sbx;
struct http_conn;
struct principal;
struct hutch_err;

/* network.c: a sandbox's network policy (netpolicy.h) from a create's
 * "network" and "secrets", set on sb; -1 after a 400. And its route. */
int network_set(struct http_conn *c, struct sbx *sb, json_t *network, json_t *secrets);
/* The same, checking only. */
int network_check(struct http_conn *c, json_t *network, json_t *secrets);
/* The sandbox and the body object of a request that changes its network
 * (fields of known only); NULL after an error answer. */
json_t *network_request(struct http_conn *c, const struct principal *p,
                        const char *const *known, struct sbx **sb);
/* A running sandbox's change: set, connections rechecked, stored; -1
 * after an error answer. */
int network_change(struct http_conn *c, struct sbx *sb, json_t *network, json_t *secrets);
/* After a restart: the policy the store kept; -1 when it is unusable. */
int network_restore(struct sbx *sb, json_t *network, json_t *secrets, struct hutch_err *err);
void network_free(struct sbx *sb);

/* egress.c: a sandbox's egress proxy, listening in its namespace; and its
 * end. egress_recheck ends connections its policy no longer allows. */
int egress_open(struct sbx *sb, struct hutch_err *err);
void egress_close(struct sbx *sb);
/* Connections through the sandbox's proxy now. */
unsigned egress_conns(const struct sbx *sb);
void egress_recheck(struct sbx *sb);
/* Connections through its proxy, or its ports, idle for idle_ms end. */
void egress_sweep(struct sbx *sb, uint64_t idle_ms);
/* Whether sa is an address of the server's own host. */
bool egress_host_own(struct server *srv, const struct sockaddr *sa);

#endif
