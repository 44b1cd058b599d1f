/* Cgroups behind one ops table: v2 (unified) and v1/hybrid, where each
 * controller lives on its own hierarchy. A struct hutch_cgroup is one cgroup,
 * held as directory fds (one per hierarchy), so that nothing here resolves a
 * path after the cgroup has been opened. libc only: the agent links this.
 *
 * Layout (docs/security.md): <root>/hutch/<slot>/ is a sandbox and each exec
 * runs in a leaf <slot>/e<N> of its own (an ended exec's, its counts reset,
 * where the kernel allows: the agent's leaf.c). The agent runs in the sandbox cgroup on
 * v1, and in a leaf <slot>/agent on v2, where only leaves hold processes.
 * On v1 a cgroup exists only in the hierarchies of the controllers it is
 * made for: every directory costs a mkdir, a migration and an rmdir. */
#ifndef HUTCH_CGROUP_H
#define HUTCH_CGROUP_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "err.h"

enum hutch_cg_ctl { CG_MEMORY, CG_PIDS, CG_CPU, CG_CPUACCT, CG_FREEZER, CG_NCTL };
#define HUTCH_CG_MAXH CG_NCTL
#define CG_BIT(c) (1u << (c))
/* What an exec's leaf is for: its memory, its CPU time, stopping it. */
#define CG_LEAF_CTLS (CG_BIT(CG_MEMORY) | CG_BIT(CG_CPUACCT) | CG_BIT(CG_FREEZER))

struct hutch_cgroup {
  const struct hutch_cgroup_ops *ops;
  int nfd;
  int fd[HUTCH_CG_MAXH]; /* a directory fd per hierarchy; v2 uses fd[0] */
  int8_t ctl[CG_NCTL];   /* which fd holds each controller, -1 when absent */
};

struct hutch_cg_limits {
  uint64_t memory_bytes; /* 0 = unlimited; swap is always off */
  uint64_t pids;         /* 0 = unlimited */
  uint64_t cpu_milli;    /* CPUs x 1000; 0 = unlimited */
};

/* What a sandbox uses now (its metrics). */
struct hutch_cg_usage {
  uint64_t cpu_ns;       /* CPU time since the cgroup was created */
  uint64_t memory_bytes; /* in use, page cache included */
  uint64_t memory_cache; /* of which page cache (file-backed) */
  uint64_t pids;
};

/* What a verdict reports of a finished exec's cgroup. */
struct hutch_cg_stats {
  uint64_t cpu_ns;
  uint64_t memory_peak; /* bytes, since the cgroup was created */
  uint64_t oom_kills;
};

struct hutch_cgroup_ops {
  const char *name;
  bool leaves_only; /* processes may live only in leaf cgroups (v2) */
  /* Create a child for the controllers in ctls (a CG_BIT mask; v2 has them
   * all). It fails with EEXIST if the name is taken. */
  int (*mkchild)(const struct hutch_cgroup *parent, const char *name, unsigned ctls,
                 struct hutch_cgroup *child, struct hutch_err *err);
  /* Open an existing child where it exists; its memory controller must. */
  int (*open)(const struct hutch_cgroup *parent, const char *name, struct hutch_cgroup *child,
              struct hutch_err *err);
  int (*rmchild)(const struct hutch_cgroup *parent, const char *name, struct hutch_err *err);
  int (*set_limits)(const struct hutch_cgroup *cg, const struct hutch_cg_limits *l,
                    struct hutch_err *err);
  /* Let children of cg have their own controllers (v2 subtree_control). */
  int (*enable_children)(const struct hutch_cgroup *cg, struct hutch_err *err);
  /* Move the calling process, which must be single-threaded, into cg. */
  int (*enter_self)(const struct hutch_cgroup *cg, struct hutch_err *err);
  int (*stats)(const struct hutch_cgroup *cg, struct hutch_cg_stats *s, struct hutch_err *err);
  /* SIGKILL every process in cg and its descendants, leaving none able to fork. */
  int (*kill_all)(const struct hutch_cgroup *cg, struct hutch_err *err);
  /* Thaw cg and every cgroup below it, so that SIGKILLed processes there
   * can die; NULL where a frozen process dies of SIGKILL anyway (v2). */
  int (*thaw_all)(const struct hutch_cgroup *cg, struct hutch_err *err);
  int (*usage)(const struct hutch_cgroup *cg, struct hutch_cg_usage *u, struct hutch_err *err);
  /* Freeze every process in cg and below it, returning once all are
   * frozen (or failing, thawed again, if they are not within timeout_ms);
   * or thaw them. Only cg's own state changes: a child frozen by itself
   * stays so. */
  int (*freeze)(const struct hutch_cgroup *cg, bool frozen, int timeout_ms, struct hutch_err *err);
  /* Whether any process is in cg or below it. */
  bool (*populated)(const struct hutch_cgroup *cg);
  /* Hand cg to uid:gid so it can make children and move its own processes. */
  int (*delegate)(const struct hutch_cgroup *cg, uid_t uid, gid_t gid, struct hutch_err *err);
  /* Make an exec's ended leaf ready for the next exec: its CPU time and
   * memory peak start again, and base gets what cannot (the OOM kills so
   * far, to subtract). Fails with EBUSY while a process is in cg or more
   * than max_charged bytes are still charged to it (page cache, tmpfs
   * files), which the next exec's peak would count, or when it cannot be
   * (frozen, no OOM count). NULL on v2: memory.peak is reset only per
   * descriptor, and only from 6.12 (Debian 12 has 6.1); not built. */
  int (*reset)(const struct hutch_cgroup *cg, uint64_t max_charged, struct hutch_cg_stats *base,
               struct hutch_err *err);
};

extern const struct hutch_cgroup_ops hutch_cgroup_v1_ops;
extern const struct hutch_cgroup_ops hutch_cgroup_v2_ops;
/* No cgroup at all (cgroup_none.c): the agent's, under a kernel of the
 * sandbox's own (the gvisor tier). */
extern const struct hutch_cgroup_ops hutch_cgroup_none_ops;
void hutch_cgroup_none(struct hutch_cgroup *cg);

/* Find the host's controllers and open (creating if needed) the hutch root
 * cgroup under them: <hierarchy>/hutch. */
int hutch_cgroup_open_root(struct hutch_cgroup *root, struct hutch_err *err);
/* The same directories as src, on descriptors of dst's own (a root the
 * caller holds open: no /proc/self/mountinfo to read, which waits on the
 * host's mount namespace lock while sandboxes mount and unmount). */
int hutch_cgroup_dup(const struct hutch_cgroup *src, struct hutch_cgroup *dst,
                     struct hutch_err *err);
/* The ceiling of hutch's whole subtree: every sandbox together holds at
 * most memory bytes (0: no ceiling) and pids processes. */
int hutch_cgroup_cap_root(const struct hutch_cgroup *root, uint64_t memory, uint64_t pids,
                          struct hutch_err *err);
void hutch_cgroup_close(struct hutch_cgroup *cg);
/* The fd of the hierarchy holding controller c, -1 when cg lacks it. */
int hutch_cg_fd(const struct hutch_cgroup *cg, enum hutch_cg_ctl c);
/* The controller's name, as the kernel spells it ("memory"). */
const char *hutch_cg_ctl_name(enum hutch_cg_ctl c);

/* The fds of a cgroup as text, to pass across exec ("1:4,5,-,6,7" or "2:4"),
 * and back. The spec names fd numbers in controller order, "-" for absent. */
void hutch_cgroup_spec(const struct hutch_cgroup *cg, char *buf, size_t size);
int hutch_cgroup_from_spec(const char *spec, struct hutch_cgroup *cg, struct hutch_err *err);

/* Helpers shared by the two ops tables. */
int hutch_cg_read_u64(int dirfd, const char *file, const char *key, uint64_t *out,
                      struct hutch_err *err);
int hutch_cg_kill_procs(int dirfd, bool *any, struct hutch_err *err);
bool hutch_cg_has_procs(int dirfd);
int hutch_cg_rmdir(int parentfd, const char *name, struct hutch_err *err);

#endif
