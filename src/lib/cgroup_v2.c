/* cgroup v2: one unified hierarchy. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cgroup.h"
#include "cleanup.h"
#include "util.h"

static int v2_open(const struct hutch_cgroup *parent, const char *name, struct hutch_cgroup *child,
                   struct hutch_err *err) {
  memset(child, 0, sizeof *child);
  child->ops = parent->ops;
  int fd = openat(parent->fd[0], name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) {
    if (errno == ENOENT)
      return hutch_err_not_found(err, "cgroup %s", name);
    return hutch_err_set(err, errno, "open cgroup %s", name);
  }
  child->fd[0] = fd;
  child->nfd = 1;
  memset(child->ctl, 0, sizeof child->ctl);
  return 0;
}

static int v2_mkchild(const struct hutch_cgroup *parent, const char *name, unsigned ctls,
                      struct hutch_cgroup *child, struct hutch_err *err) {
  (void)ctls; /* one hierarchy holds them all */
  if (mkdirat(parent->fd[0], name, 0755) < 0)
    return hutch_err_set(err, errno, "create cgroup %s", name);
  if (v2_open(parent, name, child, err) < 0) {
    unlinkat(parent->fd[0], name, AT_REMOVEDIR);
    return -1;
  }
  return 0;
}

static int v2_rmchild(const struct hutch_cgroup *parent, const char *name, struct hutch_err *err) {
  return hutch_cg_rmdir(parent->fd[0], name, err);
}

static int v2_set_limits(const struct hutch_cgroup *cg, const struct hutch_cg_limits *l,
                         struct hutch_err *err) {
  char v[48];
  int fd = cg->fd[0];
  if (l->memory_bytes) {
    snprintf(v, sizeof v, "%llu", (unsigned long long)l->memory_bytes);
    if (write_file_at(fd, "memory.max", v, err) < 0)
      return -1;
  }
  /* Swap off. Without swap accounting the file is absent: no swap either. */
  if (faccessat(fd, "memory.swap.max", F_OK, 0) == 0 &&
      write_file_at(fd, "memory.swap.max", "0", err) < 0)
    return -1;
  if (l->pids) {
    snprintf(v, sizeof v, "%llu", (unsigned long long)l->pids);
    if (write_file_at(fd, "pids.max", v, err) < 0)
      return -1;
  }
  if (l->cpu_milli) {
    snprintf(v, sizeof v, "%llu 100000", (unsigned long long)(l->cpu_milli * 100));
    if (write_file_at(fd, "cpu.max", v, err) < 0)
      return -1;
  }
  return 0;
}

static int v2_enable_children(const struct hutch_cgroup *cg, struct hutch_err *err) {
  return write_file_at(cg->fd[0], "cgroup.subtree_control", "+memory +pids +cpu", err);
}

/* hutch clones into the cgroup instead where it can (CLONE_INTO_CGROUP),
 * which avoids the write lock a migration takes. */
static int v2_enter_self(const struct hutch_cgroup *cg, struct hutch_err *err) {
  return write_file_at(cg->fd[0], "cgroup.procs", "0", err);
}

static int v2_stats(const struct hutch_cgroup *cg, struct hutch_cg_stats *s,
                    struct hutch_err *err) {
  uint64_t usec = 0;
  int fd = cg->fd[0];
  memset(s, 0, sizeof *s);
  if (hutch_cg_read_u64(fd, "cpu.stat", "usage_usec", &usec, err) < 0)
    return -1;
  if (hutch_cg_read_u64(fd, "memory.events", "oom_kill", &s->oom_kills, err) < 0)
    return -1;
  s->cpu_ns = usec * 1000;

  /* memory.peak appeared in 5.19; before it the current value is the best
   * there is. */
  struct hutch_err ignored;
  if (hutch_cg_read_u64(fd, "memory.peak", NULL, &s->memory_peak, &ignored) == 0)
    return 0;
  return hutch_cg_read_u64(fd, "memory.current", NULL, &s->memory_peak, err);
}

static int v2_usage(const struct hutch_cgroup *cg, struct hutch_cg_usage *u,
                    struct hutch_err *err) {
  uint64_t usec = 0;
  int fd = cg->fd[0];
  memset(u, 0, sizeof *u);
  if (hutch_cg_read_u64(fd, "cpu.stat", "usage_usec", &usec, err) < 0)
    return -1;
  if (hutch_cg_read_u64(fd, "memory.current", NULL, &u->memory_bytes, err) < 0)
    return -1;
  if (hutch_cg_read_u64(fd, "memory.stat", "file", &u->memory_cache, err) < 0)
    return -1;
  if (hutch_cg_read_u64(fd, "pids.current", NULL, &u->pids, err) < 0)
    return -1;
  u->cpu_ns = usec * 1000;
  return 0;
}

/* cgroup.events says "frozen 1" once every process below is frozen. */
static int v2_freeze(const struct hutch_cgroup *cg, bool frozen, int timeout_ms,
                     struct hutch_err *err) {
  int fd = cg->fd[0];
  if (write_file_at(fd, "cgroup.freeze", frozen ? "1" : "0", err) < 0)
    return -1;
  if (!frozen)
    return 0;
  uint64_t deadline = now_ns() + (uint64_t)timeout_ms * 1000000;
  for (unsigned spin = 0;; spin++) {
    char buf[256];
    if (read_file_at(fd, "cgroup.events", buf, sizeof buf, err) < 0)
      break;
    if (strstr(buf, "\nfrozen 1") || strncmp(buf, "frozen 1", 8) == 0)
      return 0;
    if (now_ns() >= deadline) {
      hutch_err_set(err, EBUSY, "processes did not freeze within %d ms", timeout_ms);
      break;
    }
    usleep(spin < 20 ? 10 : 1000);
  }
  struct hutch_err ignored;
  write_file_at(fd, "cgroup.freeze", "0", &ignored);
  return -1;
}

static int v2_kill_all(const struct hutch_cgroup *cg, struct hutch_err *err) {
  int fd = cg->fd[0];
  if (faccessat(fd, "cgroup.kill", F_OK, 0) == 0)
    return write_file_at(fd, "cgroup.kill", "1", err);
  /* Before 5.14: freeze, kill what is listed, thaw, until nothing is left. */
  for (int round = 0; round < 100; round++) {
    bool any = false;
    if (write_file_at(fd, "cgroup.freeze", "1", err) < 0)
      return -1;
    int ret = hutch_cg_kill_procs(fd, &any, err);
    /* Thawed whether or not every kill was sent. */
    if (write_file_at(fd, "cgroup.freeze", "0", err) < 0)
      return -1;
    if (ret < 0)
      return -1;
    if (!any)
      return 0;
    usleep(200);
  }
  return hutch_err_set(err, 0, "processes survive SIGKILL in cgroup");
}

static bool v2_populated(const struct hutch_cgroup *cg) {
  char buf[256];
  struct hutch_err ignored;
  if (read_file_at(cg->fd[0], "cgroup.events", buf, sizeof buf, &ignored) < 0)
    return hutch_cg_has_procs(cg->fd[0]);
  return strstr(buf, "populated 1") != NULL;
}

static int v2_delegate(const struct hutch_cgroup *cg, uid_t uid, gid_t gid, struct hutch_err *err) {
  /* The delegation set of cgroup v2 (Documentation/admin-guide/cgroup-v2.rst,
   * "Delegation"): the directory and the files that move processes and
   * enable controllers below. Limit files of this cgroup stay root's. */
  static const char *const files[] = {"cgroup.procs", "cgroup.threads", "cgroup.subtree_control"};
  int fd = cg->fd[0];
  if (fchown(fd, uid, gid) < 0)
    return hutch_err_set(err, errno, "delegate cgroup");
  for (size_t i = 0; i < ARRAY_SIZE(files); i++)
    if (fchownat(fd, files[i], uid, gid, AT_SYMLINK_NOFOLLOW) < 0)
      return hutch_err_set(err, errno, "delegate cgroup: %s", files[i]);
  return 0;
}

const struct hutch_cgroup_ops hutch_cgroup_v2_ops = {
    .name = "v2",
    .leaves_only = true,
    .mkchild = v2_mkchild,
    .open = v2_open,
    .rmchild = v2_rmchild,
    .set_limits = v2_set_limits,
    .enable_children = v2_enable_children,
    .enter_self = v2_enter_self,
    .stats = v2_stats,
    .kill_all = v2_kill_all,
    .thaw_all = NULL, /* a fatal signal reaches frozen processes on v2 */
    .usage = v2_usage,
    .freeze = v2_freeze,
    .populated = v2_populated,
    .delegate = v2_delegate,
};
