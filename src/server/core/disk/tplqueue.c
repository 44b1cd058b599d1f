/* The template jobs' fair queue (tplqueue.h).
 *
 * The attack: the server runs few jobs at once (the builds share the
 * machine's cores), and a job may run for --template-timeout. Slots given
 * first come, first served, with a refusal past them, let two tenants
 * with two long builds each hold all four, and every other tenant's job
 * was a 429 for as long as theirs ran. Here no tenant is refused for what
 * the others run: its job waits, and each slot that frees goes to the
 * waiting tenant that runs fewest jobs (of equals, the one whose turn is
 * oldest), so a tenant waits at most for the first slot to free however
 * many jobs the others queue, and a tenant's own jobs wait only behind
 * its own. What a tenant may queue is bounded (TEMPLATE_JOBS_QUEUED): the
 * waiting jobs hold the server's memory and their uploads its disk only
 * so far, and the refusal says so before an upload is read (tplqueue_room).
 *
 * A build's RUN steps run in a sandbox that hutch-template makes, outside
 * the server's registry: uncounted, a tenant at its sandbox or memory
 * quota had another 1 GiB sandbox for each build it ran. While a build
 * runs it holds one sandbox and its RUN memory in its tenant's counts
 * (tally.h), which every create checks, and it starts only when they fit
 * the tenant's quotas. A build that does not fit waits while the tenant's
 * own builds run (each gives its room back when it ends: the builds of a
 * tenant with room for one run one at a time); when none runs, nothing of
 * the queue's would make room, and it is refused (429 at once, or failed
 * quota_exceeded when its turn came): the sandboxes in the way are the
 * tenant's, to end. */
#include "core/disk/tplqueue.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hostlimits.h"
#include "sandbox.h"
#include "util.h"
#include "core/base/server.h"
#include "core/disk/tplcap.h"
#include "core/sandbox/tally.h"
#include "core/disk/templates.h"

uint64_t tplqueue_run_memory_mb(void) {
  uint64_t ceiling = hutch_memory_ceiling();
  return (HUTCH_DEFAULT_MEMORY < ceiling ? HUTCH_DEFAULT_MEMORY : ceiling) >> 20;
}

static struct tplqueue *queue_of(struct server *srv) {
  return &templates_state(srv)->queue;
}

static struct tplq_tenant **entry_slot(struct tplqueue *q, const char *tenant) {
  struct tplq_tenant **e = &q->tenants;
  while (*e && strcmp((*e)->tenant, tenant) != 0)
    e = &(*e)->next;
  return e;
}

static struct tplq_tenant *entry_get(struct tplqueue *q, const char *tenant) {
  struct tplq_tenant **e = entry_slot(q, tenant);
  if (!*e) {
    *e = xcalloc(1, sizeof **e);
    str_copy((*e)->tenant, sizeof(*e)->tenant, tenant);
    (*e)->tail = &(*e)->head;
    (*e)->turn_ns = now_ns();
  }
  return *e;
}

/* A tenant with nothing running or queued is forgotten. */
static void entry_put(struct tplqueue *q, struct tplq_tenant *e) {
  if (e->running || e->queued)
    return;
  *entry_slot(q, e->tenant) = e->next;
  free(e);
}

static void unqueue(struct tplq_tenant *e, struct template_job *j) {
  struct template_job **pp = &e->head;
  while (*pp && *pp != j)
    pp = &(*pp)->qnext;
  if (!*pp)
    return;
  *pp = j->qnext;
  if (e->tail == &j->qnext)
    e->tail = pp;
  j->qnext = NULL;
  j->in_queue = false;
  e->queued--;
}

/* Room in j's tenant's quotas (and the server's capacity) for its RUN
 * sandbox. */
static int run_room(struct server *srv, const struct template_job *j, struct hutch_err *err) {
  struct principal p = {0};
  str_copy(p.tenant, sizeof p.tenant, j->tenant);
  if (tally_check_room(srv, &p, j->run_memory_mb, 1, err) == 0)
    return 0;
  return hutch_err_wrap(err, "a template build runs its RUN steps in a sandbox of %llu MiB",
                        (unsigned long long)j->run_memory_mb);
}

int tplqueue_room(struct server *srv, const struct principal *p, struct hutch_err *err) {
  if (srv->stopping)
    return hutch_err_fail(err, HUTCH_ERR_UNAVAILABLE, "stopping", "the server is stopping");
  const struct tplq_tenant *e = *entry_slot(queue_of(srv), p->tenant);
  if (e && e->queued >= TEMPLATE_JOBS_QUEUED)
    return hutch_err_fail(err, HUTCH_ERR_QUOTA, "quota_exceeded",
                          "tenant %s has its maximum of %d template jobs queued (waiting for "
                          "one of the server's %d slots)",
                          p->tenant, TEMPLATE_JOBS_QUEUED, TEMPLATE_JOBS_SERVER);
  return 0;
}

/* Whether e, running some jobs already, must leave the last free slot to
 * a tenant running none. Jobs are never stopped to make room, and one may
 * run for --template-timeout: were every slot open to a second job, two
 * tenants with two long builds each would hold the server's four for two
 * hours while every other tenant waited. The last slot is kept, so a
 * tenant running nothing starts at once until as many tenants as slots
 * run a job each. */
static bool keeps_last_slot(const struct tplqueue *q, const struct tplq_tenant *e) {
  return e->running > 0 && q->running + 1 >= TEMPLATE_JOBS_SERVER;
}

/* The tenant whose turn it is: of those with a job queued and less than
 * their share running (and not passed over in this round, nor held back
 * for the last slot), the one that runs fewest, then the one that has
 * waited longest since its last turn. */
static struct tplq_tenant *pick(struct tplqueue *q) {
  struct tplq_tenant *best = NULL;
  for (struct tplq_tenant *e = q->tenants; e; e = e->next) {
    if (!e->head || e->running >= TEMPLATE_JOBS_TENANT || e->passed == q->round ||
        keeps_last_slot(q, e))
      continue;
    if (!best || e->running < best->running ||
        (e->running == best->running && e->turn_ns < best->turn_ns))
      best = e;
  }
  return best;
}

/* Start e's oldest queued job in a slot, or pass e over: its build waits
 * for its own builds to end, or fails when none runs. A job that fails
 * ends here (templates_fail), which gives back what it held. */
static void start_head(struct server *srv, struct tplqueue *q, struct tplq_tenant *e) {
  struct template_job *j = e->head;
  struct hutch_err err = {0};
  bool build = j->run_memory_mb > 0;

  /* Its tenant's running jobs hold the disk room it needs: it waits for
   * their end, which gives it back. */
  if (tplcap_waits(j)) {
    e->passed = q->round;
    return;
  }
  if (build && run_room(srv, j, &err) < 0) {
    if (e->builds) {
      e->passed = q->round;
      return;
    }
    unqueue(e, j);
    templates_fail(j, &err);
    return;
  }

  unqueue(e, j);
  e->running++;
  e->builds += build;
  e->turn_ns = now_ns();
  q->running++;
  j->slot = true;
  if (build)
    tally_building(srv, j->tenant, j->run_memory_mb, true);

  if (templates_launch(j, &err) < 0)
    templates_fail(j, &err);
}

/* Fill the free slots, turn by turn. A job that fails as it starts ends,
 * and its end asks for a dispatch again: that one returns at once, and
 * this loop goes on. */
static void dispatch(struct server *srv) {
  struct tplqueue *q = queue_of(srv);
  if (q->dispatching)
    return;
  q->dispatching = true;
  q->round++;
  struct tplq_tenant *e;
  while (!srv->stopping && q->running < TEMPLATE_JOBS_SERVER && (e = pick(q)))
    start_head(srv, q, e);
  q->dispatching = false;
}

/* What a job just queued waits for, for its log. */
static void wait_reason(const struct tplqueue *q, const struct tplq_tenant *e,
                        const struct template_job *j, char *why, size_t n) {
  if (e->passed == q->round && e->head == j)
    snprintf(why, n,
             "queued: its RUN sandbox waits for tenant %s's running builds to end (its sandbox "
             "and memory quotas)",
             e->tenant);
  else if (e->running >= TEMPLATE_JOBS_TENANT)
    snprintf(why, n, "queued: tenant %s runs its share of %d template jobs at once", e->tenant,
             TEMPLATE_JOBS_TENANT);
  else if (e->head != j)
    snprintf(why, n, "queued behind %u older jobs of tenant %s", e->queued - 1, e->tenant);
  else if (keeps_last_slot(q, e))
    snprintf(why, n,
             "queued: the server keeps its last free slot for a tenant running no template "
             "job");
  else
    snprintf(why, n, "queued: the server runs its %d template jobs at once", TEMPLATE_JOBS_SERVER);
}

int tplqueue_admit(struct template_job *j, const struct principal *p, char *why, size_t nwhy,
                   struct hutch_err *err) {
  struct server *srv = j->srv;
  struct tplqueue *q = queue_of(srv);
  if (tplqueue_room(srv, p, err) < 0)
    return -1;

  struct tplq_tenant *e = entry_get(q, j->tenant);
  if (j->run_memory_mb && !e->builds && run_room(srv, j, err) < 0) {
    entry_put(q, e);
    return -1;
  }

  j->state = TJOB_QUEUED;
  j->in_queue = true;
  j->qnext = NULL;
  *e->tail = j;
  e->tail = &j->qnext;
  e->queued++;
  dispatch(srv);

  if (j->state == TJOB_ERROR) {
    *err = j->err;
    return -1;
  }
  if (j->state == TJOB_QUEUED)
    wait_reason(q, e, j, why, nwhy);
  return 0;
}

void tplqueue_ended(struct template_job *j) {
  struct server *srv = j->srv;
  struct tplqueue *q = queue_of(srv);
  struct tplq_tenant *e = *entry_slot(q, j->tenant);
  if (!e)
    return;

  if (j->in_queue)
    unqueue(e, j);
  if (j->slot) {
    j->slot = false;
    e->running--;
    q->running--;
    if (j->run_memory_mb) {
      e->builds--;
      tally_building(srv, j->tenant, j->run_memory_mb, false);
    }
  }
  entry_put(q, e);

  /* A job that failed as it started is ended inside a dispatch, which goes on. */
  if (q->dispatching)
    return;
  q->ending = j;
  dispatch(srv);
  q->ending = NULL;
}

void tplqueue_stop(struct server *srv) {
  struct tplqueue *q = queue_of(srv);
  struct hutch_err err = {0};
  hutch_err_fail(&err, HUTCH_ERR_UNAVAILABLE, "stopping", "the server is stopping");
  /* Each failed job leaves the queue and may take its tenant's entry
   * with it: the first queued job is looked for again each time. */
  for (;;) {
    struct tplq_tenant *e = q->tenants;
    while (e && !e->head)
      e = e->next;
    if (!e)
      return;
    struct template_job *j = e->head;
    unqueue(e, j);
    templates_fail(j, &err);
  }
}

void tplqueue_free(struct server *srv) {
  struct tplqueue *q = queue_of(srv);
  while (q->tenants) {
    struct tplq_tenant *e = q->tenants;
    q->tenants = e->next;
    free(e);
  }
}
