/* The cgroup operations of no cgroups (hutch_cgroup_none_ops, cgroup.h):
 * what hutch-agent uses where the sandbox's kernel is not the host's (the
 * gvisor tier, docs/isolation.md). There the whole sandbox, gVisor's own
 * kernel included, sits in the host cgroup hutch made for it, which holds
 * its limits, freezes it and measures it; inside, the agent keeps each
 * exec apart by its process group and times it by rusage
 * (src/agent/job.c). Every operation succeeds and does nothing but freeze,
 * which a guest cannot do to itself. */
#include <errno.h>
#include <string.h>

#include "cgroup.h"

static int none_child(const struct hutch_cgroup *parent, const char *name, unsigned ctls,
                      struct hutch_cgroup *child, struct hutch_err *err) {
  (void)parent, (void)name, (void)ctls, (void)err;
  hutch_cgroup_none(child);
  return 0;
}

static int none_open(const struct hutch_cgroup *parent, const char *name,
                     struct hutch_cgroup *child, struct hutch_err *err) {
  return none_child(parent, name, 0, child, err);
}

static int none_rmchild(const struct hutch_cgroup *parent, const char *name,
                        struct hutch_err *err) {
  (void)parent, (void)name, (void)err;
  return 0;
}

static int none_limits(const struct hutch_cgroup *cg, const struct hutch_cg_limits *l,
                       struct hutch_err *err) {
  (void)cg, (void)l, (void)err;
  return 0;
}

static int none_do(const struct hutch_cgroup *cg, struct hutch_err *err) {
  (void)cg, (void)err;
  return 0;
}

static int none_stats(const struct hutch_cgroup *cg, struct hutch_cg_stats *s,
                      struct hutch_err *err) {
  (void)cg, (void)err;
  memset(s, 0, sizeof *s);
  return 0;
}

static int none_usage(const struct hutch_cgroup *cg, struct hutch_cg_usage *u,
                      struct hutch_err *err) {
  (void)cg, (void)err;
  memset(u, 0, sizeof *u);
  return 0;
}

static int none_freeze(const struct hutch_cgroup *cg, bool frozen, int timeout_ms,
                       struct hutch_err *err) {
  (void)cg, (void)frozen, (void)timeout_ms;
  return hutch_err_set(err, ENOTSUP, "no cgroup to freeze");
}

static bool none_populated(const struct hutch_cgroup *cg) {
  (void)cg;
  return false;
}

static int none_delegate(const struct hutch_cgroup *cg, uid_t uid, gid_t gid,
                         struct hutch_err *err) {
  (void)uid, (void)gid;
  return none_do(cg, err);
}

const struct hutch_cgroup_ops hutch_cgroup_none_ops = {
    .name = "none",
    .mkchild = none_child,
    .open = none_open,
    .rmchild = none_rmchild,
    .set_limits = none_limits,
    .enable_children = none_do,
    .enter_self = none_do,
    .stats = none_stats,
    .kill_all = none_do,
    .thaw_all = NULL,
    .usage = none_usage,
    .freeze = none_freeze,
    .populated = none_populated,
    .delegate = none_delegate,
};

void hutch_cgroup_none(struct hutch_cgroup *cg) {
  memset(cg, 0, sizeof *cg);
  cg->ops = &hutch_cgroup_none_ops;
  for (int c = 0; c < CG_NCTL; c++)
    cg->ctl[c] = -1;
}
