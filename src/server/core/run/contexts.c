/* Code contexts (contexts.h): a persistent kernel per context (share/kernels/kernel.py,
 * run in the sandbox by its own python3), and the cells run in it.
 *
 * The routes are api/contexts.c's (native) and e2b/interp.c's (E2B's code
 * interpreter); a cell's events go to their sink (struct cell_sink).
 *
 * A kernel is an exec like any other (the agent runs it, its stdin is open);
 * its stdout carries the kernel protocol (docs/kernels.md) and is read here,
 * line by line. One cell runs at a time per context; the others wait in
 * order. A cell past its timeout is interrupted (SIGINT to the kernel's
 * process group) and, if it does not stop within INTERRUPT_GRACE_MS, the
 * kernel is killed: the context is then dead until restarted. A default
 * context per language is made on first use, and made again if it died.
 * A client that goes away takes its cell with it, as E2B's interpreter
 * does: a running cell is interrupted (the context keeps its state), a
 * waiting one is dropped.
 *
 * A Python context forks: its copy is a new context whose exec (kernel.py
 * fork TOKEN) waits on an abstract socket; when it says it is listening,
 * a fork request goes to the parent kernel as a cell, and the kernel's
 * copy takes the new exec's stdin and stdout over (docs/kernels.md). */
#include "core/run/contexts.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frame.h"
#include "util.h"
#include "core/sandbox/sbx.h"
#include "http/body.h"
#include "http/http.h"

#define CONTEXTS_MAX 16             /* per sandbox */
#define CELLS_QUEUED_MAX 64         /* per context, the running one included */
#define INTERRUPT_GRACE_MS 2000     /* from the timeout's SIGINT to the kill */
#define KERNEL_LINE_MAX (64u << 20) /* one event (a large image, say) */
#define KERNEL_ERR_KEEP 2048        /* the kernel's own stderr, for its death message */
#define FORK_TIMEOUT_S 30           /* a fork request, as a cell of the parent */

enum cx_state { CX_STARTING, CX_READY, CX_DEAD };

struct cell {
  struct cell *next;
  struct context *cx;
  struct cell_sink sink;
  bool live; /* the sink is called: false once the reader is gone */
  uint64_t id;
  json_t *line; /* the request for the kernel */
  double timeout_s;
  uint32_t owed; /* kernel output window to give back once the client drains */
  bool timed_out;
};

struct context {
  struct context *next;
  struct sbx *sb; /* NULL once the sandbox is gone */
  char id[17];
  char language[16];
  json_t *cwd, *env; /* as created: a restart starts the same kernel */
  bool is_default;
  char fork_of[17]; /* the context it is a copy of, until the copy is made */
  enum cx_state state;
  char died[256];
  struct astream *s; /* the kernel's exec stream, NULL when it has none */
  char *line;        /* a partial line of the kernel's stdout */
  size_t line_len;
  char err[KERNEL_ERR_KEEP];
  size_t err_len;
  struct cell *cells; /* the first is the running one once sent */
  unsigned ncells;
  bool sent;       /* the first cell went to the kernel */
  int64_t sent_ms; /* ... then (ms since the epoch) */
  uint64_t next_cell;
  uv_timer_t timer; /* the running cell's timeout, then the grace */
  bool grace;
};

static const char *const languages[] = {"python", "javascript", "bash", NULL};

static void on_timer(uv_timer_t *t);

static void cell_free(struct cell *ce) {
  json_decref(ce->line);
  free(ce);
}

static void cell_send(struct cell *ce, json_t *j) {
  if (ce->live)
    ce->sink.event(j, ce->sink.arg);
  else
    json_decref(j);
}

/* The cell's last word to its reader. */
static void cell_end(struct cell *ce) {
  if (ce->live) {
    ce->live = false;
    ce->sink.end(ce->sink.arg);
  }
}

/* End a cell that never ran, or whose kernel went away, with an error. */
static void cell_fail(struct cell *ce, const char *name, const char *value) {
  cell_send(ce, json_pack("{s:s,s:s,s:o,s:s}", "type", "error", "name", name, "value",
                          http_json_text(value), "traceback", ""));
  cell_send(ce, json_pack("{s:s}", "type", "end_of_execution"));
  cell_end(ce);
}

static void kernel_signal(struct context *cx, int sig);

void contexts_cell_cancel(struct cell *ce) {
  struct context *cx = ce->cx;
  ce->live = false;
  /* Nobody reads it now, so the kernel is never held back for it. */
  if (ce->owed && cx->s)
    agentc_window(cx->s, ce->owed);
  ce->owed = 0;

  /* A running cell ends as an interrupted one, unread. */
  if (ce == cx->cells && cx->sent) {
    kernel_signal(cx, SIGINT);
    return;
  }

  /* A waiting cell never ran, and now never will. */
  for (struct cell **p = &cx->cells; *p; p = &(*p)->next)
    if (*p == ce) {
      *p = ce->next;
      cx->ncells--;
      cell_free(ce);
      return;
    }
}

void contexts_cell_drain(struct cell *ce) {
  if (ce->owed && ce->cx->s && ce == ce->cx->cells)
    agentc_window(ce->cx->s, ce->owed);
  ce->owed = 0;
}

/* ---- the kernel ---- */

static void kernel_signal(struct context *cx, int sig) {
  if (cx->s)
    agentc_send_json(cx->s, HUTCH_F_CONTROL, json_pack("{s:i}", "signal", sig));
}

static void send_next(struct context *cx) {
  struct cell *ce = cx->cells;
  if (cx->state != CX_READY || !ce || cx->sent || !cx->s)
    return;

  size_t n;
  char *s = http_json_line(json_incref(ce->line), &n);
  agentc_stdin(cx->s, s, n, false);
  free(s);

  cx->sent = true;
  cx->sent_ms = wall_ms();
  cx->grace = false;
  uv_timer_start(&cx->timer, on_timer, (uint64_t)(ce->timeout_s * 1000), 0);
}

/* The running cell has ended: the next one goes. */
static void cell_done(struct context *cx) {
  struct cell *ce = cx->cells;
  uv_timer_stop(&cx->timer);
  cx->cells = ce->next;
  cx->ncells--;
  cx->sent = false;
  cell_end(ce);
  if (ce->owed && cx->s)
    agentc_window(cx->s, ce->owed);
  cell_free(ce);
  send_next(cx);
}

static void on_timer(uv_timer_t *t) {
  struct context *cx = t->data;
  struct cell *ce = cx->cells;
  if (!ce || !cx->sent)
    return;

  if (!cx->grace) {
    ce->timed_out = true;
    cx->grace = true;
    kernel_signal(cx, SIGINT);
    uv_timer_start(&cx->timer, on_timer, INTERRUPT_GRACE_MS, 0);
    return;
  }

  /* The interrupt did not stop it: the kernel goes, the context is dead. */
  snprintf(cx->died, sizeof cx->died,
           "the cell ran past its timeout of %g s and did not stop when interrupted; the "
           "kernel was killed: restart the context",
           ce->timeout_s);
  if (cx->s)
    agentc_send_json(cx->s, HUTCH_F_CONTROL, json_pack("{s:b}", "kill", 1));
}

/* The exec of a copy listens: the parent forks into it, in its turn. */
static void fork_into(struct context *cx) {
  struct context *parent = NULL;
  for (struct context *x = cx->sb->contexts; x; x = x->next)
    if (strcmp(x->id, cx->fork_of) == 0)
      parent = x;
  if (!parent || parent->state == CX_DEAD) {
    snprintf(cx->died, sizeof cx->died, "the context %s it was to copy is gone", cx->fork_of);
    agentc_send_json(cx->s, HUTCH_F_CONTROL, json_pack("{s:b}", "kill", 1));
    return;
  }

  struct cell *ce = xcalloc(1, sizeof *ce);
  ce->cx = parent;
  ce->id = ++parent->next_cell;
  ce->timeout_s = FORK_TIMEOUT_S;
  ce->line = json_pack("{s:I,s:s}", "id", (json_int_t)ce->id, "fork", cx->id);

  struct cell **tail = &parent->cells;
  while (*tail)
    tail = &(*tail)->next;
  *tail = ce;
  parent->ncells++;

  send_next(parent);
}

/* One line of the kernel protocol. */
static void kernel_line(struct context *cx, const char *p, size_t n) {
  json_t *j = json_loadb(p, n, 0, NULL);
  const char *type = json_string_value(json_object_get(j, "type"));
  struct cell *ce = cx->cells;
  if (!type) {
    json_decref(j);
    return;
  }

  if (strcmp(type, "ready") == 0) {
    cx->state = CX_READY;
    send_next(cx);
    json_decref(j);
    return;
  }
  if (strcmp(type, "fork_listening") == 0 && cx->fork_of[0] && cx->state == CX_STARTING) {
    fork_into(cx);
    json_decref(j);
    return;
  }

  /* Output after its cell ended (a background child's) is dropped. */
  json_t *id = json_object_get(j, "id");
  if (!ce || !cx->sent || !json_is_integer(id) || (uint64_t)json_integer_value(id) != ce->id) {
    json_decref(j);
    return;
  }
  json_object_del(j, "id");

  if (strcmp(type, "error") == 0 && ce->timed_out) {
    char msg[160];
    snprintf(msg, sizeof msg,
             "the cell ran past its timeout of %g s and was interrupted; the context keeps its "
             "state",
             ce->timeout_s);
    json_object_set_new(j, "name", json_string("TimeoutError"));
    json_object_set_new(j, "value", json_string(msg));
  }

  bool end = strcmp(type, "end_of_execution") == 0;
  cell_send(ce, j);
  if (end)
    cell_done(cx);
}

static void kernel_stdout(struct context *cx, const uint8_t *p, size_t n) {
  while (n > 0) {
    const uint8_t *nl = memchr(p, '\n', n);
    size_t take = nl ? (size_t)(nl - p) : n;
    if (cx->line_len + take > KERNEL_LINE_MAX) {
      snprintf(cx->died, sizeof cx->died, "the kernel sent a line longer than %u MiB",
               KERNEL_LINE_MAX >> 20);
      agentc_send_json(cx->s, HUTCH_F_CONTROL, json_pack("{s:b}", "kill", 1));
      cx->line_len = 0;
      return;
    }

    if (!nl || cx->line_len) {
      cx->line = xrealloc(cx->line, cx->line_len + take + 1);
      memcpy(cx->line + cx->line_len, p, take);
      cx->line_len += take;
    }
    if (!nl)
      return;

    if (cx->line_len) {
      kernel_line(cx, cx->line, cx->line_len);
      cx->line_len = 0;
    } else {
      kernel_line(cx, (const char *)p, take);
    }

    p += take + 1;
    n -= take + 1;
  }
}

/* The kernel is gone: every cell ends with the reason. */
static void kernel_gone(struct context *cx, const char *why) {
  cx->s = NULL;
  cx->state = CX_DEAD;

  if (!cx->died[0]) {
    /* The last line the kernel wrote to stderr says most. */
    size_t n = cx->err_len;
    while (n && cx->err[n - 1] == '\n')
      n--;
    size_t start = n;
    while (start && cx->err[start - 1] != '\n')
      start--;
    snprintf(cx->died, sizeof cx->died, "the %s kernel ended (%s)%s%.*s", cx->language, why,
             n > start ? ": " : "", (int)(n - start), cx->err + start);
  }

  uv_timer_stop(&cx->timer);
  while (cx->cells) {
    struct cell *ce = cx->cells;
    cx->cells = ce->next;
    cell_fail(ce, "KernelDied", cx->died);
    cell_free(ce);
  }
  cx->ncells = 0;
  cx->sent = false;
}

static void on_kernel_frame(struct astream *s, const struct hutch_frame *f) {
  struct context *cx = s->ctx;
  if (!f) {
    kernel_gone(cx, "the sandbox ended");
    return;
  }

  switch (f->type) {
  case HUTCH_F_STDOUT: {
    struct cell *ce = cx->cells;
    kernel_stdout(cx, f->payload, f->len);

    /* Output waits for a slow client, as an exec's does. */
    if (cx->s && ce && ce == cx->cells && ce->live && ce->sink.full(ce->sink.arg))
      ce->owed += f->len;
    else if (cx->s)
      agentc_window(s, f->len);
    break;
  }
  case HUTCH_F_STDERR: {
    size_t n = f->len < KERNEL_ERR_KEEP ? f->len : KERNEL_ERR_KEEP;
    if (cx->err_len + n > KERNEL_ERR_KEEP) {
      size_t drop = cx->err_len + n - KERNEL_ERR_KEEP;
      memmove(cx->err, cx->err + drop, cx->err_len - drop);
      cx->err_len -= drop;
    }

    memcpy(cx->err + cx->err_len, f->payload + f->len - n, n);
    cx->err_len += n;
    agentc_window(s, f->len);
    break;
  }
  case HUTCH_F_EVENT:
  case HUTCH_F_ERROR:
    if (f->flags & HUTCH_FL_END) {
      json_t *j = json_loadb((const char *)f->payload, f->len, 0, NULL);
      char why[256];
      json_t *code = json_object_get(j, "exit_code"), *sig = json_object_get(j, "signal");
      /* A kernel that never ran (125: the agent could not set it up) says why. */
      const char *msg = json_string_value(json_object_get(j, "message"));

      if (json_is_integer(sig))
        snprintf(why, sizeof why, "killed by signal %d", (int)json_integer_value(sig));
      else if (json_is_integer(code))
        snprintf(why, sizeof why, "exit status %d%s%s", (int)json_integer_value(code),
                 msg && json_integer_value(code) == 125 ? ": " : "",
                 msg && json_integer_value(code) == 125 ? msg : "");
      else
        snprintf(why, sizeof why, "%s",
                 json_string_value(json_object_get(j, "message")) ?: "it could not start");

      json_decref(j);
      kernel_gone(cx, why);
    }
    break;
  default:
    break;
  }
}

static int kernel_start(struct context *cx) {
  struct sbx *sb = cx->sb;
  json_t *env = json_deep_copy(sb->env);
  json_object_update(env, cx->env);
  json_object_set_new(env, "PYTHONDONTWRITEBYTECODE", json_string("1"));

  json_t *argv;
  if (cx->fork_of[0])
    argv = json_pack("[s,s,s,s]", "python3", SERVE_KERNELS_PATH "/kernel.py", "fork", cx->id);
  else
    argv = json_pack("[s,s,s]", "python3", SERVE_KERNELS_PATH "/kernel.py", cx->language);
  json_t *req = json_pack("{s:s,s:o,s:o,s:s,s:b,s:I}", "op", "exec", "argv", argv, "env", env,
                          "user", "user", "stdin", 1, "timeout_ms", (json_int_t)0);
  if (json_is_string(cx->cwd))
    json_object_set(req, "cwd", cx->cwd);

  cx->state = CX_STARTING;
  cx->died[0] = '\0';
  cx->err_len = cx->line_len = 0;
  cx->s = agentc_open(&sb->ac, req, on_kernel_frame, cx);
  json_decref(req);

  if (!cx->s) {
    cx->state = CX_DEAD;
    snprintf(cx->died, sizeof cx->died, "the sandbox's agent is not reachable");
    return -1;
  }
  return 0;
}

/* ---- contexts ---- */

static void context_free_cb(uv_handle_t *h) {
  struct context *cx = h->data;
  json_decref(cx->cwd);
  json_decref(cx->env);
  free(cx->line);
  free(cx);
}

/* Stop its kernel (the agent kills what it started) and end its cells. */
static void context_stop(struct context *cx, const char *why) {
  if (cx->s) {
    agentc_abandon(cx->s);
    cx->s = NULL;
  }
  snprintf(cx->died, sizeof cx->died, "%s", why);
  kernel_gone(cx, why);
}

static void context_unlink(struct context *cx) {
  struct sbx *sb = cx->sb;
  for (struct context **p = &sb->contexts; *p; p = &(*p)->next)
    if (*p == cx) {
      *p = cx->next;
      sb->ncontexts--;
      break;
    }
  cx->sb = NULL;
  uv_close((uv_handle_t *)&cx->timer, context_free_cb);
}

void contexts_free(struct sbx *sb) {
  while (sb->contexts) {
    struct context *cx = sb->contexts;
    context_stop(cx, "the sandbox ended");
    context_unlink(cx);
  }
}

void contexts_info(const struct context *cx, struct context_info *out) {
  static const char *const states[] = {"starting", "ready", "dead"};
  *out = (struct context_info){.id = cx->id,
                               .language = cx->language,
                               .cwd = json_string_value(cx->cwd),
                               .state = states[cx->state],
                               .died = cx->state == CX_DEAD ? cx->died : NULL,
                               .fork_of = cx->fork_of[0] ? cx->fork_of : NULL};
}

/* An env a kernel can be given: no '=' in a name. */
static int env_check(json_t *env, struct hutch_err *err) {
  const char *k;
  json_t *v;
  json_object_foreach(env, k, v) {
    if (strchr(k, '='))
      return hutch_err_fail(err, HUTCH_ERR_INVALID, "invalid_argument",
                            "env: '%s' is not a usable variable", k);
  }
  return 0;
}

static const char *language_of(const char *name, struct hutch_err *err) {
  if (!name)
    return "python";
  if (strcmp(name, "js") == 0)
    return "javascript";
  for (const char *const *l = languages; *l; l++)
    if (strcmp(name, *l) == 0)
      return *l;
  hutch_err_fail(err, HUTCH_ERR_INVALID, "invalid_argument",
                 "language must be python, javascript (js) or bash");
  return NULL;
}

static struct context *context_new(struct sbx *sb, const char *language, json_t *cwd, json_t *env,
                                   const char *fork_of, struct hutch_err *err) {
  if (!sb->srv->kernels_dir) {
    hutch_err_fail(err, HUTCH_ERR_UNAVAILABLE, "kernels_unavailable",
                   "this server has no kernels directory (share/kernels): code contexts are off");
    return NULL;
  }
  if (sb->ncontexts >= CONTEXTS_MAX) {
    hutch_err_fail(err, HUTCH_ERR_QUOTA, "quota_exceeded", "a sandbox has at most %d code contexts",
                   CONTEXTS_MAX);
    return NULL;
  }

  struct context *cx = xcalloc(1, sizeof *cx);
  cx->sb = sb;
  random_hex(cx->id, sizeof cx->id - 1);
  str_copy(cx->language, sizeof cx->language, language);
  cx->cwd = cwd ? json_incref(cwd) : json_null();
  str_copy(cx->fork_of, sizeof cx->fork_of, fork_of ? fork_of : "");
  cx->env = env ? json_deep_copy(env) : json_object();
  uv_timer_init(sb->srv->loop, &cx->timer);
  cx->timer.data = cx;

  /* The contexts are listed in the order they were made. */
  struct context **tail = &sb->contexts;
  while (*tail)
    tail = &(*tail)->next;
  *tail = cx;
  sb->ncontexts++;

  kernel_start(cx);
  return cx;
}

struct context *contexts_find(struct sbx *sb, const char *id, struct hutch_err *err) {
  for (struct context *cx = sb->contexts; cx; cx = cx->next)
    if (strcmp(cx->id, id) == 0)
      return cx;
  hutch_err_fail(err, HUTCH_ERR_NOT_FOUND, "not_found", "no code context %s in sandbox %s", id,
                 sb->id);
  return NULL;
}

struct context *contexts_create(struct sbx *sb, const char *language, const char *cwd, json_t *env,
                                struct hutch_err *err) {
  if (env && env_check(env, err) < 0)
    return NULL;
  const char *lang = language_of(language, err);
  if (!lang)
    return NULL;
  json_t *dir = cwd ? json_string(cwd) : NULL;
  struct context *cx = context_new(sb, lang, dir, env, NULL, err);
  json_decref(dir);
  return cx;
}

void contexts_delete(struct context *cx) {
  context_stop(cx, "the context was deleted");
  context_unlink(cx);
}

int contexts_restart(struct context *cx, struct hutch_err *err) {
  context_stop(cx, "the context was restarted");
  cx->fork_of[0] = '\0'; /* a copy restarts as a kernel of its own */
  if (kernel_start(cx) < 0)
    return hutch_err_fail(err, HUTCH_ERR_UNAVAILABLE, "sandbox_error", "%s", cx->died);
  return 0;
}

void contexts_interrupt(struct context *cx) {
  if (cx->sent)
    kernel_signal(cx, SIGINT);
}

int64_t contexts_oldest_ms(const struct sbx *sb) {
  int64_t oldest = 0;
  for (const struct context *cx = sb->contexts; cx; cx = cx->next)
    if (cx->sent && (!oldest || cx->sent_ms < oldest))
      oldest = cx->sent_ms;
  return oldest;
}

struct context *contexts_next(struct sbx *sb, struct context *prev) {
  return prev ? prev->next : sb->contexts;
}

struct context *contexts_default(struct sbx *sb, const char *language, struct hutch_err *err) {
  for (struct context *cx = sb->contexts; cx; cx = cx->next) {
    if (!cx->is_default || strcmp(cx->language, language) != 0)
      continue;
    if (cx->state != CX_DEAD)
      return cx;
    context_unlink(cx); /* it died: a new default takes its place */
    break;
  }
  struct context *cx = context_new(sb, language, NULL, NULL, NULL, err);
  if (cx)
    cx->is_default = true;
  return cx;
}

void contexts_defaults(struct sbx *sb) {
  if (sb->contexts_defaulted)
    return;
  sb->contexts_defaulted = true;
  /* Not made (too many contexts, no kernels): the request that needs one says why. */
  for (const char *const *l = languages; *l && strcmp(*l, "bash") != 0; l++) {
    struct hutch_err err = {0};
    (void)contexts_default(sb, *l, &err);
  }
}

/* The context a cell names: its context_id, or the default one of its
 * language (made, or made again, as needed). */
static struct context *cell_context(struct sbx *sb, const struct cell_request *r,
                                    struct hutch_err *err) {
  if (r->context_id && r->language) {
    hutch_err_fail(err, HUTCH_ERR_INVALID, "invalid_argument",
                   "give context_id or language, not both");
    return NULL;
  }
  if (r->context_id) {
    struct context *cx = contexts_find(sb, r->context_id, err);
    if (cx && cx->state == CX_DEAD) {
      hutch_err_fail(err, HUTCH_ERR_CONFLICT, "context_dead", "%s", cx->died);
      return NULL;
    }
    return cx;
  }

  const char *language = language_of(r->language, err);
  return language ? contexts_default(sb, language, err) : NULL;
}

int contexts_run(struct sbx *sb, const struct cell_request *r, const struct cell_sink *sink,
                 struct hutch_err *err) {
  if (r->env && env_check(r->env, err) < 0)
    return -1;
  if (!r->code)
    return hutch_err_fail(err, HUTCH_ERR_INVALID, "invalid_argument",
                          "code (a string) is required");
  struct context *cx = cell_context(sb, r, err);
  if (!cx)
    return -1;
  if (cx->ncells >= CELLS_QUEUED_MAX)
    return hutch_err_fail(err, HUTCH_ERR_QUOTA, "quota_exceeded",
                          "%d cells already wait in context %s, the most one may hold",
                          CELLS_QUEUED_MAX, cx->id);

  struct cell *ce = xcalloc(1, sizeof *ce);
  ce->cx = cx;
  ce->id = ++cx->next_cell;
  ce->timeout_s = r->timeout_s;
  ce->line = json_pack("{s:I,s:s,s:o}", "id", (json_int_t)ce->id, "code", r->code, "env",
                       r->env ? json_deep_copy(r->env) : json_object());

  struct cell **tail = &cx->cells;
  while (*tail)
    tail = &(*tail)->next;
  *tail = ce;
  cx->ncells++;

  ce->sink = *sink;
  ce->live = true;
  sink->start(ce, sink->arg);
  send_next(cx);
  return 0;
}

/* A copy of a Python context: its variables, imports and cwd as they are
 * once the cells before this request have run; the copy then goes its own
 * way. It lives in the parent's exec (the fork's cgroup): deleting or
 * restarting the parent ends its copies. */
struct context *contexts_fork(struct context *parent, struct hutch_err *err) {
  if (strcmp(parent->language, "python") != 0) {
    hutch_err_fail(err, HUTCH_ERR_UNSUPPORTED, "not_supported",
                   "only Python contexts fork (a %s kernel's state lives in a child process)",
                   parent->language);
    return NULL;
  }
  if (parent->state == CX_DEAD) {
    hutch_err_fail(err, HUTCH_ERR_CONFLICT, "context_dead", "context %s is dead: %s", parent->id,
                   parent->died);
    return NULL;
  }
  return context_new(parent->sb, "python", parent->cwd, parent->env, parent->id, err);
}
