/* A sandbox's egress proxy (egress.c). */
#ifndef HUTCH_CORE_EGRESS_EGRESS_H
#define HUTCH_CORE_EGRESS_EGRESS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include "err.h"

struct server;
struct sbx;

/* A sandbox's egress proxy, listening in its namespace; and its end.
 * egress_recheck ends connections its policy no longer allows. */
int egress_open(struct sbx *sb, struct hutch_err *err);
void egress_close(struct sbx *sb);
/* egress_open, a failure said on stderr: the sandbox runs on with no way out. */
void egress_start(struct sbx *sb);
void egress_recheck(struct sbx *sb);
/* Connections through its proxy, or its ports, idle for idle_ms end. */
void egress_sweep(struct sbx *sb, uint64_t idle_ms);
/* Whether sa is an address of the server's own host. */
bool egress_host_own(struct server *srv, const struct sockaddr *sa);
/* The host's addresses (n of them) as egress_host_own judges by: the
 * server's own list, valid until the next call. */
const struct sockaddr_storage *egress_own_addrs(struct server *srv, size_t *n);
/* Whether sa is one of the n addresses of list; pure (any thread). */
bool egress_addr_among(const struct sockaddr *sa, const struct sockaddr_storage *list, size_t n);

#endif
