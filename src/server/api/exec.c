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

#include "msg.h"
#include "util.h"
#include "api/api.h"
#include "api/handlers.h"
#include "core/exec.h"
#include "core/outlines.h"
#include "core/procs.h"
#include "http/body.h"

#define MAX_ARGS 4096

/* ---- a foreground exec, rendered as NDJSON ---- */

struct ndexec {
  struct http_conn *c;
  struct exec *x; /* NULL once it has ended */
  struct outlines out;
};

static void send_line(struct http_conn *c, json_t *j) {
  size_t n;
  char *s = http_json_line(j, &n);
  http_stream_send(c, s, n);
  free(s);
}

static void on_start(json_t *pid, void *arg) {
  struct ndexec *nd = arg;
  send_line(nd->c, json_pack("{s:s,s:O?}", "type", "start", "pid", pid));
}

static void send_output(struct ndexec *nd, int which, const uint8_t *data, size_t len,
                        bool last) {
  size_t n;
  char *line = outlines_next(&nd->out, which, data, len, last, &n);
  if (line)
    http_stream_send(nd->c, line, n);
  free(line);
}

static bool on_output(int which, const uint8_t *data, size_t len, void *arg) {
  struct ndexec *nd = arg;
  send_output(nd, which, data, len, false);
  return http_queued(nd->c) < HTTP_STREAM_HIGH; /* take more only as fast as the client reads */
}

static void on_end(json_t *exit, void *arg) {
  struct ndexec *nd = arg;
  for (int i = 0; i < 2; i++)
    send_output(nd, i, NULL, 0, true); /* what a cut character held back */
  size_t n;
  char *s = http_json_line(exit, &n);
  http_stream_end_with(nd->c, s, n); /* the exit line and the end: one write */
  free(s);
  free(nd); /* the response has ended: no abort follows */
}

static void on_abort(void *ctx) {
  struct ndexec *nd = ctx;
  exec_abandon(nd->x);
  free(nd);
}

static void on_drain(void *ctx) {
  struct ndexec *nd = ctx;
  exec_resume(nd->x);
}

static const struct http_stream_ops exec_ops = {.abort = on_abort, .drain = on_drain};

json_t *exec_request(struct http_conn *c, const struct sbx *sb, json_t *o, const char **in) {
  static const char *const known[] = {"cmd",  "shell",      "env",        "cwd", "stdin",
                                      "timeout_s", "user", "background", "keep_stdin", "pty",
                                      NULL};
  /* A template's user and working directory are the defaults. */
  const char *shell = NULL, *cwd = sb->workdir, *user = sb->user ? sb->user : "user";
  json_t *env = NULL, *cmd = json_object_get(o, "cmd");
  double timeout = 0;
  if (body_only(c, o, known) < 0 || body_string(c, o, "shell", HUTCH_STRING_MAX - 1, &shell) < 0 ||
      body_string(c, o, "cwd", 4095, &cwd) < 0 || body_string(c, o, "user", 32, &user) < 0 ||
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
  if (!hutch_user_ok(user)) {
    http_error(c, HUTCH_ERR_INVALID, "invalid_argument",
               "user must be \"user\", \"root\", a user name of the sandbox or UID[:GID]");
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
  struct hutch_err err;
  if (req && json_is_true(json_object_get(o, "background"))) {
    start_background(c, sb, req, in, json_is_true(json_object_get(o, "keep_stdin")));
  } else if (req) {
    struct ndexec *nd = xcalloc(1, sizeof *nd);
    const struct exec_sink sink = {on_start, on_output, on_end, nd};
    nd->x = exec_start(sb, req, in, c->req.started_ns, &sink, &err);
    if (!nd->x) {
      free(nd);
      http_fail(c, &err);
    } else {
      nd->c = c;
      http_stream_start(c, 200, "application/x-ndjson", &exec_ops, nd);
    }
  }
  json_decref(req);
  json_decref(o);
}
