/* hutch-agent: PID 1 of a sandbox. One event loop (epoll) serves the
 * protocol connection, the workloads' pipes, timers and SIGCHLD. */
#ifndef HUTCH_AGENT_H
#define HUTCH_AGENT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "cgroup.h"
#include "conn.h"
#include "msg.h"

struct agent;

/* Anything registered with epoll: its fd and what to do when it is ready. */
struct watch {
  int fd;
  uint32_t events; /* the interest currently registered, 0 when not */
  void (*ready)(struct agent *a, struct watch *w, uint32_t events);
};

void agent_watch(struct agent *a, struct watch *w, uint32_t events);
void agent_unwatch(struct agent *a, struct watch *w);
void agent_close_watch(struct agent *a, struct watch *w);

enum job_kind { JOB_EXEC, JOB_FILE };

/* An output pipe of a job, forwarded as STDOUT or STDERR frames. */
struct outpipe {
  struct watch w;
  struct job *job;
  uint8_t frame_type;
  bool eof;
};

/* An exec's own cgroup (leaf.c): made for it, or an ended exec's kept. */
struct leaf {
  struct hutch_cgroup cg; /* cg.ops is NULL when there is none */
  char name[16];
  uint64_t oom_base; /* OOM kills counted in it before this exec */
};

/* One stream: an exec, or a file operation run by a worker process. */
struct job {
  struct job *next;
  uint32_t id;
  enum job_kind kind;
  pid_t pid;        /* 0 once reaped */
  pid_t pgid;       /* exec job: its session and process group, which is pid */
  int status;       /* wait status of pid */
  struct rusage ru; /* of pid once reaped: its CPU time without a cgroup */
  uint64_t started_ns, exited_ns;

  struct outpipe out, err; /* err unused for a file job or a PTY */
  struct watch in;         /* write end of the workload's stdin */
  uint8_t *inbuf;          /* stdin bytes not yet written */
  size_t inlen, incap;
  size_t in_max; /* twice the window the client was given: more is an error */
  bool in_eof;   /* the client sent EOF: close once inbuf drains */
  bool pty;

  struct watch result; /* file job: the worker's result JSON */
  char *resbuf;
  size_t reslen;
  bool result_eof;

  struct watch exec_err; /* exec job: why exec failed, if it did */
  char exec_msg[256];

  struct leaf leaf;   /* exec job: its own cgroup */
  struct watch timer; /* exec job: wall and CPU limits */
  uint64_t timeout_ms, cpu_ms, output_limit, output_bytes;
  enum hutch_status forced; /* set when the agent ended it: timeout, output_limit */
  char forced_msg[128];

  uint64_t escape_attempts; /* exec job: refused calls its processes made */

  /* Exec job whose artifacts the client asked for: where to look besides
   * the home and /tmp, since when, and as whom (job.c, exec_changed). */
  char *changed_root;
  int64_t changed_since_ns;
  uid_t uid;
  gid_t gid;
  char home[256]; /* "" for none */

  uint32_t send_window; /* bytes we may still send on this stream */
  bool closed;          /* the client abandoned the stream */
  bool reaped;
  bool done; /* final frame sent; freed after this loop turn */
};

/* A process started ahead of the next exec (spare.c): in its own leaf, as
 * the sandbox user, every step of child_run() done but the command's own
 * (stdio, cwd, env, exec), waiting for it on sock. */
struct spare {
  pid_t pid; /* 0 when there is none */
  int sock;
  bool ready;       /* it said so: its setup went through */
  uint64_t born_ns; /* when the sandbox fell idle and it was started */
  struct leaf leaf;
};

/* monitor.c: refused syscalls, counted. */
struct escape_count {
  const char *name; /* from the filter's table: static */
  uint64_t n;
};
struct monitor {
  struct watch w;     /* the seccomp listener; fd -1 without one */
  struct watch timer; /* holds reports back; fd -1 when not monitoring */
  bool timer_armed;
  bool dirty; /* counts changed since the host last heard them */
  uint64_t total;
  struct escape_count *calls;
  size_t ncalls;
};

struct agent {
  int epfd;
  struct hutch_conn conn;
  struct watch conn_w, sig_w;
  /* The socket a client that went away comes back through (a restarted
   * server); fd -1 without one: then losing the connection ends the agent. */
  struct watch listen_w;
  bool detached;          /* no client: wait on listen_w */
  bool build;             /* --build: a template build's step (HUTCH_BUILD_CAPS for root) */
  uint64_t bset;          /* its capability bounding set, and so every child's at fork */
  struct hutch_cgroup cg; /* the sandbox cgroup; exec leaves go below it */
  struct job *jobs;
  unsigned next_leaf;
  struct leaf kept; /* an ended exec's leaf, for the next (leaf.c) */
  uint64_t kept_ns; /* since when */
  struct spare spare;
  bool spare_off; /* a spare died untaken: make no more */
  unsigned spares_made;
  uint64_t first_spare_ns; /* when the first spare is due; 0: now */
  /* Something ended (a job, an orphan): the sandbox may be idle now, and
   * worth a look for a spare. Not looked at on every loop turn. */
  bool maybe_idle;
  long ncpu; /* read when a CPU-time limit first needs it */
  struct monitor monitor;
};

struct job *agent_find_job(struct agent *a, uint32_t id);
void agent_send(struct agent *a, uint8_t type, uint8_t flags, uint32_t stream, const void *p,
                size_t n);
void agent_send_json(struct agent *a, uint8_t type, uint8_t flags, uint32_t stream, json_t *j);
void agent_send_error(struct agent *a, uint32_t stream, const char *code, const char *msg);
/* Whole frames, already encoded. */
void agent_send_raw(struct agent *a, const void *p, size_t n);
/* Whether output may be read now: the connection is not backed up. */
bool agent_can_send(const struct agent *a);

/* job.c */
/* artifacts: NULL, or {"path", "since_ns"}: the files the exec changes
 * come in its exit event's "changed" (as the file op "changed" answers),
 * unless this kernel cannot look as the user (the client asks a worker). */
int job_start_exec(struct agent *a, uint32_t id, struct hutch_exec_req *req, json_t *artifacts,
                   struct hutch_err *err);
int job_start_file(struct agent *a, uint32_t id, json_t *req, struct hutch_err *err);
void job_stdin(struct agent *a, struct job *j, const uint8_t *p, size_t n, bool eof);
void job_control(struct agent *a, struct job *j, json_t *ctl);
void job_window(struct agent *a, struct job *j, uint32_t more);
void job_close(struct agent *a, struct job *j);
void job_reaped(struct agent *a, struct job *j, int status, const struct rusage *ru);
/* Re-arm output pipes whose reading was paused by flow control. */
void job_update_interest(struct agent *a, struct job *j);
void job_free(struct agent *a, struct job *j);
/* fork(), the child born in leaf on cgroup v2 (NULL: where the agent is). */
pid_t agent_fork(const struct agent *a, const struct hutch_cgroup *leaf);

/* users.c: the account a workload runs as. */
struct who {
  uid_t uid;
  gid_t gid;
  char name[33]; /* "" when /etc/passwd has no entry for a UID given */
  char home[256];
};
/* user: "user" or NULL (hutch's default), "root", a name in the sandbox's
 * /etc/passwd, or UID[:GID]. */
int agent_who(const char *user, struct who *w, struct hutch_err *err);

/* child.c: runs in the forked child, never returns. */
struct child_plan {
  enum job_kind kind;
  const struct hutch_exec_req *req; /* exec */
  json_t *file_req;                 /* file */
  uid_t uid;
  gid_t gid;
  const struct who *who;           /* NULL: hutch's user, or root by uid */
  uint64_t caps;                   /* kept when uid is 0: 0, or HUTCH_BUILD_CAPS */
  uint64_t bset;                   /* the agent's bounding set: what is left to drop */
  const struct hutch_cgroup *leaf; /* v1: join it; NULL when already in it */
  /* The agent runs on a kernel of the sandbox's own (gVisor: --cgroup
   * none): no cgroup namespace, and no securebits, which that kernel does
   * not have; the empty bounding set and no_new_privs still keep a
   * workload from gaining any capability. */
  bool guest_kernel;
  int stdin_fd, stdout_fd, stderr_fd;
  int pty_slave; /* -1 without a PTY */
  int report_fd; /* exec failure reason, or the file worker's result */
};
void __attribute__((noreturn)) child_run(const struct child_plan *p);
/* Every signal's disposition to its default (the agent, at its start). */
void child_reset_signals(void);
/* The spare's side: set up, say "R" on sock, then wait for one command. */
void __attribute__((noreturn)) child_spare(const struct child_plan *p, int sock);

/* spare.c. A command for the spare is one SOCK_SEQPACKET message: this
 * header, then cwd ("" for the user's home), argv and env as NUL-terminated
 * strings, with four fds: stdin (anything when !has_stdin), stdout, stderr
 * and the report pipe. A command too big for one message is run the slow
 * way. */
#define SPARE_MSG_MAX (60u << 10)
struct spare_msg {
  uint32_t has_stdin, argc, envc;
};
/* How long a server's sandbox waits for its first spare, unless a job ends
 * first (spare.c). */
#define SPARE_FIRST_MS 20
/* A spawned spare's start: `hutch-agent --spare ...` (spare.c). */
void __attribute__((noreturn)) spare_main(int argc, char **argv);
/* Start a spare when the sandbox is idle and has none. */
void spare_keep(struct agent *a);
/* Hand the command to the spare: its pid, now the job's (with the leaf),
 * or -1 when there is no spare that can run it. */
pid_t spare_take(struct agent *a, struct job *j, const struct hutch_exec_req *req, int in, int out,
                 int err, int report);
/* Whether pid was the spare (then it is forgotten). */
bool spare_reaped(struct agent *a, pid_t pid);
/* End the spare now, to free its pid for another process. */
void spare_drop(struct agent *a);
/* End a spare that has waited AGENT_IDLE_MS; the milliseconds until the
 * one there is would be, or until the first is due, or -1 (epoll_wait's
 * timeout). */
int spare_expire(struct agent *a);

/* leaf.c. What the spare and a kept leaf wait before they go: long enough
 * to span an agent's turn (a model's answer). */
#define AGENT_IDLE_MS 30000
/* Whether the sandbox holds no process but the agent. */
bool agent_alone(struct agent *a);
/* A leaf for the next exec: the kept one, else a new one. */
int leaf_get(struct agent *a, struct leaf *l, struct hutch_err *err);
/* Done with an exec's leaf (its processes gone): kept for the next exec
 * when it can be, else removed. l is empty after. */
void leaf_put(struct agent *a, struct leaf *l);
/* Close a leaf and remove it (a leaf still holding processes stays until
 * the sandbox ends). */
void leaf_remove(struct agent *a, struct leaf *l);
/* Remove a leaf kept AGENT_IDLE_MS, and tell when the one kept would go:
 * in milliseconds, or -1 without one. */
int leaf_expire(struct agent *a);

/* monitor.c. Start listening when the first process passed a listener
 * (without one nothing is counted, which is not an error). */
int monitor_start(struct agent *a, struct hutch_err *err);
/* Whether refused calls are counted in this sandbox. */
bool monitor_on(const struct agent *a);
/* {"total": N, "syscalls": {name: N}}, both null when not counting. */
json_t *monitor_json(const struct agent *a);

/* What the worker of a write whose parents it hands to the user starts
 * with, as root (job.c): chown, and becoming the user. */
#define FILE_OWNER_CAPS \
  ((1ull << 0 /* CHOWN */) | (1ull << 6 /* SETGID */) | (1ull << 7 /* SETUID */))

/* files.c: the file operations, in the worker (as the sandbox user). */
int files_run(json_t *req, int out_fd, int in_fd, int result_fd);
/* Report errno e as the operation's result; -1. */
int files_fail(int fd, int e, const char *what, const char *path);
/* An entry as the operations report it: path's lstat st (name in the
 * directory at, or AT_FDCWD for path itself). */
json_t *files_entry(const char *path, const char *name, const struct stat *st, int at);
/* watch.c: the "watch" operation. */
int watch_files(json_t *req, const char *path, int out, int in, int res);
/* An exec's artifacts (files.c, op "changed"): {path, size, ctime_ns}
 * objects, by path. */
json_t *files_changed_since(const char *path, const char *home, int64_t since_ns);

#endif
