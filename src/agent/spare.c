/* The spare: one process started ahead of the next exec, so that an exec in
 * an idle sandbox costs a message and an execve instead of a leaf cgroup,
 * a fork, the move into the leaf, the drop to the sandbox user and the
 * seccomp filter (more than half of an exec's cost in the agent).
 *
 * Its bounds. It exists only while the sandbox is idle: no job, and no
 * process but the agent (pids.current of the sandbox is 1). So it never
 * takes a pid or memory that a workload's limits count on: the exec that
 * takes it is the process it stood in for, and any other process the agent
 * must start while it waits (a file worker, an exec the spare cannot run)
 * makes it go first. It is set up exactly as child_run() sets up an exec
 * (same leaf, ids, bounding set, securebits, rlimits, filter) and runs as
 * the sandbox user, never root: an exec as root is run the slow way. It
 * makes itself not dumpable, so no workload can trace it or open its /proc
 * files, and it holds no fd of the agent's but its socket. A workload can
 * kill it (same uid), which costs only that workload's own sandbox a
 * slower exec. A spare that dies before it is taken turns spares off for
 * the agent's life, so that a setup that cannot work is not retried on
 * every loop turn.
 *
 * A sandbox that can outlive its client (a server's, whose agent listens
 * for the next one) gets a new spare each time it falls idle; a one-shot
 * sandbox (hutch run) only the first, which overlaps its setup with the
 * client's first request: a second would only slow the teardown. A
 * server's sandbox gets its first SPARE_FIRST_MS after its start, or when
 * its first job ends: one made and deleted at once (a probe, a pool's
 * churn, a create that fails the client's checks) then costs no leaf and no
 * fork, and one that lives has it long before an agent's first exec
 * usually comes (that exec runs the slow way if it comes sooner).
 *
 * A server's sandbox spawns its spares rather than forking them (on cgroup
 * v1): the agent starts its own binary again (/proc/self/exe --spare:
 * spare_main) from a child that shares its memory until that exec, the
 * agent waiting (CLONE_VFORK, as posix_spawn does). A fork would
 * write-protect every page the agent has written, and the agent writes a
 * dozen or more for each exec (stack, heap, static buffers): each would
 * then cost a page fault on the next exec's path, in the agent and again
 * in the spare when taken, where a fault is dear (about 20 us on a PVM
 * guest). The spare's own start (an exec, its binary's first pages) comes
 * while the sandbox is idle. What it needs from the agent comes in its
 * argv (the bounding set) and as fds above any the agent has: its socket,
 * then the leaf's directories. Between its exec and its drop to the
 * sandbox user it is root of the sandbox with the agent's bounding set, as
 * a fork of the agent is, while the agent is the only process
 * (sandbox_idle); it makes itself not dumpable first. Without /proc there
 * is nothing to exec: it dies, and spares are off, as when a fork fails.
 * Forked still: a one-shot sandbox's only spare (its first exec waits for
 * the spare's setup, which a fork finishes sooner, and the shared pages
 * cost that one exec alone), and on cgroup v2, where a fork is born in its
 * leaf (CLONE_INTO_CGROUP) and a spawned spare would have to move there, a
 * migration that takes the host-wide lock the clone avoids (glibc 2.36
 * cannot spawn into a cgroup; on v1 every spare moves either way). Under
 * gVisor there is no spare (no pids controller: agent_alone() never
 * holds).
 *
 * A spare that waits AGENT_IDLE_MS untaken ends, and the next one is made
 * only when a job ends again: a sandbox idle between an agent's turns then
 * holds one process and one memory cgroup instead of two. A memory cgroup
 * costs the kernel a slot for every memory-aware shrinker on the host (one
 * per mounted filesystem: about ten per sandbox), so with thousands of
 * sandboxes the idle spares' leaves would cost more than the rest of the
 * sandbox. The exec after a long idle runs the slow way (its own leaf and
 * fork: a few milliseconds more, most of it the host-wide cgroup lock), so
 * the wait is long enough to span an agent's turn (a model's answer). */
#include <assert.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent.h"
#include "layout.h"
#include "util.h"

/* How long an exec waits for a spare still setting up (normally well under
 * a millisecond) before it ends it and forks its own process. */
#define SPARE_READY_WAIT_MS 100

/* The stack spawn()'s child runs on until its exec: three calls deep. */
#define SPARE_STACK (16u << 10)

static bool sandbox_idle(struct agent *a) {
  for (struct job *j = a->jobs; j; j = j->next)
    if (!j->done)
      return false;
  return agent_alone(a);
}

static void forget(struct agent *a) {
  struct spare *s = &a->spare;
  close(s->sock);
  leaf_put(a, &s->leaf);
  *s = (struct spare){.sock = -1};
}

/* The spare's setup (child_spare): leaf is the cgroup it joins, NULL when
 * it was born there or has none. */
static struct child_plan spare_plan(const struct hutch_cgroup *leaf, uint64_t bset, bool guest) {
  return (struct child_plan){
      .kind = JOB_EXEC,
      .uid = HUTCH_USER_UID,
      .gid = HUTCH_USER_GID,
      .leaf = leaf,
      .stdin_fd = -1,
      .stdout_fd = -1,
      .stderr_fd = -1,
      .pty_slave = -1,
      .report_fd = -1,
      .bset = bset,
      .guest_kernel = guest,
  };
}

/* A forked spare (a one-shot sandbox's, or on cgroup v2, where it is born
 * in its leaf). */
static pid_t fork_spare(struct agent *a, const struct hutch_cgroup *leaf, int sock) {
  struct child_plan plan = spare_plan(leaf->ops == &hutch_cgroup_v1_ops ? leaf : NULL, a->bset,
                                      a->cg.ops == &hutch_cgroup_none_ops);
  pid_t pid = agent_fork(a, leaf);
  if (pid == 0)
    child_spare(&plan, sock);
  return pid;
}

/* The child of spawn(): the agent's memory is its own until the exec, with
 * the agent waiting (CLONE_VFORK), so it only moves fds and execs. */
struct spawn_plan {
  int from[1 + HUTCH_CG_MAXH], n, base;
  bool close_notify;
  char **argv;
};

static int spawned(void *arg) {
  const struct spawn_plan *s = arg;
  char *envp[] = {NULL};
  for (int i = 0; i < s->n; i++)
    if (dup2(s->from[i], s->base + i) < 0)
      _exit(125);
  /* The seccomp listener: no process but the agent holds it (job.c). */
  if (s->close_notify)
    close(HUTCH_AGENT_NOTIFY_FD);
  execve("/proc/self/exe", s->argv, envp);
  _exit(127);
}

/* Start the spare (cgroup v1; see above): its socket at fd base, the
 * leaf's directories right after it; base is above every fd they come
 * from, so that no dup2 overwrites the source of a later one. Every signal
 * stays blocked in the child until the spare resets its mask (child.c):
 * none may run a handler on the agent's memory. */
static pid_t spawn(struct agent *a, const struct hutch_cgroup *leaf, int sock) {
  struct spawn_plan plan = {
      .n = 1, .from = {sock}, .base = sock, .close_notify = a->monitor.w.fd >= 0};
  for (int i = 0; i < leaf->nfd; i++)
    plan.from[plan.n++] = leaf->fd[i];

  for (int i = 0; i < plan.n; i++)
    if (plan.from[i] > plan.base)
      plan.base = plan.from[i];
  if (plan.base < HUTCH_AGENT_NOTIFY_FD)
    plan.base = HUTCH_AGENT_NOTIFY_FD;
  plan.base++;

  char base_s[16], nfd_s[16], bset_s[24];
  snprintf(base_s, sizeof base_s, "%d", plan.base);
  snprintf(nfd_s, sizeof nfd_s, "%d", plan.n - 1);
  snprintf(bset_s, sizeof bset_s, "%llu", (unsigned long long)a->bset);
  char *argv[] = {"hutch-agent", "--spare", base_s, nfd_s, bset_s, NULL};
  plan.argv = argv;

  /* The child's stack: this frame's, unused while the agent waits. */
  static_assert(SPARE_STACK % 16 == 0, "a stack 16-byte aligned");
  _Alignas(16) char stack[SPARE_STACK];
  sigset_t all, old;
  sigfillset(&all);
  sigprocmask(SIG_SETMASK, &all, &old);
  pid_t pid = clone(spawned, stack + sizeof stack, CLONE_VM | CLONE_VFORK | SIGCHLD, &plan);
  sigprocmask(SIG_SETMASK, &old, NULL);
  return pid;
}

void spare_main(int argc, char **argv) {
  /* Not dumpable before anything else: its exec made it so again. Named
   * as the agent's other processes are ("exe" after its exec). */
  if (prctl(PR_SET_DUMPABLE, 0) < 0)
    _exit(125);
  if (prctl(PR_SET_NAME, "hutch-agent") < 0)
    _exit(125);

  uint64_t base, nfd, bset;
  if (argc != 5 || !parse_u64(argv[2], &base) || base < 3 || base > 1 << 20 ||
      !parse_u64(argv[3], &nfd) || nfd < 1 || nfd > HUTCH_CG_MAXH || !parse_u64(argv[4], &bset)) {
    fprintf(stderr, "hutch-agent: --spare is for the agent's own use\n");
    _exit(125);
  }

  struct hutch_cgroup leaf = {.ops = &hutch_cgroup_v1_ops, .nfd = (int)nfd};
  for (int i = 0; i < leaf.nfd; i++)
    leaf.fd[i] = (int)base + 1 + i;
  memset(leaf.ctl, -1, sizeof leaf.ctl);

  /* The agent's bounding set, what is left to drop (child.c), as a fork
   * has it. Only the agent writes these numbers; anyone else who runs the
   * binary so has no capability to keep or lose. */
  struct child_plan plan = spare_plan(&leaf, bset, false);
  child_spare(&plan, (int)base);
}

void spare_keep(struct agent *a) {
  struct spare *s = &a->spare;
  if (a->first_spare_ns) {
    if (now_ns() < a->first_spare_ns)
      return;
    a->first_spare_ns = 0;
  }

  if (s->pid > 0)
    a->maybe_idle = false; /* what ended meanwhile found one waiting */
  if (s->pid > 0 || !a->maybe_idle || a->spare_off || (a->spares_made > 0 && a->listen_w.fd < 0))
    return;
  a->maybe_idle = false; /* until the next job or orphan ends */
  if (!sandbox_idle(a))
    return;

  a->spares_made++;
  struct hutch_err err;
  int sv[2];
  if (leaf_get(a, &s->leaf, &err) < 0) {
    a->spare_off = true;
    return;
  }
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
    s->sock = -1;
    forget(a);
    a->spare_off = true;
    return;
  }

  pid_t pid = a->listen_w.fd >= 0 && s->leaf.cg.ops == &hutch_cgroup_v1_ops
                  ? spawn(a, &s->leaf.cg, sv[1])
                  : fork_spare(a, &s->leaf.cg, sv[1]);
  close(sv[1]);
  s->sock = sv[0];
  if (pid < 0) {
    forget(a);
    a->spare_off = true;
    return;
  }

  s->pid = pid;
  s->born_ns = now_ns();
}

int spare_expire(struct agent *a) {
  struct spare *s = &a->spare;
  if (s->pid <= 0 && a->first_spare_ns) {
    uint64_t now = now_ns();
    return now < a->first_spare_ns ? (int)((a->first_spare_ns - now + 999999) / 1000000) : 0;
  }
  if (s->pid <= 0)
    return -1;
  uint64_t age_ms = (now_ns() - s->born_ns) / 1000000;
  if (age_ms < AGENT_IDLE_MS)
    return (int)(AGENT_IDLE_MS - age_ms);
  spare_drop(a);
  if (a->kept.cg.ops) /* its leaf, or an older one: not kept past the spare */
    leaf_remove(a, &a->kept);
  return -1;
}

/* Wait for the spare's "R": it is set up, its filter installed. */
static bool wait_ready(struct spare *s) {
  if (s->ready)
    return true;
  struct pollfd p = {s->sock, POLLIN, 0};
  char c = 0;
  int r;
  do
    r = poll(&p, 1, SPARE_READY_WAIT_MS);
  while (r < 0 && errno == EINTR);
  s->ready = r == 1 && read(s->sock, &c, 1) == 1 && c == 'R';
  return s->ready;
}

static size_t encode(const struct hutch_exec_req *req, char *buf) {
  struct spare_msg h = {.has_stdin = req->stdin_open};
  size_t n = sizeof h;
  const char *cwd = req->cwd ? req->cwd : "";
  size_t len = strlen(cwd) + 1;
  if (n + len > SPARE_MSG_MAX)
    return 0;
  memcpy(buf + n, cwd, len);
  n += len;
  char **lists[] = {req->argv, req->env};
  uint32_t *counts[] = {&h.argc, &h.envc};
  for (size_t l = 0; l < ARRAY_SIZE(lists); l++)
    for (char **p = lists[l]; p && *p; p++) {
      len = strlen(*p) + 1;
      if (n + len > SPARE_MSG_MAX)
        return 0;
      memcpy(buf + n, *p, len);
      n += len;
      (*counts[l])++;
    }
  memcpy(buf, &h, sizeof h);
  return n;
}

pid_t spare_take(struct agent *a, struct job *j, const struct hutch_exec_req *req, int in, int out,
                 int err, int report) {
  static char buf[SPARE_MSG_MAX];
  struct spare *s = &a->spare;
  if (s->pid <= 0)
    return -1;

  size_t n =
      req->pty || (req->user && strcmp(req->user, HUTCH_USER_NAME) != 0) ? 0 : encode(req, buf);
  if (n == 0 || !wait_ready(s)) {
    spare_drop(a);
    return -1;
  }

  int fds[4] = {in >= 0 ? in : out, out, err, report};
  char cbuf[CMSG_SPACE(sizeof fds)] = {0};
  struct iovec iov = {buf, n};
  struct msghdr mh = {
      .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof cbuf};
  struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof fds);
  memcpy(CMSG_DATA(c), fds, sizeof fds);

  if (sendmsg(s->sock, &mh, MSG_NOSIGNAL) != (ssize_t)n) {
    spare_drop(a);
    return -1;
  }

  pid_t pid = s->pid;
  j->leaf = s->leaf;
  close(s->sock);
  *s = (struct spare){.sock = -1};
  return pid;
}

bool spare_reaped(struct agent *a, pid_t pid) {
  if (pid <= 0 || pid != a->spare.pid)
    return false;
  forget(a);
  a->spare_off = true;
  return true;
}

void spare_drop(struct agent *a) {
  struct spare *s = &a->spare;
  if (s->pid <= 0)
    return;
  kill(s->pid, SIGKILL);
  while (waitpid(s->pid, NULL, 0) < 0 && errno == EINTR)
    ;
  forget(a);
}
