/* Usage. */
#ifndef HUTCH_CORE_TENANCY_USAGE_H
#define HUTCH_CORE_TENANCY_USAGE_H

#include <stdbool.h>
#include <stdint.h>

#include "err.h"
#include "state/store.h"

struct server;
struct sbx;
struct principal;

/* usage.c: what sandboxes use, sampled (metrics), and what tenants used. */
void usage_sample_all(struct server *srv);
/* Take one sample now, its use since the last charged to its tenant
 * (before a pause and a resume, and before it goes, so each is counted to
 * the moment). */
void usage_sample(struct sbx *sb);
void usage_free(struct sbx *sb);
/* The samples from start to end (ms since the epoch), oldest first, with
 * one taken now at the end, each passed to fn. */
struct usage_point {
  int64_t ms;
  double cpu_pct;   /* of the CPUs it may use */
  unsigned cpus;    /* those CPUs, rounded up */
  double cpu_limit; /* the same, as many as its limit says (or the host's) */
  uint64_t cpu_ns;  /* the CPU time it has used since it was made */
  uint64_t memory_used, memory_cache, memory_limit, disk_used, disk_limit, pids;
};
void usage_points(struct sbx *sb, int64_t start_ms, int64_t end_ms,
                  void (*fn)(const struct usage_point *pt, void *arg), void *arg);
/* The newest sample kept (no reading now: /metrics reads every sandbox's,
 * and the sampler has read them lately); false when there is none yet. */
bool usage_last(const struct sbx *sb, struct usage_point *out);
/* What a tenant's sandboxes used while running, sandboxes that ended
 * included, and how many it has now. tenant NULL: the caller's own;
 * another's only for the admin (forbidden else). */
struct usage_total {
  const char *tenant;
  struct usage_delta used;
  unsigned running, paused;
};
int usage_of(struct server *srv, const struct principal *p, const char *tenant,
             struct usage_total *out, struct hutch_err *err);

#endif
