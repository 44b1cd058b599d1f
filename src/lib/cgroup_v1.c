/* cgroup v1 (and hybrid hosts): each controller on its own hierarchy, so a
 * cgroup is a directory in every one of them. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cgroup.h"
#include "cleanup.h"
#include "util.h"

#define FD(cg, c) hutch_cg_fd(cg, c)

/* Open dirfd/name in every hierarchy of parent where want(i) holds and the
 * directory exists; a controller's index is -1 where it was not opened. */
static int open_where(const struct hutch_cgroup *parent, const char *name, const bool *want,
                      struct hutch_cgroup *child, struct hutch_err *err) {
  memset(child, 0, sizeof *child);
  child->ops = parent->ops;
  int8_t index[HUTCH_CG_MAXH];

  for (int i = 0; i < parent->nfd; i++) {
    index[i] = -1;
    if (!want[i])
      continue;
    int fd = openat(parent->fd[i], name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0 && errno == ENOENT)
      continue;
    if (fd < 0) {
      int e = errno;
      hutch_cgroup_close(child);
      return hutch_err_set(err, e, "open cgroup %s", name);
    }
    index[i] = (int8_t)child->nfd;
    child->fd[child->nfd++] = fd;
  }

  for (int c = 0; c < CG_NCTL; c++)
    child->ctl[c] = parent->ctl[c] < 0 ? -1 : index[parent->ctl[c]];
  if (child->ctl[CG_MEMORY] < 0) {
    hutch_cgroup_close(child);
    return hutch_err_not_found(err, "cgroup %s", name);
  }
  return 0;
}

static int v1_open(const struct hutch_cgroup *parent, const char *name, struct hutch_cgroup *child,
                   struct hutch_err *err) {
  bool all[HUTCH_CG_MAXH] = {true, true, true, true, true};
  return open_where(parent, name, all, child, err);
}

/* v1 charges TCP buffers to a counter of their own, and only in a cgroup
 * where that counter was ever given a limit: without one, a workload
 * queueing data on loopback sockets it never reads holds host memory far
 * past its limit. Every hutch cgroup turns the counting on; the sandbox's
 * caps it (v2 charges socket memory to memory.max itself). */
static int v1_account_tcp(const struct hutch_cgroup *cg, const char *limit, struct hutch_err *err) {
  if (FD(cg, CG_MEMORY) < 0 ||
      faccessat(FD(cg, CG_MEMORY), "memory.kmem.tcp.limit_in_bytes", F_OK, 0) < 0)
    return 0;
  return write_file_at(FD(cg, CG_MEMORY), "memory.kmem.tcp.limit_in_bytes", limit, err);
}

/* Remove parent/name from the first n hierarchies where want holds. */
static void remove_made(const struct hutch_cgroup *parent, const char *name, const bool *want,
                        int n) {
  for (int i = 0; i < n; i++)
    if (want[i])
      unlinkat(parent->fd[i], name, AT_REMOVEDIR);
}

static int v1_mkchild(const struct hutch_cgroup *parent, const char *name, unsigned ctls,
                      struct hutch_cgroup *child, struct hutch_err *err) {
  bool want[HUTCH_CG_MAXH] = {false};
  for (int c = 0; c < CG_NCTL; c++)
    if ((ctls & CG_BIT(c)) && parent->ctl[c] >= 0)
      want[parent->ctl[c]] = true;

  for (int i = 0; i < parent->nfd; i++)
    if (want[i] && mkdirat(parent->fd[i], name, 0755) < 0) {
      int e = errno;
      remove_made(parent, name, want, i);
      return hutch_err_set(err, e, "create cgroup %s", name);
    }

  /* open_where leaves child closed when it fails. */
  if (open_where(parent, name, want, child, err) < 0) {
    remove_made(parent, name, want, parent->nfd);
    return -1;
  }
  if (v1_account_tcp(child, "-1", err) < 0) {
    hutch_cgroup_close(child);
    remove_made(parent, name, want, parent->nfd);
    return -1;
  }
  return 0;
}

static int v1_rmchild(const struct hutch_cgroup *parent, const char *name, struct hutch_err *err) {
  int ret = 0;
  for (int i = 0; i < parent->nfd; i++)
    if (hutch_cg_rmdir(parent->fd[i], name, err) < 0)
      ret = -1;
  return ret;
}

static int v1_set_limits(const struct hutch_cgroup *cg, const struct hutch_cg_limits *l,
                         struct hutch_err *err) {
  char v[32];
  if (l->memory_bytes) {
    snprintf(v, sizeof v, "%llu", (unsigned long long)l->memory_bytes);
    if (write_file_at(FD(cg, CG_MEMORY), "memory.limit_in_bytes", v, err) < 0)
      return -1;
    /* Swap off: memory+swap may not exceed memory. Hosts booted without
     * swap accounting have no memsw file and no swap to turn off. */
    if (faccessat(FD(cg, CG_MEMORY), "memory.memsw.limit_in_bytes", F_OK, 0) == 0) {
      if (write_file_at(FD(cg, CG_MEMORY), "memory.memsw.limit_in_bytes", v, err) < 0)
        return -1;
    }
    if (v1_account_tcp(cg, v, err) < 0)
      return -1;
  }

  if (write_file_at(FD(cg, CG_MEMORY), "memory.swappiness", "0", err) < 0)
    return -1;

  if (l->pids) {
    snprintf(v, sizeof v, "%llu", (unsigned long long)l->pids);
    if (write_file_at(FD(cg, CG_PIDS), "pids.max", v, err) < 0)
      return -1;
  }

  if (l->cpu_milli) {
    if (FD(cg, CG_CPU) < 0)
      return hutch_err_set(err, 0, "cgroup made without the cpu controller");
    snprintf(v, sizeof v, "%llu", (unsigned long long)(l->cpu_milli * 100));
    if (write_file_at(FD(cg, CG_CPU), "cpu.cfs_period_us", "100000", err) < 0)
      return -1;
    if (write_file_at(FD(cg, CG_CPU), "cpu.cfs_quota_us", v, err) < 0)
      return -1;
  }
  return 0;
}

static int v1_enable_children(const struct hutch_cgroup *cg, struct hutch_err *err) {
  (void)cg, (void)err; /* v1 hierarchies nest without being asked */
  return 0;
}

/* A thread moving itself through `tasks` is the one migration the kernel
 * does without taking cgroup_threadgroup_rwsem for writing, which waits for
 * an RCU grace period (5-15 ms on an idle machine) whenever the lock has
 * not been write-locked recently. For a single-threaded process, moving its
 * one thread is moving the process. */
static int v1_enter_self(const struct hutch_cgroup *cg, struct hutch_err *err) {
  for (int i = 0; i < cg->nfd; i++)
    if (write_file_at(cg->fd[i], "tasks", "0", err) < 0)
      return -1;
  return 0;
}

static int v1_stats(const struct hutch_cgroup *cg, struct hutch_cg_stats *s,
                    struct hutch_err *err) {
  memset(s, 0, sizeof *s);
  if (hutch_cg_read_u64(FD(cg, CG_CPUACCT), "cpuacct.usage", NULL, &s->cpu_ns, err) < 0)
    return -1;
  if (hutch_cg_read_u64(FD(cg, CG_MEMORY), "memory.max_usage_in_bytes", NULL, &s->memory_peak,
                        err) < 0)
    return -1;
  /* oom_kill appeared in 4.13; an older kernel reports OOM only as SIGKILL. */
  struct hutch_err ignored;
  hutch_cg_read_u64(FD(cg, CG_MEMORY), "memory.oom_control", "oom_kill", &s->oom_kills, &ignored);
  return 0;
}

static bool freezer_is(int fd, const char *state) {
  char buf[32];
  struct hutch_err ignored;
  return read_file_at(fd, "freezer.state", buf, sizeof buf, &ignored) > 0 &&
         strncmp(buf, state, strlen(state)) == 0;
}

static int v1_usage(const struct hutch_cgroup *cg, struct hutch_cg_usage *u,
                    struct hutch_err *err) {
  memset(u, 0, sizeof *u);
  if (hutch_cg_read_u64(FD(cg, CG_CPUACCT), "cpuacct.usage", NULL, &u->cpu_ns, err) < 0)
    return -1;
  if (hutch_cg_read_u64(FD(cg, CG_MEMORY), "memory.usage_in_bytes", NULL, &u->memory_bytes, err) <
      0)
    return -1;
  if (hutch_cg_read_u64(FD(cg, CG_MEMORY), "memory.stat", "total_cache", &u->memory_cache, err) < 0)
    return -1;
  return hutch_cg_read_u64(FD(cg, CG_PIDS), "pids.current", NULL, &u->pids, err);
}

/* Reading freezer.state also moves a FREEZING cgroup on towards FROZEN. */
static int v1_freeze(const struct hutch_cgroup *cg, bool frozen, int timeout_ms,
                     struct hutch_err *err) {
  int fz = FD(cg, CG_FREEZER);
  if (write_file_at(fz, "freezer.state", frozen ? "FROZEN" : "THAWED", err) < 0)
    return -1;
  if (!frozen)
    return 0;
  uint64_t deadline = now_ns() + (uint64_t)timeout_ms * 1000000;
  for (unsigned spin = 0; !freezer_is(fz, "FROZEN"); spin++) {
    if (now_ns() >= deadline) {
      struct hutch_err ignored;
      write_file_at(fz, "freezer.state", "THAWED", &ignored);
      return hutch_err_set(err, EBUSY, "processes did not freeze within %d ms", timeout_ms);
    }
    usleep(spin < 20 ? 10 : 1000);
  }
  return 0;
}

/* Call visit on dirfd, then on every cgroup below it (8 levels at most:
 * hutch's own tree is 3 deep), until one returns nonzero. */
static int walk(int dirfd, int depth, int (*visit)(int fd, void *arg), void *arg) {
  int ret = visit(dirfd, arg);
  if (ret != 0 || depth >= 8)
    return ret;
  int dup = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  DIR *d = dup >= 0 ? fdopendir(dup) : NULL;
  if (!d) {
    if (dup >= 0)
      close(dup);
    return 0; /* gone meanwhile: nothing below it */
  }
  for (struct dirent *e; ret == 0 && (e = readdir(d));) {
    if (e->d_type != DT_DIR || e->d_name[0] == '.')
      continue;
    _cleanup_close_ int sub = openat(dirfd, e->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (sub >= 0)
      ret = walk(sub, depth + 1, visit, arg);
  }
  closedir(d);
  return ret;
}

struct kill_state {
  bool any;
  struct hutch_err *err;
};

static int kill_one(int fd, void *arg) {
  struct kill_state *k = arg;
  return hutch_cg_kill_procs(fd, &k->any, k->err);
}

/* A cgroup frozen by itself stays frozen when its parent thaws, and its
 * processes cannot die while it is: an agent killed between freezing an
 * exec's leaf and thawing it leaves such a leaf, which would hold its
 * sandbox's teardown forever. So thawing is always of the whole tree. */
static int thaw_one(int fd, void *arg) {
  return write_file_at(fd, "freezer.state", "THAWED", arg);
}

static int v1_thaw_all(const struct hutch_cgroup *cg, struct hutch_err *err) {
  return walk(FD(cg, CG_FREEZER), 0, thaw_one, err);
}

/* Freeze so that nothing can fork while we look, SIGKILL everything, thaw so
 * the kills are delivered, and repeat until no process is left. */
static int v1_kill_all(const struct hutch_cgroup *cg, struct hutch_err *err) {
  int fz = FD(cg, CG_FREEZER);
  for (int round = 0; round < 100; round++) {
    if (write_file_at(fz, "freezer.state", "FROZEN", err) < 0)
      return -1;
    for (int i = 0; i < 1000 && !freezer_is(fz, "FROZEN"); i++)
      usleep(100);
    struct kill_state k = {false, err};
    int ret = walk(fz, 0, kill_one, &k);
    /* Thawed whether or not every kill was sent. */
    if (v1_thaw_all(cg, err) < 0)
      return -1;
    if (ret < 0)
      return -1;
    if (!k.any)
      return 0;
    usleep(round < 10 ? 200 : 2000);
  }
  return hutch_err_set(err, 0, "processes survive SIGKILL in cgroup");
}

static int has_procs(int fd, void *arg) {
  (void)arg;
  return hutch_cg_has_procs(fd);
}

/* Whether any process is in cg or below it (v1 has no cgroup.events). */
static bool v1_populated(const struct hutch_cgroup *cg) {
  for (int i = 0; i < cg->nfd; i++)
    if (walk(cg->fd[i], 0, has_procs, NULL))
      return true;
  return false;
}

static int v1_delegate(const struct hutch_cgroup *cg, uid_t uid, gid_t gid, struct hutch_err *err) {
  /* Only the directories: the owner may then make child cgroups (and set
   * limits on those, which the kernel caps at ours), but the limit files of
   * this cgroup stay root's. */
  for (int i = 0; i < cg->nfd; i++)
    if (fchown(cg->fd[i], uid, gid) < 0)
      return hutch_err_set(err, errno, "delegate cgroup");
  return 0;
}

static int v1_reset(const struct hutch_cgroup *cg, uint64_t max_charged,
                    struct hutch_cg_stats *base, struct hutch_err *err) {
  memset(base, 0, sizeof *base);
  for (int i = 0; i < cg->nfd; i++)
    if (hutch_cg_has_procs(cg->fd[i]))
      return hutch_err_set(err, EBUSY, "cgroup still holds a process");

  /* Frozen by a kill that could not thaw it: the next process would stop
   * in it, and SIGKILL does not end a process frozen on v1. */
  if (!freezer_is(FD(cg, CG_FREEZER), "THAWED"))
    return hutch_err_set(err, EBUSY, "cgroup is not thawed");

  uint64_t charged = 0;
  if (hutch_cg_read_u64(FD(cg, CG_MEMORY), "memory.usage_in_bytes", NULL, &charged, err) < 0)
    return -1;
  if (charged > max_charged)
    return hutch_err_set(err, EBUSY, "cgroup still holds %llu bytes", (unsigned long long)charged);

  /* The kernel takes only 0 for either: the peak becomes what is charged
   * now (at most max_charged), the CPU time starts from nothing. */
  if (write_file_at(FD(cg, CG_CPUACCT), "cpuacct.usage", "0", err) < 0)
    return -1;
  if (write_file_at(FD(cg, CG_MEMORY), "memory.max_usage_in_bytes", "0", err) < 0)
    return -1;

  /* Without the count so far (a kernel before 4.13 has none), the next
   * exec would be told of this one's OOM kills: no reuse. */
  return hutch_cg_read_u64(FD(cg, CG_MEMORY), "memory.oom_control", "oom_kill", &base->oom_kills,
                           err);
}

const struct hutch_cgroup_ops hutch_cgroup_v1_ops = {
    .name = "v1",
    .leaves_only = false,
    .mkchild = v1_mkchild,
    .open = v1_open,
    .rmchild = v1_rmchild,
    .set_limits = v1_set_limits,
    .enable_children = v1_enable_children,
    .enter_self = v1_enter_self,
    .stats = v1_stats,
    .kill_all = v1_kill_all,
    .thaw_all = v1_thaw_all,
    .usage = v1_usage,
    .freeze = v1_freeze,
    .populated = v1_populated,
    .delegate = v1_delegate,
    .reset = v1_reset,
};
