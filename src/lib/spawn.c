/* The sandbox's first process, from clone to the agent's exec.
 *
 * Order matters for what the sandbox can reach:
 *  1. clone into new mount, pid, ipc and uts namespaces, and join a
 *     network namespace the parent makes meanwhile (the costliest to make),
 *     all as host root in the host's user namespace: those namespaces
 *     belong to the host user namespace, so nothing inside can ever mount,
 *     change the network or the hostname, whatever capabilities it later
 *     holds in its own;
 *  2. build the root filesystem and pivot into it (rootfs.c);
 *  3. unshare a user namespace, which the parent maps onto this sandbox's
 *     own host id range: from here on, even "root" inside is an
 *     unprivileged host uid no other sandbox shares;
 *  4. install the sandbox's seccomp filter, which the agent runs under and
 *     every workload inherits;
 *  5. exec the agent from a read-only mount, with only the fds it needs.
 * The agent runs in the sandbox cgroup from its first instruction: v2 clones
 * straight into it; on v1 the child moves itself there before anything else. */
#include "spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/sched.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cleanup.h"
#include "gvisor.h"
#include "layout.h"
#include "seccomp_install.h"
#include "spawner.h"
#include "util.h"

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

/* Messages on the sync socket (SOCK_SEQPACKET: one message per send). */
#define SYNC_NETNS 'N'  /* parent -> child: the network namespace, as an fd */
#define SYNC_USERNS 'U' /* child -> parent: user namespace made, map it */
#define SYNC_GO 'G'     /* parent -> child: mapped and in the cgroup */
#define SYNC_ERROR 'E'  /* child -> parent: kind byte, then the message */

static pid_t clone3_pidfd(uint64_t flags, int cgroup_fd, int *pidfd) {
  struct clone_args args = {
      .flags = flags | CLONE_PIDFD,
      .pidfd = (uint64_t)(uintptr_t)pidfd,
      /* CLONE_PARENT's child signals the parent as the caller would. */
      .exit_signal = flags & CLONE_PARENT ? 0 : SIGCHLD,
  };
  if (cgroup_fd >= 0) {
    args.flags |= CLONE_INTO_CGROUP;
    args.cgroup = (uint64_t)cgroup_fd;
  }
  return (pid_t)syscall(SYS_clone3, &args, sizeof args);
}

static void __attribute__((noreturn)) child_fail(int sync, const struct hutch_err *err) {
  char msg[sizeof err->msg + 2];
  msg[0] = SYNC_ERROR;
  msg[1] = (char)('0' + err->kind);
  size_t n = strlen(err->msg);
  memcpy(msg + 2, err->msg, n);
  (void)!send(sync, msg, n + 2, MSG_NOSIGNAL);
  _exit(125);
}

/* Put the agent's fds in place: 0-2 /dev/null, the connection, the sandbox
 * cgroup's directories, the listening socket if any (its number in
 * *listen), the storage at HUTCH_AGENT_STORAGE_FD and the seccomp listener
 * at HUTCH_AGENT_NOTIFY_FD. Every other fd is closed at exec; *agent, the
 * binary to exec, is moved out of their way. */
static int child_fds(struct hutch_spawn *s, int *sync, int *listen, int notify, int *agent,
                     struct hutch_err *err) {
  int want[2 + HUTCH_CG_MAXH], n = 0;
  want[n++] = s->conn_fd;
  for (int i = 0; i < s->cg->nfd; i++)
    want[n++] = s->cg->fd[i];
  *listen = -1;
  if (s->listen_fd >= 0) {
    *listen = HUTCH_AGENT_CONN_FD + n;
    want[n++] = s->listen_fd;
  }

  /* Lift every fd still needed above the targets first, so that no dup2
   * clobbers one: a source, the storage, the listener, the agent's binary
   * (which fd numbers the kernel gave them differs from host to host). */
  int high[2 + HUTCH_CG_MAXH];
  for (int i = 0; i < n; i++)
    if ((high[i] = fcntl(want[i], F_DUPFD_CLOEXEC, 64)) < 0)
      return hutch_err_set(err, errno, "dup");
  int storage = fcntl(s->rootfs.storage_fd, F_DUPFD_CLOEXEC, 64);
  if (storage < 0)
    return hutch_err_set(err, errno, "dup");
  if ((*sync = fcntl(*sync, F_DUPFD_CLOEXEC, 64)) < 0)
    return hutch_err_set(err, errno, "dup");
  if ((*agent = fcntl(*agent, F_DUPFD_CLOEXEC, 64)) < 0)
    return hutch_err_set(err, errno, "dup");
  if (notify >= 0 && (notify = fcntl(notify, F_DUPFD_CLOEXEC, 64)) < 0)
    return hutch_err_set(err, errno, "dup");

  int null = open("/dev/null", O_RDWR | O_CLOEXEC);
  if (null < 0)
    return hutch_err_set(err, errno, "open /dev/null");
  for (int fd = 0; fd < 3; fd++)
    if (dup2(null, fd) < 0)
      return hutch_err_set(err, errno, "dup2");

  for (int i = 0; i < n; i++)
    if (dup2(high[i], HUTCH_AGENT_CONN_FD + i) < 0)
      return hutch_err_set(err, errno, "dup2");
  if (syscall(SYS_close_range, HUTCH_AGENT_CONN_FD + n, ~0U, CLOSE_RANGE_CLOEXEC) < 0)
    return hutch_err_set(err, errno, "close_range");
  if (dup2(storage, HUTCH_AGENT_STORAGE_FD) < 0)
    return hutch_err_set(err, errno, "dup2");
  if (notify >= 0 && dup2(notify, HUTCH_AGENT_NOTIFY_FD) < 0)
    return hutch_err_set(err, errno, "dup2");
  return 0;
}

static int child_join_netns(int sync, struct hutch_err *err) {
  char c = 0;
  union {
    struct cmsghdr h;
    char buf[CMSG_SPACE(sizeof(int))];
  } u;
  struct iovec iov = {&c, 1};
  struct msghdr m = {
      .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof u.buf};
  if (recvmsg(sync, &m, MSG_CMSG_CLOEXEC) != 1 || c != SYNC_NETNS)
    _exit(125); /* the parent is gone, or failed and will say why */
  struct cmsghdr *h = CMSG_FIRSTHDR(&m);
  if (!h || h->cmsg_type != SCM_RIGHTS || h->cmsg_len != CMSG_LEN(sizeof(int)))
    return hutch_err_set(err, EPROTO, "no network namespace from the parent");
  int fd;
  memcpy(&fd, CMSG_DATA(h), sizeof fd);
  int r = setns(fd, CLONE_NEWNET);
  close(fd);
  if (r < 0)
    return hutch_err_set(err, errno, "join the network namespace");
  return 0;
}

/* The ids of this process, by the system calls themselves: glibc's
 * setresuid, setresgid and setgroups apply the change to every thread it
 * knows of, and this process, cloned from one thread of a threaded one,
 * would signal and wait for threads that are not its own (forever, for
 * one that was starting or ending at the clone). */
static int set_ids(uid_t id) {
  if (syscall(SYS_setresgid, id, id, id) < 0)
    return -1;
  if (syscall(SYS_setresuid, id, id, id) < 0)
    return -1;
  return 0;
}

/* Become the sandbox's root host id before making the user namespace, so
 * that the namespace is owned by that id, not by host root: the kernel
 * charges per-user quotas (inotify instances and watches, message queues,
 * user namespaces, pending signals) up the chain of namespace owners, and a
 * namespace owned by host root would let one sandbox use up root's quota for
 * the whole host. Capabilities are kept through the id change so that
 * making the namespace does not depend on unprivileged user namespaces
 * being allowed; the new namespace grants its own set anyway. */
static int child_become_owner(uid_t base, struct hutch_err *err) {
  struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
  struct __user_cap_data_struct d[2];
  if (prctl(PR_SET_KEEPCAPS, 1, 0, 0, 0) < 0)
    return hutch_err_set(err, errno, "become the sandbox's host id %u", (unsigned)base);
  if (syscall(SYS_capget, &h, d) < 0)
    return hutch_err_set(err, errno, "become the sandbox's host id %u", (unsigned)base);
  if (set_ids(base) < 0)
    return hutch_err_set(err, errno, "become the sandbox's host id %u", (unsigned)base);

  d[0].effective = d[0].permitted;
  d[1].effective = d[1].permitted;
  if (syscall(SYS_capset, &h, d) < 0)
    return hutch_err_set(err, errno, "keep capabilities as host id %u", (unsigned)base);
  if (prctl(PR_SET_KEEPCAPS, 0, 0, 0, 0) < 0)
    return hutch_err_set(err, errno, "keep capabilities as host id %u", (unsigned)base);
  return 0;
}

/* *notify: the filter's listener, or -1 when the kernel cannot give one.
 * notify NULL: no filter (the gvisor tier, gvisor_fds). */
static int child_userns(uid_t base, int sync, int *notify, struct hutch_err *err) {
  char c;
  if (child_become_owner(base, err) < 0)
    return -1;
  if (unshare(CLONE_NEWUSER) < 0)
    return hutch_err_set(err, errno, "unshare user namespace");
  c = SYNC_USERNS;
  if (send(sync, &c, 1, MSG_NOSIGNAL) != 1)
    _exit(125); /* the parent is gone */

  /* The sandbox's filter, while the parent writes the id maps: it stays on
   * through the exec, so the agent runs under it and every workload
   * inherits it under its own. What follows up to the exec is allowed, and
   * refuses nothing: a refused call here would wait on a listener that
   * only the agent reads. Without a listener the refusals are not counted,
   * and the sandbox is as safe. */
  if (notify) {
    *notify = hutch_seccomp_install_sandbox_notify();
    if (*notify < 0 && hutch_seccomp_install_sandbox() < 0)
      return hutch_err_set(err, errno, "install the sandbox's seccomp filter");
  }

  if (recv(sync, &c, 1, 0) != 1 || c != SYNC_GO)
    _exit(125);
  if (set_ids(0) < 0)
    return hutch_err_set(err, errno, "become the sandbox's root");
  return 0;
}

/* The agent's descriptors are its sandbox's, not its creator's: a server
 * started with few (or a tenant's load on it) must not leave each agent
 * unable to make an exec's pipes. As many as a workload may have (65536,
 * within the kernel's fs.nr_open). */
static int agent_nofile(struct hutch_err *err) {
  struct rlimit nofile = {65536, 65536};
  char buf[24] = "";
  int fd = open("/proc/sys/fs/nr_open", O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    (void)!read(fd, buf, sizeof buf - 1);
    close(fd);
  }
  unsigned long nr_open = strtoul(buf, NULL, 10);
  if (nr_open && nr_open < nofile.rlim_max)
    nofile.rlim_cur = nofile.rlim_max = nr_open;
  /* Without CAP_SYS_RESOURCE (root of a container) it keeps the server's. */
  if (setrlimit(RLIMIT_NOFILE, &nofile) < 0 && errno != EPERM)
    return hutch_err_set(err, errno, "RLIMIT_NOFILE");
  return 0;
}

/* The first act of the sandbox's first process: close every fd it was
 * cloned with but those it uses. hutch serve makes sandboxes on several
 * threads at once, so this process starts with the fds of every other
 * create under way (their pipes, sync sockets, agents' connections); it
 * holds none of them while it waits for its parent, and none of theirs
 * waits on it. The exec closes the rest anyway (child_fds). A VLA: this
 * process may not allocate (sbx.c). */
static void child_close_others(const struct hutch_spawn *s, int sync) {
  const struct hutch_rootfs *r = &s->rootfs;
  size_t nbinds = 2 * r->cfg->nbinds, n = 0;
  int keep[7 + 2 * HUTCH_CG_MAXH + nbinds + r->cfg->nlayers];
  /* 0-2 stay until child_fds puts /dev/null there: a new fd never takes
   * their numbers meanwhile. */
  for (int fd = 0; fd < 3; fd++)
    keep[n++] = fd;
  keep[n++] = sync;
  keep[n++] = s->conn_fd;
  keep[n++] = s->listen_fd;
  keep[n++] = r->range_userns;
  for (int i = 0; i < s->cg->nfd; i++)
    keep[n++] = s->cg->fd[i];
  for (int i = 0; s->agent_cg != s->cg && i < s->agent_cg->nfd; i++)
    keep[n++] = s->agent_cg->fd[i];
  for (size_t i = 0; i < nbinds; i++)
    keep[n++] = r->bind_fds[i];
  for (size_t i = 0; i < r->cfg->nlayers; i++)
    keep[n++] = r->layer_fds[i];
  hutch_close_others(keep, n);
}

/* The gvisor tier's last steps. runsc makes namespaces and mounts, which
 * the namespaces made above (the host's) refuse to anything inside: it
 * gets a mount and a pid namespace of the sandbox's own user namespace,
 * nested in those, and runs as PID 1 there, with a /proc of its own. This
 * process stays outside as the sandbox's first process, holding only the
 * storage (layout.h), until runsc ends. runsc gets the connection as
 * stdin (it hands the container its stdio, and nothing else) and
 * /dev/null as stdout and stderr (it logs to its own file). No seccomp
 * filter of ours: runsc mounts and traces its own stubs (the ptrace
 * platform); the sentry and the gofer install filters of their own before
 * they serve the sandbox, and the workload runs on gVisor's kernel, never
 * the host's. */
/* runsc's descriptors, in the process that execs it: the connection as
 * stdin, /dev/null (*null) as stdout and stderr, the storage at
 * HUTCH_AGENT_STORAGE_FD, and every other one, sync and runsc's binary
 * among them (lifted to 64 and above first), closed at exec. 0, or -1 with
 * errno set. */
static int gvisor_fds(const struct hutch_spawn *s, int *sync, int *runsc, int *null) {
  int storage = fcntl(s->rootfs.storage_fd, F_DUPFD_CLOEXEC, 64);
  *runsc = fcntl(s->rootfs.runsc_fd, F_DUPFD_CLOEXEC, 64);
  *null = open("/dev/null", O_RDWR | O_CLOEXEC);
  *sync = fcntl(*sync, F_DUPFD_CLOEXEC, 64);
  if (*sync < 0 || storage < 0 || *runsc < 0 || *null < 0)
    return -1;

  if (dup2(s->conn_fd, 0) < 0)
    return -1;
  if (dup2(*null, 1) < 0)
    return -1;
  if (dup2(*null, 2) < 0)
    return -1;
  if (syscall(SYS_close_range, 3, ~0U, CLOSE_RANGE_CLOEXEC) < 0)
    return -1;
  if (dup2(storage, HUTCH_AGENT_STORAGE_FD) < 0)
    return -1;
  return 0;
}

/* In runsc's process, before its exec: it dies with the first process,
 * gets a /proc of its own pid namespace, and leaves the storage behind.
 * The storage is the first process's to hold, not runsc's: the sentry,
 * the gofer and the ptrace platform's processes that run the workload's
 * code would each have a way to the sandbox's storage beside the root
 * runsc serves them. 0, or -1 with errno set. */
static int runsc_prepare(void) {
  if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0)
    return -1;
  if (fcntl(HUTCH_AGENT_STORAGE_FD, F_SETFD, FD_CLOEXEC) < 0)
    return -1;
  return mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL);
}

/* The first process, once runsc is cloned, holds only the storage (and
 * /dev/null as stdin). 0, or -1 with errno set. */
static int hold_only_storage(int null) {
  if (dup2(null, 0) < 0)
    return -1;
  if (syscall(SYS_close_range, 3, HUTCH_AGENT_STORAGE_FD - 1, 0) < 0)
    return -1;
  if (syscall(SYS_close_range, HUTCH_AGENT_STORAGE_FD + 1, ~0U, 0) < 0)
    return -1;
  return 0;
}

static void __attribute__((noreturn)) gvisor_start(struct hutch_spawn *s, int sync) {
  struct hutch_err err = {0};
  int runsc, null;
  if (gvisor_fds(s, &sync, &runsc, &null) < 0) {
    hutch_err_set(&err, errno, "runsc's descriptors");
    child_fail(sync, &err);
  }
  umask(022);
  if (unshare(CLONE_NEWNS | CLONE_NEWPID) < 0) {
    hutch_err_set(&err, errno, "runsc's namespaces");
    child_fail(sync, &err);
  }

  /* The system call, not glibc's fork: see set_ids. */
  pid_t pid = (pid_t)syscall(SYS_clone, SIGCHLD, NULL, NULL, NULL, NULL);
  if (pid == 0) {
    if (runsc_prepare() < 0) {
      hutch_err_set(&err, errno, "runsc's /proc");
      child_fail(sync, &err);
    }
    hutch_gvisor_exec(runsc, s->rootfs.cfg->gvisor, s->rootfs.hostname, &err);
    child_fail(sync, &err);
  }
  if (pid < 0) {
    hutch_err_set(&err, errno, "clone runsc");
    child_fail(sync, &err);
  }

  /* The runsc child's exec closes the last copy of sync: the host's sign
   * that the sandbox runs. */
  if (hold_only_storage(null) < 0)
    _exit(125);
  int status;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR)
      _exit(125);
  _exit(WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
}

/* The agent's exec, its fds in place (child_fds), with its arguments: the
 * cgroup spec (numbered for the fds as the agent will see them), --build,
 * --listen. */
static void __attribute__((noreturn)) exec_agent(struct hutch_spawn *s, int sync, int notify) {
  struct hutch_err err = {0};
  int listen_fd, agent = s->rootfs.agent_fd;
  if (child_fds(s, &sync, &listen_fd, notify, &agent, &err) < 0)
    child_fail(sync, &err);
  umask(022);

  char spec[64];
  /* Re-number the spec for the fds as the agent will see them. */
  struct hutch_cgroup moved = *s->cg;
  for (int i = 0; i < moved.nfd; i++)
    moved.fd[i] = HUTCH_AGENT_CG_FD + i;
  hutch_cgroup_spec(&moved, spec, sizeof spec);

  char lfd[16];
  snprintf(lfd, sizeof lfd, "%d", listen_fd);
  char *argv[6] = {"hutch-agent", "--cgroup", spec};
  int argc = 3;
  if (s->build)
    argv[argc++] = "--build";
  if (listen_fd >= 0) {
    argv[argc++] = "--listen";
    argv[argc++] = lfd;
  }

  char *envp[] = {NULL};
  syscall(SYS_execveat, agent, "", argv, envp, AT_EMPTY_PATH);
  hutch_err_set(&err, errno, "exec hutch-agent");
  child_fail(sync, &err);
}

static void __attribute__((noreturn)) child_main(struct hutch_spawn *s, int sync) {
  struct hutch_err err = {0};
  int notify = -1;
  child_close_others(s, sync);
  umask(0);
  if (agent_nofile(&err) < 0)
    child_fail(sync, &err);
  /* Host root's supplementary groups must not follow it in. */
  if (syscall(SYS_setgroups, 0, NULL) < 0) {
    hutch_err_set(&err, errno, "setgroups");
    child_fail(sync, &err);
  }

  /* v1 has no CLONE_INTO_CGROUP: the child moves itself, first thing. */
  if (s->agent_cg->ops == &hutch_cgroup_v1_ops &&
      s->agent_cg->ops->enter_self(s->agent_cg, &err) < 0)
    child_fail(sync, &err);

  if (hutch_rootfs_prepare(&s->rootfs, &err) < 0)
    child_fail(sync, &err);
  if (child_join_netns(sync, &err) < 0)
    child_fail(sync, &err);
  if (hutch_rootfs_enter(&s->rootfs, &err) < 0)
    child_fail(sync, &err);

  /* A sandbox made ahead of demand is built at a lower priority (the
   * creating thread's, hutch serve's pool refills); the agent and all it
   * starts run at the process's. Raising it back takes CAP_SYS_NICE of the
   * host's user namespace: now, before the sandbox's own is entered. */
  if (getpriority(PRIO_PROCESS, 0) != s->nice && setpriority(PRIO_PROCESS, 0, s->nice) < 0) {
    hutch_err_set(&err, errno, "setpriority");
    child_fail(sync, &err);
  }

  bool gvisor = s->rootfs.cfg->isolation == HUTCH_ISOLATION_GVISOR;
  if (child_userns(s->rootfs.uid_base, sync, gvisor ? NULL : &notify, &err) < 0)
    child_fail(sync, &err);
  /* Set after the uid change, which clears it; the sync socket tells us the
   * parent was still there when it was set. */
  if (s->rootfs.cfg->die_with_parent && prctl(PR_SET_PDEATHSIG, SIGKILL) < 0) {
    hutch_err_set(&err, errno, "PR_SET_PDEATHSIG");
    child_fail(sync, &err);
  }

  if (gvisor)
    gvisor_start(s, sync);
  exec_agent(s, sync, notify);
}

static int write_map(pid_t pid, const char *file, unsigned base, struct hutch_err *err) {
  char path[64], map[64];
  snprintf(path, sizeof path, "/proc/%d/%s", (int)pid, file);
  snprintf(map, sizeof map, "0 %u %u\n", base, HUTCH_ID_RANGE);
  _cleanup_close_ int fd = open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0 || write_all(fd, map, strlen(map)) < 0)
    return hutch_err_set(err, errno, "write %s", path);
  return 0;
}

/* What the child said on the sync socket: 1 for the expected byte, 0 for end
 * of stream, -1 with err set for an error report or a broken socket. */
static int parent_recv(int sync, char expect, struct hutch_err *err) {
  char msg[sizeof err->msg + 2];
  ssize_t n = recv(sync, msg, sizeof msg - 1, 0);
  /* A child that failed and exited before reading what we sent it resets
   * the socket; the error is reported once, ahead of its last message,
   * which a second read still gets. */
  if (n < 0 && errno == ECONNRESET)
    n = recv(sync, msg, sizeof msg - 1, 0);
  if (n == 0)
    return 0;
  if (n < 0)
    return hutch_err_set(err, errno, "sandbox setup");
  if (n == 1 && msg[0] == expect)
    return 1;
  if (n >= 2 && msg[0] == SYNC_ERROR) {
    msg[n] = '\0';
    err->kind = (enum hutch_errkind)(msg[1] - '0');
    err->errnum = 0;
    snprintf(err->msg, sizeof err->msg, "%s", msg + 2);
    return -1;
  }
  return hutch_err_set(err, EPROTO, "sandbox setup: unexpected message");
}

/* The network namespace travels to the child as an fd (netns.c made it). */
static int send_netns(struct hutch_spawn *s, int fd, struct hutch_err *err) {
  char c = SYNC_NETNS;
  union {
    struct cmsghdr h;
    char buf[CMSG_SPACE(sizeof(int))];
  } u = {0};
  struct iovec iov = {&c, 1};
  struct msghdr m = {
      .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof u.buf};
  struct cmsghdr *h = CMSG_FIRSTHDR(&m);
  h->cmsg_level = SOL_SOCKET;
  h->cmsg_type = SCM_RIGHTS;
  h->cmsg_len = CMSG_LEN(sizeof(int));
  memcpy(CMSG_DATA(h), &fd, sizeof(int));
  ssize_t n = sendmsg(s->sync_fd, &m, MSG_NOSIGNAL);
  return n == 1 ? 0 : hutch_err_set(err, errno, "send the network namespace");
}

pid_t hutch_spawn_clone(struct hutch_spawn *s, int sync, uint64_t flags, int *pidfd) {
  int cgfd = s->agent_cg->ops == &hutch_cgroup_v2_ops ? s->agent_cg->fd[0] : -1;
  pid_t pid =
      clone3_pidfd(flags | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS, cgfd, pidfd);
  if (pid == 0)
    child_main(s, sync);
  return pid;
}

int hutch_spawn_start(struct hutch_spawn *s, struct hutch_err *err) {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
    return hutch_err_set(err, errno, "socketpair");
  s->pidfd = -1;
  /* The main thread's: PRIO_PROCESS with a pid names that one thread. */
  errno = 0;
  s->nice = getpriority(PRIO_PROCESS, (id_t)getpid());
  if (s->nice == -1 && errno)
    s->nice = 0;

  /* Through the spawner when there is one and it takes this one (1: it
   * does not), else cloned here. */
  int r = 1;
  if (s->rootfs.cfg->spawner)
    r = hutch_spawner_clone(s->rootfs.cfg->spawner, s, sv[1], err);
  if (r == 1) {
    s->pid = hutch_spawn_clone(s, sv[1], 0, &s->pidfd);
    r = 0;
    if (s->pid < 0)
      r = hutch_err_set(err, errno, "clone sandbox");
  }
  close(sv[1]);
  if (r < 0) {
    close(sv[0]);
    return -1;
  }
  s->sync_fd = sv[0];
  return 0;
}

void hutch_spawn_abort(struct hutch_spawn *s) {
  syscall(SYS_pidfd_send_signal, s->pidfd, SIGKILL, NULL, 0);
  waitpid(s->pid, NULL, 0);
  close(s->pidfd);
  close(s->sync_fd);
  s->pidfd = s->sync_fd = -1;
}

/* The network namespace sent, then the child's word that its user
 * namespace is made: parent_recv's answer (1 when it came). */
static int send_netns_await_userns(struct hutch_spawn *s, int netns_fd, struct hutch_err *err) {
  struct hutch_err send_err = {0};
  if (send_netns(s, netns_fd, &send_err) == 0)
    return parent_recv(s->sync_fd, SYNC_USERNS, err);

  /* The child may have failed first: then its reason is the one to give. */
  int r = parent_recv(s->sync_fd, SYNC_USERNS, err);
  if (r >= 0) {
    *err = send_err;
    r = -1;
  }
  return r;
}

/* The child's user namespace mapped onto the sandbox's host ids, the child
 * let go, and its exec of the agent seen. */
static int map_and_release(struct hutch_spawn *s, struct hutch_err *err) {
  uid_t base = s->rootfs.uid_base;
  if (write_map(s->pid, "uid_map", base, err) < 0)
    return -1;
  if (write_map(s->pid, "gid_map", base, err) < 0)
    return -1;

  char go = SYNC_GO;
  if (send(s->sync_fd, &go, 1, MSG_NOSIGNAL) != 1)
    return hutch_err_set(err, errno, "sandbox setup");

  /* The sync socket is close-on-exec: end of stream means the agent runs. */
  if (parent_recv(s->sync_fd, 0, err) != 0)
    return -1;
  return 0;
}

int hutch_spawn_finish(struct hutch_spawn *s, int netns_fd, struct hutch_err *err) {
  int r = send_netns_await_userns(s, netns_fd, err);
  if (r == 0)
    r = hutch_err_set(err, 0, "sandbox setup: child exited");
  if (r > 0)
    r = map_and_release(s, err);

  if (r < 0) {
    hutch_spawn_abort(s);
    return -1;
  }
  close(s->sync_fd);
  s->sync_fd = -1;
  return 0;
}

/* pid's user namespace given its id maps (from_uid and from_gid onto
 * count ids from to), and opened: its fd, or -1 with errno set. */
static int map_userns(pid_t pid, uid_t from_uid, gid_t from_gid, uid_t to, unsigned count) {
  char path[64], map[64];
  const char *files[] = {"uid_map", "gid_map"};
  unsigned from[] = {from_uid, from_gid};
  for (int i = 0; i < 2; i++) {
    snprintf(path, sizeof path, "/proc/%d/%s", (int)pid, files[i]);
    snprintf(map, sizeof map, "%u %u %u\n", from[i], (unsigned)to, count);
    _cleanup_close_ int m = open(path, O_WRONLY | O_CLOEXEC);
    if (m < 0 || write_all(m, map, strlen(map)) < 0)
      return -1;
  }

  snprintf(path, sizeof path, "/proc/%d/ns/user", (int)pid);
  return open(path, O_RDONLY | O_CLOEXEC);
}

int hutch_spawn_idmap_userns(uid_t from_uid, gid_t from_gid, uid_t to, unsigned count,
                             struct hutch_err *err) {
  int p[2];
  if (pipe2(p, O_CLOEXEC) < 0)
    return hutch_err_set(err, errno, "pipe");

  int pidfd = -1;
  pid_t pid = clone3_pidfd(CLONE_NEWUSER, -1, &pidfd);
  if (pid == 0) {
    /* Holding no other create's fds (hutch serve makes several sandboxes
     * at once: src/server/core/offload.h), until the parent
     * has what it needs: only the parent holds the write end, so its
     * close, or its death, ends the read. */
    char c;
    hutch_close_others(&p[0], 1);
    (void)!read(p[0], &c, 1);
    _exit(0);
  }

  close(p[0]);
  if (pid < 0) {
    close(p[1]);
    return hutch_err_set(err, errno, "clone for idmap");
  }

  int fd = map_userns(pid, from_uid, from_gid, to, count);
  int e = errno;
  close(p[1]);
  waitpid(pid, NULL, 0);
  close(pidfd);
  if (fd < 0)
    return hutch_err_set(err, e, "idmap user namespace");
  return fd;
}
