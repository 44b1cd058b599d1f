/* POST /v1/sandboxes/{id}/exec: run a command in a sandbox and stream what
 * happens as NDJSON lines:
 *
 *   {"type":"start","pid":N}
 *   {"type":"stdout"|"stderr","data":"…"}   (or "data_b64" for bytes that
 *                                            are not UTF-8)
 *   {"type":"exit", …the verdict…}          always last
 *
 * The HTTP client's pace sets the workload's: the agent gets more window
 * only as the client takes what was sent. A client that goes away kills
 * the command. With "background": true the answer is 201 {pid} once it
 * runs, and the process outlives the request (procs.c). */
#include <stdlib.h>
#include <string.h>

#include "frame.h"
#include "msg.h"
#include "util.h"
#include "api/api.h"
#include "api/handlers.h"
#include "core/metrics.h"
#include "core/outlines.h"
#include "core/procs.h"
#include "http/body.h"

#define MAX_ARGS 4096

struct exec {
  struct http_conn *c;     /* NULL once the client is gone */
  struct astream *s;       /* NULL once the agent stream is over */
  struct server *srv;
  uint64_t t0;
  uint32_t owed;           /* window to give back once the client drains */
  struct outlines out;
  bool started;
};

static void exec_maybe_free(struct exec *x) {
  if (!x->c && !x->s)
    free(x);
}

static void send_line(struct exec *x, json_t *j) {
  size_t n;
  char *s = http_json_line(j, &n);
  http_stream_send(x->c, s, n);
  free(s);
}

static void send_output(struct exec *x, int which, const uint8_t *data, size_t len, bool last) {
  size_t n;
  char *line = outlines_next(&x->out, which, data, len, last, &n);
  if (line)
    http_stream_send(x->c, line, n);
  free(line);
}

static void finish(struct exec *x, json_t *exit_line) {
  if (x->c) {
    for (int i = 0; i < 2; i++)
      send_output(x, i, NULL, 0, true);
    send_line(x, exit_line);
    http_stream_end(x->c);
    x->c = NULL;
  } else {
    json_decref(exit_line);
  }
}

static void on_frame(struct astream *s, const struct hutch_frame *f) {
  struct exec *x = s->ctx;
  if (!f) { /* the sandbox went away under the exec */
    x->s = NULL;
    finish(x, outlines_exit_gone("the sandbox ended during the exec"));
    exec_maybe_free(x);
    return;
  }
  switch (f->type) {
  case HUTCH_F_STDOUT:
  case HUTCH_F_STDERR:
    send_output(x, f->type == HUTCH_F_STDERR, f->payload, f->len, false);
    /* Take more only as fast as the client reads. */
    if (x->c && http_queued(x->c) < HTTP_STREAM_HIGH)
      agentc_window(s, f->len);
    else
      x->owed += f->len;
    break;
  case HUTCH_F_EVENT:
  case HUTCH_F_ERROR: {
    json_t *j = json_loadb((const char *)f->payload, f->len, 0, NULL);
    const char *ev = json_string_value(json_object_get(j, "event"));
    if (f->type == HUTCH_F_EVENT && ev && strcmp(ev, "started") == 0 && x->c && !x->started) {
      x->started = true;
      x->srv->metrics.execs++;
      metrics_observe(x->srv->metrics.exec_hist, &x->srv->metrics.exec_sum_s,
                      (double)(now_ns() - x->t0) / 1e9);
      send_line(x, json_pack("{s:s,s:O?}", "type", "start", "pid", json_object_get(j, "pid")));
    } else if (f->flags & HUTCH_FL_END) {
      x->s = NULL;
      finish(x, outlines_exit(f->type, j));
    }
    json_decref(j);
    break;
  }
  default:
    break;
  }
  exec_maybe_free(x);
}

static void on_abort(void *ctx) {
  struct exec *x = ctx;
  x->c = NULL;
  if (x->s) {
    agentc_abandon(x->s); /* the agent kills what the exec started */
    x->s = NULL;
  }
  exec_maybe_free(x);
}

static void on_drain(void *ctx) {
  struct exec *x = ctx;
  if (x->s && x->owed) {
    agentc_window(x->s, x->owed);
    x->owed = 0;
  }
}

static const struct http_stream_ops exec_ops = {.abort = on_abort, .drain = on_drain};

json_t *exec_request(struct http_conn *c, const struct sbx *sb, json_t *o, const char **in) {
  static const char *const known[] = {"cmd",  "shell",      "env",        "cwd", "stdin",
                                      "timeout_s", "user", "background", "keep_stdin", "pty",
                                      NULL};
  const char *shell = NULL, *cwd = NULL, *user = "user";
  json_t *env = NULL, *cmd = json_object_get(o, "cmd");
  double timeout = 0;
  if (body_only(c, o, known) < 0 || body_string(c, o, "shell", HUTCH_STRING_MAX - 1, &shell) < 0 ||
      body_string(c, o, "cwd", 4095, &cwd) < 0 || body_string(c, o, "user", 8, &user) < 0 ||
      body_string(c, o, "stdin", HTTP_BODY_MAX, in) < 0 ||
      body_string_map(c, o, "env", 1024, &env) < 0 ||
      body_number(c, o, "timeout_s", 0, SERVE_MAX_TIMEOUT_S, &timeout) < 0)
    return NULL;
  json_t *bg = json_object_get(o, "background"), *ks = json_object_get(o, "keep_stdin");
  if ((bg && !json_is_boolean(bg)) || (ks && !json_is_boolean(ks))) {
    http_error(c, HUTCH_ERR_INVALID, "invalid_argument", "background and keep_stdin are true or false");
    return NULL;
  }
  if (json_is_true(ks) && !json_is_true(bg)) {
    http_error(c, HUTCH_ERR_INVALID, "invalid_argument", "keep_stdin is for background processes");
    return NULL;
  }
  if (!!cmd == !!shell) {
    http_error(c, HUTCH_ERR_INVALID, "invalid_argument", "give exactly one of cmd (an argv array) or shell");
    return NULL;
  }
  if (strcmp(user, "user") != 0 && strcmp(user, "root") != 0) {
    http_error(c, HUTCH_ERR_INVALID, "invalid_argument", "user must be \"user\" or \"root\"");
    return NULL;
  }
  json_t *argv;
  if (shell) {
    argv = json_pack("[s,s,s]", "/bin/bash", "-c", shell);
  } else {
    size_t i;
    json_t *a;
    if (!json_is_array(cmd) || json_array_size(cmd) == 0 || json_array_size(cmd) > MAX_ARGS) {
      http_error(c, HUTCH_ERR_INVALID, "invalid_argument", "cmd must be an array of 1 to %d strings", MAX_ARGS);
      return NULL;
    }
    json_array_foreach(cmd, i, a) {
      if (!json_is_string(a) || json_string_length(a) >= HUTCH_STRING_MAX ||
          strlen(json_string_value(a)) != json_string_length(a)) {
        http_error(c, HUTCH_ERR_INVALID, "invalid_argument",
                   "cmd[%zu] must be a string shorter than %u bytes, without NUL", i,
                   HUTCH_STRING_MAX);
        return NULL;
      }
    }
    argv = json_deep_copy(cmd);
  }
  /* The sandbox's environment, then the exec's own over it. */
  json_t *e = json_deep_copy(sb->env);
  if (env)
    json_object_update(e, env);
  const char *k;
  json_t *v;
  json_object_foreach(e, k, v) if (strchr(k, '=') || json_string_length(v) >= HUTCH_STRING_MAX) {
    http_error(c, HUTCH_ERR_INVALID, "invalid_argument", "env: '%s' is not a usable variable", k);
    json_decref(e);
    json_decref(argv);
    return NULL;
  }
  json_t *r = json_pack("{s:s,s:o,s:o,s:s,s:b,s:I}", "op", "exec", "argv", argv, "env", e, "user",
                        user, "stdin", *in != NULL, "timeout_ms", (json_int_t)(timeout * 1000));
  if (cwd)
    json_object_set_new(r, "cwd", json_string(cwd));
  json_t *pty = json_object_get(o, "pty");
  if (pty && !json_is_null(pty)) {
    json_int_t rows = json_integer_value(json_object_get(pty, "rows"));
    json_int_t cols = json_integer_value(json_object_get(pty, "cols"));
    if (!json_is_object(pty) || json_object_size(pty) != 2 || rows < 1 || rows > 9999 ||
        cols < 1 || cols > 9999) {
      http_error(c, HUTCH_ERR_INVALID, "invalid_argument", "pty is {\"rows\": R, \"cols\": C}, 1 to 9999");
      json_decref(r);
      return NULL;
    }
    json_object_set_new(r, "pty", json_pack("{s:I,s:I}", "rows", rows, "cols", cols));
  }
  return r;
}

/* ---- a background one: 201 {pid} once it runs ---- */

static void bg_started(int pid, json_t *exit, void *arg) {
  struct http_conn *c = http_wait_end(arg);
  free(arg);
  if (!c)
    return;
  json_t *j = json_pack("{s:o,s:b}", "pid", pid ? json_integer(pid) : json_null(), "background", 1);
  if (exit)
    json_object_set(j, "exit", exit);
  http_json(c, 201, j);
}

static void start_background(struct http_conn *c, struct sbx *sb, json_t *req, const char *in,
                             bool keep_stdin) {
  struct http_wait *w = xcalloc(1, sizeof *w);
  struct hutch_err err;
  http_wait_begin(w, c);
  if (!procs_start(sb, req, in, keep_stdin, bg_started, w, &err)) {
    http_wait_end(w);
    free(w);
    http_fail(c, &err);
  }
}

void api_exec(struct http_conn *c, const struct principal *p) {
  struct sbx *sb = sbx_lookup_live(c, p);
  json_t *o = sb ? body_object(c) : NULL;
  if (!o)
    return;
  const char *in = NULL;
  json_t *req = exec_request(c, sb, o, &in);
  if (!req) {
    json_decref(o);
    return;
  }
  if (json_is_true(json_object_get(o, "background"))) {
    start_background(c, sb, req, in, json_is_true(json_object_get(o, "keep_stdin")));
    json_decref(req);
    json_decref(o);
    return;
  }
  struct exec *x = xcalloc(1, sizeof *x);
  x->srv = c->srv;
  x->t0 = c->req.started_ns;
  x->s = agentc_open(&sb->ac, req, on_frame, x);
  json_decref(req);
  if (!x->s) {
    free(x);
    json_decref(o);
    http_error(c, HUTCH_ERR_UNAVAILABLE, "sandbox_error", "the sandbox's agent is not reachable");
    return;
  }
  if (in)
    agentc_stdin(x->s, in, strlen(in), true);
  json_decref(o);
  x->c = c;
  http_stream_start(c, 200, "application/x-ndjson", &exec_ops, x);
}
