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
 * counters and what is still charged to it, and a leaf is kept only when:
 *  - the sandbox holds no process but the agent (pids.current is 1): no
 *    process is left in the leaf, and none elsewhere holds an object the
 *    kernel charges to the leaf it was made in (an inotify instance whose
 *    events a leftover daemon could pile up on the next exec's peak);
 *  - at most KEEP_CHARGED bytes are still charged to it: a file an exec
 *    left in /tmp stays charged to the leaf it was written from;
 *  - its counters can start again (ops->reset: CPU time and memory peak
 *    zeroed, the OOM kills so far the next exec's base), and it is thawed.
 * cgroup v1 only: on v2 every exec gets a new leaf, as before (cgroup.h).
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
 * can report that is not the exec's own. Not scaled with the CPUs: on a
 * large host an exec that ran on many keeps its leaf less often, rather
 * than the next peak counting more. */
#define KEEP_CHARGED (1u << 20)

bool agent_alone(struct agent *a) {
  struct hutch_err ignored;
  uint64_t n = 0;
  int fd = hutch_cg_fd(&a->cg, CG_PIDS);
  return fd >= 0 && hutch_cg_read_u64(fd, "pids.current", NULL, &n, &ignored) == 0 && n == 1;
}

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
  if (a->kept.cg.ops || !l->cg.ops->reset || !agent_alone(a) ||
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
