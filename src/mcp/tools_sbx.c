/* The sandbox tools: create, list, templates, kill, pause, resume,
 * snapshot, fork, expose_port. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "result.h"
#include "tools.h"
#include "util.h"

/* A native call with a JSON body (NULL: none) whose answer is the tool's
 * result: the answer's JSON, or its refusal. */
static json_t *plain(struct mcp_ctx *cx, const char *method, const char *path, json_t *body,
                     struct hc_answer *keep) {
  char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
  json_decref(body);
  struct hc_req call = {.method = method,
                          .path = path,
                          .body = text,
                          .body_len = text ? strlen(text) : 0,
                          .timeout_ms = 600000};
  struct hc_answer a;
  bool ok = mcp_tool_call(cx, &call, &a);
  free(text);
  json_t *r;
  if (!ok || a.status >= 300)
    r = mcp_result_native(&a);
  else if (a.json)
    r = mcp_result_json(json_incref(a.json));
  else
    r = mcp_result_text("done");
  if (keep && ok && a.status < 300) {
    *keep = a; /* the caller reads and frees it */
    return r;
  }
  hc_answer_free(&a);
  if (keep)
    memset(keep, 0, sizeof *keep);
  return r;
}

static json_t *on_sandbox(struct mcp_ctx *cx, json_t *args, const char *method, const char *rest,
                          json_t *body) {
  char path[256];
  cx->sandbox = mcp_arg_str(args, "sandbox_id");
  mcp_sandbox_path(path, sizeof path, cx->sandbox, rest);
  return plain(cx, method, path, body, NULL);
}

json_t *mcp_tool_create(struct mcp_ctx *cx, json_t *args) {
  json_t *body = json_object();
  static const char *const same[] = {"template", "isolation", "timeout_s", "memory_mb",
                                     "cpus",     "disk_mb",   "env"};
  for (size_t i = 0; i < sizeof same / sizeof *same; i++) {
    json_t *v = json_object_get(args, same[i]);
    if (v)
      json_object_set(body, same[i], v);
  }
  /* A sandbox a model forgets is gone within the default timeout. */
  if (!json_object_get(body, "timeout_s"))
    json_object_set_new(body, "timeout_s", json_integer(MCP_TIMEOUT_S));
  json_t *allow = json_object_get(args, "allow_hosts");
  if (allow && json_array_size(allow))
    json_object_set_new(body, "network",
                        json_pack("{s:s, s:O}", "mode", "allowlist", "allow", allow));
  json_object_set_new(body, "metadata", json_pack("{s:s}", "made_by", "mcp"));

  struct hc_answer a;
  json_t *r = plain(cx, "POST", "/v1/sandboxes", body, &a);
  const char *id = json_string_value(json_object_get(a.json, "id"));
  if (id) {
    str_copy(cx->made, sizeof cx->made, id);
    cx->sandbox = cx->made;
    mcp_session_made(cx->s, id, json_is_true(json_object_get(args, "keep")));
    json_t *sc = json_object_get(r, "structuredContent");
    json_object_set_new(sc, "sandbox_id", json_string(id));
    json_object_set_new(sc, "killed_with_session",
                        json_boolean(!json_is_true(json_object_get(args, "keep"))));
  }
  hc_answer_free(&a);
  return r;
}

json_t *mcp_tool_list(struct mcp_ctx *cx, json_t *args) {
  (void)args;
  return plain(cx, "GET", "/v1/sandboxes", NULL, NULL);
}

json_t *mcp_tool_templates(struct mcp_ctx *cx, json_t *args) {
  (void)args;
  return plain(cx, "GET", "/v1/templates", NULL, NULL);
}

json_t *mcp_tool_kill(struct mcp_ctx *cx, json_t *args) {
  json_t *r = on_sandbox(cx, args, "DELETE", "", NULL);
  if (!json_is_true(json_object_get(r, "isError")))
    mcp_session_forget(cx->s, mcp_arg_str(args, "sandbox_id"));
  return r;
}

json_t *mcp_tool_pause(struct mcp_ctx *cx, json_t *args) {
  return on_sandbox(cx, args, "POST", "/pause", NULL);
}

json_t *mcp_tool_resume(struct mcp_ctx *cx, json_t *args) {
  return on_sandbox(cx, args, "POST", "/resume", NULL);
}

json_t *mcp_tool_snapshot(struct mcp_ctx *cx, json_t *args) {
  return on_sandbox(cx, args, "POST", "/snapshots", json_object());
}

json_t *mcp_tool_fork(struct mcp_ctx *cx, json_t *args) {
  char path[256];
  cx->sandbox = mcp_arg_str(args, "sandbox_id");
  mcp_sandbox_path(path, sizeof path, cx->sandbox, "/fork");
  struct hc_answer a;
  json_t *r = plain(cx, "POST", path, json_pack("{s:i}", "count", 1), &a);
  json_t *made = json_array_get(json_object_get(a.json, "sandboxes"), 0);
  const char *id = json_string_value(json_object_get(made, "id"));
  if (id) {
    mcp_session_made(cx->s, id, json_is_true(json_object_get(args, "keep")));
    json_object_set_new(json_object_get(r, "structuredContent"), "sandbox_id", json_string(id));
  }
  hc_answer_free(&a);
  return r;
}

json_t *mcp_tool_expose_port(struct mcp_ctx *cx, json_t *args) {
  char path[256];
  cx->sandbox = mcp_arg_str(args, "sandbox_id");
  mcp_sandbox_path(path, sizeof path, cx->sandbox, "");
  struct hc_req call = {.method = "GET", .path = path, .timeout_ms = 30000};
  struct hc_answer a;
  if (!mcp_tool_call(cx, &call, &a) || a.status >= 300) {
    json_t *r = mcp_result_native(&a);
    hc_answer_free(&a);
    return r;
  }
  const char *token = json_string_value(json_object_get(a.json, "traffic_token"));
  long long port = json_integer_value(json_object_get(args, "port"));
  char url[1024];
  const char *base = cx->s->native.public_url[0] ? cx->s->native.public_url : cx->s->native.url;
  snprintf(url, sizeof url, "%s%s/ports/%lld/", base, path, port);
  json_t *v = json_pack("{s:s, s:I, s:s, s:s, s:s}", "url", url, "port", (json_int_t)port, "header",
                        "X-Hutch-Traffic-Token", "token", token ? token : "", "note",
                        "send the token in the header; the service must listen on the port");
  hc_answer_free(&a);
  return mcp_result_json(v);
}
