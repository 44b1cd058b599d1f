/* envd's process.Process service (E2B's spec/envd/process/process.proto)
 * over Connect RPC, on hutch's background processes (procs.c): every
 * process an E2B client starts outlives its stream, as under envd, so it
 * can be listed, connected to again, written to and signalled.
 *
 *   Start    {process:{cmd,args,envs,cwd}, pty?, stdin?}  → stream of
 *            {event:{start:{pid}}}, {event:{data:{stdout|stderr|pty}}},
 *            {event:{end:{exitCode,exited,status,error?}}}, end of stream
 *   Connect  {process:{pid}}   → the same stream, from now on
 *   List, SendInput, CloseStdin, SendSignal, Update (PTY size): unary.
 *
 * Output is bytes, base64 in JSON. Connect-Timeout-Ms becomes the
 * process's wall-time limit, as envd does. */
#include "e2b/process.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"
#include "api/exec.h"
#include "api/lifecycle.h"
#include "core/run/procs.h"
#include "core/sandbox/sbx.h"
#include "e2b/control.h"
#include "http/body.h"
#include "http/connect.h"
#include "http/errors.h"
#include "http/http.h"
#include "http/request.h"

#define STREAM_BACKLOG (8u << 20) /* output queued for a slow client before it is dropped */

struct pstream {
  struct http_conn *c;
  struct sub *u;
  bool pty;
  bool started;
  bool attaching; /* in ps_attach: a client gone meanwhile is freed there */
  bool gone;
};

static void ps_gone(void *ctx) {
  struct pstream *ps = ctx;
  if (ps->u) /* the process goes on: it is not the stream's */
    procs_unsubscribe(ps->u);
  ps->u = NULL;
  if (ps->attaching)
    ps->gone = true;
  else
    free(ps);
}

static const struct http_stream_ops ps_ops = {.abort = ps_gone};

static void ps_start(struct sub *u, int pid) {
  struct pstream *ps = u->ctx;
  ps->started = true;
  http_connect_send(ps->c, json_pack("{s:{s:{s:i}}}", "event", "start", "pid", pid));
}

/* The field of envd's data event that carries a line of type: the PTY's
 * for a process on one, else its stderr or stdout. */
static const char *data_field(const struct pstream *ps, const char *type) {
  if (ps->pty)
    return "pty";
  if (strcmp(type, "stderr") == 0)
    return "stderr";
  return "stdout";
}

/* One NDJSON output line of procs.c as a data event. */
static void ps_line(struct sub *u, const char *line, size_t n) {
  struct pstream *ps = u->ctx;
  json_t *j = json_loadb(line, n, 0, NULL);
  const char *type = json_string_value(json_object_get(j, "type"));
  const char *text = json_string_value(json_object_get(j, "data"));
  const char *b64 = json_string_value(json_object_get(j, "data_b64"));
  if (type && (text || b64)) {
    char *data =
        text ? http_b64_encode(text, json_string_length(json_object_get(j, "data"))) : xstrdup(b64);
    const char *which = data_field(ps, type);
    http_connect_send(ps->c, json_pack("{s:{s:{s:s}}}", "event", "data", which, data));
    free(data);
  }
  json_decref(j);
  if (http_queued(ps->c) > STREAM_BACKLOG) /* a reader this slow is dropped */
    http_abort(ps->c);                     /* its abort (ps_gone) frees ps */
}

/* The verdict as envd's EndEvent: exit status N, or signal: NAME (the
 * status and error strings of Go's os.ProcessState, which envd sends). */
static json_t *end_event(json_t *exit) {
  const char *status = json_string_value(json_object_get(exit, "status"));
  const char *msg = json_string_value(json_object_get(exit, "message"));
  json_t *code = json_object_get(exit, "exit_code");
  json_t *sig = json_object_get(exit, "signal");
  char what[96];
  json_t *end;
  if (json_is_integer(code)) {
    json_int_t n = json_integer_value(code);
    snprintf(what, sizeof what, "exit status %lld", (long long)n);
    end = json_pack("{s:I,s:b,s:s}", "exitCode", n, "exited", 1, "status", what);
    if (n != 0)
      json_object_set_new(end, "error", json_string(msg && *msg ? msg : what));
    return end;
  }
  int s = json_is_integer(sig) ? (int)json_integer_value(sig) : SIGKILL;
  const char *name = strsignal(s);
  snprintf(what, sizeof what, "signal: %c%s", name ? (char)(name[0] | 0x20) : 'k',
           name ? name + 1 : "illed");
  end = json_pack("{s:i,s:s}", "exitCode", -1, "status", what);
  /* A timeout, an OOM or an output limit says so in its message. */
  bool signaled = status && strcmp(status, "signaled") == 0;
  json_object_set_new(end, "error", http_json_text(msg && *msg && !signaled ? msg : what));
  return end;
}

static void ps_end(struct sub *u, const char *line, size_t n) {
  struct pstream *ps = u->ctx;
  struct http_conn *c = ps->c;
  free(u); /* already unlinked */
  ps->u = NULL;
  json_t *exit = json_loadb(line, n, 0, NULL);
  const char *status = json_string_value(json_object_get(exit, "status"));
  const char *msg = json_string_value(json_object_get(exit, "message"));

  if (status && strcmp(status, "sandbox_error") == 0 && !e2b_sandbox(c)) {
    /* The sandbox was killed: E2B's proxy cuts the stream, and the SDKs
     * tell that (the health check then finds it gone) from an end. */
    json_decref(exit);
    e2b_cut(c);
    free(ps);
    return;
  }

  if (!ps->started) {
    /* It never ran: envd answers that with invalid_argument. */
    struct hutch_err err = {0};
    hutch_err_fail(&err,
                   status && strcmp(status, "sandbox_error") == 0 ? HUTCH_ERR_UNAVAILABLE
                                                                  : HUTCH_ERR_INVALID,
                   NULL, "%s", msg && *msg ? msg : "the process could not be started");
    http_connect_end(c, &err);
  } else {
    http_connect_send(c, json_pack("{s:{s:o}}", "event", "end", end_event(exit)));
    http_connect_end(c, NULL);
  }

  json_decref(exit);
  free(ps); /* the response has ended: no abort follows */
}

static struct pstream *ps_attach(struct http_conn *c, struct proc *pr, bool pty) {
  struct pstream *ps = xcalloc(1, sizeof *ps);
  ps->c = c;
  ps->pty = pty;
  ps->u = procs_subscribe(pr, ps_line, ps_end, ps);
  ps->u->start = ps_start;
  /* Starting the stream can lose the connection at once (ps_gone). */
  ps->attaching = true;
  http_connect_stream_start(c, &ps_ops, ps);
  ps->attaching = false;
  if (ps->gone) {
    free(ps);
    return NULL;
  }
  return ps;
}

/* ---- Start ---- */

static json_t *string_array(json_t *a) {
  size_t i;
  json_t *v;
  if (!json_is_array(a))
    return NULL;
  json_array_foreach(a, i, v)
    if (!json_is_string(v))
      return NULL;
  return a;
}

/* The native exec body for a StartRequest; NULL after a 400. */
static json_t *start_body(struct http_conn *c, json_t *m, const char *user, bool *pty) {
  json_t *proc = json_object_get(m, "process");
  json_t *cmd = json_object_get(proc, "cmd"), *args = json_object_get(proc, "args");
  json_t *envs = json_object_get(proc, "envs"), *cwd = json_object_get(proc, "cwd");
  json_t *ptyo = json_object_get(m, "pty"), *in = json_object_get(m, "stdin");
  json_t *size = json_object_get(ptyo, "size");
  if (!json_is_string(cmd) || !json_string_length(cmd) || (args && !string_array(args)) ||
      (envs && !json_is_object(envs)) || (cwd && !json_is_string(cwd)) ||
      (in && !json_is_boolean(in)) || (ptyo && !json_is_object(size))) {
    http_error(c, HUTCH_ERR_INVALID, "invalid_argument",
               "process is {cmd, args: [strings], envs: {…}, cwd}; pty {size:{cols,rows}}; stdin "
               "true or false");
    return NULL;
  }

  json_t *argv = json_pack("[O]", cmd);
  if (args)
    json_array_extend(argv, args);
  json_t *o = json_pack("{s:o,s:s,s:b,s:b}", "cmd", argv, "user", user, "background", 1,
                        "keep_stdin", json_is_true(in) || ptyo);
  /* No cwd: the template's working directory (E2B's setWorkdir), else
   * the user's home. */
  const struct sbx *sb = e2b_sandbox(c);
  char *dir;
  if (!cwd && sb && sb->workdir)
    dir = xstrdup(sb->workdir);
  else
    dir = e2b_path(cwd ? json_string_value(cwd) : NULL, user);
  json_object_set_new(o, "cwd", json_string(dir));
  free(dir);
  if (envs)
    json_object_set(o, "env", envs);
  if (ptyo) {
    json_int_t cols = json_integer_value(json_object_get(size, "cols"));
    json_int_t rows = json_integer_value(json_object_get(size, "rows"));
    json_object_set_new(o, "pty", json_pack("{s:I,s:I}", "rows", rows, "cols", cols));
  }

  /* envd kills the process when the call's deadline passes. */
  const char *deadline = http_header(&c->req, "Connect-Timeout-Ms");
  uint64_t ms;
  if (deadline && parse_u64(deadline, &ms) && ms > 0)
    json_object_set_new(o, "timeout_s", json_real((double)(ms < 1000 ? 1000 : ms) / 1000));
  *pty = ptyo != NULL;
  return o;
}

void e2b_process_start(struct http_conn *c, const struct principal *p) {
  struct sbx *sb = api_sbx_lookup(c, p);
  const char *user = sb ? e2b_user(c, sb) : NULL;
  json_t *m = user ? http_connect_request(c, 1) : NULL;
  bool pty = false;
  json_t *o = m ? start_body(c, m, user, &pty) : NULL;
  const char *in = NULL;
  json_t *req = o ? api_exec_request(c, sb, o, &in) : NULL;
  struct hutch_err err;
  struct proc *pr = NULL;
  if (req) {
    pr = procs_start(sb, req, in, json_is_true(json_object_get(o, "keep_stdin")), NULL, NULL, &err);
    if (!pr)
      http_fail(c, &err);
  }
  if (pr)
    ps_attach(c, pr, pty);
  json_decref(req);
  json_decref(o);
  json_decref(m);
}

/* ---- the others: they name a process by its pid ---- */

static struct proc *selected(struct http_conn *c, struct sbx *sb, json_t *m) {
  json_t *sel = json_object_get(m, "process");
  json_t *pid = json_object_get(sel, "pid");
  if (json_object_get(sel, "tag")) {
    http_error(c, HUTCH_ERR_INVALID, "invalid_argument",
               "hutch selects processes by pid, not by tag");
    return NULL;
  }
  json_int_t n = json_is_integer(pid) ? json_integer_value(pid) : -1;
  if (json_is_string(pid))
    n = strtoll(json_string_value(pid), NULL, 10);
  struct proc *pr = n > 0 && n <= INT32_MAX ? procs_by_pid(sb, (int)n) : NULL;
  if (!pr || procs_exit_line(pr))
    http_error(c, HUTCH_ERR_NOT_FOUND, "not_found", "no running process with pid %lld",
               (long long)n);
  return pr && !procs_exit_line(pr) ? pr : NULL;
}

/* The message of a unary call on a process, and the process; NULL after
 * an error answer. */
static struct proc *unary(struct http_conn *c, const struct principal *p, json_t **m) {
  struct sbx *sb = api_sbx_lookup(c, p);
  *m = sb ? http_connect_request(c, 0) : NULL;
  return *m ? selected(c, sb, *m) : NULL;
}

static void ok(struct http_conn *c) {
  http_json(c, 200, json_object());
}

void e2b_process_connect(struct http_conn *c, const struct principal *p) {
  struct sbx *sb = api_sbx_lookup(c, p);
  json_t *m = sb ? http_connect_request(c, 1) : NULL;
  struct proc *pr = m ? selected(c, sb, m) : NULL;
  if (pr) {
    struct pstream *ps = ps_attach(c, pr, procs_pty(pr));
    if (ps)
      ps_start(ps->u, procs_pid(pr));
  }
  json_decref(m);
}

void e2b_process_list(struct http_conn *c, const struct principal *p) {
  struct sbx *sb = api_sbx_lookup(c, p);
  if (!sb)
    return;
  json_t *a = json_array();
  for (struct proc *pr = procs_next(sb, NULL); pr; pr = procs_next(sb, pr)) {
    if (procs_exit_line(pr))
      continue;
    json_t *argv = procs_cmd(pr);
    json_t *config = json_pack("{s:O?,s:o}", "cmd", json_array_get(argv, 0), "args", json_array());
    for (size_t i = 1; i < json_array_size(argv); i++)
      json_array_append(json_object_get(config, "args"), json_array_get(argv, i));
    json_array_append_new(a, json_pack("{s:o,s:i}", "config", config, "pid", procs_pid(pr)));
  }
  http_json(c, 200, json_pack("{s:o}", "processes", a));
}

static void write_input(struct http_conn *c, struct proc *pr, const void *data, size_t n,
                        bool eof) {
  struct hutch_err err;
  if (procs_input(pr, data, n, eof, &err) < 0)
    http_fail(c, &err);
  else
    ok(c);
}

void e2b_process_input(struct http_conn *c, const struct principal *p) {
  json_t *m;
  struct proc *pr = unary(c, p, &m);
  if (pr) {
    json_t *input = json_object_get(m, "input");
    json_t *data = json_object_get(input, "stdin");
    if (!data)
      data = json_object_get(input, "pty");
    uint8_t *raw;
    size_t n;
    if (!json_is_string(data) || http_b64_decode(json_string_value(data), &raw, &n) < 0) {
      http_error(c, HUTCH_ERR_INVALID, "invalid_argument",
                 "input is {stdin: base64} or {pty: base64}");
    } else {
      write_input(c, pr, raw, n, false);
      free(raw);
    }
  }
  json_decref(m);
}

void e2b_process_close_stdin(struct http_conn *c, const struct principal *p) {
  json_t *m;
  struct proc *pr = unary(c, p, &m);
  if (pr)
    write_input(c, pr, NULL, 0, true);
  json_decref(m);
}

/* The number of envd's signal name: 9, 15, or 0 for any other. */
static json_int_t signal_number(const char *name) {
  if (strcmp(name, "SIGNAL_SIGKILL") == 0)
    return 9;
  if (strcmp(name, "SIGNAL_SIGTERM") == 0)
    return 15;
  return 0;
}

/* SIGKILL kills every process the command started (its cgroup), as a
 * native kill does; SIGTERM goes to its process group. */
void e2b_process_signal(struct http_conn *c, const struct principal *p) {
  json_t *m;
  struct proc *pr = unary(c, p, &m);
  if (pr) {
    json_t *sig = json_object_get(m, "signal");
    const char *name = json_string_value(sig);
    json_int_t n = name ? 0 : json_integer_value(sig);
    if (name)
      n = signal_number(name);
    struct hutch_err err;
    if (n == 9)
      procs_kill(pr, &err);
    else if (n == 15)
      procs_signal(pr, SIGTERM, &err);
    if (n == 9 || n == 15)
      ok(c);
    else
      http_error(c, HUTCH_ERR_INVALID, "invalid_argument",
                 "signal is SIGNAL_SIGKILL or SIGNAL_SIGTERM");
  }
  json_decref(m);
}

void e2b_process_update(struct http_conn *c, const struct principal *p) {
  json_t *m;
  struct proc *pr = unary(c, p, &m);
  if (pr) {
    json_t *size = json_object_get(json_object_get(m, "pty"), "size");
    json_int_t cols = json_integer_value(json_object_get(size, "cols"));
    json_int_t rows = json_integer_value(json_object_get(size, "rows"));
    struct hutch_err err;
    if (cols < 1 || cols > 9999 || rows < 1 || rows > 9999)
      http_error(c, HUTCH_ERR_INVALID, "invalid_argument", "pty.size is {cols, rows}, 1 to 9999");
    else if (procs_resize(pr, (int)rows, (int)cols, &err) < 0)
      http_error(c, HUTCH_ERR_NOT_FOUND, "not_found", "the process has ended");
    else
      ok(c);
  }
  json_decref(m);
}

/* A paused sandbox's envd does not answer: 502, as E2B's proxy says it
 * (the SDKs' isRunning() reads it as "not running"); one made to resume on
 * traffic resumes, as any request to it would. */
void e2b_envd_health(struct http_conn *c, const struct principal *p) {
  (void)p;
  struct sbx *sb = e2b_sandbox(c);
  if (!sb || (sb->paused && !sb->auto_resume))
    http_error(c, HUTCH_ERR_UPSTREAM, "sandbox_paused", "sandbox %s is paused: connect resumes it",
               c->req.params[0]);
  else if (api_sbx_wake(c, sb))
    http_respond(c, 204, "application/json", "", 0, NULL);
}
