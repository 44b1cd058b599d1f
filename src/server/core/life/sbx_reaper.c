/* The reaper (sbx_reaper.h): every 100 ms, the sandboxes past their timeout
 * end or pause, paused ones past their retention end, and crashed slots
 * are collected now and then. */
#include "core/life/sbx_reaper.h"

#include <errno.h>
#include <linux/capability.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "cleanup.h"
#include "backend.h"
#include "util.h"
#include "core/events/events.h"
#include "core/sandbox/audit.h"
#include "core/run/contexts.h"
#include "core/life/pool.h"
#include "core/run/procs.h"
#include "core/life/snapshots.h"
#include "core/tenancy/usage.h"
#include "state/store.h"
#include "core/egress/egress.h"
#include "core/life/sbx_pause.h"
#include "core/life/sbx_teardown.h"

static void audit_reaped(struct server *srv, const struct sbx *sb, const char *action) {
  audit_record(srv, json_pack("{s:s,s:s,s:s,s:i,s:n,s:i}", "tenant", sb->tenant, "action", action,
                              "sandbox", sb->id, "status", 200, "error", "duration_ms", 0));
}

static void collect_run(struct offload *o) {
  (void)o;
  hutch_shell_gc_host();
}

static void collect_done(struct offload *o) {
  o->srv->collecting = false;
  free(o);
}

/* The end of a pause the timeout asked for: one that cannot be frozen
 * ends instead. */
static void paused_at_timeout(struct sbx *sb, int r, struct hutch_err *err, void *arg) {
  (void)arg;
  if (!sb)
    return; /* It was destroyed meanwhile. */
  if (r == 0) {
    audit_reaped(sb->srv, sb, "sandbox.pause");
    return;
  }

  fprintf(stderr, "hutch serve: sandbox %s: pausing at its timeout: %s; ending it\n", sb->id,
          err->msg);
  sb->srv->metrics.expired++;
  audit_reaped(sb->srv, sb, "sandbox.expire");
  sb->end_reason = "timeout";
  sbx_destroy(sb);
}

/* A running sandbox past its timeout ends, or is paused if it asked to be
 * (then it has no timeout left); a paused one ends after the retention. */
static void reap(uv_timer_t *t) {
  struct server *srv = t->data;
  int64_t now = wall_ms();

  /* Every few seconds, what killed servers and hutch runs left behind:
   * off the loop, as it opens every slot's cgroup. */
  if (++srv->reaper_ticks % 30 == 1 && !srv->collecting) {
    srv->collecting = true;
    offload(srv, OFFLOAD_OTHER, xcalloc(1, sizeof(struct offload)), collect_run, collect_done);
  }

  /* Every second, relayed connections idle too long (egress, ports). */
  if (srv->reaper_ticks % 10 == 0)
    for (struct sbx *sb = srv->sandboxes; sb; sb = sb->next) {
      egress_sweep(sb, srv->cfg.relay_idle_ms);
      if (srv->fronts)
        srv->fronts->sandbox_sweep(sb, srv->cfg.relay_idle_ms);
    }

  /* Every tick, the sandboxes past their time. */
  struct sbx *next;
  for (struct sbx *sb = srv->sandboxes; sb; sb = next) {
    next = sb->next;
    if (sb->freezing)
      continue; /* A pause or a snapshot is under way: its end decides. */
    if (sb->paused) {
      if (sb->paused_ms + srv->cfg.paused_retention_ms <= now) {
        events_emit(srv, "sandbox.timed_out", sb->tenant, sb->id,
                    json_pack("{s:s,s:b}", "then", "kill", "paused", 1));
        sb->end_reason = "retention";
        srv->metrics.expired++;
        audit_reaped(srv, sb, "sandbox.expire");
        sbx_destroy(sb);
      }
    } else if (sb->expires_ms <= now) {
      events_emit(srv, "sandbox.timed_out", sb->tenant, sb->id,
                  json_pack("{s:s}", "then", sb->pause_on_timeout ? "pause" : "kill"));
      if (sb->pause_on_timeout) {
        sbx_pause(sb, paused_at_timeout, NULL);
        continue;
      }
      sb->end_reason = "timeout";
      srv->metrics.expired++;
      audit_reaped(srv, sb, "sandbox.expire");
      sbx_destroy(sb);
    }
  }

  escapes_audit_due(srv, now);
  usage_sample_all(srv);
  if (srv->reaper_ticks % 10 == 5)
    pool_shrink(srv);

  /* Every 5 s, if sandboxes ended since: what their ends freed, on the
   * loop and in the arenas of libuv's pool threads (which made them), goes
   * back to the system; glibc keeps freed heap otherwise, and SQLite its
   * page cache. */
  if (srv->reaper_ticks % 50 == 0) {
    if (srv->nsandboxes < srv->trim_mark) {
      store_release_memory(srv->store);
      malloc_trim(0);
    }
    srv->trim_mark = srv->nsandboxes;
  }
}

/* Every 100 ms (the first at once): a sandbox outlives its timeout by at
 * most that, plus its teardown. */
void sbx_reaper_start(struct server *srv) {
  uv_timer_init(srv->loop, &srv->reaper);
  srv->reaper.data = srv;
  uv_timer_start(&srv->reaper, reap, 0, 100);
}
