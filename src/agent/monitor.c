/* Escape attempts: the refused syscalls of the sandbox, counted.
 *
 * The sandbox's seccomp filter (src/lib/seccomp_profile.c) hands every call
 * it refuses on purpose to its listener instead of failing it at once; the
 * first process gave that listener to the agent (HUTCH_AGENT_NOTIFY_FD).
 * Each notification is answered EPERM, the answer the filter gives without
 * a listener, and counted: per syscall for the sandbox, and per exec (its
 * verdict) by the cgroup leaf of the calling process. The
 * host hears the counts as an EVENT on stream 0, at most once a second
 * (docs/protocol.md).
 *
 * What the listener could do, and why only the agent holds it: an answer
 * with SECCOMP_USER_NOTIF_FLAG_CONTINUE would let the refused call run.
 * The fd is close-on-exec and every process the agent forks closes it
 * first thing (agent_fork), so no workload ever has it; the agent is not
 * dumpable, so its fds are not reachable through /proc or ptrace. The agent
 * never sends CONTINUE.
 *
 * A caller waits until it is answered, so the agent itself must never make
 * a refused call (it would wait on itself): it makes none, and the tests
 * run every operation through it. A workload that loops on refused calls
 * costs the agent two ioctls each, in the sandbox's own cgroup. */
#include <errno.h>
#include <fcntl.h>
#include <linux/seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "agent.h"
#include "layout.h"
#include "seccomp_install.h"
#include "util.h"

/* Reports to the host are held back to one per this many ms. */
#define REPORT_INTERVAL_MS 1000

/* Whether thread tid is in an exec's leaf. The list is read from the
 * cgroup, which gives ids in the agent's pid namespace: /proc would not
 * do, since it hides the workloads' processes from the agent (hidepid,
 * rootfs.c). */
static bool leaf_holds(const struct hutch_cgroup *leaf, pid_t tid) {
  const char *file = leaf->ops == &hutch_cgroup_v2_ops ? "cgroup.threads" : "tasks";
  int fd = openat(leaf->fd[0], file, O_RDONLY | O_CLOEXEC);
  FILE *f = fd >= 0 ? fdopen(fd, "r") : NULL;
  if (!f) {
    if (fd >= 0)
      close(fd);
    return false;
  }
  int id;
  bool found = false;
  while (!found && fscanf(f, "%d", &id) == 1)
    found = id == tid;
  fclose(f);
  return found;
}

/* The exec that made the call: its own process (the usual case), else the
 * one whose leaf holds the calling thread. A process that has left every
 * exec (an orphan of one that ended) counts for the sandbox only. */
static struct job *job_of(struct agent *a, pid_t tid) {
  for (struct job *j = a->jobs; j; j = j->next)
    if (j->kind == JOB_EXEC && !j->done && j->pid == tid)
      return j;
  for (struct job *j = a->jobs; j; j = j->next)
    if (j->kind == JOB_EXEC && !j->done && j->leaf.cg.nfd > 0 && leaf_holds(&j->leaf.cg, tid))
      return j;
  return NULL;
}

bool monitor_on(const struct agent *a) {
  return a->monitor.timer.fd >= 0;
}

static void count(struct agent *a, const char *name) {
  struct monitor *m = &a->monitor;
  m->total++;
  m->dirty = true;
  for (size_t i = 0; i < m->ncalls; i++)
    if (strcmp(m->calls[i].name, name) == 0) {
      m->calls[i].n++;
      return;
    }
  /* Names come from the filter's table, so the list stays that short. */
  m->calls = xrealloc(m->calls, (m->ncalls + 1) * sizeof *m->calls);
  m->calls[m->ncalls++] = (struct escape_count){name, 1};
}

static void arm(struct monitor *m, uint64_t ms) {
  struct itimerspec its = {.it_value = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000}};
  if (timerfd_settime(m->timer.fd, 0, &its, NULL) == 0)
    m->timer_armed = ms != 0;
}

/* Send the counts now if they changed, and hold the next report back. */
static void report(struct agent *a) {
  struct monitor *m = &a->monitor;
  if (!m->dirty || a->detached || m->timer_armed)
    return;
  json_t *ev = monitor_json(a);
  json_object_set_new(ev, "event", json_string("escape_attempts"));
  agent_send_json(a, HUTCH_F_EVENT, 0, 0, ev);
  m->dirty = false;
  arm(m, REPORT_INTERVAL_MS);
}

static void on_timer(struct agent *a, struct watch *w, uint32_t events) {
  (void)events;
  uint64_t expirations;
  (void)!read(w->fd, &expirations, sizeof expirations);
  a->monitor.timer_armed = false;
  report(a);
}

/* One notification per readiness: RECV blocks when none is waiting, and
 * epoll (level-triggered) says so again while more are. A caller killed
 * between the two makes RECV fail with ENOENT, never block. */
static void on_notify(struct agent *a, struct watch *w, uint32_t events) {
  if (events & (EPOLLHUP | EPOLLERR)) {
    agent_close_watch(a, w); /* no filter left to listen to */
    return;
  }
  struct seccomp_notif req;
  memset(&req, 0, sizeof req); /* the kernel refuses a request that is not zeroed */
  if (ioctl(w->fd, SECCOMP_IOCTL_NOTIF_RECV, &req) < 0)
    return;
  /* Found while the caller waits for its answer: it cannot have left
   * its cgroup (or exited) yet. */
  struct job *j = job_of(a, (pid_t)req.pid);
  struct seccomp_notif_resp resp = {.id = req.id, .error = -EPERM};
  /* ENOENT: the caller is gone already; it is counted all the same. */
  (void)ioctl(w->fd, SECCOMP_IOCTL_NOTIF_SEND, &resp);
  const char *name = hutch_seccomp_refused_name(req.data.arch, req.data.nr);
  count(a, name ? name : "other");
  if (j)
    j->escape_attempts++;
  report(a);
}

int monitor_start(struct agent *a, struct hutch_err *err) {
  struct monitor *m = &a->monitor;
  m->w.fd = -1;
  m->timer.fd = -1;
  if (fcntl(HUTCH_AGENT_NOTIFY_FD, F_SETFD, FD_CLOEXEC) < 0) {
    if (errno == EBADF)
      return 0; /* the kernel gave no listener: nothing is counted */
    return hutch_err_set(err, errno, "seccomp listener");
  }
  m->timer.fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
  if (m->timer.fd < 0)
    return hutch_err_set(err, errno, "timerfd");
  m->w.fd = HUTCH_AGENT_NOTIFY_FD;
  m->w.ready = on_notify;
  m->timer.ready = on_timer;
  agent_watch(a, &m->w, EPOLLIN);
  agent_watch(a, &m->timer, EPOLLIN);
  return 0;
}

json_t *monitor_json(const struct agent *a) {
  const struct monitor *m = &a->monitor;
  if (!monitor_on(a))
    return json_pack("{s:n, s:n}", "total", "syscalls");
  json_t *calls = json_object();
  for (size_t i = 0; i < m->ncalls; i++)
    json_object_set_new(calls, m->calls[i].name, json_integer((json_int_t)m->calls[i].n));
  return json_pack("{s:I, s:o}", "total", (json_int_t)m->total, "syscalls", calls);
}
