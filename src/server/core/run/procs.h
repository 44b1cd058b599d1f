/* Background processes: the actions on them, with no connection in them
 * (the native API renders them in api/procs.c, api/exec.c and api/ws.c,
 * envd's in e2b/process.c). */
#ifndef HUTCH_CORE_RUN_PROCS_H
#define HUTCH_CORE_RUN_PROCS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"

struct sbx;
struct proc;

/* How a start ends for who waits for it: pid once it runs (exit NULL), or
 * pid 0 and its exit line (borrowed) when it ended before it ran. */
typedef void (*procs_started_cb)(int pid, json_t *exit, void *arg);

/* Start a background process (an exec with "background": true) from the
 * agent request req (exec_request): in (NULL: none) is written to its
 * stdin, keep_stdin: more may follow. started (NULL: none) is called once,
 * from the loop. NULL and err: quota_exceeded, unavailable
 * sandbox_error. */
struct proc *procs_start(struct sbx *sb, json_t *req, const char *in, bool keep_stdin,
                         procs_started_cb started, void *arg, struct hutch_err *err);
void procs_free(struct sbx *sb);
/* After a restart: the execs the agent still runs become background
 * processes (output from now on; what was kept went with the old server). */
void procs_adopt(struct sbx *sb, json_t *jobs);
/* pr is its sandbox's template's start command (startup.c): a service
 * meant to run as long as the sandbox, which procs_oldest_ms counts apart. */
void procs_mark_start(struct proc *pr);
/* When the longest running of sb's processes started (ms since the epoch;
 * an adopted one: when it was adopted), of its start commands or of the
 * others; 0: none runs. */
int64_t procs_oldest_ms(const struct sbx *sb, bool start_command);

/* The process pid (a decimal string, from a path) names in sb: not_found. */
struct proc *procs_lookup(struct sbx *sb, const char *pid, struct hutch_err *err);
/* A sandbox's processes that started, newest first (prev NULL: the first). */
struct proc *procs_next(struct sbx *sb, struct proc *prev);
struct proc *procs_by_pid(struct sbx *sb, int pid); /* NULL: none */
struct proc_info {
  int pid;
  json_t *cmd;        /* the argv; borrowed */
  int64_t started_ms; /* ms since the epoch */
  json_t *exit;       /* the exit line once it has ended, NULL while it runs; borrowed */
};
void procs_info(const struct proc *pr, struct proc_info *out);
int procs_pid(const struct proc *pr);
bool procs_pty(const struct proc *pr);    /* started with a PTY (not known of adopted ones) */
json_t *procs_cmd(const struct proc *pr); /* the argv; borrowed */

/* Attach: a reader gets each output line (NDJSON, as the process's kept
 * output) by line(), then the exit line by end(), which owns u (it is
 * unlinked then); one that goes away first calls procs_unsubscribe. What
 * was kept before (procs_kept) and an exit line already there
 * (procs_exit_line) are the reader's to render first. */
struct sub {
  struct sub *next;
  struct proc *pr;
  void (*start)(struct sub *u, int pid); /* optional: it started */
  void (*line)(struct sub *u, const char *line, size_t n);
  void (*end)(struct sub *u, const char *line, size_t n);
  void *ctx;
};
struct sub *procs_subscribe(struct proc *pr,
                            void (*line)(struct sub *u, const char *line, size_t n),
                            void (*end)(struct sub *u, const char *line, size_t n), void *ctx);
void procs_unsubscribe(struct sub *u);
const char *procs_kept(const struct proc *pr, size_t *n);
json_t *procs_exit_line(const struct proc *pr); /* NULL while it runs */

/* Input: quota stdin_full when too much waits unread, conflict
 * stdin_closed when it takes no more (started without keep_stdin, ended,
 * or eof sent). */
int procs_input(struct proc *pr, const void *data, size_t n, bool eof, struct hutch_err *err);
/* Signal sig (1 to 64) to it, resize its PTY, or kill what it started (its
 * cgroup): conflict not_running when it has ended. */
int procs_signal(struct proc *pr, int sig, struct hutch_err *err);
int procs_resize(struct proc *pr, int rows, int cols, struct hutch_err *err);
int procs_kill(struct proc *pr, struct hutch_err *err);

#endif
