/* What runs before a create ends (startup.h): the sandbox's egress CA
 * installed when it has secrets (egress_tls.h); a template's start and
 * ready commands: the start command
 * as a background process of the new sandbox, then the ready command run
 * every STARTUP_POLL_MS until it exits 0; the create answers only then.
 * Both run as any exec of the sandbox (its user, working directory and
 * environment, its limits): they are the template author's code. */
#include "core/life/startup.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"
#include "core/events/events.h"
#include "core/run/exec.h"
#include "core/run/procs.h"
#include "core/life/sbx_create.h"
#include "core/sandbox/sbx.h"
#include "core/base/server.h"
#include "core/egress/egress_trust.h"
#include "core/life/sbx_teardown.h"

struct startup {
  struct server *srv;
  struct principal p;
  char id[17];
  char *start, *ready;
  const struct create_ops *ops;
  void *arg;
  uint64_t deadline_ns;
  uv_timer_t timer;
  unsigned tries;
  bool passed;
  char last[256]; /* what the last ready check said */
};

/* The command from the template's config, else from its labels (what a
 * Dockerfile, or E2B's build, sets: LABEL hutch.start_cmd=...). */
static const char *config_cmd(json_t *tmpl, const char *key, const char *label) {
  json_t *cfg = json_object_get(tmpl, "config");
  const char *s = json_string_value(json_object_get(cfg, key));
  if (!s || !*s)
    s = json_string_value(json_object_get(json_object_get(cfg, "labels"), label));
  return s && *s ? s : NULL;
}

static json_t *shell_request(const struct sbx *sb, const char *cmd, int64_t timeout_ms) {
  json_t *r = json_pack("{s:s,s:[s,s,s],s:o,s:s,s:b,s:I}", "op", "exec", "argv", "/bin/sh", "-c",
                        cmd, "env", json_deep_copy(sb->env), "user", sb->user ? sb->user : "user",
                        "stdin", 0, "timeout_ms", (json_int_t)timeout_ms);
  if (sb->workdir)
    json_object_set_new(r, "cwd", json_string(sb->workdir));
  return r;
}

static void timer_closed(uv_handle_t *h) {
  free(h->data);
}

static void startup_end(struct startup *su, struct sbx *sb, const struct hutch_err *err) {
  const struct create_ops *ops = su->ops;
  void *arg = su->arg;
  struct hutch_err left = {0};
  if (sb && !ops->wanted(arg)) {
    hutch_err_fail(&left, HUTCH_ERR_UNAVAILABLE, "overloaded", "the client left");
    err = &left;
  }
  if (sb && err)
    sbx_destroy(sb);
  free(su->start);
  free(su->ready);
  uv_close((uv_handle_t *)&su->timer, timer_closed);
  if (!err)
    startup_ready(sb);
  ops->made(err ? NULL : sb, err, arg);
}

static void check_due(uv_timer_t *t);

static void check_start(json_t *pid, void *arg) {
  (void)pid, (void)arg;
}

static bool check_output(int which, const uint8_t *data, size_t n, void *arg) {
  (void)which, (void)data, (void)n, (void)arg;
  return true;
}

/* A check's verdict: what comes next is decided on the timer, not here,
 * inside the agent connection's callback (ending the sandbox from there
 * would free the connection under its own feet). */
static void check_end(json_t *exit, void *arg) {
  struct startup *su = arg;
  const char *status = json_string_value(json_object_get(exit, "status"));
  json_int_t code = json_integer_value(json_object_get(exit, "exit_code"));
  snprintf(su->last, sizeof su->last, "%s, exit code %lld", status ? status : "?", (long long)code);
  su->passed = status && strcmp(status, "ok") == 0;
  json_decref(exit);

  bool again = !su->passed && now_ns() < su->deadline_ns;
  uv_timer_start(&su->timer, check_due, again ? STARTUP_POLL_MS : 0, 0);
}

static const struct exec_sink check_sink = {
    .start = check_start, .output = check_output, .end = check_end};

/* The next ready check, or the end: passed, out of time, the sandbox
 * gone meanwhile, or its client gone (the sandbox goes then, not at the
 * deadline: it counts against the tenant's limits). */
static void check_due(uv_timer_t *t) {
  struct startup *su = t->data;
  struct principal p = su->p;
  struct sbx *sb = sbx_find_own(su->srv, &p, su->id);
  struct hutch_err err = {0};

  if (!sb || su->srv->stopping) {
    hutch_err_fail(&err, HUTCH_ERR_UNAVAILABLE, "sandbox_error",
                   "the sandbox ended before its template's ready command passed");
    startup_end(su, NULL, &err);
    return;
  }
  if (su->passed || !su->ops->wanted(su->arg)) {
    startup_end(su, sb, NULL);
    return;
  }
  if (su->tries && now_ns() >= su->deadline_ns) {
    hutch_err_fail(&err, HUTCH_ERR_UPSTREAM_TIMEOUT, "ready_timeout",
                   "the template's ready command did not pass within %llu s (%u tries; the "
                   "last: %s)",
                   (unsigned long long)(su->srv->cfg.ready_timeout_ms / 1000), su->tries, su->last);
    startup_end(su, sb, &err);
    return;
  }

  su->tries++;
  struct exec_sink sink = check_sink;
  sink.arg = su;
  json_t *req = shell_request(sb, su->ready, STARTUP_CHECK_TIMEOUT_MS);
  struct exec *x = exec_start(sb, req, NULL, now_ns(), &sink, &err);
  json_decref(req);
  if (!x)
    startup_end(su, sb, &err);
}

/* The commands, once the sandbox trusts its egress CA (if it needed to). */
static void run_commands(struct startup *su, struct sbx *sb) {
  struct hutch_err err = {0};
  if (su->start) {
    json_t *req = shell_request(sb, su->start, 0);
    struct proc *pr = procs_start(sb, req, NULL, false, NULL, NULL, &err);
    json_decref(req);
    if (!pr) {
      hutch_err_wrap(&err, "the template's start command");
      startup_end(su, sb, &err);
      return;
    }
    procs_mark_start(pr);
  }

  if (!su->ready)
    startup_end(su, sb, NULL);
  else
    check_due(&su->timer);
}

static void trusted_due(uv_timer_t *t) {
  struct startup *su = t->data;
  struct principal p = su->p;
  struct sbx *sb = sbx_find_own(su->srv, &p, su->id);
  if (!sb || su->srv->stopping) {
    struct hutch_err err = {0};
    hutch_err_fail(&err, HUTCH_ERR_UNAVAILABLE, "sandbox_error",
                   "the sandbox ended before it was ready");
    startup_end(su, NULL, &err);
    return;
  }
  run_commands(su, sb);
}

/* Its CA is installed, or could not be (the sandbox runs on, its secrets
 * going over plain HTTP only): on the timer, as check_end. */
static void trusted(const struct hutch_err *err, void *arg) {
  struct startup *su = arg;
  if (err)
    fprintf(stderr, "hutch serve: %s\n", err->msg);
  uv_timer_start(&su->timer, trusted_due, 0, 0);
}

void startup_ready(struct sbx *sb) {
  events_emit(sb->srv, "sandbox.started", sb->tenant, sb->id, NULL);
}

int startup_begin(struct server *srv, const struct principal *p, struct sbx *sb, json_t *tmpl,
                  const struct create_ops *ops, void *arg) {
  const char *start = config_cmd(tmpl, "start_cmd", "hutch.start_cmd");
  const char *ready = config_cmd(tmpl, "ready_cmd", "hutch.ready_cmd");
  bool trust = json_array_size(sb->secrets) && !sb->tls_ca;
  if (!start && !ready && !trust)
    return 0;

  struct startup *su = xcalloc(1, sizeof *su);
  su->srv = srv;
  su->p = *p;
  str_copy(su->id, sizeof su->id, sb->id);
  su->ops = ops;
  su->arg = arg;
  su->start = start ? xstrdup(start) : NULL;
  su->ready = ready ? xstrdup(ready) : NULL;
  su->deadline_ns = now_ns() + srv->cfg.ready_timeout_ms * 1000000;
  uv_timer_init(srv->loop, &su->timer);
  su->timer.data = su;

  /* The sandbox trusts its egress CA before anything of it runs. */
  if (!egress_trust(sb, trusted, su))
    run_commands(su, sb);
  return 1;
}
