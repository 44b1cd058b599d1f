/* The native API's code contexts (core/contexts.c):
 *
 *   POST   /v1/sandboxes/{id}/contexts {language, cwd, env}   → 201 context
 *   GET    /v1/sandboxes/{id}/contexts                        → {contexts}
 *   DELETE /v1/sandboxes/{id}/contexts/{cid}                  → 204
 *   POST   /v1/sandboxes/{id}/contexts/{cid}/restart          → 200 context
 *   POST   /v1/sandboxes/{id}/contexts/{cid}/interrupt        → 204
 *   POST   /v1/sandboxes/{id}/contexts/{cid}/fork             → 201 context (a copy)
 *   POST   /v1/sandboxes/{id}/code {code, language | context_id, timeout_s, env}
 *          → NDJSON, the lines E2B's code interpreter sends: stdout, stderr,
 *            result, error, number_of_executions, end_of_execution (last).
 *
 * A client that goes away takes its cell with it, as E2B's interpreter
 * does: a running cell is interrupted, a waiting one is dropped. */
#include "api/contexts.h"

#include <stdlib.h>
#include <string.h>

#include "api/lifecycle.h"
#include "core/run/contexts.h"
#include "core/sandbox/sbx.h"
#include "http/body.h"
#include "http/errors.h"
#include "http/http.h"

/* {id, language, cwd, state, error?, forked_from?} */
static json_t *context_json(const struct context *cx) {
  struct context_info i;
  contexts_info(cx, &i);
  json_t *j = json_pack("{s:s,s:s,s:o,s:s}", "id", i.id, "language", i.language, "cwd",
                        i.cwd ? json_string(i.cwd) : json_null(), "state", i.state);
  if (i.died)
    json_object_set_new(j, "error", http_json_text(i.died));
  if (i.fork_of)
    json_object_set_new(j, "forked_from", json_string(i.fork_of));
  return j;
}

/* The context the route's {id} and {cid} name; NULL after an error answer. */
static struct context *route_context(struct http_conn *c, const struct principal *p) {
  struct hutch_err err = {0};
  struct sbx *sb = api_sbx_lookup_live(c, p);
  struct context *cx = sb ? contexts_find(sb, c->req.params[1], &err) : NULL;
  if (sb && !cx)
    http_fail(c, &err);
  return cx;
}

/* A create's {language, cwd, env}: 0, or -1 after a 400. */
static int create_fields(struct http_conn *c, json_t *o, const char **lang, const char **cwd,
                         json_t **env) {
  static const char *const known[] = {"language", "cwd", "env", NULL};
  if (http_body_only(c, o, known) < 0)
    return -1;
  if (http_body_string(c, o, "language", 15, lang) < 0)
    return -1;
  if (http_body_string(c, o, "cwd", 4095, cwd) < 0)
    return -1;
  if (http_body_string_map(c, o, "env", 1024, env) < 0)
    return -1;
  return 0;
}

void api_contexts_create(struct http_conn *c, const struct principal *p) {
  struct hutch_err err = {0};
  struct sbx *sb = api_sbx_lookup_live(c, p);
  json_t *o = sb ? http_body_object(c) : NULL, *env = NULL;
  const char *lang = "python", *cwd = NULL;
  if (!o)
    return;
  if (create_fields(c, o, &lang, &cwd, &env) == 0) {
    struct context *cx = contexts_create(sb, lang, cwd, env, &err);
    if (cx)
      http_json(c, 201, context_json(cx));
    else
      http_fail(c, &err);
  }
  json_decref(o);
}

void api_contexts_list(struct http_conn *c, const struct principal *p) {
  struct sbx *sb = api_sbx_lookup(c, p);
  if (!sb)
    return;
  json_t *a = json_array();
  for (struct context *cx = contexts_next(sb, NULL); cx; cx = contexts_next(sb, cx))
    json_array_append_new(a, context_json(cx));
  http_json(c, 200, json_pack("{s:o}", "contexts", a));
}

void api_contexts_delete(struct http_conn *c, const struct principal *p) {
  struct context *cx = route_context(c, p);
  if (!cx)
    return;
  contexts_delete(cx);
  http_respond(c, 204, NULL, NULL, 0, NULL);
}

void api_contexts_restart(struct http_conn *c, const struct principal *p) {
  struct hutch_err err = {0};
  struct context *cx = route_context(c, p);
  if (!cx)
    return;
  if (contexts_restart(cx, &err) == 0)
    http_json(c, 200, context_json(cx));
  else
    http_fail(c, &err);
}

void api_contexts_interrupt(struct http_conn *c, const struct principal *p) {
  struct context *cx = route_context(c, p);
  if (!cx)
    return;
  contexts_interrupt(cx);
  http_respond(c, 204, NULL, NULL, 0, NULL);
}

void api_contexts_fork(struct http_conn *c, const struct principal *p) {
  struct hutch_err err = {0};
  struct context *parent = route_context(c, p);
  if (!parent)
    return;
  struct context *cx = contexts_fork(parent, &err);
  if (cx)
    http_json(c, 201, context_json(cx));
  else
    http_fail(c, &err);
}

/* ---- a cell's events as NDJSON ---- */

static void cell_abort(void *ctx) {
  contexts_cell_cancel(ctx);
}

static void cell_drain(void *ctx) {
  contexts_cell_drain(ctx);
}

static const struct http_stream_ops cell_ops = {.abort = cell_abort, .drain = cell_drain};

static void sink_start(struct cell *ce, void *arg) {
  http_stream_start(arg, 200, "application/x-ndjson", &cell_ops, ce);
}

static void sink_event(json_t *ev, void *arg) {
  /* ASCII: E2B's JS SDK decodes each chunk it reads on its own, which
   * would cut a character that a chunk boundary splits. */
  char *s = json_dumps(ev, SERVE_JSON_FLAGS | JSON_ENSURE_ASCII);
  json_decref(ev);
  if (!s)
    abort(); /* out of memory */
  size_t n = strlen(s);
  s[n] = '\n'; /* over the NUL: sent by length */
  http_stream_send(arg, s, n + 1);
  free(s);
}

/* Whether the sandbox of the request is gone (killed, or at its end). */
static bool sandbox_gone(const struct http_conn *c) {
  return !c->req.nparams || !sbx_find(c->srv, c->req.params[0]);
}

/* E2B's SDKs know the lines of E2B's interpreter only. */
static void sink_event_e2b(json_t *ev, void *arg) {
  const char *type = json_string_value(json_object_get(ev, "type"));
  if (type && strcmp(type, "artifacts") == 0)
    json_decref(ev);
  else
    sink_event(ev, arg);
}

static void sink_end(void *arg) {
  struct http_conn *c = arg;
  /* E2B's interpreter (the text dialect): a cell whose sandbox was killed
   * is cut as E2B's proxy cuts it, which its SDK reports as the kill. */
  if (c->dialect == DIALECT_TEXT && sandbox_gone(c)) {
    http_own(c, NULL, NULL);
    http_abort(c);
    return;
  }
  http_stream_end(c);
}

static bool sink_full(void *arg) {
  return http_queued(arg) >= HTTP_STREAM_HIGH;
}

/* A cell's {code, env, timeout_s} and, with code, its {context_id,
 * language}, into r: 0, or -1 after a 400. */
static int cell_fields(struct http_conn *c, json_t *o, struct cell_request *r) {
  static const char *const known[] = {"code", "language", "context_id", "timeout_s", "env", NULL};
  if (http_body_only(c, o, known) < 0)
    return -1;
  if (http_body_string(c, o, "code", CONTEXTS_CODE_MAX, &r->code) < 0)
    return -1;
  if (http_body_string_map(c, o, "env", 1024, &r->env) < 0)
    return -1;
  if (http_body_number(c, o, "timeout_s", 0.001, SERVE_MAX_TIMEOUT_S, &r->timeout_s) < 0)
    return -1;
  if (!r->code)
    return 0;
  if (http_body_string(c, o, "context_id", 16, &r->context_id) < 0)
    return -1;
  if (http_body_string(c, o, "language", 15, &r->language) < 0)
    return -1;
  return 0;
}

void api_contexts_code(struct http_conn *c, struct sbx *sb, json_t *o, bool e2b) {
  struct cell_request r = {.timeout_s = CONTEXTS_CELL_TIMEOUT_S};
  struct hutch_err err = {0};
  if (cell_fields(c, o, &r) < 0)
    return;
  struct cell_sink sink = {sink_start, e2b ? sink_event_e2b : sink_event, sink_end, sink_full, c};
  if (contexts_run(sb, &r, &sink, &err) < 0)
    http_fail(c, &err);
}

void api_code(struct http_conn *c, const struct principal *p) {
  struct sbx *sb = api_sbx_lookup_live(c, p);
  json_t *o = sb ? http_body_object(c) : NULL;
  if (o)
    api_contexts_code(c, sb, o, false);
  json_decref(o);
}
