/* POST /v1/sandboxes/{id}/exec: run a command in a sandbox and stream what
 * happens as NDJSON lines:
 *
 *   {"type":"start","pid":N}
 *   {"type":"stdout"|"stderr","data":"…"}   (or "data_b64" for bytes that
 *                                            are not UTF-8)
 *   {"type":"exit", …the verdict…}          always last; "artifacts": the
 *                                            files it made or changed
 *
 * The HTTP client's pace sets the workload's: the agent gets more window
 * only as the client takes what was sent. A client that goes away kills
 * the command. With "background": true the answer is 201 {pid} once it
 * runs, and the process outlives the request (procs.c). */
#include "api/exec.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "msg.h"
#include "util.h"
#include "api/lifecycle.h"
#include "core/run/exec.h"
#include "core/run/files.h"
#include "core/run/ndjson.h"
#include "core/run/procs.h"
#include "core/sandbox/sbx.h"
#include "http/body.h"
#include "http/errors.h"
#include "http/http.h"

#define MAX_ARGS 4096

/* ---- a foreground exec, rendered as NDJSON ---- */

struct ndexec {
  struct http_conn *c;
  struct exec *x; /* NULL once it has ended */
  struct ndjson out;
  /* Its artifacts: looked for once it ends, in its cwd (else the home
   * directory) and /tmp, as its user, among files changed since since_ns. */
  struct sbx *sb;
  char root[FILES_PATH_MAX + 1], user[33];
  int64_t since_ns;
  json_t *exit; /* the verdict, while its artifacts are looked for */
  bool gone;    /* the client left meanwhile */
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

static void send_output(struct ndexec *nd, int which, const uint8_t *data, size_t len, bool last) {
  size_t n;
  char *line = ndjson_next(&nd->out, which, data, len, last, &n);
  if (line)
    http_stream_send(nd->c, line, n);
  free(line);
}

static bool on_output(int which, const uint8_t *data, size_t len, void *arg) {
  struct ndexec *nd = arg;
  send_output(nd, which, data, len, false);
  return http_queued(nd->c) < HTTP_STREAM_HIGH; /* take more only as fast as the client reads */
}

/* A MIME type by the name's extension; the kernels' Python guesses more. */
static const char *mime_of(const char *path) {
  static const char *const types[][2] = {
      {"png", "image/png"},       {"jpg", "image/jpeg"},        {"jpeg", "image/jpeg"},
      {"gif", "image/gif"},       {"svg", "image/svg+xml"},     {"webp", "image/webp"},
      {"pdf", "application/pdf"}, {"json", "application/json"}, {"csv", "text/csv"},
      {"txt", "text/plain"},      {"log", "text/plain"},        {"md", "text/markdown"},
      {"html", "text/html"},      {"xml", "application/xml"},   {"py", "text/x-python"},
      {"js", "text/javascript"},  {"sh", "application/x-sh"},   {"zip", "application/zip"},
      {"gz", "application/gzip"}, {"tar", "application/x-tar"}, {"wav", "audio/x-wav"},
      {"mp3", "audio/mpeg"},      {"mp4", "video/mp4"}};
  const char *dot = strrchr(path, '.');
  if (dot && !strchr(dot, '/'))
    for (size_t i = 0; i < sizeof types / sizeof *types; i++)
      if (strcasecmp(dot + 1, types[i][0]) == 0)
        return types[i][1];
  return "application/octet-stream";
}

static void finish(struct ndexec *nd) {
  size_t n;
  char *s = http_json_line(nd->exit, &n); /* takes the verdict */
  http_stream_end_with(nd->c, s, n);      /* the exit line and the end: one write */
  free(s);
  free(nd); /* the response has ended: no abort follows */
}

static void on_artifacts(const struct files_result *r, const struct hutch_err *err, void *arg) {
  struct ndexec *nd = arg;
  (void)err; /* not looked for (the sandbox went): the verdict alone */
  if (nd->gone) {
    json_decref(nd->exit);
    free(nd);
    return;
  }

  json_t *files = r ? json_object_get(r->done, "files") : NULL, *f;
  size_t i;
  /* A file an exec before reported, unchanged since, is not this one's
   * (it was written within the clock tick this one began in). */
  json_t *seen = json_object(), *a = json_array();
  json_array_foreach(files, i, f) {
    const char *path = json_string_value(json_object_get(f, "path"));
    json_t *ctime = json_object_get(f, "ctime_ns");
    if (!path || !json_is_integer(ctime))
      continue;
    json_object_set(seen, path, ctime);
    json_t *before = json_object_get(nd->sb->artifacts_seen, path);
    if (!before || json_integer_value(before) != json_integer_value(ctime))
      json_array_append_new(a, json_pack("{s:s,s:O,s:s}", "path", path, "size",
                                         json_object_get(f, "size"), "mime_type", mime_of(path)));
  }

  if (r) {
    json_decref(nd->sb->artifacts_seen);
    nd->sb->artifacts_seen = json_incref(seen);
  }
  json_decref(seen);
  if (json_array_size(a) > 0)
    json_object_set_new(nd->exit, "artifacts", a);
  else
    json_decref(a);
  finish(nd);
}

static void on_end(json_t *exit, void *arg) {
  struct ndexec *nd = arg;
  nd->x = NULL;
  for (int i = 0; i < 2; i++)
    send_output(nd, i, NULL, 0, true); /* what a cut character held back */
  nd->exit = exit;
  struct hutch_err err = {0};
  /* A sandbox_error is the sandbox's, gone or failing: nothing to look in. */
  const char *status = json_string_value(json_object_get(exit, "status"));
  /* The agent looked itself (as the exec's user): its answer is the one a
   * worker gives. Else (gVisor's kernel, an agent from before) a worker. */
  json_t *changed = json_incref(json_object_get(exit, "changed"));
  json_object_del(exit, "changed");
  if (json_is_array(changed) && status && strcmp(status, "sandbox_error") != 0) {
    json_t *done = json_pack("{s:o}", "files", changed);
    on_artifacts(&(struct files_result){.done = done, .path = nd->root}, NULL, nd);
    json_decref(done);
    return;
  }

  json_decref(changed);
  if (!status || strcmp(status, "sandbox_error") == 0)
    finish(nd);
  else if (files_changed(nd->sb, nd->root, nd->user, nd->since_ns, on_artifacts, nd, &err) < 0)
    finish(nd);
}

static void on_abort(void *ctx) {
  struct ndexec *nd = ctx;
  if (!nd->x) { /* ended: its artifacts are being looked for */
    nd->gone = true;
    return;
  }
  exec_abandon(nd->x);
  free(nd);
}

static void on_drain(void *ctx) {
  struct ndexec *nd = ctx;
  if (nd->x)
    exec_resume(nd->x);
}

/* Where an exec's artifacts are looked for besides the home directory and
 * /tmp: its cwd when absolute, without a trailing slash. */
static void artifacts_root(struct ndexec *nd, json_t *req) {
  const char *cwd = json_string_value(json_object_get(req, "cwd"));
  str_copy(nd->root, sizeof nd->root, cwd && cwd[0] == '/' ? cwd : "/tmp");
  for (size_t n = strlen(nd->root); n > 1 && nd->root[n - 1] == '/'; n--)
    nd->root[n - 1] = '\0';
  str_copy(nd->user, sizeof nd->user, json_string_value(json_object_get(req, "user")));
  struct timespec ts; /* the clock file times are stamped with: never later than theirs */
  clock_gettime(CLOCK_REALTIME_COARSE, &ts);
  nd->since_ns = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static const struct http_stream_ops exec_ops = {.abort = on_abort, .drain = on_drain};

/* What an exec body gives besides cmd, background, keep_stdin and pty. */
struct exec_body {
  const char *shell, *cwd, *user;
  json_t *env;
  double timeout_s;
};

/* The body's fields into b, and its stdin into *in: 0, or -1 after a 400. */
static int exec_fields(struct http_conn *c, json_t *o, struct exec_body *b, const char **in) {
  static const char *const known[] = {"cmd",        "shell",     "env",  "cwd",
                                      "stdin",      "timeout_s", "user", "background",
                                      "keep_stdin", "pty",       NULL};
  if (http_body_only(c, o, known) < 0)
    return -1;
  if (http_body_string(c, o, "shell", HUTCH_STRING_MAX - 1, &b->shell) < 0)
    return -1;
  if (http_body_string(c, o, "cwd", 4095, &b->cwd) < 0)
    return -1;
  if (http_body_string(c, o, "user", 32, &b->user) < 0)
    return -1;
  if (http_body_string(c, o, "stdin", HTTP_BODY_MAX, in) < 0)
    return -1;
  if (http_body_string_map(c, o, "env", 1024, &b->env) < 0)
    return -1;
  if (http_body_number(c, o, "timeout_s", 0, SERVE_MAX_TIMEOUT_S, &b->timeout_s) < 0)
    return -1;
  return 0;
}

/* The argv of a shell line (bash -c), or a copy of cmd once each of its
 * strings is checked: 0, or -1 after a 400. */
static int exec_argv(struct http_conn *c, json_t *cmd, const char *shell, json_t **argv) {
  if (shell) {
    *argv = json_pack("[s,s,s]", "/bin/bash", "-c", shell);
    return 0;
  }

  size_t i;
  json_t *a;
  if (!json_is_array(cmd) || json_array_size(cmd) == 0 || json_array_size(cmd) > MAX_ARGS) {
    http_error(c, HUTCH_ERR_INVALID, "invalid_argument", "cmd must be an array of 1 to %d strings",
               MAX_ARGS);
    return -1;
  }
  json_array_foreach(cmd, i, a) {
    if (!json_is_string(a) || json_string_length(a) >= HUTCH_STRING_MAX ||
        strlen(json_string_value(a)) != json_string_length(a)) {
      http_error(c, HUTCH_ERR_INVALID, "invalid_argument",
                 "cmd[%zu] must be a string shorter than %u bytes, without NUL", i,
                 HUTCH_STRING_MAX);
      return -1;
    }
  }
  *argv = json_deep_copy(cmd);
  return 0;
}

/* The sandbox's environment, then the exec's own env over it, into *out:
 * 0, or -1 after a 400. */
static int exec_env(struct http_conn *c, const struct sbx *sb, json_t *env, json_t **out) {
  json_t *e = json_deep_copy(sb->env);
  if (env)
    json_object_update(e, env);
  const char *k;
  json_t *v;
  json_object_foreach(e, k, v)
    if (strchr(k, '=') || json_string_length(v) >= HUTCH_STRING_MAX) {
      http_error(c, HUTCH_ERR_INVALID, "invalid_argument", "env: '%s' is not a usable variable", k);
      json_decref(e);
      return -1;
    }
  *out = e;
  return 0;
}

/* The body's pty {rows, cols}, if any, into the request r: 0, or -1 after
 * a 400. */
static int exec_pty(struct http_conn *c, json_t *o, json_t *r) {
  json_t *pty = json_object_get(o, "pty");
  if (!pty || json_is_null(pty))
    return 0;
  json_int_t rows = json_integer_value(json_object_get(pty, "rows"));
  json_int_t cols = json_integer_value(json_object_get(pty, "cols"));
  if (!json_is_object(pty) || json_object_size(pty) != 2 || rows < 1 || rows > 9999 || cols < 1 ||
      cols > 9999) {
    http_error(c, HUTCH_ERR_INVALID, "invalid_argument",
               "pty is {\"rows\": R, \"cols\": C}, 1 to 9999");
    return -1;
  }
  json_object_set_new(r, "pty", json_pack("{s:I,s:I}", "rows", rows, "cols", cols));
  return 0;
}

json_t *api_exec_request(struct http_conn *c, const struct sbx *sb, json_t *o, const char **in) {
  /* A template's user and working directory are the defaults. */
  struct exec_body b = {.cwd = sb->workdir, .user = sb->user ? sb->user : "user"};
  json_t *cmd = json_object_get(o, "cmd");
  if (exec_fields(c, o, &b, in) < 0)
    return NULL;

  json_t *bg = json_object_get(o, "background"), *ks = json_object_get(o, "keep_stdin");
  if ((bg && !json_is_boolean(bg)) || (ks && !json_is_boolean(ks))) {
    http_error(c, HUTCH_ERR_INVALID, "invalid_argument",
               "background and keep_stdin are true or false");
    return NULL;
  }
  if (json_is_true(ks) && !json_is_true(bg)) {
    http_error(c, HUTCH_ERR_INVALID, "invalid_argument", "keep_stdin is for background processes");
    return NULL;
  }
  if (!!cmd == !!b.shell) {
    http_error(c, HUTCH_ERR_INVALID, "invalid_argument",
               "give exactly one of cmd (an argv array) or shell");
    return NULL;
  }
  if (!hutch_user_ok(b.user)) {
    http_error(c, HUTCH_ERR_INVALID, "invalid_argument",
               "user must be \"user\", \"root\", a user name of the sandbox or UID[:GID]");
    return NULL;
  }

  json_t *argv, *e;
  if (exec_argv(c, cmd, b.shell, &argv) < 0)
    return NULL;
  if (exec_env(c, sb, b.env, &e) < 0) {
    json_decref(argv);
    return NULL;
  }

  json_t *r =
      json_pack("{s:s,s:o,s:o,s:s,s:b,s:I}", "op", "exec", "argv", argv, "env", e, "user", b.user,
                "stdin", *in != NULL, "timeout_ms", (json_int_t)(b.timeout_s * 1000));
  if (b.cwd)
    json_object_set_new(r, "cwd", json_string(b.cwd));
  if (exec_pty(c, o, r) < 0) {
    json_decref(r);
    return NULL;
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
  struct sbx *sb = api_sbx_lookup_live(c, p);
  json_t *o = sb ? http_body_object(c) : NULL;
  if (!o)
    return;

  const char *in = NULL;
  json_t *req = api_exec_request(c, sb, o, &in);
  struct hutch_err err;
  if (req && json_is_true(json_object_get(o, "background"))) {
    start_background(c, sb, req, in, json_is_true(json_object_get(o, "keep_stdin")));
  } else if (req) {
    struct ndexec *nd = xcalloc(1, sizeof *nd);
    nd->sb = sb;
    artifacts_root(nd, req);
    json_object_set_new(
        req, "artifacts",
        json_pack("{s:s,s:I}", "path", nd->root, "since_ns", (json_int_t)nd->since_ns));
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
