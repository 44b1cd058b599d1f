/* Background processes: an exec with "background": true outlives its
 * request. The server reads its output as it comes (a background process
 * never waits for a reader), keeps the last PROC_KEEP bytes of it as NDJSON
 * lines, and hands them, then what follows, to every client that attaches
 * (GET …/processes/{pid}/output), until the exit line. Clients can also
 * list processes, signal them, write to their stdin and kill them. */
#include "core/procs.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frame.h"
#include "util.h"
#include "api/api.h"
#include "api/handlers.h"
#include "core/outlines.h"
#include "http/body.h"

#define PROC_KEEP (1u << 20)  /* output kept for clients that attach later */
#define PROC_MAX 256          /* processes remembered per sandbox, ended ones included */
#define SUB_BACKLOG (8u << 20) /* output queued for an attached client before it is dropped */
#define STDIN_HELD (4u << 20)  /* input queued for a process that does not read it */

struct proc {
  struct proc *next;
  struct sbx *sb;
  struct astream *s;       /* NULL once its stream has ended */
  int pid;                 /* in the sandbox; 0 until it started */
  json_t *cmd;
  int64_t started_ms;
  json_t *exit;            /* the exit line once it has ended */
  struct outlines enc;
  char *kept;              /* the last lines of output */
  size_t kept_len;
  struct sub *subs;
  struct http_conn *creator; /* the request that started it, until answered */
  bool stdin_open;
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

static void answer_creator(struct proc *pr) {
  if (!pr->creator)
    return;
  struct http_conn *c = pr->creator;
  pr->creator = NULL;
  json_t *j = json_pack("{s:o,s:b}", "pid", pr->pid ? json_integer(pr->pid) : json_null(),
                        "background", 1);
  if (pr->exit)
    json_object_set(j, "exit", pr->exit);
  http_json(c, 201, j);
}

static void ended(struct proc *pr, json_t *exit_line) {
  size_t n;
  for (int i = 0; i < 2; i++) {
    char *line = outlines_next(&pr->enc, i, NULL, 0, true, &n);
    emit(pr, line, n);
  }
  pr->exit = exit_line;
  pr->s = NULL;
  pr->stdin_open = false;
  char *line = http_json_line(json_incref(exit_line), &n);
  while (pr->subs) {
    struct sub *u = pr->subs;
    pr->subs = u->next;
    u->next = NULL;
    u->end(u, line, n); /* frees u */
  }
  free(line);
  answer_creator(pr);
}

static void on_frame(struct astream *s, const struct hutch_frame *f) {
  struct proc *pr = s->ctx;
  if (!f) {
    ended(pr, outlines_exit_gone("the sandbox ended"));
    return;
  }
  if (f->type == HUTCH_F_STDOUT || f->type == HUTCH_F_STDERR) {
    size_t n;
    char *line = outlines_next(&pr->enc, f->type == HUTCH_F_STDERR, f->payload, f->len, false, &n);
    emit(pr, line, n);
    agentc_window(s, f->len); /* never wait for a reader */
    return;
  }
  if (f->type != HUTCH_F_EVENT && f->type != HUTCH_F_ERROR)
    return;
  json_t *j = json_loadb((const char *)f->payload, f->len, 0, NULL);
  const char *ev = json_string_value(json_object_get(j, "event"));
  if (f->type == HUTCH_F_EVENT && ev && strcmp(ev, "started") == 0) {
    pr->pid = (int)json_integer_value(json_object_get(j, "pid"));
    pr->sb->srv->metrics.execs++;
    struct sub *next;
    for (struct sub *u = pr->subs; u; u = next) {
      next = u->next;
      if (u->start)
        u->start(u, pr->pid); /* may unsubscribe u */
    }
    answer_creator(pr);
  } else if (f->flags & HUTCH_FL_END) {
    ended(pr, outlines_exit(f->type, j));
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
    if ((*p)->exit && !(*p)->subs && !(*p)->creator) {
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

static void creator_gone(void *ctx) {
  struct proc *pr = ctx;
  pr->creator = NULL; /* the process goes on: it is a background one */
}

static const struct http_stream_ops creator_ops = {.abort = creator_gone};

struct proc *procs_spawn(struct http_conn *c, struct sbx *sb, json_t *req, const char *in,
                         bool keep_stdin) {
  prune(sb);
  size_t n = 0;
  for (struct proc *p = sb->procs; p; p = p->next)
    n++;
  if (n >= PROC_MAX) {
    http_error(c, HUTCH_ERR_QUOTA, "too_many_processes",
               "the sandbox has %d background processes; wait for some to end", PROC_MAX);
    return NULL;
  }
  struct proc *pr = xcalloc(1, sizeof *pr);
  pr->sb = sb;
  pr->cmd = json_incref(json_object_get(req, "argv"));
  pr->started_ms = wall_ms();
  pr->stdin_open = keep_stdin;
  if (keep_stdin)
    json_object_set_new(req, "stdin", json_true());
  pr->s = agentc_open(&sb->ac, req, on_frame, pr);
  if (!pr->s) {
    json_decref(pr->cmd);
    free(pr);
    http_error(c, HUTCH_ERR_UNAVAILABLE, "sandbox_error", "the sandbox's agent is not reachable");
    return NULL;
  }
  if (in)
    agentc_stdin(pr->s, in, strlen(in), !keep_stdin);
  pr->next = sb->procs;
  sb->procs = pr;
  return pr;
}

int procs_start(struct http_conn *c, struct sbx *sb, json_t *req, const char *in, bool keep_stdin) {
  struct proc *pr = procs_spawn(c, sb, req, in, keep_stdin);
  if (!pr)
    return -1;
  pr->creator = c;
  http_own(c, &creator_ops, pr);
  return 0;
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

/* The process the route's {pid} names; NULL after a 404. */
static struct proc *find(struct http_conn *c, struct sbx **sbp, const struct principal *p) {
  struct sbx *sb = sbx_lookup_live(c, p);
  uint64_t pid;
  struct proc *pr;
  *sbp = sb;
  if (!sb)
    return NULL;
  if (parse_u64(c->req.params[1], &pid) && pid <= INT32_MAX && (pr = procs_by_pid(sb, (int)pid)))
    return pr;
  http_error(c, HUTCH_ERR_NOT_FOUND, "not_found", "no background process %s in sandbox %s", c->req.params[1],
             sb->id);
  return NULL;
}

static json_t *proc_json(const struct proc *pr) {
  char started[32];
  iso8601(pr->started_ms, started);
  return json_pack("{s:i,s:O,s:s,s:b,s:O?}", "pid", pr->pid, "cmd", pr->cmd, "started_at",
                   started, "running", pr->exit == NULL, "exit", pr->exit);
}

void api_procs_list(struct http_conn *c, const struct principal *p) {
  struct sbx *sb = sbx_lookup(c, p);
  if (!sb)
    return;
  json_t *a = json_array();
  for (struct proc *pr = sb->procs; pr; pr = pr->next)
    if (pr->pid > 0)
      json_array_append_new(a, proc_json(pr));
  http_json(c, 200, json_pack("{s:o}", "processes", a));
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

/* ---- an NDJSON reader ---- */

static void sub_gone(void *ctx) { procs_unsubscribe(ctx); }

static const struct http_stream_ops sub_ops = {.abort = sub_gone};

static void ndjson_line(struct sub *u, const char *line, size_t n) {
  struct http_conn *c = u->ctx;
  http_stream_send(c, line, n);
  if (http_queued(c) > SUB_BACKLOG) /* a reader this slow is dropped */
    http_abort(c);                  /* its abort (sub_gone) frees u */
}

static void ndjson_end(struct sub *u, const char *line, size_t n) {
  struct http_conn *c = u->ctx;
  free(u); /* already unlinked */
  http_stream_send(c, line, n);
  http_stream_end(c);
}

void api_procs_output(struct http_conn *c, const struct principal *p) {
  struct sbx *sb;
  struct proc *pr = find(c, &sb, p);
  if (!pr)
    return;
  if (pr->exit) { /* what was kept, the exit line, and done */
    size_t n;
    char *line = http_json_line(json_incref(pr->exit), &n);
    http_stream_start(c, 200, "application/x-ndjson", NULL, NULL);
    http_stream_send(c, pr->kept, pr->kept_len);
    http_stream_send(c, line, n);
    http_stream_end(c);
    free(line);
    return;
  }
  /* Subscribed before anything is sent: a send that fails closes the
   * connection, whose abort unsubscribes (and frees) u. */
  struct sub *u = procs_subscribe(pr, ndjson_line, ndjson_end, c);
  http_stream_start(c, 200, "application/x-ndjson", &sub_ops, u);
  http_stream_send(c, pr->kept, pr->kept_len);
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

int procs_pid(const struct proc *pr) { return pr->pid; }

json_t *procs_cmd(const struct proc *pr) { return pr->cmd; }

struct proc *procs_find(struct http_conn *c, const struct principal *p) {
  struct sbx *sb;
  return find(c, &sb, p);
}

const char *procs_kept(const struct proc *pr, size_t *n) {
  *n = pr->kept_len;
  return pr->kept;
}

json_t *procs_exit_line(const struct proc *pr) { return pr->exit; }

int procs_stdin(struct proc *pr, const void *data, size_t n, bool eof) {
  if (!pr->s || !pr->stdin_open)
    return -1;
  if (agentc_stdin_pending(pr->s) + n > STDIN_HELD)
    return -2;
  agentc_stdin(pr->s, data, n, eof);
  pr->stdin_open = !eof;
  return 0;
}

bool procs_control(struct proc *pr, json_t *ctl) {
  if (!pr->s) {
    json_decref(ctl);
    return false;
  }
  agentc_send_json(pr->s, HUTCH_F_CONTROL, ctl);
  return true;
}

void api_procs_signal(struct http_conn *c, const struct principal *p) {
  static const char *const known[] = {"signal", NULL};
  struct sbx *sb;
  struct proc *pr = find(c, &sb, p);
  json_t *o = pr ? body_object(c) : NULL;
  uint64_t sig = 0;
  if (!o)
    return;
  if (body_only(c, o, known) < 0 || body_uint(c, o, "signal", 1, 64, &sig) < 0)
    goto out;
  if (!sig)
    http_error(c, HUTCH_ERR_INVALID, "invalid_argument", "signal is required (a number, 1 to 64)");
  else if (!procs_control(pr, json_pack("{s:I}", "signal", (json_int_t)sig)))
    http_error(c, HUTCH_ERR_CONFLICT, "not_running", "process %d has ended", pr->pid);
  else
    http_respond(c, 204, "application/json", "", 0, NULL);
out:
  json_decref(o);
}

void api_procs_stdin(struct http_conn *c, const struct principal *p) {
  static const char *const known[] = {"data", "eof", NULL};
  struct sbx *sb;
  struct proc *pr = find(c, &sb, p);
  json_t *o = pr ? body_object(c) : NULL;
  const char *data = "";
  if (!o)
    return;
  if (body_only(c, o, known) < 0 || body_string(c, o, "data", HTTP_BODY_MAX, &data) < 0)
    goto out;
  bool eof = json_is_true(json_object_get(o, "eof"));
  int r = procs_stdin(pr, data, strlen(data), eof);
  if (r == -2)
    http_error(c, HUTCH_ERR_QUOTA, "stdin_full", "process %d has %u bytes of input it has not read yet",
               pr->pid, STDIN_HELD);
  else if (r < 0)
    http_error(c, HUTCH_ERR_CONFLICT, "stdin_closed",
               "process %d takes no more input (started without keep_stdin, ended, or sent eof)",
               pr->pid);
  else
    http_respond(c, 204, "application/json", "", 0, NULL);
out:
  json_decref(o);
}

void api_procs_kill(struct http_conn *c, const struct principal *p) {
  struct sbx *sb;
  struct proc *pr = find(c, &sb, p);
  if (!pr)
    return;
  procs_control(pr, json_pack("{s:b}", "kill", 1));
  http_respond(c, 204, "application/json", "", 0, NULL);
}
