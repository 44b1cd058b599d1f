/* Pausing and resuming a sandbox. A paused sandbox has every process
 * frozen in its cgroup (the agent too), its memory and files kept, and uses
 * no CPU; its timeout's clock stops, and it is kept for --paused-retention.
 * A resumed one goes on where it stopped. Memory stays the host's: pausing
 * frees no RAM, it frees the CPU (see docs/lifecycle.md).
 *
 * Freezing waits for every process to stop, up to half a second when one
 * is slow to (a workload can make it so), so it runs off the loop
 * (offload.c) on a copy of the cgroup's fds: a tenant pausing again and
 * again must not hold every other request. While a freeze is under way
 * (sb->freezing) a pause or a snapshot waits for its end, a resume is
 * refused (409 busy); destroyed, the sandbox is forgotten by the job, whose
 * waiters then hear it is gone. Thawing is one write: it stays on the loop. */
#include "core/life/sbx_pause.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "util.h"
#include "core/events/events.h"
#include "core/base/offload.h"
#include "core/sandbox/sbx.h"
#include "core/base/server.h"
#include "core/sandbox/tally.h"
#include "core/tenancy/usage.h"
#include "state/store.h"
#include "core/life/sbx_adopt.h"
#include "core/life/sbx_teardown.h"

static void save(struct sbx *sb) {
  struct hutch_err err = {0};
  if (sbx_store(sb, false, &err) < 0)
    fprintf(stderr, "hutch serve: %s\n", err.msg);
}

/* One who waits for a freeze: the pause or snapshot that asked for it,
 * or one that came while it was under way and goes on from its end. */
struct freeze_wait {
  struct freeze_wait *next;
  sbx_frozen_fn then;
  void *arg;
};

struct freeze {
  struct offload o;
  struct sbx *sb;         /* NULL once the sandbox has gone (sbx_freeze_forget) */
  struct hutch_cgroup cg; /* a copy of its cgroup's fds: all the job touches */
  int r;
  struct hutch_err err;
  struct freeze_wait *waits, **tail;
};

static void freeze_run(struct offload *o) {
  struct freeze *f = OFFLOAD_JOB(o, struct freeze);
  f->r = hutch_shell_freeze_wait(&f->cg, &f->err);
}

static void freeze_done(struct offload *o) {
  struct freeze *f = OFFLOAD_JOB(o, struct freeze);
  struct sbx *sb = f->sb;

  if (sb) {
    sb->freezing = NULL;
  } else if (f->r == 0) {
    /* Forgotten meanwhile: destroyed (its teardown thaws anyway) or let go
     * by a server stopping with SIGTERM, whose sandboxes must run on. */
    struct hutch_err ignored;
    f->cg.ops->freeze(&f->cg, false, 0, &ignored);
    f->r = hutch_err_set(&f->err, ENOENT, "the sandbox was destroyed meanwhile");
  }
  hutch_cgroup_close(&f->cg);

  for (struct freeze_wait *w = f->waits, *next; w; w = next) {
    next = w->next;
    /* A waiter may destroy the sandbox (a pause at its timeout that
     * failed): the next ones hear it gone. */
    w->then(sb && !sb->dying ? sb : NULL, f->r, &f->err, w->arg);
    free(w);
  }

  free(f);
}

void sbx_freeze(struct sbx *sb, sbx_frozen_fn then, void *arg) {
  struct freeze_wait *w = xcalloc(1, sizeof *w);
  w->then = then;
  w->arg = arg;

  /* A freeze under way is waited for, else one starts. */
  struct freeze *f = sb->freezing;
  if (!f) {
    f = xcalloc(1, sizeof *f);
    struct hutch_err err = {0};
    if (hutch_shell_cgroup(sb->hs, &f->cg, &err) < 0) {
      free(f);
      free(w);
      then(sb, -1, &err, arg);
      return;
    }
    f->sb = sb;
    f->tail = &f->waits;
    sb->freezing = f;
    offload(sb->srv, OFFLOAD_OTHER, &f->o, freeze_run, freeze_done);
  }

  *f->tail = w;
  f->tail = &w->next;
}

void sbx_freeze_forget(struct sbx *sb) {
  if (sb->freezing)
    sb->freezing->sb = NULL;
  sb->freezing = NULL;
}

/* Frozen: now it is paused. */
static void mark_paused(struct sbx *sb) {
  usage_sample(sb); /* Its running time is counted up to now. */

  int64_t now = wall_ms();
  tally_paused(sb, true);
  sb->paused_ms = now;
  /* Paused by its timeout, it has none left: it gets its timeout's length
   * again when it resumes. */
  sb->left_ms = sb->expires_ms > now ? sb->expires_ms - now : sb->timeout_ms;

  save(sb);
  events_emit(sb->srv, "sandbox.paused", sb->tenant, sb->id, NULL);
}

/* What a pause waits with: who hears its end. */
struct pausing {
  sbx_paused_fn then;
  void *arg;
};

static void pause_frozen(struct sbx *sb, int r, struct hutch_err *err, void *arg) {
  struct pausing *pw = arg;
  if (sb && r == 0 && !sb->paused) /* Two pauses may wait for one freeze. */
    mark_paused(sb);
  pw->then(sb, r, err, pw->arg);
  free(pw);
}

void sbx_pause(struct sbx *sb, sbx_paused_fn then, void *arg) {
  /* Frozen already for a snapshot's copy: paused at once. */
  if (sb->captures && !sb->freezing) {
    struct hutch_err none = {0};
    mark_paused(sb);
    then(sb, 0, &none, arg);
    return;
  }

  struct pausing *pw = xmalloc(sizeof *pw);
  pw->then = then;
  pw->arg = arg;
  sbx_freeze(sb, pause_frozen, pw);
}

int sbx_resume(struct sbx *sb, int64_t timeout_ms, struct hutch_err *err) {
  /* Taken over paused, its agent answers only once thawed, which a copy
   * under way does not allow yet. */
  if (sb->agent_pending && sb->captures)
    return hutch_err_set(err, EBUSY, "a snapshot of it is being copied: resume it in a moment");
  if (sb->freezing)
    return hutch_err_set(err, EBUSY,
                         "it is being frozen (a pause or a snapshot): try again in a "
                         "moment");

  usage_sample(sb); /* Sampled while still paused, its paused time is not charged. */

  /* A snapshot being copied keeps it frozen: its end thaws it. */
  if (!sb->captures && hutch_sandbox_freeze(sb->hs, false, err) < 0)
    return -1;
  /* Taken over while paused: its agent can answer only now. */
  if (sb->agent_pending && sbx_connect_agent(sb) < 0) {
    hutch_err_set(err, 0, "its agent did not answer after the resume");
    sbx_destroy(sb);
    return -1;
  }

  tally_paused(sb, false);
  sb->expires_ms = wall_ms() + (timeout_ms >= 0 ? timeout_ms : sb->left_ms);
  save(sb);
  events_emit(sb->srv, "sandbox.resumed", sb->tenant, sb->id, NULL);
  return 0;
}
