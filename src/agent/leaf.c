/* Exec leaves: the cgroup each exec runs in, for its memory peak, its CPU
 * time and killing all it started (docs/security.md, Workloads).
 *
 * A leaf is made for an exec and, once the exec has ended, kept for the
 * next one instead of removed. Making and removing a memory cgroup is most
 * of what an exec costs the host beyond the fork: on v1 three mkdirs and
 * three rmdirs under the host-wide cgroup lock, a slot for every shrinker
 * on the host in the new memory cgroup, and a dying one that the kernel's
 * workers free later (per exec, at a cost that grows with the host's
 * mounts: with thousands of sandboxes it was most of an exec).
 *
 * Why a kept leaf is as good as a new one. No workload can reach a leaf's
 * files: no cgroup file system is mounted in a sandbox and the agent, which
 * alone holds the leaf's fds, is not dumpable. So an ended exec leaves
 * nothing in its leaf that the next could inherit but the kernel's
 * counters, and the leaf is kept only when those can start again
 * (ops->reset: the CPU time and memory peak zeroed, the OOM kills so far
 * taken as the next exec's base), no process is left in it, and at most
 * KEEP_CHARGED bytes are still charged to it: a file an exec left in /tmp
 * stays charged to the leaf it was written from, and would otherwise count
 * in the next exec's peak. Where the kernel cannot reset a peak (cgroup v2
 * before 6.12), every exec gets a new leaf, as before.
 *
 * One leaf is kept at most, and for AGENT_IDLE_MS: a sandbox idle between
 * an agent's turns then holds no memory cgroup but its own. */
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

#include "agent.h"
#include "util.h"

/* What an exec of a small command leaves charged: a few slab objects, and
 * the charges each CPU it ran on holds in advance (64 pages a CPU, drained
 * only when another cgroup charges there). The most a reused leaf's peak
 * can report that is not the exec's own. */
#define KEEP_CHARGED (1u << 20)

int leaf_get(struct agent *a, struct leaf *l, struct hutch_err *err) {
  if (a->kept.cg.ops) {
    *l = a->kept;
    a->kept = (struct leaf){0};
    return 0;
  }
  *l = (struct leaf){0};
  snprintf(l->name, sizeof l->name, "e%u", a->next_leaf++);
  if (a->cg.ops->mkchild(&a->cg, l->name, CG_LEAF_CTLS, &l->cg, err) < 0) {
    l->cg.ops = NULL;
    return -1;
  }
  return 0;
}

void leaf_remove(struct agent *a, struct leaf *l) {
  hutch_cgroup_close(&l->cg);
  for (int i = 0; i < a->cg.nfd; i++)
    unlinkat(a->cg.fd[i], l->name, AT_REMOVEDIR);
  *l = (struct leaf){0};
}

void leaf_put(struct agent *a, struct leaf *l) {
  struct hutch_cg_stats base;
  struct hutch_err ignored;
  if (!l->cg.ops)
    return;
  if (a->kept.cg.ops || !l->cg.ops->reset ||
      l->cg.ops->reset(&l->cg, KEEP_CHARGED, &base, &ignored) < 0) {
    leaf_remove(a, l);
    return;
  }
  l->oom_base = base.oom_kills;
  a->kept = *l;
  a->kept_ns = now_ns();
  *l = (struct leaf){0};
}

int leaf_expire(struct agent *a) {
  if (!a->kept.cg.ops)
    return -1;
  uint64_t age_ms = (now_ns() - a->kept_ns) / 1000000;
  if (age_ms < AGENT_IDLE_MS)
    return (int)(AGENT_IDLE_MS - age_ms);
  leaf_remove(a, &a->kept);
  return -1;
}
