/* hutch-agent: PID 1 of a sandbox (docs/architecture.md, "The agent protocol").
 *
 * It runs as root of the sandbox's user namespace, which owns none of the
 * sandbox's other namespaces: its capabilities reach no mount, network or
 * host object. Workloads run as another uid with no capabilities at all, so
 * they can neither signal nor trace it; it is also not dumpable, which keeps
 * its /proc entries closed to them. */
#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent.h"
#include "cleanup.h"
#include "layout.h"
#include "seccomp_install.h"
#include "util.h"

#define AGENT_VERSION "0.1.0"
/* Stop reading workload output while this much waits to be sent. */
#define CONN_HIGH_WATER (1u << 20)

void agent_watch(struct agent *a, struct watch *w, uint32_t events) {
  if (w->fd < 0 || w->events == events)
    return;
  struct epoll_event ev = {.events = events, .data.ptr = w};
  int op = EPOLL_CTL_ADD;
  if (w->events)
    op = events ? EPOLL_CTL_MOD : EPOLL_CTL_DEL;
  if (epoll_ctl(a->epfd, op, w->fd, &ev) == 0)
    w->events = events;
}

void agent_unwatch(struct agent *a, struct watch *w) {
  agent_watch(a, w, 0);
}

void agent_close_watch(struct agent *a, struct watch *w) {
  if (w->fd < 0)
    return;
  agent_unwatch(a, w);
  close(w->fd);
  w->fd = -1;
}

struct job *agent_find_job(struct agent *a, uint32_t id) {
  for (struct job *j = a->jobs; j; j = j->next)
    if (j->id == id && !j->done)
      return j;
  return NULL;
}

void agent_send(struct agent *a, uint8_t type, uint8_t flags, uint32_t stream, const void *p,
                size_t n) {
  hutch_conn_send(&a->conn, type, flags, stream, p, n);
}

void agent_send_json(struct agent *a, uint8_t type, uint8_t flags, uint32_t stream, json_t *j) {
  size_t n;
  char *s = hutch_json_dump(j, &n);
  agent_send(a, type, flags, stream, s, n);
  free(s);
  json_decref(j);
}

void agent_send_raw(struct agent *a, const void *p, size_t n) {
  struct hutch_buf *b = &a->conn.out;
  if (b->cap - b->end < n) {
    b->data = xrealloc(b->data, b->end + n);
    b->cap = b->end + n;
  }
  memcpy(b->data + b->end, p, n);
  b->end += n;
}

void agent_send_error(struct agent *a, uint32_t stream, const char *code, const char *msg) {
  agent_send_json(a, HUTCH_F_ERROR, HUTCH_FL_END, stream,
                  json_pack("{s:s, s:o}", "code", code, "message", hutch_json_text(msg)));
}

/* Detached, nothing goes out: output waits in the workloads' pipes. */
bool agent_can_send(const struct agent *a) {
  return !a->detached && hutch_conn_queued(&a->conn) < CONN_HIGH_WATER;
}

static const char *const file_ops[] = {"read",   "write", "list",  "stat",    "mkdir",
                                       "remove", "move",  "watch", "changed", NULL};

static void on_open(struct agent *a, const struct hutch_frame *f) {
  struct hutch_err err = {0};
  if (f->stream == 0 || agent_find_job(a, f->stream)) {
    /* No END: the stream that has this id goes on. */
    agent_send_json(a, HUTCH_F_ERROR, 0, f->stream,
                    json_pack("{s:s, s:s}", "code", "protocol", "message", "stream id in use"));
    return;
  }

  json_error_t je;
  json_t *req = json_loadb((const char *)f->payload, f->len, 0, &je);
  const char *op = req ? json_string_value(json_object_get(req, "op")) : NULL;

  int r = -1;
  if (!op) {
    hutch_err_invalid(&err, "request is not a JSON object with an \"op\"");
  } else if (strcmp(op, "exec") == 0) {
    struct hutch_exec_req er;
    if (hutch_exec_req_from_json(req, &er, &err) == 0) {
      r = job_start_exec(a, f->stream, &er, json_object_get(req, "artifacts"), &err);
      hutch_exec_req_free(&er);
    }
  } else {
    bool known = false;
    for (const char *const *o = file_ops; *o; o++)
      known |= strcmp(op, *o) == 0;
    if (known)
      r = job_start_file(a, f->stream, req, &err);
    else
      hutch_err_invalid(&err, "unknown op '%s'", op);
  }
  json_decref(req);

  if (r < 0)
    agent_send_error(a, f->stream, err.kind == HUTCH_ERR_INVALID ? "invalid" : "sandbox_error",
                     err.msg);
}

static void on_frame(struct agent *a, const struct hutch_frame *f) {
  if (f->type == HUTCH_F_OPEN) {
    on_open(a, f);
    return;
  }

  struct job *j = agent_find_job(a, f->stream);
  if (!j)
    return; /* the stream has ended; frames in flight are dropped */

  switch (f->type) {
  case HUTCH_F_STDIN:
    job_stdin(a, j, f->payload, f->len, f->flags & HUTCH_FL_EOF);
    break;
  case HUTCH_F_CONTROL: {
    json_t *ctl = json_loadb((const char *)f->payload, f->len, 0, NULL);
    if (ctl)
      job_control(a, j, ctl);
    json_decref(ctl);
    break;
  }
  case HUTCH_F_WINDOW:
    job_window(a, j, hutch_conn_window_increment(f));
    break;
  case HUTCH_F_CLOSE:
    job_close(a, j);
    break;
  default:
    break;
  }
}

static void on_conn(struct agent *a, struct watch *w, uint32_t events) {
  (void)w;
  struct hutch_err err = {0};
  if (events & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
    if (hutch_conn_fill(&a->conn, &err) < 0) {
      a->conn.eof = true;
      return;
    }
    struct hutch_frame f;
    int r;
    while ((r = hutch_conn_next(&a->conn, &f, &err)) > 0)
      on_frame(a, &f);
    if (r < 0)
      a->conn.eof = true; /* a peer that breaks framing is not one to serve */
  }
}

static void on_signal(struct agent *a, struct watch *w, uint32_t events) {
  (void)events;
  struct signalfd_siginfo si;
  while (read(w->fd, &si, sizeof si) == sizeof si)
    ;
  /* As PID 1 we reap every orphan of the sandbox as well as our jobs. */
  for (;;) {
    int status;
    struct rusage ru;
    pid_t pid = wait4(-1, &status, WNOHANG, &ru);
    if (pid <= 0)
      break;
    a->maybe_idle = true;
    if (spare_reaped(a, pid))
      continue;
    for (struct job *j = a->jobs; j; j = j->next)
      if (j->pid == pid) {
        job_reaped(a, j, status, &ru);
        break;
      }
  }
}

/* gVisor makes /dev, and the devices in it, its root's (uid 0): the uid of
 * a workload run as root, which could then put a file of its own where
 * the agent and every other exec open /dev/null, or chmod the devices. In
 * the ns tier they are the host's, unmapped. Here they become the agent's
 * own (uid 65536 under gVisor, gvisor.c): an id no workload can run as
 * (users.c takes ids below 65536 only), where nobody (65534) is one an
 * image may well run as. What is mounted on /dev (pts, shm, the agent)
 * keeps its owner. */
static int gvisor_dev_owner(struct hutch_err *err) {
  uid_t self = geteuid();
  gid_t group = getegid();
  _cleanup_close_ int dev = open("/dev", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  struct stat top;
  if (self < HUTCH_ID_RANGE)
    return hutch_err_invalid(err,
                             "under gVisor the agent's uid must be one no workload has, "
                             "not %u",
                             (unsigned)self);

  if (dev < 0)
    return hutch_err_set(err, errno, "/dev");
  if (fstat(dev, &top) < 0)
    return hutch_err_set(err, errno, "/dev");
  if (fchown(dev, self, group) < 0)
    return hutch_err_set(err, errno, "/dev");

  DIR *d = fdopendir(dup(dev));
  if (!d)
    return hutch_err_set(err, errno, "/dev");
  int r = 0;
  for (struct dirent *e; r == 0 && (e = readdir(d));) {
    struct stat st;
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
      continue;
    if (fstatat(dev, e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || st.st_dev != top.st_dev)
      continue;
    if (fchownat(dev, e->d_name, self, group, AT_SYMLINK_NOFOLLOW) < 0)
      r = hutch_err_set(err, errno, "/dev/%s", e->d_name);
  }

  closedir(d);
  return r;
}

/* Keep only what the agent itself uses: setting workload ids, chowning a
 * PTY to its user, signalling workloads, giving each its cgroup namespace,
 * and dropping capabilities in children. */
/* The agent keeps what it needs to set a workload up, and, in a build
 * step's sandbox, what root's RUN steps keep (HUTCH_BUILD_CAPS): a
 * capability dropped here no child can have. */
static int drop_capabilities(struct agent *a) {
  static const int keep[] = {CAP_CHOWN,  CAP_KILL,    CAP_SETGID,
                             CAP_SETUID, CAP_SETPCAP, CAP_SYS_ADMIN};
  uint64_t mask = a->build ? HUTCH_BUILD_CAPS : 0;
  for (size_t i = 0; i < ARRAY_SIZE(keep); i++)
    mask |= 1ull << keep[i];
  for (int cap = 0; cap <= 63; cap++)
    if (!(mask & (1ull << cap)) && prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 && errno != EINVAL)
      return -1;
  a->bset = mask;
  struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
  struct __user_cap_data_struct d[2] = {
      {(uint32_t)mask, (uint32_t)mask, 0},
      {(uint32_t)(mask >> 32), (uint32_t)(mask >> 32), 0},
  };
  return (int)syscall(SYS_capset, &h, d);
}

static void hello(struct agent *a, int fd);

/* The client went away. Execs go on (their output waits in their pipes,
 * their limits still hold); file operations, which only a client can use,
 * are abandoned. Frames the jobs send meanwhile (an exit) are kept for
 * the next client, after its HELLO. */
static void detach(struct agent *a) {
  agent_unwatch(a, &a->conn_w);
  hutch_conn_free(&a->conn); /* closes the fd, drops what was half sent */
  hutch_conn_init(&a->conn, -1);
  a->conn_w.fd = -1;
  a->conn_w.events = 0;
  a->detached = true;
  for (struct job *j = a->jobs; j; j = j->next)
    if (!j->done && j->kind == JOB_FILE)
      job_close(a, j);
  agent_watch(a, &a->listen_w, EPOLLIN);
}

static void on_listen(struct agent *a, struct watch *w, uint32_t events) {
  (void)events;
  int fd = accept4(w->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
  if (fd < 0 || !a->detached) {
    if (fd >= 0)
      close(fd);
    return;
  }
  agent_unwatch(a, &a->listen_w); /* one client at a time */
  hello(a, fd);
}

/* fd made non-blocking and close-on-exec; -1 with errno when it cannot be. */
static int nonblock_cloexec(int fd) {
  int fl = fcntl(fd, F_GETFL);
  if (fl < 0)
    return -1;
  if (fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
    return -1;
  if (fcntl(fd, F_SETFD, FD_CLOEXEC) < 0)
    return -1;
  return 0;
}

static int setup(struct agent *a, int argc, char **argv, struct hutch_err *err) {
  uint64_t lfd = 0;
  a->listen_w.fd = -1;

  /* --build comes right after the spec when given (spawn.c). */
  a->build = argc >= 4 && strcmp(argv[3], "--build") == 0;
  if (a->build) {
    for (int i = 3; i < argc; i++)
      argv[i] = argv[i + 1];
    argc--;
  }

  if ((argc != 3 && argc != 5) || strcmp(argv[1], "--cgroup") != 0 ||
      (argc == 5 && (strcmp(argv[3], "--listen") != 0 || !parse_u64(argv[4], &lfd) || lfd > 1024)))
    return hutch_err_invalid(err, "usage: hutch-agent --cgroup SPEC [--build] [--listen FD] "
                                  "(started by hutch)");
  if (argc == 5) {
    a->first_spare_ns = now_ns() + (uint64_t)SPARE_FIRST_MS * 1000000;
    a->listen_w.fd = (int)lfd;
    a->listen_w.ready = on_listen;
    if (nonblock_cloexec(a->listen_w.fd) < 0)
      return hutch_err_set(err, errno, "listening socket");
  }

  if (hutch_cgroup_from_spec(argv[2], &a->cg, err) < 0)
    return -1;

  /* Under a kernel of the sandbox's own (the gvisor tier: --cgroup none),
   * the runtime hands the container only stdio: the connection is stdin. */
  if (a->cg.ops == &hutch_cgroup_none_ops) {
    if (dup2(0, HUTCH_AGENT_CONN_FD) < 0)
      return hutch_err_set(err, errno, "connection on stdin");
    int null = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (null < 0)
      return hutch_err_set(err, errno, "/dev/null");
    if (dup2(null, 0) < 0)
      return hutch_err_set(err, errno, "/dev/null");
    close(null);

    /* runsc cannot run under the sandbox's filter (its sentry makes host
     * calls the profile refuses), so the agent installs it on itself, as
     * its first process does in the ns tier: every workload inherits the
     * same profile beneath its own. gVisor has no listener to count with. */
    if (gvisor_dev_owner(err) < 0)
      return -1;
    if (hutch_seccomp_install_sandbox() < 0)
      return hutch_err_set(err, errno, "install the sandbox's seccomp filter");
  }

  /* Held for the host, never used here (layout.h); no workload inherits it. */
  if (fcntl(HUTCH_AGENT_STORAGE_FD, F_SETFD, FD_CLOEXEC) < 0 && errno != EBADF)
    return hutch_err_set(err, errno, "storage fd");
  if (prctl(PR_SET_DUMPABLE, 0) < 0)
    return hutch_err_set(err, errno, "drop privileges");
  if (drop_capabilities(a) < 0)
    return hutch_err_set(err, errno, "drop privileges");

  /* Nothing hutch's caller ignored stays ignored, here or in a child;
   * SIGPIPE is the one disposition the agent sets, and the one a child
   * resets (child.c). As PID 1 of its namespace, the agent hears no signal
   * it has no handler for either way. */
  child_reset_signals();
  signal(SIGPIPE, SIG_IGN);
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGCHLD);
  if (sigprocmask(SIG_BLOCK, &set, NULL) < 0)
    return hutch_err_set(err, errno, "sigprocmask");

  a->epfd = epoll_create1(EPOLL_CLOEXEC);
  a->sig_w.fd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
  if (a->epfd < 0 || a->sig_w.fd < 0)
    return hutch_err_set(err, errno, "event loop");
  a->sig_w.ready = on_signal;
  agent_watch(a, &a->sig_w, EPOLLIN);

  if (nonblock_cloexec(HUTCH_AGENT_CONN_FD) < 0)
    return hutch_err_set(err, errno, "connection fd");
  for (int i = 0; i < a->cg.nfd; i++)
    fcntl(a->cg.fd[i], F_SETFD, FD_CLOEXEC);
  a->conn_w.ready = on_conn;

  return monitor_start(a, err);
}

/* Start serving a client on fd: HELLO first, with the execs still going
 * (their stream ids, which the client takes up again with fresh windows),
 * then what the jobs sent while there was none. */
static void hello(struct agent *a, int fd) {
  struct hutch_conn old = a->conn;
  hutch_conn_init(&a->conn, fd);

  json_t *jobs = json_array();
  for (struct job *j = a->jobs; j; j = j->next) {
    if (j->done || j->closed || j->kind != JOB_EXEC)
      continue;
    j->send_window = HUTCH_WINDOW_INITIAL;
    json_array_append_new(jobs, json_pack("{s:I,s:i,s:b}", "stream", (json_int_t)j->id, "pid",
                                          j->pid ? j->pid : -1, "stdin", j->in.fd >= 0));
  }
  agent_send_json(a, HUTCH_F_HELLO, 0, 0,
                  json_pack("{s:i, s:s, s:s, s:o, s:o}", "protocol", HUTCH_PROTOCOL_VERSION,
                            "agent", "hutch-agent", "version", AGENT_VERSION, "jobs", jobs,
                            "escape_attempts", monitor_json(a)));
  a->monitor.dirty = false; /* the client has the counts */

  size_t kept = old.out.end - old.out.start;
  if (kept)
    agent_send_raw(a, old.out.data + old.out.start, kept);
  old.fd = -1;
  hutch_conn_free(&old);

  a->conn_w.fd = fd;
  a->conn_w.events = 0;
  a->detached = false;
  agent_watch(a, &a->conn_w, EPOLLIN);
}

static void reap_done(struct agent *a) {
  for (struct job **p = &a->jobs; *p;) {
    struct job *j = *p;
    if (j->done) {
      *p = j->next;
      job_free(a, j);
      a->maybe_idle = true;
      a->first_spare_ns = 0; /* in use: its spare is due now */
    } else {
      p = &j->next;
    }
  }
}

static void update_interest(struct agent *a) {
  for (struct job *j = a->jobs; j; j = j->next)
    if (!j->done)
      job_update_interest(a, j);
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "--spare") == 0)
    spare_main(argc, argv);

  struct agent a = {.epfd = -1, .spare.sock = -1, .maybe_idle = true};
  struct hutch_err err = {0};
  if (setup(&a, argc, argv, &err) < 0) {
    fprintf(stderr, "hutch-agent: %s\n", err.msg);
    return 125;
  }
  hello(&a, HUTCH_AGENT_CONN_FD);

  for (;;) {
    if (!a.detached && (a.conn.eof || hutch_conn_flush(&a.conn, &err) < 0)) {
      /* The client is gone. As PID 1, exiting ends the whole sandbox:
       * unless a client can come back, that is what happens. */
      if (a.listen_w.fd < 0)
        break;
      detach(&a);
    }

    /* Ended jobs are freed after their last frame is on its way (freeing
     * keeps or removes their leaf: leaf.c), and never inside a callback
     * that might still use them. The spare comes after, in the leaf an
     * ended job left. */
    reap_done(&a);
    /* After the flush: output paused while the connection was backed up
     * reads again once it has drained, and nothing else would wake us. */
    update_interest(&a);
    spare_keep(&a);
    if (!a.detached)
      agent_watch(&a, &a.conn_w, EPOLLIN | (hutch_conn_queued(&a.conn) ? EPOLLOUT : 0));

    struct epoll_event ev[32];
    int wait_ms = spare_expire(&a), kept_ms = leaf_expire(&a);
    if (kept_ms >= 0 && (wait_ms < 0 || kept_ms < wait_ms))
      wait_ms = kept_ms;
    int n = epoll_wait(a.epfd, ev, ARRAY_SIZE(ev), wait_ms);
    if (n < 0 && errno != EINTR)
      break;

    for (int i = 0; i < n; i++) {
      struct watch *w = ev[i].data.ptr;
      if (w->fd >= 0) /* closed by an earlier callback of this turn */
        w->ready(&a, w, ev[i].events);
    }
  }

  return 0;
}
