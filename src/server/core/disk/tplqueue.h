/* The template jobs' fair queue (docs/templates.md, "Template jobs"): the
 * server runs TEMPLATE_JOBS_SERVER jobs at once, each tenant at most
 * TEMPLATE_JOBS_TENANT of them; a job admitted beyond that waits its turn
 * (TJOB_QUEUED), up to TEMPLATE_JOBS_QUEUED of each tenant. A slot that
 * frees goes to the waiting tenant that runs fewest jobs, and among those
 * to the one whose turn is oldest (round robin across tenants). A build
 * runs its RUN steps in a sandbox of the tenant's: while it runs, it holds
 * one sandbox and TEMPLATE_RUN_MEMORY_MB in the tenant's counts (tally.h),
 * against its quotas as any create. */
#ifndef HUTCH_CORE_DISK_TPLQUEUE_H
#define HUTCH_CORE_DISK_TPLQUEUE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "state/store.h"

struct server;
struct principal;
struct template_job;

/* A tenant with a job running or queued. */
struct tplq_tenant {
  struct tplq_tenant *next;
  char tenant[SERVE_TENANT_LEN + 1];
  unsigned running, builds; /* slots held; of them, builds (each with its RUN sandbox) */
  unsigned queued;
  struct template_job *head, **tail; /* queued, oldest first (template_job.qnext) */
  uint64_t turn_ns;                  /* when it last started a job, or began to wait */
  uint64_t passed;                   /* the dispatch round that passed it over (tplqueue.c) */
};

struct tplqueue {
  struct tplq_tenant *tenants;
  unsigned running; /* slots held, of TEMPLATE_JOBS_SERVER */
  uint64_t round;   /* dispatches so far */
  bool dispatching;
  /* The job whose end runs the dispatch: a job failed meanwhile must not
   * forget it (forget_old) while its end's callers still hold it. */
  const struct template_job *ending;
};

/* Whether p may queue one more job now: -1 and err (stopping; 429
 * quota_exceeded past its queue's bound), else 0. For a route to ask
 * before it reads an upload the job would take. */
int tplqueue_room(struct server *srv, const struct principal *p, struct hutch_err *err);
/* j (its steps made, TJOB_WAITING) admitted for p: queued, and started if
 * its turn is now. -1 and err: refused (as tplqueue_room; a build whose
 * tenant's quotas have no room for its RUN sandbox while none of its
 * builds runs to make room), or started and failed at once (j ended).
 * Else 0, and j is BUILDING, or QUEUED with why saying what it waits for. */
int tplqueue_admit(struct template_job *j, const struct principal *p, char *why, size_t nwhy,
                   struct hutch_err *err);
/* j ended, whatever it was: its slot and its RUN sandbox's counts given
 * back, or its place in the queue; the next jobs started. */
void tplqueue_ended(struct template_job *j);
/* At stop: every queued job fails "stopping". */
void tplqueue_stop(struct server *srv);
void tplqueue_free(struct server *srv);
/* The memory of a build's RUN sandbox (the sandbox default, within the
 * host's ceiling): what hutch-template is told (--memory) and the tenant
 * is counted. */
uint64_t tplqueue_run_memory_mb(void);

#endif
