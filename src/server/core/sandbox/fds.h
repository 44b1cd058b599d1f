/* Descriptor budgets. */
#ifndef HUTCH_CORE_SANDBOX_FDS_H
#define HUTCH_CORE_SANDBOX_FDS_H

#include <stddef.h>

#include "err.h"

struct server;
struct sbx;
struct hutch_err;

/* fds.c: descriptor budgets per tenant, per sandbox and for the server.
 * fds_check: 0 when want more fit, else -1 and why (quota: the tenant's or
 * the sandbox's share; unavailable: the server's). */
#define FDS_RELAY 6 /* a relayed connection: two sockets, two pipes */
void fds_init(struct server *srv);
unsigned fds_pool(const struct server *srv);
unsigned fds_server_used(const struct server *srv);
/* What a sandbox holds of the server's descriptors, its relays aside. */
unsigned fds_of_sandbox(const struct sbx *sb);
int fds_check(const struct server *srv, const char *tenant, const struct sbx *sb, unsigned want,
              struct hutch_err *err);
int fds_check_sandbox(const struct server *srv);

#endif
