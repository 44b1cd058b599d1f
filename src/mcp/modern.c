/* The 2026-07-28 revision's requests (modern.h). A stateless request runs
 * in a session all the same — the front end's: stdio's one, or hutch
 * serve's per tenant — which holds its tasks, scoped to who made them. */
#include "modern.h"

#include <stdio.h>
#include <string.h>

#include "engine.h"
#include "tools.h"
#include "util.h"

#define TASKS_EXT "io.modelcontextprotocol/tasks"

static const char *const supported[] = {MCP_MODERN, MCP_LATEST, "2025-06-18", "2025-03-26"};

static json_t *meta_of(const json_t *msg) {
  return json_object_get(json_object_get(msg, "params"), "_meta");
}

const char *mcp_modern_version(const json_t *msg) {
  return json_string_value(
      json_object_get(meta_of(msg), "io.modelcontextprotocol/protocolVersion"));
}

static json_t *supported_json(void) {
  json_t *a = json_array();
  for (size_t i = 0; i < ARRAY_SIZE(supported); i++)
    json_array_append_new(a, json_string(supported[i]));
  return a;
}

/* A complete result of this revision. */
static json_t *complete(json_t *id, json_t *result) {
  json_object_set_new(result, "resultType", json_string("complete"));
  return mcp_reply(id, result);
}

static bool wants_tasks(const json_t *msg) {
  json_t *caps = json_object_get(meta_of(msg), "io.modelcontextprotocol/clientCapabilities");
  return json_object_get(json_object_get(caps, "extensions"), TASKS_EXT) != NULL;
}

static json_t *discover(json_t *id) {
  return complete(
      id, json_pack("{s:o, s:{s:{}, s:{}, s:{s:{}}}, s:{s:{s:s, s:s}}, s:s, s:i, s:s}",
                    "supportedVersions", supported_json(), "capabilities", "tools", "resources",
                    "extensions", TASKS_EXT, "_meta", "io.modelcontextprotocol/serverInfo", "name",
                    "hutch", "version", HUTCH_VERSION, "instructions",
                    "hutch runs code in isolated Linux sandboxes. Call create first and pass its "
                    "sandbox_id to the other tools; kill it when done (sandboxes made without a "
                    "session end with their timeout, 900 s unless given).",
                    "ttlMs", 3600000, "cacheScope", "public"));
}

/* A task as this revision shows it: its status, and its result or error
 * when it has ended (lock held). A tool's isError result is a completed
 * task: "failed" is for JSON-RPC errors only. */
static json_t *task_json(const struct mcp_task *t) {
  char created[32], updated[32];
  iso8601(t->created_ms, created);
  iso8601(t->updated_ms, updated);
  const char *status = t->status == TASK_CANCELLED ? "cancelled"
                       : t->status == TASK_WORKING ? "working"
                                                   : "completed";
  json_t *j = json_pack("{s:s, s:s, s:s, s:s, s:s, s:I, s:i}", "taskId", t->id, "status", status,
                        "statusMessage", t->message, "createdAt", created, "lastUpdatedAt", updated,
                        "ttlMs", (json_int_t)t->ttl_ms, "pollIntervalMs", 1000);
  if (t->result && t->status != TASK_CANCELLED) {
    json_t *r = json_deep_copy(t->result);
    json_object_set_new(r, "resultType", json_string("complete"));
    json_object_set_new(j, "result", r);
  }
  return j;
}

/* tools/call: run to its end, unless it takes longer than
 * MCP_TASK_INLINE_MS and the client takes tasks: then a task. */
static json_t *call(struct mcp_session *s, json_t *id, json_t *msg, const atomic_bool *cancel,
                    const struct mcp_sink *out) {
  json_t *params = json_object_get(msg, "params");
  json_t *owned, *error;
  const struct mcp_tool *t = mcp_call_tool(id, params, &owned, &error);
  if (!t)
    return error;
  json_t *progress = json_object_get(json_object_get(params, "_meta"), "progressToken");

  if (!t->task || !wants_tasks(msg)) {
    json_t *res = complete(id, mcp_run_tool(s, t, owned, progress, cancel, out));
    json_decref(owned);
    return res;
  }

  struct mcp_task *tk = mcp_task_start(s, t, owned, 0, NULL);
  json_decref(owned);
  if (!tk)
    return mcp_rpc_error(id, RPC_INVALID_REQUEST, "%d tasks run already: wait for one",
                         MCP_TASKS_MAX);
  int64_t until = wall_ms() + MCP_TASK_INLINE_MS;
  pthread_mutex_lock(&s->lock);
  while (!tk->result && wall_ms() < until && !atomic_load(cancel)) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += 50 * 1000 * 1000;
    if (ts.tv_nsec >= 1000000000L)
      ts.tv_sec++, ts.tv_nsec -= 1000000000L;
    pthread_cond_timedwait(&s->changed, &s->lock, &ts);
  }
  json_t *res;
  if (tk->result) {
    res = complete(id, json_incref(tk->result));
    tk->ttl_ms = 0; /* answered whole: the task is no one's to poll */
  } else {
    if (atomic_load(cancel))
      atomic_store(&tk->cancel, true);
    json_t *tj = task_json(tk);
    json_object_set_new(tj, "resultType", json_string("task"));
    res = mcp_reply(id, tj);
  }
  pthread_mutex_unlock(&s->lock);
  return res;
}

static json_t *tasks(struct mcp_session *s, const char *method, json_t *id, json_t *msg) {
  if (!wants_tasks(msg))
    return json_pack("{s:s, s:O, s:{s:i, s:s, s:{s:{s:{s:{}}}}}}", "jsonrpc", "2.0", "id", id,
                     "error", "code", RPC_MISSING_CAPABILITY, "message",
                     "Missing required client capability", "data", "requiredCapabilities",
                     "extensions", TASKS_EXT);
  const char *tid = json_string_value(json_object_get(json_object_get(msg, "params"), "taskId"));
  pthread_mutex_lock(&s->lock);
  struct mcp_task *t = mcp_task_find(s, tid);
  json_t *res;
  if (!t) {
    res = mcp_rpc_error(id, RPC_INVALID_PARAMS, "no task '%.64s'", tid ? tid : "");
  } else if (strcmp(method, "tasks/get") == 0) {
    res = complete(id, task_json(t));
  } else if (strcmp(method, "tasks/cancel") == 0) {
    atomic_store(&t->cancel, true);
    if (t->status == TASK_WORKING) {
      t->status = TASK_CANCELLED;
      t->updated_ms = wall_ms();
      str_copy(t->message, sizeof t->message, "cancelled by request");
    }
    res = complete(id, json_object());
  } else { /* tasks/update: hutch's tasks never wait for input */
    res = mcp_rpc_error(id, RPC_INVALID_PARAMS, "task %s asks for no input", t->id);
  }
  pthread_mutex_unlock(&s->lock);
  return res;
}

json_t *mcp_modern_handle(struct mcp_session *s, json_t *msg, const struct mcp_sink *out) {
  json_t *id = json_object_get(msg, "id");
  const char *method = json_string_value(json_object_get(msg, "method"));
  const char *v = mcp_modern_version(msg);
  if (strcmp(v, MCP_MODERN) != 0) {
    json_t *e = mcp_rpc_error(id, RPC_UNSUPPORTED_VERSION, "Unsupported protocol version");
    json_object_set_new(json_object_get(e, "error"), "data",
                        json_pack("{s:o, s:s}", "supported", supported_json(), "requested", v));
    return e;
  }
  if (strcmp(method, "server/discover") == 0)
    return discover(id);
  if (strcmp(method, "ping") == 0)
    return complete(id, json_object());
  if (strcmp(method, "tools/list") == 0)
    return complete(id, mcp_tools_list());
  if (strncmp(method, "resources/", 10) == 0) {
    json_t *res = mcp_resources_method(s, id, method, json_object_get(msg, "params"));
    json_t *r = json_object_get(res, "result");
    if (r)
      json_object_set_new(r, "resultType", json_string("complete"));
    return res;
  }
  if (strcmp(method, "tasks/get") == 0 || strcmp(method, "tasks/cancel") == 0 ||
      strcmp(method, "tasks/update") == 0)
    return tasks(s, method, id, msg);
  if (strcmp(method, "tools/call") == 0) {
    struct mcp_inflight *r = mcp_session_begin(s, id);
    if (!r)
      return mcp_rpc_error(id, RPC_INVALID_REQUEST, "%d calls run already: wait for one",
                           MCP_INFLIGHT_MAX);
    json_t *res = call(s, id, msg, &r->cancel, out);
    mcp_session_finish(s, r);
    return res;
  }
  return mcp_rpc_error(id, RPC_METHOD_NOT_FOUND, "no method '%.64s' here", method);
}
