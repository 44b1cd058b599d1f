/* Jobs: execs and file operations, each a child process whose output is
 * forwarded on its stream under flow control, and whose end is reported
 * once: a verdict for an exec, a result for a file operation. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/fsuid.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include "agent.h"
#include "layout.h"
#include "util.h"

#define container_of(p, type, member) ((type *)((char *)(p)-offsetof(type, member)))
/* Read at most this many frames of one job's output per turn, for fairness. */
#define TURN_FRAMES 4
#define FILE_PIPE HUTCH_FILE_WINDOW /* a file operation's pipes */
#define RESULT_MAX (64u << 10)

static void maybe_finish(struct agent *a, struct job *j);

static void set_nonblock(int fd) {
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

static struct job *job_new(struct agent *a, uint32_t id, enum job_kind kind) {
  struct job *j = xcalloc(1, sizeof *j);
  j->id = id;
  j->kind = kind;
  j->out.w.fd = j->err.w.fd = j->in.fd = j->result.fd = j->exec_err.fd = j->timer.fd = -1;
  j->out.job = j->err.job = j;
  j->out.frame_type = HUTCH_F_STDOUT;
  j->err.frame_type = HUTCH_F_STDERR;
  j->send_window = HUTCH_WINDOW_INITIAL;
  j->in_max = 2 * HUTCH_WINDOW_INITIAL;
  j->next = a->jobs;
  a->jobs = j;
  return j;
}

void job_free(struct agent *a, struct job *j) {
  agent_close_watch(a, &j->out.w);
  agent_close_watch(a, &j->err.w);
  agent_close_watch(a, &j->in);
  agent_close_watch(a, &j->result);
  agent_close_watch(a, &j->exec_err);
  agent_close_watch(a, &j->timer);
  leaf_put(a, &j->leaf);
  free(j->inbuf);
  free(j->resbuf);
  free(j->changed_root);
  free(j);
}

/* End the job's processes: the whole leaf cgroup, so nothing that left the
 * process group or the session survives. The job's own process may not be
 * in the leaf yet (on v1 it moves itself there after the fork), but then it
 * has not run the workload either, so it cannot have children: killing it
 * by pid covers that moment. */
static void kill_job(struct job *j) {
  struct hutch_err ignored;
  if (j->pid > 0)
    kill(j->pid, SIGKILL);
  /* Without a cgroup (the gvisor tier) the job is its session: what left
   * it is not reached, and the sandbox's own end is what ends that. */
  if (j->kind == JOB_EXEC && j->pgid > 0 && j->leaf.cg.ops == &hutch_cgroup_none_ops)
    kill(-j->pgid, SIGKILL);
  if (j->kind == JOB_EXEC && j->leaf.cg.ops)
    j->leaf.cg.ops->kill_all(&j->leaf.cg, &ignored);
}

/* The utime, stime, cutime and cstime of /proc/PID/stat, in ns. */
static uint64_t proc_cpu_ns(pid_t pid) {
  char path[64], buf[1024];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return 0;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0)
    return 0;
  buf[n] = '\0';
  char *p = strrchr(buf, ')'); /* the command may hold spaces and parentheses */
  unsigned long long t[4] = {0};
  if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %llu %llu", &t[0],
                   &t[1], &t[2], &t[3]) != 4)
    return 0;
  long hz = sysconf(_SC_CLK_TCK);
  return (t[0] + t[1] + t[2] + t[3]) * (1000000000ull / (uint64_t)(hz > 0 ? hz : 100));
}

/* What the job's leaf says of it; without a cgroup, its process's own
 * count (and its reaped children's): while it runs from /proc, once
 * reaped from wait4. */
static void job_stats(const struct job *j, struct hutch_cg_stats *st) {
  struct hutch_err ignored;
  memset(st, 0, sizeof *st);
  if (j->leaf.cg.ops != &hutch_cgroup_none_ops) {
    j->leaf.cg.ops->stats(&j->leaf.cg, st, &ignored);
    st->oom_kills -= st->oom_kills < j->leaf.oom_base ? st->oom_kills : j->leaf.oom_base;
    return;
  }
  if (!j->reaped) {
    st->cpu_ns = j->pid > 0 ? proc_cpu_ns(j->pid) : 0;
    return;
  }
  st->cpu_ns =
      (uint64_t)j->ru.ru_utime.tv_sec * 1000000000ull + (uint64_t)j->ru.ru_utime.tv_usec * 1000 +
      (uint64_t)j->ru.ru_stime.tv_sec * 1000000000ull + (uint64_t)j->ru.ru_stime.tv_usec * 1000;
  st->memory_peak = (uint64_t)j->ru.ru_maxrss * 1024;
}

static void force_end(struct agent *a, struct job *j, enum hutch_status st, const char *fmt,
                      double v) {
  if (j->forced == HUTCH_ST_OK) {
    j->forced = st;
    snprintf(j->forced_msg, sizeof j->forced_msg, fmt, v);
  }
  agent_close_watch(a, &j->timer);
  kill_job(j);
}

/* Forward what an output pipe has, within the stream's window, the output
 * limit and a per-turn budget. */
static void pump_output(struct agent *a, struct job *j, struct outpipe *op) {
  size_t chunk = j->kind == JOB_FILE ? HUTCH_FILE_CHUNK : HUTCH_DATA_CHUNK;
  size_t budget = TURN_FRAMES * chunk;

  /* An abandoned stream's output is read and dropped, window or not. */
  while (op->w.fd >= 0 && budget > 0 && (j->closed || (j->send_window > 0 && agent_can_send(a)))) {
    size_t n = j->closed || chunk < j->send_window ? chunk : j->send_window;
    /* Read in place, into the frame that carries it out. */
    uint8_t *buf = hutch_conn_room(&a->conn, n);
    ssize_t r = read(op->w.fd, buf, n);
    if (r < 0 && errno == EINTR)
      continue;
    if (r < 0 && errno == EAGAIN) {
      if (j->reaped) /* drained after exit: what comes later has no reader */
        agent_close_watch(a, &op->w);
      break;
    }
    if (r <= 0) { /* end of file, or EIO from a PTY whose slave is gone */
      agent_close_watch(a, &op->w);
      break;
    }

    size_t send = (size_t)r;
    bool over = false;
    if (j->output_limit && j->output_bytes + send > j->output_limit) {
      send = (size_t)(j->output_limit - j->output_bytes);
      over = true;
    }

    if (send > 0 && !j->closed) {
      hutch_conn_commit(&a->conn, op->frame_type, 0, j->id, send);
      j->send_window -= (uint32_t)send;
    }
    j->output_bytes += send;
    budget -= send < budget ? send : budget;

    if (over) {
      force_end(a, j, HUTCH_ST_OUTPUT_LIMIT, "output limit of %.0f bytes exceeded",
                (double)j->output_limit);
      agent_close_watch(a, &j->out.w);
      agent_close_watch(a, &j->err.w);
    }
  }

  maybe_finish(a, j);
}

static void on_output(struct agent *a, struct watch *w, uint32_t events) {
  (void)events;
  struct outpipe *op = container_of(w, struct outpipe, w);
  pump_output(a, op->job, op);
}

void job_update_interest(struct agent *a, struct job *j) {
  bool readable = j->closed || (j->send_window > 0 && agent_can_send(a));
  struct outpipe *pipes[] = {&j->out, &j->err};
  for (size_t i = 0; i < ARRAY_SIZE(pipes); i++) {
    if (pipes[i]->w.fd < 0)
      continue;
    agent_watch(a, &pipes[i]->w, readable ? EPOLLIN : 0);
    /* After exit, a paused pipe is drained as soon as it may be. */
    if (readable && j->reaped)
      pump_output(a, j, pipes[i]);
  }
}

static void flush_stdin(struct agent *a, struct job *j) {
  uint32_t granted = 0;
  while (j->inlen > 0 && j->in.fd >= 0) {
    ssize_t w = write(j->in.fd, j->inbuf, j->inlen);
    if (w < 0 && errno == EINTR)
      continue;
    if (w < 0 && errno == EAGAIN)
      break;
    if (w < 0) { /* the workload closed its stdin: the rest has no reader */
      granted += (uint32_t)j->inlen;
      j->inlen = 0;
      agent_close_watch(a, &j->in);
      break;
    }
    memmove(j->inbuf, j->inbuf + w, j->inlen - (size_t)w);
    j->inlen -= (size_t)w;
    granted += (uint32_t)w;
  }
  if (granted)
    hutch_conn_send_window(&a->conn, j->id, granted);

  if (j->in.fd < 0)
    return;
  if (j->inlen == 0 && j->in_eof) {
    if (j->pty) {
      static const char eot = 4; /* a terminal's end of input is ^D */
      (void)!write(j->in.fd, &eot, 1);
    }
    agent_close_watch(a, &j->in);
    return;
  }

  agent_watch(a, &j->in, j->inlen ? EPOLLOUT : 0);
}

static void on_stdin_writable(struct agent *a, struct watch *w, uint32_t events) {
  (void)events;
  flush_stdin(a, container_of(w, struct job, in));
}

void job_stdin(struct agent *a, struct job *j, const uint8_t *p, size_t n, bool eof) {
  if (j->in.fd < 0) {
    if (n) /* nobody reads it; keep the sender's window open anyway */
      hutch_conn_send_window(&a->conn, j->id, (uint32_t)n);
    return;
  }
  if (j->inlen + n > j->in_max) {
    /* More than the window allows: the client is broken. */
    a->conn.eof = true;
    return;
  }
  j->in_eof |= eof;

  /* Nothing waits before these bytes: they go from the frame straight to
   * the pipe, and only what it cannot take now is kept. */
  size_t wrote = 0;
  while (j->inlen == 0 && wrote < n) {
    ssize_t w = write(j->in.fd, p + wrote, n - wrote);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0)
      break; /* full (flush_stdin waits for room), or closed (flush_stdin says so) */
    wrote += (size_t)w;
  }
  if (wrote)
    hutch_conn_send_window(&a->conn, j->id, (uint32_t)wrote);

  if (wrote < n) {
    j->inbuf = xgrow(j->inbuf, &j->incap, j->inlen + n - wrote);
    memcpy(j->inbuf + j->inlen, p + wrote, n - wrote);
    j->inlen += n - wrote;
  }

  flush_stdin(a, j);
}

void job_window(struct agent *a, struct job *j, uint32_t more) {
  (void)a;
  uint64_t w = (uint64_t)j->send_window + more;
  j->send_window = w > INT32_MAX ? INT32_MAX : (uint32_t)w;
}

/* The client's reader of stdout or stderr went away: close our read end, so
 * that the workload's next write there fails as it would on a pipe whose
 * reader is gone. A terminal carries both, so it hangs up instead. */
static void close_output(struct agent *a, struct job *j, const char *which) {
  bool out = which && strcmp(which, "stdout") == 0, err = which && strcmp(which, "stderr") == 0;
  if (j->pty && out) { /* the terminal carries stdin too: what waits for it has no reader */
    if (j->inlen)
      hutch_conn_send_window(&a->conn, j->id, (uint32_t)j->inlen);
    j->inlen = 0;
    agent_close_watch(a, &j->in);
    agent_close_watch(a, &j->out.w);
  } else if (!j->pty && (out || err)) {
    agent_close_watch(a, out ? &j->out.w : &j->err.w);
  } else {
    return;
  }
  maybe_finish(a, j);
}

void job_control(struct agent *a, struct job *j, json_t *ctl) {
  json_t *sig = json_object_get(ctl, "signal"), *resize = json_object_get(ctl, "resize");
  if (json_is_integer(sig) && j->pid > 0) {
    json_int_t s = json_integer_value(sig);
    /* To the process group, as a terminal would: the shell and its children. */
    if (s >= 1 && s <= 64 && kill(-j->pid, (int)s) < 0 && errno == ESRCH)
      kill(j->pid, (int)s);
  }
  if (json_is_object(resize) && j->pty && j->out.w.fd >= 0) {
    json_int_t rows = json_integer_value(json_object_get(resize, "rows"));
    json_int_t cols = json_integer_value(json_object_get(resize, "cols"));
    if (rows > 0 && cols > 0 && rows <= 10000 && cols <= 10000) {
      struct winsize ws = {.ws_row = (unsigned short)rows, .ws_col = (unsigned short)cols};
      ioctl(j->out.w.fd, TIOCSWINSZ, &ws);
    }
  }
  if (json_is_true(json_object_get(ctl, "kill")))
    kill_job(j);
  close_output(a, j, json_string_value(json_object_get(ctl, "close")));
}

void job_close(struct agent *a, struct job *j) {
  j->closed = true;
  kill_job(j);
  agent_close_watch(a, &j->in);
  j->inlen = 0;
}

/* Wall and CPU limits: one timer per exec, armed for whichever limit could
 * be reached first. CPU time is the leaf cgroup's, so it counts every
 * process the exec started, and it cannot be spent faster than on every CPU
 * at once: the next look is (limit - used) / CPUs away. */
static void arm_timer(struct agent *a, struct job *j) {
  uint64_t now = now_ns(), next = UINT64_MAX;
  if (j->timeout_ms) {
    uint64_t end = j->started_ns + j->timeout_ms * 1000000;
    next = end > now ? end - now : 1;
  }
  if (j->cpu_ms) {
    struct hutch_cg_stats st;
    job_stats(j, &st);
    uint64_t limit = j->cpu_ms * 1000000, left = st.cpu_ns < limit ? limit - st.cpu_ns : 0;
    if (a->ncpu <= 0)
      a->ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    uint64_t wait = left / (uint64_t)(a->ncpu > 0 ? a->ncpu : 1);
    if (wait < 2000000)
      wait = 2000000; /* the cgroup's counter lags a tick behind */
    if (wait < next)
      next = wait;
  }
  struct itimerspec its = {.it_value = {(time_t)(next / 1000000000), (long)(next % 1000000000)}};
  timerfd_settime(j->timer.fd, 0, &its, NULL);
}

static void on_timer(struct agent *a, struct watch *w, uint32_t events) {
  (void)events;
  struct job *j = container_of(w, struct job, timer);
  uint64_t expirations;
  (void)!read(w->fd, &expirations, sizeof expirations);
  if (j->reaped)
    return;
  if (j->timeout_ms && now_ns() - j->started_ns >= j->timeout_ms * 1000000) {
    force_end(a, j, HUTCH_ST_TIMEOUT, "wall clock limit of %g s exceeded", j->timeout_ms / 1e3);
    return;
  }
  if (j->cpu_ms) {
    struct hutch_cg_stats st;
    job_stats(j, &st);
    if (st.cpu_ns >= j->cpu_ms * 1000000) {
      force_end(a, j, HUTCH_ST_TIMEOUT, "CPU time limit of %g s exceeded", j->cpu_ms / 1e3);
      return;
    }
  }
  arm_timer(a, j);
}

static void read_all_nonblock(int fd, char **buf, size_t *len, size_t max, bool *eof) {
  char tmp[4096];
  for (;;) {
    ssize_t r = read(fd, tmp, sizeof tmp);
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0) {
      *eof = r == 0 || errno != EAGAIN;
      return;
    }
    if (*len + (size_t)r > max)
      r = (ssize_t)(max - *len);
    *buf = xrealloc(*buf, *len + (size_t)r + 1);
    memcpy(*buf + *len, tmp, (size_t)r);
    *len += (size_t)r;
    (*buf)[*len] = '\0';
  }
}

static void on_result(struct agent *a, struct watch *w, uint32_t events) {
  (void)events;
  struct job *j = container_of(w, struct job, result);
  read_all_nonblock(w->fd, &j->resbuf, &j->reslen, RESULT_MAX, &j->result_eof);
  if (j->result_eof)
    agent_close_watch(a, w);
  maybe_finish(a, j);
}

static struct hutch_verdict exec_verdict(struct agent *a, struct job *j) {
  struct hutch_verdict v = {.exit_code = -1};
  struct hutch_cg_stats st;
  job_stats(j, &st);
  v.wall_ms = (double)(j->exited_ns - j->started_ns) / 1e6;
  v.cpu_ms = (double)st.cpu_ns / 1e6;
  v.peak_memory_kb = st.memory_peak / 1024;
  v.escape_attempts = monitor_on(a) ? (int64_t)j->escape_attempts : -1;

  if (WIFEXITED(j->status))
    v.exit_code = WEXITSTATUS(j->status);
  else if (WIFSIGNALED(j->status))
    v.signal = WTERMSIG(j->status);

  if (j->forced != HUTCH_ST_OK) {
    v.status = j->forced;
    snprintf(v.message, sizeof v.message, "%s", j->forced_msg);
  } else if (st.oom_kills > 0) {
    v.status = HUTCH_ST_OOM;
    snprintf(v.message, sizeof v.message, "out of memory: %llu process(es) killed at the limit",
             (unsigned long long)st.oom_kills);
  } else if (j->exec_msg[0]) {
    /* 125 is the child's own setup failing, 126/127 the command. */
    v.status = v.exit_code == 125 ? HUTCH_ST_SANDBOX_ERROR : HUTCH_ST_NONZERO;
    snprintf(v.message, sizeof v.message, "%s", j->exec_msg);
  } else if (v.signal) {
    v.status = HUTCH_ST_SIGNALED;
    snprintf(v.message, sizeof v.message, "killed by signal %d (%s)", v.signal,
             strsignal(v.signal));
  } else {
    v.status = v.exit_code == 0 ? HUTCH_ST_OK : HUTCH_ST_NONZERO;
  }

  return v;
}

static void finish_file(struct agent *a, struct job *j) {
  json_t *res = j->resbuf ? json_loadb(j->resbuf, j->reslen, 0, NULL) : NULL;
  json_t *ok = json_object_get(res, "ok"), *error = json_object_get(res, "error");
  if (json_is_object(ok)) {
    json_object_set_new(ok, "event", json_string("done"));
    agent_send_json(a, HUTCH_F_EVENT, HUTCH_FL_END, j->id, json_incref(ok));
  } else if (json_is_object(error)) {
    agent_send_json(a, HUTCH_F_ERROR, HUTCH_FL_END, j->id, json_incref(error));
  } else {
    char msg[128];
    snprintf(msg, sizeof msg, "file operation worker ended without a result (status %d)",
             j->status);
    agent_send_error(a, j->id, "sandbox_error", msg);
  }
  json_decref(res);
}

/* An exec's artifacts, looked for by the agent itself once the exec has
 * ended: a file worker for it would cost every exec a fork, a leaf and the
 * spare (a third of an exec's round trip). It must see no more than the
 * exec's user would, as the worker did: the agent takes the user's
 * file-system ids for the look (setfsuid/setfsgid: this thread's alone,
 * and the agent has one), and a change of fsuid from 0 takes the
 * file-system capabilities (DAC_OVERRIDE, DAC_READ_SEARCH, FOWNER: a build
 * step's agent has them) out of its effective set until it goes back.
 * Groups: a workload has no supplementary groups (child.c), so the agent
 * looks only while it has none either. Only stat and directory reads are
 * made, without following links (files.c, changed_dir), and a look is
 * bounded (CHANGED_VISIT_MAX entries): a hostile tree slows only its own
 * sandbox's agent. gVisor's kernel has no setfsuid: there, and whenever the
 * ids cannot be taken, NULL, and the client asks a worker (op "changed"). */
static json_t *exec_changed(struct agent *a, struct job *j) {
  if (!j->changed_root || a->cg.ops == &hutch_cgroup_none_ops || getgroups(0, NULL) != 0)
    return NULL;
  uid_t uid = geteuid();
  gid_t gid = getegid();
  setfsgid(j->gid);
  setfsuid(j->uid);
  json_t *files = NULL;
  /* setfsuid answers the previous id, never an error: -1 reads it back. */
  if ((uid_t)setfsuid((uid_t)-1) == j->uid && (gid_t)setfsgid((gid_t)-1) == j->gid)
    files = files_changed_since(j->changed_root, j->home[0] ? j->home : NULL, j->changed_since_ns);
  setfsuid(uid);
  setfsgid(gid);
  /* Going back to its own ids cannot fail; if it did, the agent would go
   * on with less than it needs, never more: stop rather than misbehave. */
  if ((uid_t)setfsuid((uid_t)-1) != uid || (gid_t)setfsgid((gid_t)-1) != gid)
    abort();
  return files;
}

/* A job ends once its process is reaped and its pipes are read out. */
static void maybe_finish(struct agent *a, struct job *j) {
  if (j->done || !j->reaped || j->out.w.fd >= 0 || j->err.w.fd >= 0 || j->result.fd >= 0)
    return;
  j->done = true;
  agent_close_watch(a, &j->in);
  agent_close_watch(a, &j->timer);
  if (j->kind == JOB_FILE) {
    finish_file(a, j);
    return;
  }
  struct hutch_verdict v = exec_verdict(a, j);
  json_t *ev = hutch_verdict_to_json(&v);
  json_object_set_new(ev, "event", json_string("exit"));
  json_t *changed = v.status == HUTCH_ST_SANDBOX_ERROR ? NULL : exec_changed(a, j);
  if (changed)
    json_object_set_new(ev, "changed", changed);
  agent_send_json(a, HUTCH_F_EVENT, HUTCH_FL_END, j->id, ev);
}

void job_reaped(struct agent *a, struct job *j, int status, const struct rusage *ru) {
  j->status = status;
  j->ru = *ru;
  j->pid = 0;
  j->reaped = true;
  j->exited_ns = now_ns();
  if (j->exec_err.fd >= 0) { /* its writer is gone: this read does not block */
    char *msg = NULL;
    size_t len = 0;
    bool eof = false;
    read_all_nonblock(j->exec_err.fd, &msg, &len, sizeof j->exec_msg - 1, &eof);
    if (msg)
      snprintf(j->exec_msg, sizeof j->exec_msg, "%s", msg);
    free(msg);
    agent_close_watch(a, &j->exec_err);
  }
  if (j->result.fd >= 0)
    on_result(a, &j->result, EPOLLIN);
  pump_output(a, j, &j->out);
  pump_output(a, j, &j->err);
  maybe_finish(a, j);
}

pid_t agent_fork(const struct agent *a, const struct hutch_cgroup *leaf) {
  struct clone_args args = {.exit_signal = SIGCHLD};
  if (leaf && leaf->ops == &hutch_cgroup_v2_ops) {
    args.flags = CLONE_INTO_CGROUP;
    args.cgroup = (uint64_t)leaf->fd[0];
  }
  pid_t pid = (pid_t)syscall(SYS_clone3, &args, sizeof args);
  /* gVisor's kernel (the gvisor tier) may have no clone3: its cgroup-less
   * agent needs nothing fork does not do. */
  if (pid < 0 && errno == ENOSYS && !args.flags)
    pid = (pid_t)syscall(SYS_fork);
  /* The seccomp listener can let a refused call through (monitor.c): no
   * process but the agent holds it, not even until its exec. Only when
   * there is one: otherwise that number is any fd of the agent's, an
   * exec's pipe among them (always so under gVisor, which gives none). */
  if (pid == 0 && a->monitor.w.fd >= 0)
    close(HUTCH_AGENT_NOTIFY_FD);
  return pid;
}

/* Fork the job's process. On cgroup v2 it is born in its leaf; on v1 the
 * child moves itself there before anything else (child_run). A spare
 * holding the pid the sandbox's limit has left goes first. */
static pid_t spawn(struct agent *a, const struct child_plan *plan,
                   const struct hutch_cgroup *leaf) {
  pid_t pid = agent_fork(a, leaf);
  if (pid < 0 && errno == EAGAIN && a->spare.pid > 0) {
    spare_drop(a);
    pid = agent_fork(a, leaf);
  }
  if (pid == 0)
    child_run(plan);
  return pid;
}

static void close_fds(const int *fds, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (fds[i] >= 0)
      close(fds[i]);
}

/* A PTY's peer (slave) end, opened from the master, never by path. gVisor's
 * kernel (guest) has no TIOCGPTPEER: there the peer is opened by its
 * number in the agent's own devpts, a mount of the bundle that no workload
 * can cover (none holds CAP_SYS_ADMIN, even in gVisor's kernel). */
static int pty_peer(int m, bool guest) {
  int s = ioctl(m, TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC);
  if (s >= 0 || !guest || (errno != ENOTTY && errno != EINVAL))
    return s;

  unsigned n;
  if (ioctl(m, TIOCGPTN, &n) < 0)
    return s;
  char path[32];
  snprintf(path, sizeof path, "/dev/pts/%u", n);
  return open(path, O_RDWR | O_NOCTTY | O_CLOEXEC);
}

/* The exec's stdio: pipes, or a PTY. */
static int exec_stdio(struct job *j, const struct hutch_exec_req *req, bool guest, int in[2],
                      int out[2], int err[2], int *slave, struct hutch_err *e) {
  if (req->pty) {
    int m = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
    struct winsize ws = {.ws_row = req->rows, .ws_col = req->cols};
    if (m < 0)
      return hutch_err_set(e, errno, "allocate a PTY");
    if (unlockpt(m) < 0)
      goto no_pty;
    if (ioctl(m, TIOCSWINSZ, &ws) < 0)
      goto no_pty;
    *slave = pty_peer(m, guest);
    if (*slave < 0)
      goto no_pty;

    out[0] = m;
    in[1] = fcntl(m, F_DUPFD_CLOEXEC, 0);
    j->pty = true;
    return in[1] < 0 ? hutch_err_set(e, errno, "dup") : 0;

  no_pty:
    close(m);
    return hutch_err_set(e, errno, "allocate a PTY");
  }

  if (pipe2(out, O_CLOEXEC) < 0)
    return hutch_err_set(e, errno, "pipe");
  if (pipe2(err, O_CLOEXEC) < 0)
    return hutch_err_set(e, errno, "pipe");
  if (req->stdin_open && pipe2(in, O_CLOEXEC) < 0)
    return hutch_err_set(e, errno, "pipe");
  return 0;
}

static void watch_job_fds(struct agent *a, struct job *j, int in, int out, int err, int report) {
  /* A file operation reports its result, an exec only a failure to start. */
  struct watch *report_w = NULL;
  if (report != -1)
    report_w = j->kind == JOB_FILE ? &j->result : &j->exec_err;
  struct {
    struct watch *w;
    int fd;
    void (*ready)(struct agent *, struct watch *, uint32_t);
  } fds[] = {
      {&j->out.w, out, on_output},
      {&j->err.w, err, on_output},
      {&j->in, in, on_stdin_writable},
      {report_w, report, on_result},
  };

  for (size_t i = 0; i < ARRAY_SIZE(fds); i++) {
    if (!fds[i].w || fds[i].fd < 0)
      continue;
    set_nonblock(fds[i].fd);
    fds[i].w->fd = fds[i].fd;
    fds[i].w->ready = fds[i].ready;
  }

  agent_watch(a, &j->out.w, EPOLLIN);
  agent_watch(a, &j->err.w, EPOLLIN);
  agent_watch(a, &j->result, EPOLLIN);
}

int job_start_exec(struct agent *a, uint32_t id, struct hutch_exec_req *req, json_t *artifacts,
                   struct hutch_err *e) {
  struct job *j = job_new(a, id, JOB_EXEC);
  int in[2] = {-1, -1}, out[2] = {-1, -1}, err[2] = {-1, -1}, rep[2] = {-1, -1}, slave = -1;
  struct who who;
  if (agent_who(req->user, &who, e) < 0) {
    j->done = true;
    return -1;
  }

  const char *root = json_string_value(json_object_get(artifacts, "path"));
  if (root && root[0] == '/' && strlen(root) < PATH_MAX) {
    j->changed_root = xstrdup(root);
    j->changed_since_ns = json_integer_value(json_object_get(artifacts, "since_ns"));
    j->uid = who.uid;
    j->gid = who.gid;
    /* A UID without a name has "/" for a home: none to look in. */
    snprintf(j->home, sizeof j->home, "%s", strcmp(who.home, "/") ? who.home : "");
  }

  int r = exec_stdio(j, req, a->cg.ops == &hutch_cgroup_none_ops, in, out, err, &slave, e);
  if (r == 0 && pipe2(rep, O_CLOEXEC) < 0)
    r = hutch_err_set(e, errno, "pipe");
  if (r < 0) {
    close_fds((int[]){in[0], in[1], out[0], out[1], err[0], err[1], rep[0], rep[1], slave}, 9);
    j->done = true;
    return -1;
  }

  j->started_ns = now_ns();
  j->pid = spare_take(a, j, req, in[0], out[1], err[1], rep[1]);
  if (j->pid < 0) {
    if (leaf_get(a, &j->leaf, e) < 0) {
      close_fds((int[]){in[0], in[1], out[0], out[1], err[0], err[1], rep[0], rep[1], slave}, 9);
      j->done = true;
      return hutch_err_wrap(e, "exec cgroup");
    }
    struct child_plan plan = {
        .kind = JOB_EXEC,
        .req = req,
        .leaf = a->cg.ops == &hutch_cgroup_v1_ops ? &j->leaf.cg : NULL,
        .stdin_fd = in[0],
        .stdout_fd = out[1],
        .stderr_fd = err[1],
        .pty_slave = slave,
        .report_fd = rep[1],
        .uid = who.uid,
        .gid = who.gid,
        .who = &who,
        .caps = a->build ? HUTCH_BUILD_CAPS : 0,
        .bset = a->bset,
        .guest_kernel = a->cg.ops == &hutch_cgroup_none_ops,
    };
    j->started_ns = now_ns();
    j->pid = spawn(a, &plan, &j->leaf.cg);
  }

  int spawn_errno = errno;
  j->pgid = j->pid > 0 ? j->pid : 0;
  close_fds((int[]){in[0], out[1], err[1], rep[1], slave}, 5);
  if (j->pid < 0) {
    close_fds((int[]){in[1], out[0], err[0], rep[0]}, 4);
    j->done = true;
    return hutch_err_set(e, spawn_errno, "fork");
  }

  watch_job_fds(a, j, in[1], out[0], err[0], rep[0]);
  j->timeout_ms = req->timeout_ms;
  j->cpu_ms = req->cpu_ms;
  j->output_limit = req->output_limit;
  if (j->timeout_ms || j->cpu_ms) {
    j->timer.fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    j->timer.ready = on_timer;
    agent_watch(a, &j->timer, EPOLLIN);
    arm_timer(a, j);
  }

  agent_send_json(a, HUTCH_F_EVENT, 0, id,
                  json_pack("{s:s, s:i}", "event", "started", "pid", j->pid));
  return 0;
}

/* A file operation's pipes: its output and its result, and its input for
 * a write. -1 with errno when one cannot be made. */
static int file_pipes(int in[2], int out[2], int res[2], bool writes) {
  if (pipe2(out, O_CLOEXEC) < 0)
    return -1;
  if (pipe2(res, O_CLOEXEC) < 0)
    return -1;
  if (writes && pipe2(in, O_CLOEXEC) < 0)
    return -1;
  return 0;
}

int job_start_file(struct agent *a, uint32_t id, json_t *req, struct hutch_err *e) {
  struct job *j = job_new(a, id, JOB_FILE);
  int in[2] = {-1, -1}, out[2] = {-1, -1}, res[2] = {-1, -1};
  bool writes = strcmp(json_string_value(json_object_get(req, "op")), "write") == 0;
  if (file_pipes(in, out, res, writes) < 0) {
    hutch_err_set(e, errno, "pipe");
    close_fds((int[]){in[0], in[1], out[0], out[1], res[0], res[1]}, 6);
    j->done = true;
    return -1;
  }

  /* A file's bytes go through these pipes: large ones take a window's
   * worth a wake-up (else the default; slower, no worse). Only for reads
   * and writes: the user's pipe pages are few (pipe-user-pages-soft), and
   * lists, stats and long-lived watches would take them from its execs. */
  const char *op = json_string_value(json_object_get(req, "op"));
  if (writes || strcmp(op, "read") == 0)
    fcntl(out[1], F_SETPIPE_SZ, FILE_PIPE);
  if (writes)
    fcntl(in[1], F_SETPIPE_SZ, FILE_PIPE);

  struct who who;
  if (agent_who(json_string_value(json_object_get(req, "user")), &who, e) < 0) {
    close_fds((int[]){in[0], in[1], out[0], out[1], res[0], res[1]}, 6);
    j->done = true;
    return -1;
  }

  /* A write or mkdir whose missing directories are the sandbox root's to
   * make and the user's to own (envd's): its worker starts as root with
   * only the capabilities to hand them over and to become the user, which
   * it does before anything else (files.c, owner_first). */
  bool owned = (writes || strcmp(op, "mkdir") == 0) && who.uid != 0 &&
               json_is_true(json_object_get(req, "parents_owned"));
  if (owned)
    json_object_set_new(
        req, "owner",
        json_pack("{s:I,s:I}", "uid", (json_int_t)who.uid, "gid", (json_int_t)who.gid));

  struct child_plan plan = {
      .kind = JOB_FILE,
      .file_req = req,
      .stdin_fd = in[0],
      .stdout_fd = out[1],
      .stderr_fd = -1,
      .pty_slave = -1,
      .report_fd = res[1],
      .uid = owned ? 0 : who.uid,
      .gid = owned ? 0 : who.gid,
      .who = &who,
      .caps = owned ? FILE_OWNER_CAPS : 0,
      .bset = a->bset,
      .guest_kernel = a->cg.ops == &hutch_cgroup_none_ops,
  };
  j->started_ns = now_ns();
  j->pid = spawn(a, &plan, NULL);

  int spawn_errno = errno;
  close_fds((int[]){in[0], out[1], res[1]}, 3);
  if (j->pid < 0) {
    close_fds((int[]){in[1], out[0], res[0]}, 3);
    j->done = true;
    return hutch_err_set(e, spawn_errno, "fork");
  }

  watch_job_fds(a, j, in[1], out[0], -1, res[0]);
  if (writes) { /* the content comes in a file's window */
    hutch_conn_send_window(&a->conn, id, HUTCH_FILE_WINDOW - HUTCH_WINDOW_INITIAL);
    j->in_max = 2 * HUTCH_FILE_WINDOW;
  }
  return 0;
}
