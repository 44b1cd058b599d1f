/* What the server and each tenant hold now: sandboxes, creates under way,
 * their memory, relayed connections, connections held open, upload URLs.
 * Counted as they come and go, so that quotas and descriptor budgets cost
 * the same with 5 sandboxes or 5000 (no walk of every sandbox, connection
 * or token per request or per create): a tenant's counts are found by a
 * hash of its name, never by walking what other tenants hold. */
#ifndef HUTCH_CORE_SANDBOX_TALLY_H
#define HUTCH_CORE_SANDBOX_TALLY_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "state/store.h"

struct server;
struct sbx;
struct relay_set;
struct template_job;
struct principal;
struct hutch_err;

/* A tenant's counts; there is one only while it holds something counted
 * here but relays and paused sandboxes (which need a listed sandbox). */
struct tally {
  struct tally *next; /* its bucket's chain in srv->tallies */
  char tenant[SERVE_TENANT_LEN + 1];
  unsigned sandboxes;     /* listed (sbx_register) */
  unsigned creating;      /* being made (life/sbx_create.c) */
  unsigned builds;        /* RUN sandboxes of its template builds running (tplqueue.c) */
  uint64_t memory_mb;     /* of all three */
  unsigned relays;        /* connections through its listed sandboxes' ports and proxies */
  unsigned paused;        /* of its listed sandboxes */
  uint64_t disk_reserved; /* of its disk quota, for writes under way (diskroom.c) */
  uint64_t disk_capped;   /* of its disk quota, its running jobs' ceilings (not of the
                         * filesystem's room: their children write as they go) */
  unsigned uploads;       /* under way (api/templates.c) */
  /* Layers it let go of that are still in the store, each with what it
   * is charged until collected: layer hex -> bytes (tplcache.c). */
  json_t *uncollected;
  struct sbx *listed;        /* its listed sandboxes, newest first (sbx.tenant_next) */
  unsigned held;             /* HTTP connections a handler keeps past the request (http.h) */
  unsigned tokens;           /* upload URLs issued and not yet used or collected (tpltokens.h) */
  struct template_job *jobs; /* its template jobs kept, newest first (template_job.tenant_next) */
};

/* tenant's counts, or NULL when it holds nothing. */
const struct tally *tally_of(const struct server *srv, const char *tenant);
/* tenant's listed sandboxes, newest first (then sb->tenant_next), or
 * NULL: a tenant's listing walks its own, never every tenant's. */
struct sbx *tally_sandboxes(const struct server *srv, const char *tenant);
/* A create under way: counted (on) or not any more (off). */
void tally_creating(struct server *srv, const char *tenant, uint64_t memory_mb, bool on);
/* A template build's RUN sandbox (made by hutch-template, not listed):
 * counted while the build runs (on), not once it ended (off). */
void tally_building(struct server *srv, const char *tenant, uint64_t memory_mb, bool on);
/* One more (on) or one fewer of tenant's held connections, or its
 * tokens: the counts each bound reads. */
void tally_held(struct server *srv, const char *tenant, bool on);
void tally_tokens(struct server *srv, const char *tenant, bool on);
/* tenant's counts, made when it has none, to count something more; and
 * put back after a change: a tenant that holds nothing has no counts left
 * to keep. */
struct tally *tally_get(struct server *srv, const char *tenant);
void tally_put(struct server *srv, struct tally *t);
/* sb listed (on) or out of the registry (off): it, its descriptors and
 * its relays counted, for its tenant and the server. */
void tally_listed(struct server *srv, struct sbx *sb, bool on);
/* sb->paused set, and counted while it is listed. */
void tally_paused(struct sbx *sb, bool paused);
/* A set of relays of a listed sandbox made after it was listed (its
 * egress proxy's) is counted as its ports are. */
void tally_relays_like(struct relay_set *set, const struct relay_set *like);
/* bytes more (or fewer) of the tenant's disk reserved, and uploads more
 * (or fewer) under way; counted for the server too. */
void tally_disk(struct server *srv, const char *tenant, int64_t bytes, int uploads);
void tally_disk_capped(struct server *srv, const char *tenant, int64_t bytes);
/* Layer hex let go of by the tenant, charged bytes until collected; 0
 * bytes: collected, no longer charged. */
void tally_uncollected(struct server *srv, const char *tenant, const char *hex, uint64_t bytes);
void tally_free_all(struct server *srv);

/* Room for count more sandboxes of memory_mb each: the tenant's quota
 * (quota) and the server's capacity (unavailable). */
int tally_check_room(struct server *srv, const struct principal *p, uint64_t memory_mb,
                     unsigned count, struct hutch_err *err);

#endif
