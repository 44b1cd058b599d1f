/* A template job's disk ceiling: what its child may write (--max-bytes,
 * --max-files), held of its tenant's disk quota while it runs
 * (tplcap.h). */
#include "core/disk/tplcap.h"

#include "util.h"
#include "core/disk/diskroom.h"
#include "core/base/server.h"
#include "core/disk/templates.h"

int tplcap_running(const struct template_job *j) {
  int n = 0;
  for (const struct template_job *o = templates_jobs_of(j->srv, j->tenant); o; o = o->tenant_next)
    n += o != j && o->state == TJOB_BUILDING;
  return n;
}

bool tplcap_waits(struct template_job *j) {
  struct principal p = {0};
  str_copy(p.tenant, sizeof p.tenant, j->tenant);
  return *j->owner && tplcap_running(j) && diskroom_quota_left(j->srv, &p) == 0;
}

/* The attack: a tenant exactly at its quota was given a job with a cap of
 * what the quota left, 0, which meant no cap at all (the child's own
 * 16 GiB); and two of its jobs side by side were each capped at the same
 * room left, together twice it. So an owned job's cap is held of its
 * quota while it runs (released as it ends, job_ended), as an upload's
 * bytes are: a second job's cap is what the first's left. Of what is
 * left, a job takes its share of the tenant's slots not running (half
 * when none runs, all of it in the last slot), so that a job beside it
 * has room too. A job that finds nothing left while others of its
 * tenant's run waits for their end (tplcap_waits); with none
 * running it fails, quota_exceeded, as admission would have. */
int tplcap_take(struct template_job *j, struct hutch_err *err) {
  struct server *srv = j->srv;
  struct principal p = {0};
  str_copy(p.tenant, sizeof p.tenant, j->tenant);
  int free = TEMPLATE_JOBS_TENANT - tplcap_running(j);
  uint64_t left = diskroom_quota_left(srv, &p);
  uint64_t cap = free > 1 && left / (uint64_t)free ? left / (uint64_t)free : left;
  /* Nothing left: the byte asked fails it, and names the quota. */
  if (diskroom_cap(srv, &p, cap ? cap : 1, err) < 0)
    return -1;
  j->max_bytes = cap ? cap : 1;
  return 0;
}
