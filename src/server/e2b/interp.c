/* E2B's code interpreter (the server of its code-interpreter template, on
 * sandbox port 49999) on hutch's code contexts (contexts.c):
 *
 *   POST /execute {code, context_id | language, env_vars}  → NDJSON, the
 *        lines of the native /code (E2B's own shapes)
 *   POST /contexts {language, cwd} → {id, language, cwd}
 *   GET  /contexts                 → [context…] in the order made: the python
 *                                    and javascript defaults first, made at
 *                                    the interpreter's first use
 *   DELETE /contexts/{id}, POST /contexts/{id}/restart
 *
 * Errors are text, as that server's are: its SDKs show the body. A cell has
 * no time limit of its own here (E2B's has none): a client that gives up
 * interrupts it by going away. */
#include "e2b/interp.h"

#include <stdlib.h>
#include <string.h>

#include "api/contexts.h"
#include "api/lifecycle.h"
#include "core/run/contexts.h"
#include "core/sandbox/sbx.h"
#include "http/body.h"
#include "http/errors.h"
#include "http/http.h"

#define E2B_CELL_TIMEOUT_S SERVE_MAX_TIMEOUT_S
#define DEFAULT_CWD "/home/user"

/* A field that may be absent or null (the Python SDK sends null). */
static json_t *given(json_t *o, const char *key) {
  json_t *v = json_object_get(o, key);
  return json_is_null(v) ? NULL : v;
}

static json_t *e2b_context(const struct context *cx) {
  struct context_info i;
  contexts_info(cx, &i);
  return json_pack("{s:s,s:s,s:s}", "id", i.id, "language", i.language, "cwd",
                   i.cwd ? i.cwd : DEFAULT_CWD);
}

void e2b_execute(struct http_conn *c, const struct principal *p) {
  static const char *const known[] = {"code", "context_id", "language", "env_vars", NULL};
  struct sbx *sb = api_sbx_lookup(c, p);
  json_t *o = sb ? http_body_object(c) : NULL;
  if (!o || http_body_only(c, o, known) < 0) {
    json_decref(o);
    return;
  }
  contexts_defaults(sb);
  json_t *n = json_pack("{s:O?,s:I}", "code", given(o, "code"), "timeout_s",
                        (json_int_t)E2B_CELL_TIMEOUT_S);
  if (given(o, "context_id"))
    json_object_set(n, "context_id", given(o, "context_id"));
  if (given(o, "language"))
    json_object_set(n, "language", given(o, "language"));
  if (given(o, "env_vars"))
    json_object_set(n, "env", given(o, "env_vars"));
  api_contexts_code(c, sb, n, true);
  json_decref(n);
  json_decref(o);
}

void e2b_contexts_create(struct http_conn *c, const struct principal *p) {
  static const char *const known[] = {"language", "cwd", NULL};
  struct sbx *sb = api_sbx_lookup(c, p);
  json_t *o = sb ? http_body_object(c) : NULL;
  if (!o)
    return;
  const char *lang = json_string_value(given(o, "language"));
  const char *cwd = json_string_value(given(o, "cwd"));
  if ((given(o, "language") && !lang) || (given(o, "cwd") && !cwd))
    http_error(c, HUTCH_ERR_INVALID, "invalid_argument", "language and cwd are strings");
  else if (http_body_only(c, o, known) >= 0) {
    struct hutch_err err = {0};
    contexts_defaults(sb);
    struct context *cx = contexts_create(sb, lang, cwd ? cwd : DEFAULT_CWD, NULL, &err);
    if (cx)
      http_json(c, 200, e2b_context(cx));
    else
      http_fail(c, &err);
  }
  json_decref(o);
}

void e2b_contexts_list(struct http_conn *c, const struct principal *p) {
  struct sbx *sb = api_sbx_lookup(c, p);
  if (!sb)
    return;
  contexts_defaults(sb);
  json_t *a = json_array();
  for (struct context *cx = contexts_next(sb, NULL); cx; cx = contexts_next(sb, cx))
    json_array_append_new(a, e2b_context(cx));
  http_json(c, 200, a);
}

static struct context *named(struct http_conn *c, const struct principal *p) {
  struct hutch_err err = {0};
  struct sbx *sb = api_sbx_lookup(c, p);
  struct context *cx = sb ? contexts_find(sb, c->req.params[1], &err) : NULL;
  if (sb && !cx)
    http_fail(c, &err);
  return cx;
}

void e2b_contexts_delete(struct http_conn *c, const struct principal *p) {
  struct context *cx = named(c, p);
  if (!cx)
    return;
  contexts_delete(cx);
  http_respond(c, 204, "application/json", "", 0, NULL);
}

void e2b_contexts_restart(struct http_conn *c, const struct principal *p) {
  struct hutch_err err = {0};
  struct context *cx = named(c, p);
  if (!cx)
    return;
  if (contexts_restart(cx, &err) == 0)
    http_json(c, 200, e2b_context(cx));
  else
    http_fail(c, &err);
}

void e2b_interp_health(struct http_conn *c, const struct principal *p) {
  (void)p;
  http_respond(c, 200, "application/json", "\"OK\"", 4, NULL);
}
