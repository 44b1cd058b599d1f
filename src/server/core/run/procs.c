/* Background processes: an exec with "background": true outlives its
 * request. The server reads its output as it comes (a background process
 * never waits for a reader), keeps the last PROC_KEEP bytes of it as NDJSON
 * lines, and hands them, then what follows, to every client that attaches
 * (GET …/processes/{pid}/output), until the exit line. Clients can also
 * list processes, signal them, write to their stdin and kill them. */
#include "core/run/procs.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frame.h"
#include "util.h"
#include "core/sandbox/agentc.h"
#include "core/run/exec.h"
#include "core/run/ndjson.h"
#include "core/sandbox/sbx.h"
#include "http/http.h"

#define PROC_KEEP (1u << 20)  /* output kept for clients that attach later */
#define PROC_MAX 256          /* processes remembered per sandbox, ended ones included */
#define STDIN_HELD (4u << 20) /* input queued for a process that does not read it */

struct proc {
  struct proc *next;
  struct sbx *sb;
  struct astream *s; /* NULL once its stream has ended */
  int pid;           /* in the sandbox; 0 until it started */
  json_t *cmd;
  int64_t started_ms;
  json_t *exit; /* the exit line once it has ended */
  struct ndjson enc;
  char *kept; /* the last lines of output */
  size_t kept_len;
  struct sub *subs;
  procs_started_cb started; /* who waits for it to run, until told */
  void *started_arg;
  bool stdin_open;
  bool pty;           /* its output is a terminal's */
  bool start_command; /* its template's start command (procs_mark_start) */
};

/* ---- output ---- */

static void keep(struct proc *pr, const char *line, size_t n) {
  pr->kept = xrealloc(pr->kept, pr->kept_len + n);
  memcpy(pr->kept + pr->kept_len, line, n);
  pr->kept_len += n;
  if (pr->kept_len <= PROC_KEEP)
    return;

  /* Drop whole lines from the front. */
  size_t drop = pr->kept_len - PROC_KEEP;
  char *nl = memchr(pr->kept + drop, '\n', pr->kept_len - drop);
  drop = nl ? (size_t)(nl + 1 - pr->kept) : pr->kept_len;
  memmove(pr->kept, pr->kept + drop, pr->kept_len - drop);
  pr->kept_len -= drop;
}

void procs_unsubscribe(struct sub *u) {
  struct proc *pr = u->pr;
  for (struct sub **p = &pr->subs; *p; p = &(*p)->next)
    if (*p == u) {
      *p = u->next;
      break;
    }
  free(u);
}

static void broadcast(struct proc *pr, const char *line, size_t n) {
  struct sub *next;
  for (struct sub *u = pr->subs; u; u = next) {
    next = u->next;
    u->line(u, line, n); /* may unsubscribe u */
  }
}

static void emit(struct proc *pr, char *line, size_t n) {
  if (!line)
    return;
  keep(pr, line, n);
  broadcast(pr, line, n);
  free(line);
}

static void tell_started(struct proc *pr) {
  procs_started_cb started = pr->started;
  if (!started)
    return;
  pr->started = NULL;
  started(pr->pid, pr->exit, pr->started_arg);
}

static void ended(struct proc *pr, json_t *exit_line) {
  size_t n;
  for (int i = 0; i < 2; i++) {
    char *line = ndjson_next(&pr->enc, i, NULL, 0, true, &n);
    emit(pr, line, n);
  }

  pr->exit = exit_line;
  pr->s = NULL;
  pr->stdin_open = false;
  exec_report_end(pr->sb->srv, pr->sb->tenant, pr->sb->id, pr->cmd, exit_line,
                  wall_ms() - pr->started_ms, true);

  char *line = http_json_line(json_incref(exit_line), &n);
  while (pr->subs) {
    struct sub *u = pr->subs;
    pr->subs = u->next;
    u->next = NULL;
    u->end(u, line, n); /* frees u */
  }
  free(line);

  tell_started(pr);
}

static void on_frame(struct astream *s, const struct hutch_frame *f) {
  struct proc *pr = s->ctx;
  if (!f) {
    ended(pr, ndjson_exit_gone("the sandbox ended"));
    return;
  }

  if (f->type == HUTCH_F_STDOUT || f->type == HUTCH_F_STDERR) {
    size_t n;
    char *line = ndjson_next(&pr->enc, f->type == HUTCH_F_STDERR, f->payload, f->len, false, &n);
    emit(pr, line, n);
    agentc_window(s, f->len); /* A background process never waits for a reader. */
    return;
  }
  if (f->type != HUTCH_F_EVENT && f->type != HUTCH_F_ERROR)
    return;

  json_t *j = json_loadb((const char *)f->payload, f->len, 0, NULL);
  const char *ev = json_string_value(json_object_get(j, "event"));
  if (f->type == HUTCH_F_EVENT && ev && strcmp(ev, "started") == 0) {
    pr->pid = (int)json_integer_value(json_object_get(j, "pid"));
    pr->sb->srv->metrics.execs++;
    exec_report_start(pr->sb->srv, pr->sb->tenant, pr->sb->id, pr->cmd, json_object_get(j, "pid"),
                      true);
    struct sub *next;
    for (struct sub *u = pr->subs; u; u = next) {
      next = u->next;
      if (u->start)
        u->start(u, pr->pid); /* may unsubscribe u */
    }
    tell_started(pr);
  } else if (f->flags & HUTCH_FL_END) {
    ended(pr, ndjson_exit(f->type, j));
  }
  json_decref(j);
}

/* ---- the registry of a sandbox's processes ---- */

/* Forget the oldest ended process when there are too many. */
static void prune(struct sbx *sb) {
  size_t n = 0;
  struct proc *oldest_ended = NULL;
  struct proc **link = NULL;
  for (struct proc **p = &sb->procs; *p; p = &(*p)->next) {
    n++;
    if ((*p)->exit && !(*p)->subs && !(*p)->started) {
      oldest_ended = *p;
      link = p;
    }
  }
  if (n < PROC_MAX || !oldest_ended)
    return;

  *link = oldest_ended->next;
  json_decref(oldest_ended->cmd);
  json_decref(oldest_ended->exit);
  free(oldest_ended->kept);
  free(oldest_ended);
}

struct proc *procs_start(struct sbx *sb, json_t *req, const char *in, bool keep_stdin,
                         procs_started_cb started, void *arg, struct hutch_err *err) {
  prune(sb);

  size_t n = 0;
  for (struct proc *p = sb->procs; p; p = p->next)
    n++;
  if (n >= PROC_MAX) {
    hutch_err_fail(err, HUTCH_ERR_QUOTA, "quota_exceeded",
                   "the sandbox has %d background processes; wait for some to end", PROC_MAX);
    return NULL;
  }

  struct proc *pr = xcalloc(1, sizeof *pr);
  pr->sb = sb;
  pr->cmd = json_incref(json_object_get(req, "argv"));
  pr->pty = json_object_get(req, "pty") != NULL;
  pr->started_ms = wall_ms();
  pr->stdin_open = keep_stdin;
  if (keep_stdin)
    json_object_set_new(req, "stdin", json_true());

  pr->s = agentc_open(&sb->ac, req, on_frame, pr);
  if (!pr->s) {
    json_decref(pr->cmd);
    free(pr);
    hutch_err_fail(err, HUTCH_ERR_UNAVAILABLE, "sandbox_error",
                   "the sandbox's agent is not reachable");
    return NULL;
  }

  if (in)
    agentc_stdin(pr->s, in, strlen(in), !keep_stdin);
  pr->started = started;
  pr->started_arg = arg;
  pr->next = sb->procs;
  sb->procs = pr;
  return pr;
}

void procs_adopt(struct sbx *sb, json_t *jobs) {
  size_t i;
  json_t *job;
  json_array_foreach(jobs, i, job) {
    json_t *stream = json_object_get(job, "stream"), *pid = json_object_get(job, "pid");
    if (!json_is_integer(stream) || json_integer_value(stream) <= 0 ||
        json_integer_value(stream) > UINT32_MAX || !json_is_integer(pid))
      continue;

    struct proc *pr = xcalloc(1, sizeof *pr);
    pr->sb = sb;
    pr->pid = (int)json_integer_value(pid);
    pr->cmd = json_array(); /* the agent does not keep it */
    pr->started_ms = wall_ms();
    pr->stdin_open = json_is_true(json_object_get(job, "stdin"));
    pr->s = agentc_attach(&sb->ac, (uint32_t)json_integer_value(stream), on_frame, pr);
    pr->next = sb->procs;
    sb->procs = pr;
  }
}

void procs_free(struct sbx *sb) {
  while (sb->procs) {
    struct proc *pr = sb->procs;
    sb->procs = pr->next;
    json_decref(pr->cmd);
    json_decref(pr->exit);
    free(pr->kept);
    free(pr);
  }
}

struct sub *procs_subscribe(struct proc *pr,
                            void (*line)(struct sub *u, const char *line, size_t n),
                            void (*end)(struct sub *u, const char *line, size_t n), void *ctx) {
  struct sub *u = xcalloc(1, sizeof *u);
  u->pr = pr;
  u->line = line;
  u->end = end;
  u->ctx = ctx;
  u->next = pr->subs;
  pr->subs = u;
  return u;
}

/* ---- for ws.c and e2b_process.c ---- */

struct proc *procs_next(struct sbx *sb, struct proc *prev) {
  for (struct proc *pr = prev ? prev->next : sb->procs; pr; pr = pr->next)
    if (pr->pid > 0)
      return pr;
  return NULL;
}

struct proc *procs_by_pid(struct sbx *sb, int pid) {
  for (struct proc *pr = sb->procs; pr; pr = pr->next)
    if (pid > 0 && pr->pid == pid)
      return pr; /* the newest first: a pid used again names the live one */
  return NULL;
}

bool procs_pty(const struct proc *pr) {
  return pr->pty;
}

int procs_pid(const struct proc *pr) {
  return pr->pid;
}

json_t *procs_cmd(const struct proc *pr) {
  return pr->cmd;
}

struct proc *procs_lookup(struct sbx *sb, const char *pid, struct hutch_err *err) {
  uint64_t n;
  if (parse_u64(pid, &n) && n <= INT32_MAX) {
    struct proc *pr = procs_by_pid(sb, (int)n);
    if (pr)
      return pr;
  }

  hutch_err_fail(err, HUTCH_ERR_NOT_FOUND, "not_found", "no background process %s in sandbox %s",
                 pid, sb->id);
  return NULL;
}

void procs_mark_start(struct proc *pr) {
  pr->start_command = true;
}

int64_t procs_oldest_ms(const struct sbx *sb, bool start_command) {
  int64_t oldest = 0;
  for (const struct proc *pr = sb->procs; pr; pr = pr->next) {
    bool running = pr->pid && !pr->exit;
    if (running && pr->start_command == start_command && (!oldest || pr->started_ms < oldest))
      oldest = pr->started_ms;
  }
  return oldest;
}

void procs_info(const struct proc *pr, struct proc_info *out) {
  *out = (struct proc_info){pr->pid, pr->cmd, pr->started_ms, pr->exit};
}

const char *procs_kept(const struct proc *pr, size_t *n) {
  *n = pr->kept_len;
  return pr->kept;
}

json_t *procs_exit_line(const struct proc *pr) {
  return pr->exit;
}

/* ---- input and control ---- */

int procs_input(struct proc *pr, const void *data, size_t n, bool eof, struct hutch_err *err) {
  if (!pr->s || !pr->stdin_open)
    return hutch_err_fail(err, HUTCH_ERR_CONFLICT, "stdin_closed",
                          "process %d takes no more input (started without keep_stdin, ended, "
                          "or sent eof)",
                          pr->pid);
  if (agentc_stdin_pending(pr->s) + n > STDIN_HELD)
    return hutch_err_fail(err, HUTCH_ERR_QUOTA, "stdin_full",
                          "process %d has %u bytes of input it has not read yet", pr->pid,
                          STDIN_HELD);
  agentc_stdin(pr->s, data, n, eof);
  pr->stdin_open = !eof;
  return 0;
}

static int control(struct proc *pr, json_t *ctl, struct hutch_err *err) {
  if (!pr->s) {
    json_decref(ctl);
    return hutch_err_fail(err, HUTCH_ERR_CONFLICT, "not_running", "process %d has ended", pr->pid);
  }
  agentc_send_json(pr->s, HUTCH_F_CONTROL, ctl);
  return 0;
}

int procs_signal(struct proc *pr, int sig, struct hutch_err *err) {
  if (sig < 1 || sig > 64)
    return hutch_err_fail(err, HUTCH_ERR_INVALID, "invalid_argument",
                          "a signal is a number from 1 to 64");
  return control(pr, json_pack("{s:i}", "signal", sig), err);
}

int procs_resize(struct proc *pr, int rows, int cols, struct hutch_err *err) {
  if (rows < 1 || rows > 9999 || cols < 1 || cols > 9999)
    return hutch_err_fail(err, HUTCH_ERR_INVALID, "invalid_argument",
                          "a PTY's rows and cols are 1 to 9999");
  return control(pr, json_pack("{s:{s:i,s:i}}", "resize", "rows", rows, "cols", cols), err);
}

int procs_kill(struct proc *pr, struct hutch_err *err) {
  return control(pr, json_pack("{s:b}", "kill", 1), err);
}
