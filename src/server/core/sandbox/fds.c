/* Descriptor budgets: what each tenant and each sandbox may hold of the
 * server's open files, so that none of them can make the whole server
 * answer "Too many open files" (docs/security.md, "Resources").
 *
 * The server's limit L is RLIMIT_NOFILE, raised to the hard limit at start.
 * FDS_RESERVE of it stays the server's own (database, audit log, the spare
 * of the accept path, libuv's and its threads'); each sandbox costs
 * FDS_SANDBOX; each relayed connection (a port tunnel or an egress proxy
 * connection: two sockets and two pipes) FDS_RELAY; each HTTP connection
 * one. Of the pool P = L − FDS_RESERVE a tenant may hold P/4 in relays and
 * streaming connections, a sandbox P/16 in relays. Past its share a tenant
 * gets 429 and the server, past P, 503: a refusal it can answer, where
 * running out would be a 500 for everyone. */
#include "core/sandbox/fds.h"

#include <sys/resource.h>

#include "core/sandbox/sbx.h"
#include "core/sandbox/tally.h"

#define FDS_RESERVE 64
/* The agent's connection, the egress proxy's listener and the slot's
 * lock, and the pidfd of an agent taken over after a restart: the rest is
 * opened for each use (hutch_shell_few_fds). */
#define FDS_SANDBOX 3

void fds_init(struct server *srv) {
  struct rlimit nofile;
  srv->fd_limit = 1024;
  if (getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur != RLIM_INFINITY)
    srv->fd_limit = (unsigned)(nofile.rlim_cur < 1u << 30 ? nofile.rlim_cur : 1u << 30);
}

unsigned fds_pool(const struct server *srv) {
  return srv->fd_limit > 2 * FDS_RESERVE ? srv->fd_limit - FDS_RESERVE : srv->fd_limit / 2;
}

static unsigned relay_fds(const struct sbx *sb) {
  return (sb->ports.n + (sb->egress_conns ? sb->egress_conns->n : 0)) * FDS_RELAY;
}

unsigned fds_of_sandbox(const struct sbx *sb) {
  return FDS_SANDBOX + (sb->hs && sb->hs->pidfd >= 0);
}

/* Listed sandboxes' descriptors and relays are counted as they come and
 * go (tally.h). */
unsigned fds_server_used(const struct server *srv) {
  return srv->http.nconns + srv->sandbox_fds + srv->relays * FDS_RELAY;
}

/* A tenant's relays, and its connections that a handler holds open (exec
 * and file streams, WebSockets, waits): what it keeps past a request's
 * end, both counted as they come and go (tally.h). */
static unsigned tenant_used(const struct server *srv, const char *tenant) {
  const struct tally *t = tally_of(srv, tenant);
  return t ? t->relays * FDS_RELAY + t->held : 0;
}

int fds_check(const struct server *srv, const char *tenant, const struct sbx *sb, unsigned want,
              struct hutch_err *err) {
  unsigned pool = fds_pool(srv);
  if (sb && relay_fds(sb) + want > pool / 16)
    return hutch_err_fail(err, HUTCH_ERR_QUOTA, "quota_exceeded",
                          "sandbox %s holds its share of the server's connections (%u); try "
                          "again once some close",
                          sb->id, pool / 16 / FDS_RELAY);
  if (tenant && tenant[0] && tenant_used(srv, tenant) + want > pool / 4)
    return hutch_err_fail(err, HUTCH_ERR_QUOTA, "quota_exceeded",
                          "your sandboxes hold your share of the server's connections: %u "
                          "descriptors of relays (%u each) and of streams, WebSockets, waits "
                          "and uploads held open (1 each); try again once some close",
                          pool / 4, FDS_RELAY);
  if (fds_server_used(srv) + want > pool)
    return hutch_err_fail(err, HUTCH_ERR_UNAVAILABLE, "overloaded",
                          "the server holds as many connections as it can; try again");
  return 0;
}

int fds_check_sandbox(const struct server *srv) {
  return fds_server_used(srv) + FDS_SANDBOX > fds_pool(srv) ? 503 : 0;
}
