/* The forked child of a job, from fork to exec (or to the file operation).
 *
 * Every workload gets, in this order: its own cgroup leaf and cgroup
 * namespace; its own session (and a controlling PTY when asked); core dumps
 * off and a bounded number of fds; an empty capability bounding set and
 * securebits that keep uid 0 from ever regaining capabilities; the sandbox
 * user's ids with no supplementary groups; no capabilities at all;
 * no_new_privs; and last the seccomp filter, so that nothing above has to
 * be allowed by it. Every fd of the agent is closed at exec. */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <linux/capability.h>
#include <linux/securebits.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "agent.h"
#include "layout.h"
#include "seccomp_install.h"
#include "util.h"

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

static void __attribute__((noreturn))
fail(const struct child_plan *p, int code, const char *fmt, const char *arg) {
  char msg[256];
  int e = errno;
  int n = snprintf(msg, sizeof msg, fmt, arg);
  if (e && n > 0 && (size_t)n < sizeof msg)
    snprintf(msg + n, sizeof msg - (size_t)n, ": %s", strerror(e));

  if (p->kind == JOB_FILE) {
    /* The worker reports through its result, as JSON. */
    json_t *j = json_pack("{s:{s:s, s:o}}", "error", "code", "sandbox_error", "message",
                          hutch_json_text(msg));
    char *s = json_dumps(j, JSON_COMPACT);
    if (s)
      (void)!write(p->report_fd, s, strlen(s));
  } else {
    (void)!write(p->report_fd, msg, strlen(msg));
  }

  _exit(code);
}

static void stdio(const struct child_plan *p) {
  if (p->pty_slave >= 0) {
    if (ioctl(p->pty_slave, TIOCSCTTY, 0) < 0)
      fail(p, 125, "%s", "set up the PTY");
    if (fchown(p->pty_slave, p->uid, HUTCH_TTY_GID) < 0)
      fail(p, 125, "%s", "set up the PTY");
    for (int fd = 0; fd < 3; fd++)
      if (dup2(p->pty_slave, fd) < 0)
        fail(p, 125, "%s", "dup2");
    return;
  }

  int in = p->stdin_fd >= 0 ? p->stdin_fd : open("/dev/null", O_RDONLY | O_CLOEXEC);
  int err = p->stderr_fd >= 0 ? p->stderr_fd : open("/dev/null", O_WRONLY | O_CLOEXEC);
  if (in < 0 || err < 0)
    fail(p, 125, "%s", "set up stdio");
  if (dup2(in, 0) < 0)
    fail(p, 125, "%s", "set up stdio");
  if (dup2(p->stdout_fd, 1) < 0)
    fail(p, 125, "%s", "set up stdio");
  if (dup2(err, 2) < 0)
    fail(p, 125, "%s", "set up stdio");
}

static void limits(const struct child_plan *p) {
  struct rlimit core = {0, 0}, nofile = {1024, 65536}, cur;
  if (getrlimit(RLIMIT_NOFILE, &cur) == 0 && cur.rlim_max < nofile.rlim_max)
    nofile.rlim_max = cur.rlim_max;
  if (nofile.rlim_cur > nofile.rlim_max)
    nofile.rlim_cur = nofile.rlim_max;
  if (setrlimit(RLIMIT_CORE, &core) < 0)
    fail(p, 125, "%s", "set rlimits");
  if (setrlimit(RLIMIT_NOFILE, &nofile) < 0)
    fail(p, 125, "%s", "set rlimits");

  /* A workload, not the agent, is what the OOM killer should pick. */
  int fd = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
  if (fd >= 0) {
    (void)!write(fd, "500", 3);
    close(fd);
  }
}

/* Every capability goes (bounding set, permitted, effective), and root
 * of the sandbox gains none at exec (SECBIT_NOROOT). A build step's root
 * (p->caps, hutch-agent --build) keeps those of a Dockerfile's RUN: in
 * the bounding set and permitted, without NOROOT, so that its execs keep
 * them; no_new_privs, set with the seccomp filter, still forbids any
 * other at exec. */
static void drop_privileges(const struct child_plan *p) {
  uint64_t keep = p->uid == 0 ? p->caps : 0;

  /* A fork has its parent's bounding set, and the agent's holds only
   * p->bset (main.c): the rest is gone already, one call each is enough
   * for what is left (6 calls, not 64, on every exec's path). */
  for (int cap = 0; cap <= 63; cap++)
    if ((p->bset & ~keep & (1ull << cap)) && prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 &&
        errno != EINVAL)
      fail(p, 125, "%s", "drop the bounding set");

  /* A build step's root that becomes another user (su, runuser) loses
   * its capabilities, as in Docker: no NO_SETUID_FIXUP then. */
  unsigned long bits = SECBIT_NO_SETUID_FIXUP_LOCKED | SECBIT_KEEP_CAPS_LOCKED |
                       SECBIT_NO_CAP_AMBIENT_RAISE | SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED |
                       SECBIT_NOROOT_LOCKED;
  if (!p->guest_kernel &&
      prctl(PR_SET_SECUREBITS, bits | (keep ? 0 : SECBIT_NOROOT | SECBIT_NO_SETUID_FIXUP), 0, 0,
            0) < 0)
    fail(p, 125, "%s", "set securebits");

  if (setgroups(0, NULL) < 0)
    fail(p, 125, "%s", "set the sandbox user's ids");
  if (setresgid(p->gid, p->gid, p->gid) < 0)
    fail(p, 125, "%s", "set the sandbox user's ids");
  if (setresuid(p->uid, p->uid, p->uid) < 0)
    fail(p, 125, "%s", "set the sandbox user's ids");

  struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
  struct __user_cap_data_struct d[2] = {
      {(uint32_t)keep, (uint32_t)keep, 0},
      {(uint32_t)(keep >> 32), (uint32_t)(keep >> 32), 0},
  };
  if (syscall(SYS_capset, &h, d) < 0)
    fail(p, 125, "%s", "drop capabilities");
}

/* The account's home: its own, or hutch's defaults by uid. */
static const char *home_of(const struct child_plan *p) {
  if (p->who)
    return p->who->home;
  return p->uid == 0 ? "/root" : HUTCH_USER_HOME;
}

/* The account's name: its own, or hutch's defaults by uid. */
static const char *name_of(const struct child_plan *p) {
  if (p->who && p->who->name[0])
    return p->who->name;
  return p->uid == 0 ? "root" : HUTCH_USER_NAME;
}

static char **workload_env(const struct child_plan *p) {
  const struct hutch_exec_req *r = p->req;
  const char *name = name_of(p);
  char home[300], user[48], logname[48];
  snprintf(home, sizeof home, "HOME=%s", home_of(p));
  snprintf(user, sizeof user, "USER=%s", name);
  snprintf(logname, sizeof logname, "LOGNAME=%s", name);

  char *defaults[] = {
      "PATH=" HUTCH_DEFAULT_PATH,
      home,
      user,
      logname,
      "SHELL=/bin/bash",
      "LANG=C.UTF-8",
      r->pty ? "TERM=xterm-256color" : "TERM=dumb",
  };
  size_t nreq = 0;
  while (r->env && r->env[nreq])
    nreq++;

  char **env = xcalloc(ARRAY_SIZE(defaults) + nreq + 1, sizeof(char *));
  size_t n = 0;
  for (size_t i = 0; i < ARRAY_SIZE(defaults); i++) {
    size_t klen = strcspn(defaults[i], "=") + 1;
    bool overridden = false;
    for (size_t k = 0; k < nreq; k++)
      overridden |= strncmp(r->env[k], defaults[i], klen) == 0;
    if (!overridden)
      env[n++] = defaults[i];
  }
  for (size_t k = 0; k < nreq; k++)
    env[n++] = r->env[k];

  return env;
}

/* execvpe() searches the agent's PATH; a workload's own PATH is what counts. */
static void __attribute__((noreturn)) exec_in_path(const struct child_plan *p, char **env) {
  const char *file = p->req->argv[0], *path = HUTCH_DEFAULT_PATH;
  if (strchr(file, '/')) {
    execve(file, p->req->argv, env);
    fail(p, errno == ENOENT ? 127 : 126, "exec %s", file);
  }
  for (char **e = env; *e; e++)
    if (strncmp(*e, "PATH=", 5) == 0)
      path = *e + 5;
  int denied = 0;
  for (const char *d = path; *d;) {
    size_t n = strcspn(d, ":");
    char full[4096];
    snprintf(full, sizeof full, "%.*s/%s", (int)n, n ? d : ".", file);
    execve(full, p->req->argv, env);
    if (errno == EACCES)
      denied = EACCES;
    else if (errno != ENOENT && errno != ENOTDIR)
      fail(p, 126, "exec %s", full);
    d += n + (d[n] == ':');
  }
  errno = denied ? EACCES : ENOENT;
  fail(p, denied ? 126 : 127, "exec %s", file);
}

/* The last fd close_range(2) reaches: every fd there can be. Not ~0U,
 * which gVisor's kernel of 2022 (the gvisor tier) refuses with EINVAL and
 * so left every fd of the agent's open in its workers. */
#define LAST_FD INT_MAX

/* A worker never execs, so close-on-exec does not apply: it closes every fd
 * of the agent's itself (other streams' pipes among them, which would
 * otherwise never see end of file), keeping stdio and its result pipe. */
static void close_agent_fds(struct child_plan *p) {
  if (p->kind == JOB_EXEC) {
    syscall(SYS_close_range, 3, LAST_FD, CLOSE_RANGE_CLOEXEC);
    return;
  }
  if (p->report_fd != 3 && dup2(p->report_fd, 3) < 0)
    fail(p, 125, "%s", "dup2");
  p->report_fd = 3;
  syscall(SYS_close_range, 4, LAST_FD, 0);
}

/* Every disposition back to its default: ignored signals survive exec,
 * and whatever hutch's caller ignored (a shell's background job ignores
 * SIGINT) must not make the workload deaf to it. The agent reset them all
 * at its start (child_reset_signals, from main.c) and ignores only
 * SIGPIPE since: a fork has the same, so SIGPIPE and the mask are all
 * that is left to reset here, on every exec's path. */
void child_reset_signals(void) {
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, NULL);
  struct {
    void *handler;
    unsigned long flags;
    void *restorer;
    uint64_t mask;
  } dfl = {SIG_DFL, 0, NULL, 0};
  /* The raw call reaches the two signals libc keeps for itself (32, 33). */
  for (int s = 1; s < NSIG; s++)
    syscall(SYS_rt_sigaction, s, &dfl, NULL, sizeof dfl.mask);
}

static void reset_signals(void) {
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, NULL);
  signal(SIGPIPE, SIG_DFL);
}

static void join_leaf(const struct child_plan *p) {
  struct hutch_err err;
  if (p->leaf && p->leaf->ops->enter_self(p->leaf, &err) < 0)
    fail(p, 125, "%s", err.msg);
  if (!p->guest_kernel && unshare(CLONE_NEWCGROUP) < 0)
    fail(p, 125, "%s", "cgroup namespace");
}

static const char *workload_cwd(const struct child_plan *p) {
  if (p->kind == JOB_EXEC && p->req->cwd)
    return p->req->cwd;
  return home_of(p);
}

void child_run(const struct child_plan *plan) {
  struct child_plan copy = *plan, *p = &copy;
  reset_signals();
  errno = 0;
  if (p->kind == JOB_EXEC)
    join_leaf(p);
  if (setsid() < 0)
    fail(p, 125, "%s", "setsid");
  stdio(p);
  limits(p);
  drop_privileges(p);
  const char *cwd = workload_cwd(p);
  if (chdir(cwd) < 0)
    fail(p, 126, "cannot change to directory %s", cwd);
  umask(022);
  close_agent_fds(p);
  if (hutch_seccomp_install_workload() < 0)
    fail(p, 125, "%s", "install the seccomp filter");
  if (p->kind == JOB_FILE)
    _exit(files_run(p->file_req, 1, 0, p->report_fd) == 0 ? 0 : 1);
  exec_in_path(p, workload_env(p));
}

/* The command, as spare_send() wrote it: the header, then cwd (empty for
 * the user's home), argv and env, each string NUL-terminated. Anything
 * that does not add up ends the spare; the agent then reports its death. */
static int spare_parse(char *buf, size_t len, struct hutch_exec_req *req, char **ptrs,
                       size_t nptrs) {
  struct spare_msg h;
  if (len < sizeof h)
    return -1;
  memcpy(&h, buf, sizeof h);
  if ((size_t)h.argc + h.envc + 3 > nptrs || h.argc == 0)
    return -1;

  char *s = buf + sizeof h, *end = buf + len;
  size_t want = 1 + (size_t)h.argc + h.envc, n = 0;
  for (char *q = s; q < end && n < want; n++) {
    ptrs[n] = q;
    char *nul = memchr(q, '\0', (size_t)(end - q));
    if (!nul)
      return -1;
    q = nul + 1;
  }
  if (n != want)
    return -1;

  req->cwd = *ptrs[0] ? ptrs[0] : NULL;
  req->argv = ptrs + 1;
  req->env = ptrs + 1 + h.argc + 1;
  memmove(req->env, ptrs + 1 + h.argc, h.envc * sizeof *ptrs);
  req->argv[h.argc] = NULL;
  req->env[h.envc] = NULL;
  req->stdin_open = h.has_stdin;

  return 0;
}

void child_spare(const struct child_plan *plan, int sock) {
  static char buf[SPARE_MSG_MAX];
  static char *ptrs[SPARE_MSG_MAX / 2 + 2];
  struct child_plan copy = *plan, *p = &copy;

  reset_signals();
  errno = 0;
  join_leaf(p);
  if (setsid() < 0)
    _exit(125);
  limits(p);
  drop_privileges(p);
  umask(022);

  /* Nothing of the agent's but the socket to it: not its connection, not
   * another stream's pipe (whose reader would never see end of file). */
  if (sock != 3 && dup3(sock, 3, O_CLOEXEC) < 0)
    _exit(125);
  if (syscall(SYS_close_range, 4, LAST_FD, 0) < 0)
    _exit(125);

  if (hutch_seccomp_install_workload() < 0)
    _exit(125);
  static const char ready = 'R';
  if (write(3, &ready, 1) != 1)
    _exit(125);

  int fds[4];
  char cbuf[CMSG_SPACE(sizeof fds)];
  struct iovec iov = {buf, sizeof buf};
  struct msghdr mh = {
      .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof cbuf};
  ssize_t n;
  do
    n = recvmsg(3, &mh, MSG_CMSG_CLOEXEC);
  while (n < 0 && errno == EINTR);
  struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
  if (n <= 0 || (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) || !c || c->cmsg_level != SOL_SOCKET ||
      c->cmsg_type != SCM_RIGHTS || c->cmsg_len != CMSG_LEN(sizeof fds))
    _exit(125);
  memcpy(fds, CMSG_DATA(c), sizeof fds);

  struct hutch_exec_req req = {0};
  p->report_fd = fds[3];
  if (spare_parse(buf, (size_t)n, &req, ptrs, ARRAY_SIZE(ptrs)) < 0)
    fail(p, 125, "%s", "malformed command from the agent");
  p->req = &req;
  p->stdin_fd = req.stdin_open ? fds[0] : -1;
  p->stdout_fd = fds[1];
  p->stderr_fd = fds[2];
  p->pty_slave = -1;

  stdio(p);
  const char *cwd = workload_cwd(p);
  if (chdir(cwd) < 0)
    fail(p, 126, "cannot change to directory %s", cwd);
  exec_in_path(p, workload_env(p));
}
