/* JSON-RPC methods of MCP (engine.h): initialize, ping, tools/list,
 * tools/call, the tasks methods, cancellation. */
#include "engine.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "modern.h"
#include "resources.h"
#include "result.h"
#include "schema.h"
#include "tools.h"
#include "util.h"

static const char *const versions[] = {MCP_LATEST, "2025-06-18", "2025-03-26"};

const char *mcp_version_known(const char *v) {
  for (size_t i = 0; v && i < ARRAY_SIZE(versions); i++)
    if (strcmp(v, versions[i]) == 0)
      return versions[i];
  return NULL;
}

json_t *mcp_rpc_error(json_t *id, int code, const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return json_pack("{s:s, s:O, s:{s:i, s:s}}", "jsonrpc", "2.0", "id", id ? id : json_null(),
                   "error", "code", code, "message", msg);
}

json_t *mcp_reply(json_t *id, json_t *result) {
  return json_pack("{s:s, s:O, s:o}", "jsonrpc", "2.0", "id", id, "result", result);
}

bool mcp_is_request(const json_t *msg) {
  return json_is_string(json_object_get(msg, "method")) && json_object_get(msg, "id");
}

/* --- initialize ----------------------------------------------------------- */

static json_t *initialize(struct mcp_session *s, json_t *params) {
  const char *asked = json_string_value(json_object_get(params, "protocolVersion"));
  const char *v = mcp_version_known(asked);
  pthread_mutex_lock(&s->lock);
  str_copy(s->version, sizeof s->version, v ? v : MCP_LATEST);
  pthread_mutex_unlock(&s->lock);
  return json_pack(
      "{s:s, s:{s:{s:b}, s:{}, s:{s:{}, s:{}, s:{s:{s:{}}}}}, s:{s:s, s:s, s:s}, s:s}",
      "protocolVersion", s->version, "capabilities", "tools", "listChanged", 0, "resources",
      "tasks", "list", "cancel", "requests", "tools", "call", "serverInfo", "name", "hutch",
      "title", "hutch sandboxes", "version", HUTCH_VERSION, "instructions",
      "hutch runs code in isolated Linux sandboxes. Call create first and pass its "
      "sandbox_id to the other tools; kill it when done (sandboxes made here also end with "
      "the session unless made with keep). exec runs shell commands, run_code runs Python "
      "with state kept between calls; long commands report progress or run as tasks.");
}

/* --- tools ----------------------------------------------------------------- */

json_t *mcp_tools_list(void) {
  json_t *list = json_array();
  for (size_t i = 0; i < mcp_ntools; i++)
    json_array_append_new(list, mcp_tool_json(&mcp_tools[i]));
  return json_pack("{s:o}", "tools", list);
}

json_t *mcp_run_tool(struct mcp_session *s, const struct mcp_tool *t, json_t *args,
                     json_t *progress, const atomic_bool *cancel, const struct mcp_sink *out) {
  char why[512];
  json_t *schema = json_loads(t->schema, 0, NULL);
  bool fits = mcp_schema_check(schema, args, why, sizeof why);
  if (fits)
    mcp_schema_integers(schema, args);
  json_decref(schema);
  struct mcp_ctx cx = {.s = s, .out = out, .progress_token = progress, .cancel = cancel};
  json_t *r = fits ? t->run(&cx, args) : mcp_result_error("invalid_argument", "%s", why);
  if (s->hooks.tool_called) {
    bool failed = json_is_true(json_object_get(r, "isError"));
    json_t *err = json_object_get(json_object_get(r, "structuredContent"), "error");
    const char *code = json_string_value(json_object_get(err, "code"));
    s->hooks.tool_called(s->hooks.arg, t->name, cx.sandbox, !failed,
                         failed ? (code   ? code
                                   : fits ? "failed"
                                          : "invalid_argument")
                                : NULL);
  }
  return r;
}

struct task_run {
  struct mcp_session *s;
  struct mcp_task *task;
  const struct mcp_tool *tool;
  json_t *args;
  struct mcp_sink out; /* lasting sinks only: status notifications */
};

static void *task_main(void *arg) {
  struct task_run *tr = arg;
  json_t *r = mcp_run_tool(tr->s, tr->tool, tr->args, NULL, &tr->task->cancel, NULL);
  json_object_set_new(
      r, "_meta",
      json_pack("{s:{s:s}}", "io.modelcontextprotocol/related-task", "taskId", tr->task->id));
  json_t *args = tr->args;
  struct mcp_sink out = tr->out;
  struct mcp_session *s = tr->s;
  struct mcp_task *t = tr->task;
  free(tr);
  json_decref(args);
  mcp_task_end(s, t, r, out.send ? &out : NULL);
  return NULL;
}

struct mcp_task *mcp_task_start(struct mcp_session *s, const struct mcp_tool *t, json_t *args,
                                int64_t ttl_ms, const struct mcp_sink *out) {
  struct mcp_task *tk = mcp_task_new(s, ttl_ms);
  if (!tk)
    return NULL;
  struct task_run *tr = xmalloc(sizeof *tr);
  *tr = (struct task_run){.s = s, .task = tk, .tool = t, .args = json_incref(args)};
  if (out && out->lasting)
    tr->out = *out;

  pthread_attr_t attr;
  pthread_t th;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  int rc = pthread_create(&th, &attr, task_main, tr);
  pthread_attr_destroy(&attr);
  if (rc != 0) {
    json_decref(tr->args);
    free(tr);
    mcp_task_end(s, tk, mcp_result_error("unavailable", "no thread for the task"), NULL);
  }
  return tk;
}

/* tools/call with params.task: the call runs on as a task, answered now. */
static json_t *start_task(struct mcp_session *s, json_t *id, const struct mcp_tool *t, json_t *args,
                          json_t *task, const struct mcp_sink *out) {
  struct mcp_task *tk =
      mcp_task_start(s, t, args, json_integer_value(json_object_get(task, "ttl")), out);
  if (!tk)
    return mcp_rpc_error(id, RPC_INVALID_REQUEST,
                         "this session runs %d tasks already (or is ending): wait for one",
                         MCP_TASKS_MAX);
  pthread_mutex_lock(&s->lock);
  json_t *tj = mcp_task_json(tk);
  pthread_mutex_unlock(&s->lock);
  return mcp_reply(id, json_pack("{s:o}", "task", tj));
}

const struct mcp_tool *mcp_call_tool(json_t *id, json_t *params, json_t **args, json_t **error) {
  const char *name = json_string_value(json_object_get(params, "name"));
  const struct mcp_tool *t = mcp_tool_find(name);
  json_t *given = json_object_get(params, "arguments");
  if (!t)
    *error = mcp_rpc_error(id, RPC_INVALID_PARAMS, "unknown tool '%.64s' (tools/list names them)",
                           name ? name : "");
  else if (given && !json_is_object(given))
    *error = mcp_rpc_error(id, RPC_INVALID_PARAMS, "arguments must be an object");
  else {
    *args = given ? json_incref(given) : json_object();
    return t;
  }
  return NULL;
}

static json_t *tools_call(struct mcp_session *s, json_t *id, json_t *params,
                          const atomic_bool *cancel, const struct mcp_sink *out) {
  json_t *owned, *error;
  const struct mcp_tool *t = mcp_call_tool(id, params, &owned, &error);
  if (!t)
    return error;

  json_t *task = json_object_get(params, "task");
  json_t *res;
  if (task && !t->task)
    res = mcp_rpc_error(id, RPC_METHOD_NOT_FOUND, "tool '%s' does not run as a task", t->name);
  else if (task)
    res = start_task(s, id, t, owned, task, out);
  else {
    json_t *progress = json_object_get(json_object_get(params, "_meta"), "progressToken");
    res = mcp_reply(id, mcp_run_tool(s, t, owned, progress, cancel, out));
  }
  json_decref(owned);
  return res;
}

/* --- tasks ----------------------------------------------------------------- */

static json_t *tasks_method(struct mcp_session *s, const char *method, json_t *id, json_t *params) {
  const char *tid = json_string_value(json_object_get(params, "taskId"));
  pthread_mutex_lock(&s->lock);
  json_t *res = NULL;
  if (strcmp(method, "tasks/list") == 0) {
    json_t *list = json_array();
    for (struct mcp_task *t = s->tasks; t; t = t->next)
      json_array_append_new(list, mcp_task_json(t));
    mcp_task_find(s, ""); /* expire what is due */
    res = mcp_reply(id, json_pack("{s:o}", "tasks", list));
    goto out;
  }
  struct mcp_task *t = mcp_task_find(s, tid);
  if (!t) {
    res = mcp_rpc_error(id, RPC_INVALID_PARAMS, "no task '%.64s' in this session", tid ? tid : "");
    goto out;
  }
  if (strcmp(method, "tasks/get") == 0) {
    res = mcp_reply(id, mcp_task_json(t));
  } else if (strcmp(method, "tasks/cancel") == 0) {
    if (t->status != TASK_WORKING) {
      res = mcp_rpc_error(id, RPC_INVALID_PARAMS, "task %s has ended (%s)", t->id,
                          mcp_task_status_name(t->status));
      goto out;
    }
    atomic_store(&t->cancel, true);
    t->status = TASK_CANCELLED; /* terminal at once; the thread's end keeps it */
    t->updated_ms = wall_ms();
    str_copy(t->message, sizeof t->message, "cancelled by request");
    res = mcp_reply(id, mcp_task_json(t));
  } else { /* tasks/result: waits for the end */
    while (!t->result && !s->closing)
      pthread_cond_wait(&s->changed, &s->lock);
    res = t->result ? mcp_reply(id, json_incref(t->result))
                    : mcp_rpc_error(id, RPC_INTERNAL, "the session ended");
  }
out:
  pthread_mutex_unlock(&s->lock);
  return res;
}

/* --- resources --------------------------------------------------------- */

json_t *mcp_resources_method(struct mcp_session *s, json_t *id, const char *method,
                             json_t *params) {
  bool is_error = false;
  char why[768] = "";
  json_t *r = NULL;
  if (strcmp(method, "resources/list") == 0)
    r = mcp_resources_list(s, &is_error, why, sizeof why);
  else if (strcmp(method, "resources/templates/list") == 0)
    r = mcp_resources_templates();
  else if (strcmp(method, "resources/read") == 0)
    r = mcp_resources_read(s, params, &is_error, why, sizeof why);
  else
    return mcp_rpc_error(id, RPC_METHOD_NOT_FOUND, "no method '%.64s' here", method);
  /* A resource that is not there is -32002 (the spec's "resource not
   * found"); a native refusal otherwise is the caller's to read. */
  if (!r)
    return mcp_rpc_error(id,
                         strstr(why, "not_found") || strstr(why, "no such resource")
                             ? RPC_RESOURCE_NOT_FOUND
                             : RPC_INVALID_PARAMS,
                         "%s", why[0] ? why : "the resource could not be read");
  return mcp_reply(id, r);
}

/* --- dispatch ---------------------------------------------------------------- */

json_t *mcp_handle(struct mcp_session *s, json_t *msg, const struct mcp_sink *out) {
  if (!json_is_object(msg))
    return mcp_rpc_error(NULL, RPC_INVALID_REQUEST,
                         json_is_array(msg) ? "JSON-RPC batches are not accepted"
                                            : "a message is a JSON object");
  json_t *id = json_object_get(msg, "id");
  const char *method = json_string_value(json_object_get(msg, "method"));
  const char *jv = json_string_value(json_object_get(msg, "jsonrpc"));
  if (!method)
    return NULL; /* a response to us (we send no requests), or noise: nothing to answer */
  bool is_request = id != NULL;
  if (is_request && !json_is_string(id) && !json_is_integer(id))
    return mcp_rpc_error(NULL, RPC_INVALID_REQUEST, "id must be a string or an integer");
  if (!jv || strcmp(jv, "2.0") != 0)
    return is_request ? mcp_rpc_error(id, RPC_INVALID_REQUEST, "jsonrpc must be \"2.0\"") : NULL;
  json_t *params = json_object_get(msg, "params");
  if (params && !json_is_object(params))
    return is_request ? mcp_rpc_error(id, RPC_INVALID_PARAMS, "params must be an object") : NULL;

  if (!is_request) {
    if (strcmp(method, "notifications/initialized") == 0) {
      pthread_mutex_lock(&s->lock);
      s->initialized = true;
      pthread_mutex_unlock(&s->lock);
    } else if (strcmp(method, "notifications/cancelled") == 0) {
      mcp_session_cancel(s, json_object_get(params, "requestId"));
    }
    return NULL;
  }

  if (mcp_modern_version(msg))
    return mcp_modern_handle(s, msg, out);
  if (strcmp(method, "initialize") == 0)
    return mcp_reply(id, initialize(s, params));
  if (strcmp(method, "ping") == 0)
    return mcp_reply(id, json_object());
  if (!s->version[0])
    return mcp_rpc_error(id, RPC_INVALID_REQUEST, "initialize first");
  if (strcmp(method, "tools/list") == 0)
    return mcp_reply(id, mcp_tools_list());
  if (strncmp(method, "resources/", 10) == 0)
    return mcp_resources_method(s, id, method, params);
  if (strncmp(method, "tasks/", 6) == 0 &&
      (strcmp(method + 6, "get") == 0 || strcmp(method + 6, "result") == 0 ||
       strcmp(method + 6, "list") == 0 || strcmp(method + 6, "cancel") == 0))
    return tasks_method(s, method, id, params);
  if (strcmp(method, "tools/call") == 0) {
    struct mcp_inflight *r = mcp_session_begin(s, id);
    if (!r)
      return mcp_rpc_error(id, RPC_INVALID_REQUEST,
                           "this session runs %d calls already (or is ending): wait for one",
                           MCP_INFLIGHT_MAX);
    json_t *none = json_object();
    json_t *res = tools_call(s, id, params ? params : none, &r->cancel, out);
    json_decref(none);
    mcp_session_finish(s, r);
    return res;
  }
  return mcp_rpc_error(id, RPC_METHOD_NOT_FOUND, "no method '%.64s' here", method);
}
