/* A foreground exec: the agent's stream of one command, its events handed
 * to the caller's sink. The reader's pace sets the workload's: the agent
 * gets more window only as the reader takes what it was given. */
#include "core/run/exec.h"

#include <stdlib.h>
#include <string.h>

#include "frame.h"
#include "util.h"
#include "core/events/events.h"
#include "core/sandbox/agentc.h"
#include "core/run/ndjson.h"
#include "core/sandbox/sbx.h"
#include "core/base/counters.h"

struct exec {
  struct astream *s;
  struct server *srv;
  /* Once it runs, until it ends: in its sandbox's list of running execs
   * (sb->execs, which exec_oldest_ms reads), since started_ms. */
  struct sbx *sb;
  struct exec *next, **pprev;
  int64_t started_ms;
  struct exec_sink sink;
  uint64_t t0;
  char tenant[SERVE_TENANT_LEN + 1], sandbox[17]; /* for its events */
  json_t *argv;
  uint32_t owed; /* window to give back once the reader catches up */
  bool started;
  /* In a sink call: an exec_abandon from inside it leaves x to be freed
   * when the call returns, and the stream untouched after. */
  int busy;
  bool abandoned;
};

void exec_report_start(struct server *srv, const char *tenant, const char *sandbox, json_t *argv,
                       json_t *pid, bool background) {
  events_emit(srv, "exec.started", tenant, sandbox,
              json_pack("{s:O,s:O?,s:b}", "cmd", argv, "pid", pid, "background", background));
}

void exec_report_end(struct server *srv, const char *tenant, const char *sandbox, json_t *argv,
                     json_t *exit_line, int64_t duration_ms, bool background) {
  json_t *data = exit_line ? json_deep_copy(exit_line) : json_pack("{s:b}", "abandoned", 1);
  json_object_del(data, "type");
  json_object_del(data, "changed"); /* the artifacts' paths: the exec's answer's business */
  json_object_set_new(data, "duration_ms", json_integer(duration_ms));
  json_object_set_new(data, "background", json_boolean(background));
  json_object_set(data, "cmd", argv);
  events_emit(srv, "exec.ended", tenant, sandbox, data);
}

static void report_end(struct exec *x, json_t *exit_line) {
  exec_report_end(x->srv, x->tenant, x->sandbox, x->argv, exit_line,
                  (int64_t)((now_ns() - x->t0) / 1000000), false);
}

static void exec_free(struct exec *x) {
  json_decref(x->argv);
  free(x);
}

static void link_running(struct exec *x) {
  x->started_ms = wall_ms();
  x->next = x->sb->execs;
  if (x->next)
    x->next->pprev = &x->next;
  x->pprev = &x->sb->execs;
  x->sb->execs = x;
}

static void unlink_running(struct exec *x) {
  if (!x->pprev)
    return;
  *x->pprev = x->next;
  if (x->next)
    x->next->pprev = x->pprev;
  x->pprev = NULL;
}

static void end(struct exec *x, json_t *exit_line) {
  unlink_running(x);
  report_end(x, exit_line);
  x->s = NULL;
  x->busy++;
  x->sink.end(exit_line, x->sink.arg);
  exec_free(x);
}

/* After a sink call: false when the exec was abandoned in it (x is gone). */
static bool still_here(struct exec *x) {
  if (--x->busy == 0 && x->abandoned) {
    exec_free(x);
    return false;
  }
  return !x->abandoned;
}

static void on_event(struct exec *x, const struct hutch_frame *f) {
  json_t *j = json_loadb((const char *)f->payload, f->len, 0, NULL);
  const char *ev = json_string_value(json_object_get(j, "event"));
  if (f->type == HUTCH_F_EVENT && ev && strcmp(ev, "started") == 0 && !x->started) {
    x->started = true;
    link_running(x);
    x->srv->metrics.execs++;
    counters_observe(x->srv->metrics.exec_hist, &x->srv->metrics.exec_sum_s,
                     (double)(now_ns() - x->t0) / 1e9);
    exec_report_start(x->srv, x->tenant, x->sandbox, x->argv, json_object_get(j, "pid"), false);
    x->busy++;
    x->sink.start(json_object_get(j, "pid"), x->sink.arg);
    still_here(x);
  } else if (f->flags & HUTCH_FL_END) {
    end(x, ndjson_exit(f->type, j));
  }
  json_decref(j);
}

static void on_frame(struct astream *s, const struct hutch_frame *f) {
  struct exec *x = s->ctx;
  if (!f) { /* The sandbox went away under the exec. */
    end(x, ndjson_exit_gone("the sandbox ended during the exec"));
    return;
  }

  switch (f->type) {
  case HUTCH_F_STDOUT:
  case HUTCH_F_STDERR: {
    x->busy++;
    bool more = x->sink.output(f->type == HUTCH_F_STDERR, f->payload, f->len, x->sink.arg);
    if (!still_here(x))
      break;

    if (more)
      agentc_window(s, f->len);
    else
      x->owed += f->len;
    break;
  }
  case HUTCH_F_EVENT:
  case HUTCH_F_ERROR:
    on_event(x, f);
    break;
  default:
    break;
  }
}

struct exec *exec_start(struct sbx *sb, json_t *req, const char *in, uint64_t t0_ns,
                        const struct exec_sink *sink, struct hutch_err *err) {
  struct exec *x = xcalloc(1, sizeof *x);
  x->srv = sb->srv;
  x->sb = sb;
  x->t0 = t0_ns;
  x->sink = *sink;
  str_copy(x->tenant, sizeof x->tenant, sb->tenant);
  str_copy(x->sandbox, sizeof x->sandbox, sb->id);
  x->argv = json_incref(json_object_get(req, "argv"));
  if (!x->argv)
    x->argv = json_array();
  x->s = agentc_open(&sb->ac, req, on_frame, x);
  if (!x->s) {
    exec_free(x);
    hutch_err_fail(err, HUTCH_ERR_UNAVAILABLE, "sandbox_error",
                   "the sandbox's agent is not reachable");
    return NULL;
  }

  if (in)
    agentc_stdin(x->s, in, strlen(in), true);
  return x;
}

void exec_resume(struct exec *x) {
  if (x->owed) {
    agentc_window(x->s, x->owed);
    x->owed = 0;
  }
}

void exec_abandon(struct exec *x) {
  if (x->abandoned)
    return;
  unlink_running(x);
  if (x->s) {
    agentc_abandon(x->s); /* the agent kills what the exec started */
    if (x->started)
      report_end(x, NULL);
  }
  x->s = NULL;
  x->abandoned = true;
  if (!x->busy)
    exec_free(x);
}

int64_t exec_oldest_ms(const struct sbx *sb) {
  int64_t oldest = 0;
  for (const struct exec *x = sb->execs; x; x = x->next)
    if (!oldest || x->started_ms < oldest)
      oldest = x->started_ms;
  return oldest;
}
