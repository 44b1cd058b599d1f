/* The tools hutch offers over MCP: each a name, a description a model
 * reads, a strict input schema, honest annotations, and a handler that
 * makes native API calls (client.h) with the session's key.
 *
 * Every tool that touches a sandbox takes its id as `sandbox_id`: there is
 * no hidden "current sandbox" a model could lose track of. */
#ifndef HUTCH_MCP_TOOLS_H
#define HUTCH_MCP_TOOLS_H

#include <jansson.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "session.h"

/* What a handler has while it runs. */
struct mcp_ctx {
  struct mcp_session *s;
  const struct mcp_sink *out;
  json_t *progress_token; /* the request's _meta.progressToken, or NULL */
  double progress;        /* the last progress value sent */
  const atomic_bool *cancel;
  const char *sandbox; /* for the audit line: the sandbox the call named */
  char made[33];       /* ... or made (create) */
};

struct mcp_tool {
  const char *name;
  const char *title;
  const char *description;
  const char *schema; /* the input schema, JSON */
  bool read_only, destructive, idempotent, open_world;
  bool images; /* may return images: no outputSchema */
  bool task;   /* may run as a task (execution.taskSupport optional) */
  json_t *(*run)(struct mcp_ctx *cx, json_t *args);
};

/* The tools, in the order tools/list gives them. */
extern const struct mcp_tool mcp_tools[];
extern const size_t mcp_ntools;

const struct mcp_tool *mcp_tool_find(const char *name);
/* tools/list's entry for t (its schema parsed once per call). */
json_t *mcp_tool_json(const struct mcp_tool *t);

/* A progress notification with message (stdout and stderr pieces, as
 * they come), when the request asked for progress. */
void mcp_progress(struct mcp_ctx *cx, const char *message);

/* Handlers by file: tools_sbx.c (sandboxes), tools_run.c (commands and
 * code), tools_files.c (files). */
json_t *mcp_tool_create(struct mcp_ctx *cx, json_t *args);
json_t *mcp_tool_list(struct mcp_ctx *cx, json_t *args);
json_t *mcp_tool_templates(struct mcp_ctx *cx, json_t *args);
json_t *mcp_tool_kill(struct mcp_ctx *cx, json_t *args);
json_t *mcp_tool_pause(struct mcp_ctx *cx, json_t *args);
json_t *mcp_tool_resume(struct mcp_ctx *cx, json_t *args);
json_t *mcp_tool_snapshot(struct mcp_ctx *cx, json_t *args);
json_t *mcp_tool_fork(struct mcp_ctx *cx, json_t *args);
json_t *mcp_tool_expose_port(struct mcp_ctx *cx, json_t *args);
json_t *mcp_tool_exec(struct mcp_ctx *cx, json_t *args);
json_t *mcp_tool_run_code(struct mcp_ctx *cx, json_t *args);
json_t *mcp_tool_exec_start(struct mcp_ctx *cx, json_t *args);
json_t *mcp_tool_exec_read(struct mcp_ctx *cx, json_t *args);
json_t *mcp_tool_exec_write(struct mcp_ctx *cx, json_t *args);
json_t *mcp_tool_exec_signal(struct mcp_ctx *cx, json_t *args);
json_t *mcp_tool_read_file(struct mcp_ctx *cx, json_t *args);
json_t *mcp_tool_write_file(struct mcp_ctx *cx, json_t *args);
json_t *mcp_tool_list_files(struct mcp_ctx *cx, json_t *args);
json_t *mcp_tool_remove(struct mcp_ctx *cx, json_t *args);

/* Helpers the handlers share (tools.c). */
/* A native call with cx's cancel flag; the answer in *a. */
bool mcp_tool_call(struct mcp_ctx *cx, struct hc_req *call, struct hc_answer *a);
/* POST body (its reference taken; sent as compact JSON) to cx's sandbox's
 * rest ("/exec"), with line and arg as struct hc_req's. */
bool mcp_tool_post(struct mcp_ctx *cx, const char *rest, json_t *body,
                   int (*line)(void *arg, json_t *obj), void *arg, long timeout_ms,
                   struct hc_answer *a);
/* The fields of args that names lists into body, those given. */
void mcp_copy_args(json_t *body, json_t *args, const char *const *names, size_t n);
/* "/v1/sandboxes/<escaped id><rest>" into buf. */
void mcp_sandbox_path(char *buf, size_t n, const char *id, const char *rest);
/* args' string field, or NULL. */
const char *mcp_arg_str(json_t *args, const char *key);

#endif
