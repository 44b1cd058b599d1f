/* The sandbox shell both tiers share (shell.h): creating a sandbox (limits,
 * slot and cgroup, then the agent: spawn.c), its uses, and teardown that
 * leaves nothing behind. Its config is checked first (config.c); adopting
 * one is shell_adopt.c. */
#include "shell.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <linux/magic.h>
#include <sys/mount.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cleanup.h"
#include "config.h"
#include "gvisor.h"
#include "hostlimits.h"
#include "hostroot.h"
#include "layout.h"
#include "mkdir.h"
#include "netns.h"
#include "rootfs.h"
#include "sandbox.h"
#include "slot.h"
#include "spawn.h"
#include "util.h"

static char *agent_path(const struct hutch_sandbox_config *cfg, struct hutch_err *err) {
  char self[PATH_MAX];
  if (cfg->agent)
    return xstrdup(cfg->agent);
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n < 0) {
    hutch_err_set(err, errno, "readlink /proc/self/exe");
    return NULL;
  }
  self[n] = '\0';
  char *slash = strrchr(self, '/');
  *slash = '\0';
  char *p = xasprintf("%s/hutch-agent", self);
  if (access(p, X_OK) < 0) {
    hutch_err_set(err, errno, "agent %s", p);
    free(p);
    return NULL;
  }
  return p;
}

static void new_id(char id[17]) {
  uint8_t b[8];
  if (getrandom(b, sizeof b, 0) != sizeof b) {
    uint64_t t = now_ns() ^ (uint64_t)getpid() << 32;
    memcpy(b, &t, sizeof b);
  }
  for (int i = 0; i < 8; i++)
    snprintf(id + 2 * i, 3, "%02x", b[i]);
}

/* hutch's cgroup root: a copy of shared's fds, or opened afresh (NULL). */
static int open_root(const struct hutch_cgroup *shared, struct hutch_cgroup *root,
                     struct hutch_err *err) {
  if (shared)
    return hutch_cgroup_dup(shared, root, err);
  return hutch_cgroup_open_root(root, err);
}

/* Before the clone: a slot, its cgroup for the controllers this sandbox
 * needs (cpu only with a CPU limit), and on v2 the agent's leaf, which the
 * agent is cloned into. On v1 the agent lives in the sandbox cgroup. */
static int claim_cgroup(const struct hutch_sandbox_config *cfg, struct hutch_sandbox *sb,
                        struct hutch_cgroup *agent_cg, struct hutch_err *err) {
  unsigned ctls = CG_BIT(CG_MEMORY) | CG_BIT(CG_PIDS) | CG_BIT(CG_CPUACCT) | CG_BIT(CG_FREEZER) |
                  (cfg->cpu_milli ? CG_BIT(CG_CPU) : 0);
  if (open_root(cfg->cg_root, &sb->root, err) < 0)
    return -1;

  /* Best effort: a ceiling that cannot be written (memory in use above
   * it) leaves each sandbox's own limits, which still hold. */
  struct hutch_err ignored;
  hutch_cgroup_cap_root(&sb->root, hutch_memory_ceiling(), hutch_pids_ceiling(), &ignored);

  sb->lock_fd = hutch_slot_claim(&sb->root, ctls, &sb->slot, &sb->cg, err);
  if (sb->lock_fd < 0)
    return -1;
  sb->uid_base = hutch_slot_uid_base(sb->slot);
  if (sb->root.ops->leaves_only && sb->root.ops->mkchild(&sb->cg, "agent", ctls, agent_cg, err) < 0)
    return hutch_err_wrap(err, "sandbox cgroup");
  return 0;
}

/* While the sandbox's first process builds its root (it cannot exec the
 * agent before hutch_spawn_finish): the limits, the delegation that lets the
 * agent make a leaf per exec, and collecting what crashed runs left. */
static int finish_cgroup(const struct hutch_sandbox_config *cfg, struct hutch_sandbox *sb,
                         struct hutch_err *err) {
  const struct hutch_cgroup_ops *ops = sb->cg.ops;
  /* The agent is one of the cgroup's processes; the limit is the workload's
   * (under gVisor, kept inside it: gvisor.c). */
  uint64_t pids =
      cfg->isolation == HUTCH_ISOLATION_GVISOR ? hutch_gvisor_host_pids(cfg->pids) : cfg->pids + 1;
  struct hutch_cg_limits lim = {cfg->memory_bytes, pids, cfg->cpu_milli};
  if (ops->set_limits(&sb->cg, &lim, err) < 0)
    return hutch_err_wrap(err, "sandbox cgroup");
  if (ops->enable_children(&sb->cg, err) < 0)
    return hutch_err_wrap(err, "sandbox cgroup");
  if (ops->delegate(&sb->cg, sb->uid_base, sb->uid_base, err) < 0)
    return hutch_err_wrap(err, "sandbox cgroup");

  if (!cfg->gc_elsewhere)
    hutch_slot_gc(&sb->root);
  return 0;
}

static void close_fds(int *fds, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (fds[i] >= 0)
      close(fds[i]);
}

/* fd bound to sa (the socket file path, then made 0600) and listening: 0,
 * or -1 with errno set. */
static int bind_listening(int fd, const struct sockaddr_un *sa, const char *path) {
  if (bind(fd, (const struct sockaddr *)sa, sizeof *sa) < 0)
    return -1;
  if (chmod(path, 0600) < 0)
    return -1;
  return listen(fd, 4);
}

/* The agent's listening socket, at DIR/<id>.sock. Only host root may use
 * it: the directory is made 0700, the socket 0600, and nothing inside the
 * sandbox sees the host's filesystem; the agent holds only the fd. */
static int listen_socket(const char *dir, struct hutch_sandbox *sb, struct hutch_err *err) {
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  int n = snprintf(sb->listen_path, sizeof sb->listen_path, "%s/%s.sock", dir, sb->id);
  if (n < 0 || (size_t)n >= sizeof sb->listen_path || (size_t)n >= sizeof sa.sun_path) {
    sb->listen_path[0] = '\0';
    return hutch_err_invalid(err, "agent socket directory %s: path too long", dir);
  }
  memcpy(sa.sun_path, sb->listen_path, (size_t)n + 1);

  if (mkdir(dir, 0700) < 0 && errno != EEXIST)
    return hutch_err_set(err, errno, "agent socket directory %s", dir);
  if (chmod(dir, 0700) < 0)
    return hutch_err_set(err, errno, "agent socket directory %s", dir);

  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return hutch_err_set(err, errno, "socket");
  unlink(sb->listen_path);
  if (bind_listening(fd, &sa, sb->listen_path) < 0) {
    hutch_err_set(err, errno, "agent socket %s", sb->listen_path);
    close(fd);
    return -1;
  }
  return fd;
}

/* The storage the agent holds for us (layout.h). Host root may take an fd
 * of any process; an agent that does not hold one (made by an older hutch)
 * leaves the sandbox's disk unmeasured, nothing worse. */
int hutch_shell_storage_of(int pidfd) {
  int fd = (int)syscall(SYS_pidfd_getfd, pidfd, HUTCH_AGENT_STORAGE_FD, 0);
  struct statfs st;
  if (fd >= 0 && (fstatfs(fd, &st) < 0 || st.f_type != TMPFS_MAGIC)) {
    close(fd);
    fd = -1;
  }
  return fd;
}

/* Per bind, fds[2i] a detached copy of the source's mount tree (made
 * here: the child's mount namespace cannot clone the host's mounts by fd)
 * and fds[2i+1] the user namespace of its id map. */
static int open_binds(const struct hutch_sandbox_config *cfg, const struct hutch_sandbox *sb,
                      int *fds, struct hutch_err *err) {
  for (size_t i = 0; i < cfg->nbinds; i++) {
    struct stat st;
    int src = hutch_config_open_bind(&cfg->binds[i], &st, err);
    if (src < 0)
      return -1;
    int tree =
        open_tree(src, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE | AT_EMPTY_PATH);
    int e = errno;
    close(src);
    if (tree < 0)
      return hutch_err_set(err, e, "bind source %s", cfg->binds[i].src);
    fds[2 * i] = tree;

    fds[2 * i + 1] =
        hutch_spawn_idmap_userns(st.st_uid, st.st_gid, sb->uid_base + HUTCH_USER_UID, 1, err);
    if (fds[2 * i + 1] < 0)
      return hutch_err_wrap(err, "bind %s", cfg->binds[i].src);
  }
  return 0;
}

/* Per layer, layer_fds[i] a detached copy of its directory; then
 * *range_userns, the one id map of layers and volumes: their ids from 0
 * onto this sandbox's range. */
static int open_layers(const struct hutch_sandbox_config *cfg, const struct hutch_sandbox *sb,
                       int *layer_fds, int *range_userns, struct hutch_err *err) {
  for (size_t i = 0; i < cfg->nlayers; i++) {
    layer_fds[i] = open_tree(AT_FDCWD, cfg->layers[i], OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
    if (layer_fds[i] < 0)
      return hutch_err_set(err, errno, "layer %s", cfg->layers[i]);
  }

  if (!cfg->nlayers && !cfg->nvolumes)
    return 0;
  *range_userns = hutch_spawn_idmap_userns(0, 0, sb->uid_base, HUTCH_ID_RANGE, err);
  if (*range_userns < 0)
    return hutch_err_wrap(err, "layers and volumes");
  return 0;
}

/* The agent's connection (sv; sv[1] is the agent's end) and, for a
 * server that may come back, its listening socket (*lfd). Under gVisor
 * the agent's sockets are gVisor's: it cannot listen on the host for a
 * server that comes back (docs/isolation.md, adoption). */
static int agent_sockets(const struct hutch_sandbox_config *cfg, struct hutch_sandbox *sb,
                         int sv[2], int *lfd, struct hutch_err *err) {
  if (cfg->listen_dir && cfg->isolation == HUTCH_ISOLATION_NS) {
    *lfd = listen_socket(cfg->listen_dir, sb, err);
    if (*lfd < 0)
      return -1;
  }
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sv) < 0)
    return hutch_err_set(err, errno, "socketpair");
  return 0;
}

/* Everything the first process is handed, made in order: fds (binds,
 * then layers: open_binds, open_layers) and the agent's sockets. On
 * failure the caller closes fds. */
static int prepare_fds(const struct hutch_sandbox_config *cfg, struct hutch_sandbox *sb, int *fds,
                       int sv[2], int *lfd, struct hutch_err *err) {
  int *layer_fds = fds + 2 * cfg->nbinds;
  if (open_binds(cfg, sb, fds, err) < 0)
    return -1;
  if (open_layers(cfg, sb, layer_fds, layer_fds + cfg->nlayers, err) < 0)
    return -1;
  return agent_sockets(cfg, sb, sv, lfd, err);
}

/* The first process started (spawn.c), given the sandbox cgroup's limits
 * and its network namespace while it builds the root, then let go on to
 * exec the agent. */
static int spawn_agent(const struct hutch_sandbox_config *cfg, struct hutch_sandbox *sb,
                       struct hutch_spawn *s, struct hutch_netns *net, struct hutch_err *err) {
  if (hutch_spawn_start(s, err) < 0)
    return -1;
  if (finish_cgroup(cfg, sb, err) < 0) {
    hutch_spawn_abort(s);
    return -1;
  }
  int netns = hutch_netns_take(net, err);
  if (netns < 0) {
    hutch_spawn_abort(s);
    return -1;
  }

  int r = hutch_spawn_finish(s, netns, err);
  close(netns);
  return r;
}

static int start_agent(const struct hutch_sandbox_config *cfg, struct hutch_sandbox *sb,
                       const struct hutch_cgroup *agent_cg, struct hutch_netns *net,
                       struct hutch_err *err) {
  _cleanup_free_ char *tpl =
      cfg->rootfs ? xstrdup(cfg->rootfs) : hutch_hostroot_skeleton(cfg->state_dir, err);
  _cleanup_free_ char *agent = agent_path(cfg, err);
  if (!tpl || !agent)
    return -1;
  if (mkdir_p(HUTCH_STAGING_DIR, 0755, err) < 0)
    return hutch_err_set(err, errno, "create %s", HUTCH_STAGING_DIR);

  /* Two fds per bind, one per layer, and the id map of layers and
   * volumes (prepare_fds). */
  size_t nbind_fds = 2 * cfg->nbinds, nfds = nbind_fds + cfg->nlayers + 1;
  _cleanup_free_ int *fds = xcalloc(nfds + 1, sizeof(int));
  for (size_t i = 0; i < nfds; i++)
    fds[i] = -1;
  int *layer_fds = fds + nbind_fds, *range_userns = layer_fds + cfg->nlayers;
  int sv[2];
  _cleanup_close_ int lfd = -1;
  if (prepare_fds(cfg, sb, fds, sv, &lfd, err) < 0) {
    close_fds(fds, nfds);
    return -1;
  }

  struct hutch_spawn s = {
      .rootfs = {.cfg = cfg,
                 .template_dir = tpl,
                 .agent_path = agent,
                 .hostname = sb->id,
                 .uid_base = sb->uid_base,
                 .bind_fds = fds,
                 .layer_fds = layer_fds,
                 .range_userns = *range_userns,
                 .agent_fd = -1,
                 .runsc_fd = -1,
                 .storage_fd = -1},
      .cg = &sb->cg,
      .agent_cg = agent_cg,
      .conn_fd = sv[1],
      .listen_fd = lfd,
      .build = cfg->build,
  };
  int r = spawn_agent(cfg, sb, &s, net, err);
  close(sv[1]);
  close_fds(fds, nfds);
  if (r < 0) {
    close(sv[0]);
    return -1;
  }

  sb->pid = s.pid;
  sb->pidfd = s.pidfd;
  sb->child = true;
  sb->conn_fd = sv[0];
  sb->storage_fd = hutch_shell_storage_of(sb->pidfd);
  return 0;
}

void hutch_shell_close_root(struct hutch_sandbox *sb) {
  if (sb->root.ops)
    hutch_cgroup_close(&sb->root);
  memset(&sb->root, 0, sizeof sb->root);
}

int hutch_shell_create(const struct hutch_sandbox_config *cfg, struct hutch_sandbox **out,
                       struct hutch_err *err) {
  struct hutch_sandbox *sb = xcalloc(1, sizeof *sb);
  struct hutch_cgroup leaf = {0};
  struct hutch_netns net;
  sb->lock_fd = sb->pidfd = sb->conn_fd = sb->storage_fd = -1;
  sb->isolation = cfg->isolation;
  new_id(sb->id);

  /* First, so that the kernel makes it while everything else is prepared. */
  int r = hutch_netns_begin(&net, err);
  if (r == 0)
    r = claim_cgroup(cfg, sb, &leaf, err);
  if (r == 0)
    r = start_agent(cfg, sb, leaf.ops ? &leaf : &sb->cg, &net, err);
  hutch_cgroup_close(&leaf);
  hutch_netns_reap(&net);

  if (r < 0) {
    struct hutch_err ignored;
    hutch_shell_destroy(sb, &ignored);
    return -1;
  }
  hutch_shell_close_root(sb);
  *out = sb;
  return 0;
}

/* A freeze takes microseconds to milliseconds (a gVisor sandbox's Go
 * threads: 12 ms at the median on a loaded 2-core machine); what does not
 * freeze within 5 s (a process stuck in the kernel) keeps the sandbox
 * running, and the caller hears so. A task freezes only once it leaves an
 * uninterruptible wait, and a page-in or a write throttled behind a busy
 * disk is one: half a second was once too short for a gVisor sandbox on a
 * CI machine running the whole suite, and 2 s for an idle ns sandbox (its
 * agent's spare starting) while the suite's workers and the cgroup v2
 * guest kept the disk busy. The wait is off the server's loop. */
#define FREEZE_WAIT_MS 5000

static void close_storage(struct hutch_sandbox *sb) {
  if (sb->storage_fd >= 0)
    close(sb->storage_fd);
  sb->storage_fd = -1;
}

/* Few descriptors (hutch_shell_few_fds). Opening the sandbox's cgroup
 * again by its slot's name under the hutch root is as safe as holding it:
 * the root is host root's (a sandbox owns only its own directory, which it
 * can neither rename nor remove), and the slot is ours for as long as we
 * hold its lock. */
static int cg_open(const struct hutch_sandbox *sb, struct hutch_cgroup *cg, struct hutch_err *err) {
  char name[16];
  snprintf(name, sizeof name, "%u", sb->slot);
  if (sb->shared->ops->open(sb->shared, name, cg, err) < 0)
    return hutch_err_wrap(err, "sandbox %s's cgroup", sb->id);
  return 0;
}

/* A pidfd of the agent, to close after use. Our child's pid cannot name
 * another process before we reap it; an adopted agent's pidfd is kept. */
static int pidfd_of(const struct hutch_sandbox *sb) {
  if (sb->pidfd >= 0)
    return fcntl(sb->pidfd, F_DUPFD_CLOEXEC, 3);
  return sb->child ? (int)syscall(SYS_pidfd_open, sb->pid, 0) : -1;
}

void hutch_shell_few_fds(struct hutch_sandbox *sb, const struct hutch_cgroup *root) {
  struct stat st;
  if (sb->storage_fd >= 0 && fstat(sb->storage_fd, &st) == 0) {
    sb->storage_dev = st.st_dev;
    sb->storage_ino = st.st_ino;
  }
  sb->shared = root;
  close_storage(sb);
  if (sb->cg.ops)
    hutch_cgroup_close(&sb->cg);
  memset(&sb->cg, 0, sizeof sb->cg);
  if (sb->child && sb->pidfd >= 0) {
    close(sb->pidfd);
    sb->pidfd = -1;
  }
}

/* Taken from the agent again, and checked to be the directory it was
 * when the sandbox was made: an agent a workload took over could hold
 * anything at that number. */
int hutch_shell_storage(const struct hutch_sandbox *sb) {
  if (sb->storage_fd >= 0)
    return fcntl(sb->storage_fd, F_DUPFD_CLOEXEC, 3);
  if (!sb->storage_dev) {
    errno = ENOENT;
    return -1;
  }
  int pidfd = pidfd_of(sb);
  if (pidfd < 0)
    return -1;
  int fd = (int)syscall(SYS_pidfd_getfd, pidfd, HUTCH_AGENT_STORAGE_FD, 0);
  close(pidfd);

  struct stat st;
  if (fd >= 0 && (fstat(fd, &st) < 0 || st.st_dev != sb->storage_dev ||
                  st.st_ino != sb->storage_ino || !S_ISDIR(st.st_mode))) {
    close(fd);
    errno = ESTALE;
    return -1;
  }
  return fd;
}

int hutch_shell_freeze(struct hutch_sandbox *sb, bool frozen, struct hutch_err *err) {
  if (sb->cg.ops)
    return sb->cg.ops->freeze(&sb->cg, frozen, FREEZE_WAIT_MS, err);
  struct hutch_cgroup cg;
  if (cg_open(sb, &cg, err) < 0)
    return -1;
  int r = cg.ops->freeze(&cg, frozen, FREEZE_WAIT_MS, err);
  hutch_cgroup_close(&cg);
  return r;
}

int hutch_shell_cgroup(const struct hutch_sandbox *sb, struct hutch_cgroup *out,
                       struct hutch_err *err) {
  if (!sb->cg.ops)
    return cg_open(sb, out, err);
  *out = sb->cg;
  for (int i = 0; i < sb->cg.nfd; i++)
    if ((out->fd[i] = fcntl(sb->cg.fd[i], F_DUPFD_CLOEXEC, 3)) < 0) {
      int e = errno;
      out->nfd = i;
      hutch_cgroup_close(out);
      return hutch_err_set(err, e, "copy the sandbox's cgroup fds");
    }
  return 0;
}

int hutch_shell_freeze_wait(const struct hutch_cgroup *cg, struct hutch_err *err) {
  return cg->ops->freeze(cg, true, FREEZE_WAIT_MS, err);
}

int hutch_shell_usage(const struct hutch_sandbox *sb, bool disk, struct hutch_sandbox_usage *u,
                      struct hutch_err *err) {
  struct statfs st;
  memset(u, 0, sizeof *u);
  int fd = -1;
  if (disk)
    fd = sb->storage_fd >= 0 ? sb->storage_fd : hutch_shell_storage(sb);
  if (fd >= 0 && fstatfs(fd, &st) == 0) {
    u->disk_total = (uint64_t)st.f_blocks * (uint64_t)st.f_bsize;
    u->disk_used = (uint64_t)(st.f_blocks - st.f_bfree) * (uint64_t)st.f_bsize;
  }
  if (fd >= 0 && fd != sb->storage_fd)
    close(fd);

  if (sb->cg.ops)
    return sb->cg.ops->usage(&sb->cg, &u->cg, err);
  struct hutch_cgroup cg;
  if (cg_open(sb, &cg, err) < 0)
    return -1;
  int r = cg.ops->usage(&cg, &u->cg, err);
  hutch_cgroup_close(&cg);
  return r;
}

/* The calling thread enters the sandbox's network namespace only for the
 * socket(2) call: a socket belongs to the namespace it was made in for
 * its whole life, so the server can listen and connect inside a sandbox
 * (egress proxy, port forwarding) while the sandbox gets no route out.
 * Failing to return to our own namespace would leave every later socket
 * of this thread inside a sandbox: that is not survivable, so it aborts. */
int hutch_shell_socket(const struct hutch_sandbox *sb, int own_netns, int domain, int type,
                       struct hutch_err *err) {
  int pidfd = pidfd_of(sb);
  if (pidfd < 0 || setns(pidfd, CLONE_NEWNET) < 0) {
    int e = errno;
    if (pidfd >= 0)
      close(pidfd);
    return hutch_err_set(err, e, "enter the network namespace of sandbox %s", sb->id);
  }
  close(pidfd);
  int fd = socket(domain, type | SOCK_CLOEXEC, 0);
  int e = errno;
  if (setns(own_netns, CLONE_NEWNET) < 0)
    abort();
  if (fd < 0)
    return hutch_err_set(err, e, "socket in sandbox %s", sb->id);
  return fd;
}

void hutch_shell_release(struct hutch_sandbox *sb) {
  close_storage(sb);
  if (sb->conn_fd >= 0)
    close(sb->conn_fd);
  if (sb->pidfd >= 0)
    close(sb->pidfd);
  if (sb->lock_fd >= 0)
    close(sb->lock_fd);
  if (sb->cg.ops)
    hutch_cgroup_close(&sb->cg);
  hutch_shell_close_root(sb);
  free(sb);
}

void hutch_shell_gc_host(void) {
  struct hutch_cgroup root = {0};
  struct hutch_err ignored;
  if (hutch_cgroup_open_root(&root, &ignored) < 0)
    return;
  hutch_slot_gc(&root);
  hutch_cgroup_close(&root);
}

/* PID 1 of the sandbox dying takes every process of its pid namespace with
 * it, and the kernel reaps them before the wait returns. */
static void kill_agent(struct hutch_sandbox *sb) {
  syscall(SYS_pidfd_send_signal, sb->pidfd, SIGKILL, NULL, 0);

  /* The dying agent waits for every process of its pid namespace. One
   * frozen in a leaf it was killing (v1) cannot die until thawed: thaw
   * until the agent is gone (the agent may finish one last write of
   * FROZEN after our first thaw; it runs no code after that). An adopted
   * agent is not our child: its pidfd says when it is gone. */
  struct pollfd pfd = {.fd = sb->pidfd, .events = POLLIN};
  for (int wait_ms = 10;; wait_ms = 50) { /* thaw only if it is slow to go */
    if (poll(&pfd, 1, wait_ms) != 0 && (pfd.revents || errno != EINTR))
      break;
    struct hutch_err ignored;
    if (sb->cg.ops && sb->cg.ops->thaw_all)
      sb->cg.ops->thaw_all(&sb->cg, &ignored);
  }

  /* Reaped by its pidfd, never by pid: an adopted agent is not our child,
   * and its pid may since name one that is. */
  siginfo_t si;
  while (waitid(P_PIDFD, (id_t)sb->pidfd, &si, WEXITED) < 0 && errno == EINTR)
    ;
  close(sb->pidfd);
}

/* The sandbox's slot, its cgroup and all below it, removed. */
static int remove_slot(struct hutch_sandbox *sb, struct hutch_err *err) {
  if (sb->cg.ops)
    hutch_cgroup_close(&sb->cg);
  if (!sb->root.ops && open_root(sb->shared, &sb->root, err) < 0)
    return -1;
  return hutch_slot_remove(&sb->root, sb->slot, err);
}

int hutch_shell_destroy(struct hutch_sandbox *sb, struct hutch_err *err) {
  int ret = 0;
  close_storage(sb);
  if (sb->pidfd < 0 && sb->child)
    sb->pidfd = pidfd_of(sb);
  if (!sb->cg.ops && sb->shared && cg_open(sb, &sb->cg, err) < 0)
    ret = -1;
  if (sb->conn_fd >= 0)
    close(sb->conn_fd);

  if (sb->pidfd >= 0)
    kill_agent(sb);
  if (sb->listen_path[0])
    unlink(sb->listen_path);

  /* No process is left: they were all in the agent's pid namespace. */
  if ((sb->cg.ops || sb->shared) && remove_slot(sb, err) < 0)
    ret = -1;

  if (sb->lock_fd >= 0)
    close(sb->lock_fd);
  hutch_shell_close_root(sb);
  free(sb);
  return ret;
}
