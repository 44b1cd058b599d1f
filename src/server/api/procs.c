/* The native API on background processes (core/procs.c): list them,
 * follow one's output as NDJSON (GET …/processes/{pid}/output: what was
 * kept, then what comes, until the exit line), signal one, write to its
 * stdin, kill it. */
#include "api/procs.h"

#include <stdlib.h>
#include <string.h>

#include "util.h"
#include "api/lifecycle.h"
#include "core/run/procs.h"
#include "core/sandbox/sbx.h"
#include "http/body.h"
#include "http/errors.h"
#include "http/http.h"

#define SUB_BACKLOG (8u << 20) /* output queued for an attached client before it is dropped */

struct proc *api_proc(struct http_conn *c, const struct principal *p) {
  struct sbx *sb = api_sbx_lookup_live(c, p);
  struct hutch_err err;
  struct proc *pr = sb ? procs_lookup(sb, c->req.params[1], &err) : NULL;
  if (sb && !pr)
    http_fail(c, &err);
  return pr;
}

static json_t *proc_json(const struct proc *pr) {
  struct proc_info i;
  char started[32];
  procs_info(pr, &i);
  iso8601(i.started_ms, started);
  return json_pack("{s:i,s:O,s:s,s:b,s:O?}", "pid", i.pid, "cmd", i.cmd, "started_at", started,
                   "running", i.exit == NULL, "exit", i.exit);
}

void api_procs_list(struct http_conn *c, const struct principal *p) {
  struct sbx *sb = api_sbx_lookup(c, p);
  if (!sb)
    return;
  json_t *a = json_array();
  for (struct proc *pr = procs_next(sb, NULL); pr; pr = procs_next(sb, pr))
    json_array_append_new(a, proc_json(pr));
  http_json(c, 200, json_pack("{s:o}", "processes", a));
}

/* ---- an NDJSON reader ---- */

static void sub_gone(void *ctx) {
  procs_unsubscribe(ctx);
}

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
  struct proc *pr = api_proc(c, p);
  if (!pr)
    return;
  size_t nkept;
  const char *kept = procs_kept(pr, &nkept);
  json_t *exit = procs_exit_line(pr);
  if (exit) { /* what was kept, the exit line, and done */
    size_t n;
    char *line = http_json_line(json_incref(exit), &n);
    http_stream_start(c, 200, "application/x-ndjson", NULL, NULL);
    http_stream_send(c, kept, nkept);
    http_stream_send(c, line, n);
    http_stream_end(c);
    free(line);
    return;
  }
  /* Subscribed before anything is sent: a send that fails closes the
   * connection, whose abort unsubscribes (and frees) u. */
  struct sub *u = procs_subscribe(pr, ndjson_line, ndjson_end, c);
  http_stream_start(c, 200, "application/x-ndjson", &sub_ops, u);
  http_stream_send(c, kept, nkept);
}

/* ---- input and control ---- */

static void no_content(struct http_conn *c) {
  http_respond(c, 204, "application/json", "", 0, NULL);
}

void api_procs_signal(struct http_conn *c, const struct principal *p) {
  static const char *const known[] = {"signal", NULL};
  struct proc *pr = api_proc(c, p);
  json_t *o = pr ? http_body_object(c) : NULL;
  uint64_t sig = 0;
  struct hutch_err err;
  if (!o)
    return;
  if (http_body_only(c, o, known) < 0)
    goto out;
  if (http_body_uint(c, o, "signal", 1, 64, &sig) < 0)
    goto out;

  if (!sig)
    http_error(c, HUTCH_ERR_INVALID, "invalid_argument", "signal is required (a number, 1 to 64)");
  else if (procs_signal(pr, (int)sig, &err) < 0)
    http_fail(c, &err);
  else
    no_content(c);
out:
  json_decref(o);
}

void api_procs_stdin(struct http_conn *c, const struct principal *p) {
  static const char *const known[] = {"data", "eof", NULL};
  struct proc *pr = api_proc(c, p);
  json_t *o = pr ? http_body_object(c) : NULL;
  const char *data = "";
  struct hutch_err err;
  if (!o)
    return;
  if (http_body_only(c, o, known) < 0)
    goto out;
  if (http_body_string(c, o, "data", HTTP_BODY_MAX, &data) < 0)
    goto out;

  bool eof = json_is_true(json_object_get(o, "eof"));
  if (procs_input(pr, data, strlen(data), eof, &err) < 0)
    http_fail(c, &err);
  else
    no_content(c);
out:
  json_decref(o);
}

/* A process that has ended already is killed all the same: 204. */
void api_procs_kill(struct http_conn *c, const struct principal *p) {
  struct proc *pr = api_proc(c, p);
  struct hutch_err err;
  if (!pr)
    return;
  procs_kill(pr, &err);
  no_content(c);
}
