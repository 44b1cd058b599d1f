/* The tool table (tools.h) and what its handlers share. Descriptions are
 * written for a model: what the tool does, what it returns, and what to
 * do next. */
#include "tools.h"

#include <stdio.h>
#include <string.h>

#include "util.h"

#define ID_PROP                                                           \
  "\"sandbox_id\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":64," \
  "\"description\":\"the sandbox's id, as create or list gave it\"}"
#define OBJ(props, req)                                                                \
  "{\"$schema\":\"https://json-schema.org/draft/2020-12/schema\",\"type\":\"object\"," \
  "\"additionalProperties\":false,\"properties\":{" props "},\"required\":[" req "]}"
#define ENV_PROP                                                                 \
  "\"env\":{\"type\":\"object\",\"additionalProperties\":{\"type\":\"string\"}," \
  "\"description\":\"environment variables set over the sandbox's\"}"
#define PATH_PROP(what)                                               \
  "\"path\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":4096," \
  "\"description\":\"" what "\"}"

const struct mcp_tool mcp_tools[] = {
    {"create", "Create a sandbox",
     "Start a new sandbox (a Linux box of its own, isolated from the host) and return its "
     "sandbox_id, which every other tool takes. It is killed after timeout_s seconds "
     "(default 900), and when this MCP session ends unless keep is true.",
     OBJ("\"template\":{\"type\":\"string\",\"maxLength\":257,\"description\":\"what it is made "
         "from: 'host' (default), a template's name or a snapshot's id (see templates)\"},"
         "\"isolation\":{\"enum\":[\"ns\",\"gvisor\"],\"description\":\"ns: namespaces; gvisor: "
         "gVisor's kernel (stronger)\"},"
         "\"timeout_s\":{\"type\":\"number\",\"minimum\":1,\"maximum\":604800},"
         "\"memory_mb\":{\"type\":\"integer\",\"minimum\":16,\"maximum\":1048576},"
         "\"cpus\":{\"type\":\"number\",\"minimum\":0.01,\"maximum\":1024},"
         "\"disk_mb\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":1048576},"
         "\"allow_hosts\":{\"type\":\"array\",\"maxItems\":256,\"items\":{\"type\":\"string\","
         "\"maxLength\":261},\"description\":\"hosts it may reach through the egress proxy "
         "('pypi.org', '*.github.com'); none: no network\"}," ENV_PROP ","
         "\"keep\":{\"type\":\"boolean\",\"description\":\"outlive this MCP session\"}",
         ""),
     false, false, false, true, false, false, mcp_tool_create},
    {"run_code", "Run code",
     "Run a cell of Python (default), JavaScript or bash in the sandbox's code interpreter. "
     "State persists between calls in the same context (variables, imports). Returns the "
     "output, the value of a trailing expression, errors with their traceback, and charts "
     "(matplotlib figures) as images.",
     OBJ(ID_PROP
         ",\"code\":{\"type\":\"string\",\"maxLength\":1048576},"
         "\"language\":{\"enum\":[\"python\",\"javascript\",\"bash\"]},"
         "\"context_id\":{\"type\":\"string\",\"maxLength\":64,\"description\":"
         "\"a context of its own (not with language)\"},"
         "\"timeout_s\":{\"type\":\"number\",\"minimum\":0.001,\"maximum\":86400}," ENV_PROP,
         "\"sandbox_id\",\"code\""),
     false, false, false, false, true, true, mcp_tool_run_code},
    {"exec", "Run a command",
     "Run a shell command (bash -c) in the sandbox and wait for it to end; returns its exit "
     "status, stdout and stderr (long output is cut to its head and tail, and kept whole in "
     "a file the result names). For long commands ask for progress or run it as a task; for "
     "interactive ones use exec_start.",
     OBJ(ID_PROP ",\"command\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":1048576},"
                 "\"cwd\":{\"type\":\"string\",\"maxLength\":4096}," ENV_PROP ","
                 "\"user\":{\"type\":\"string\",\"maxLength\":32,\"description\":\"'user' "
                 "(default) or 'root' of the sandbox\"},"
                 "\"timeout_s\":{\"type\":\"number\",\"minimum\":0,\"maximum\":604800},"
                 "\"stdin\":{\"type\":\"string\",\"maxLength\":1048576}",
         "\"sandbox_id\",\"command\""),
     false, false, false, false, false, true, mcp_tool_exec},
    {"exec_start", "Start a background command",
     "Start a command that keeps running (a server, a REPL); returns its pid. Read its "
     "output with exec_read, write its stdin with exec_write, stop it with exec_signal.",
     OBJ(ID_PROP ",\"command\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":1048576},"
                 "\"cwd\":{\"type\":\"string\",\"maxLength\":4096}," ENV_PROP ","
                 "\"user\":{\"type\":\"string\",\"maxLength\":32}",
         "\"sandbox_id\",\"command\""),
     false, false, false, false, false, false, mcp_tool_exec_start},
    {"exec_read", "Read a background command's output",
     "The output a background command wrote after byte `offset` (0: from the start), "
     "waiting up to wait_ms for some; returns the text, the offset to read from next, and "
     "its exit status once it ended.",
     OBJ(ID_PROP ",\"pid\":{\"type\":\"integer\",\"minimum\":1},"
                 "\"offset\":{\"type\":\"integer\",\"minimum\":0},"
                 "\"wait_ms\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":30000}",
         "\"sandbox_id\",\"pid\""),
     true, false, false, false, false, false, mcp_tool_exec_read},
    {"exec_write", "Write to a background command",
     "Write text to a background command's stdin (eof: close it after).",
     OBJ(ID_PROP ",\"pid\":{\"type\":\"integer\",\"minimum\":1},"
                 "\"data\":{\"type\":\"string\",\"maxLength\":1048576},"
                 "\"eof\":{\"type\":\"boolean\"}",
         "\"sandbox_id\",\"pid\",\"data\""),
     false, false, false, false, false, false, mcp_tool_exec_write},
    {"exec_signal", "Signal a background command",
     "Send a signal to a background command's process group (default 15, SIGTERM; 9 kills).",
     OBJ(ID_PROP ",\"pid\":{\"type\":\"integer\",\"minimum\":1},"
                 "\"signal\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":64}",
         "\"sandbox_id\",\"pid\""),
     false, true, false, false, false, false, mcp_tool_exec_signal},
    {"read_file", "Read a file",
     "Read a file of the sandbox: text as text, a PNG, JPEG, GIF or WebP as an image, other "
     "bytes as base64. At most 8 MiB.",
     OBJ(ID_PROP "," PATH_PROP("absolute, or relative to the user's home"),
         "\"sandbox_id\",\"path\""),
     true, false, true, false, true, false, mcp_tool_read_file},
    {"write_file", "Write a file",
     "Write a file of the sandbox (made with its directories; replaced if there): content as "
     "text, or as base64 with encoding 'base64'. At most 8 MiB.",
     OBJ(ID_PROP "," PATH_PROP(
             "absolute, or relative to the user's home") ","
                                                         "\"content\":{\"type\":\"string\","
                                                         "\"maxLength\":11184812},"
                                                         "\"encoding\":{\"enum\":[\"text\","
                                                         "\"base64\"]}",
         "\"sandbox_id\",\"path\",\"content\""),
     false, true, true, false, false, false, mcp_tool_write_file},
    {"list_files", "List a directory",
     "List a directory of the sandbox: each entry's name, type and size.",
     OBJ(ID_PROP
         "," PATH_PROP("a directory; default the user's home") ","
                                                               "\"depth\":{\"type\":\"integer\","
                                                               "\"minimum\":1,\"maximum\":16}",
         "\"sandbox_id\""),
     true, false, true, false, false, false, mcp_tool_list_files},
    {"remove", "Remove a file",
     "Remove a file or a directory (with what it holds) from the sandbox.",
     OBJ(ID_PROP "," PATH_PROP("what to remove"), "\"sandbox_id\",\"path\""), false, true, true,
     false, false, false, mcp_tool_remove},
    {"expose_port", "Expose a port",
     "The URL at which a service listening on a port of the sandbox is reached from "
     "outside, and the token to send with it (header X-Hutch-Traffic-Token).",
     OBJ(ID_PROP ",\"port\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":65535}",
         "\"sandbox_id\",\"port\""),
     true, false, true, false, false, false, mcp_tool_expose_port},
    {"pause", "Pause a sandbox",
     "Freeze a sandbox (its processes stop, its memory and files stay); resume continues it.",
     OBJ(ID_PROP, "\"sandbox_id\""), false, false, true, false, false, false, mcp_tool_pause},
    {"resume", "Resume a sandbox", "Continue a paused sandbox.", OBJ(ID_PROP, "\"sandbox_id\""),
     false, false, true, false, false, false, mcp_tool_resume},
    {"snapshot", "Snapshot a sandbox",
     "Save a sandbox's files as a snapshot; its id is a template for create.",
     OBJ(ID_PROP, "\"sandbox_id\""), false, false, false, false, false, true, mcp_tool_snapshot},
    {"fork", "Fork a sandbox",
     "A new sandbox that starts as a copy of this one's files; returns its sandbox_id. It "
     "goes with the session like one made by create, unless keep is true.",
     OBJ(ID_PROP ",\"keep\":{\"type\":\"boolean\"}", "\"sandbox_id\""), false, false, false, false,
     false, true, mcp_tool_fork},
    {"kill", "Kill a sandbox", "Destroy a sandbox and everything in it. It cannot be undone.",
     OBJ(ID_PROP, "\"sandbox_id\""), false, true, true, false, false, false, mcp_tool_kill},
    {"list", "List sandboxes", "The caller's sandboxes: id, template, state, when each ends.",
     OBJ("", ""), true, false, true, false, false, false, mcp_tool_list},
    {"templates", "List templates", "The templates a sandbox can be created from.", OBJ("", ""),
     true, false, true, false, false, false, mcp_tool_templates},
};
const size_t mcp_ntools = ARRAY_SIZE(mcp_tools);

const struct mcp_tool *mcp_tool_find(const char *name) {
  for (size_t i = 0; name && i < mcp_ntools; i++)
    if (strcmp(mcp_tools[i].name, name) == 0)
      return &mcp_tools[i];
  return NULL;
}

json_t *mcp_tool_json(const struct mcp_tool *t) {
  json_t *schema = json_loads(t->schema, 0, NULL);
  json_t *j =
      json_pack("{s:s, s:s, s:s, s:o, s:{s:s, s:b, s:b, s:b, s:b}}", "name", t->name, "title",
                t->title, "description", t->description, "inputSchema", schema, "annotations",
                "title", t->title, "readOnlyHint", t->read_only, "destructiveHint", t->destructive,
                "idempotentHint", t->idempotent, "openWorldHint", t->open_world);
  if (t->task)
    json_object_set_new(j, "execution", json_pack("{s:s}", "taskSupport", "optional"));
  return j;
}

void mcp_progress(struct mcp_ctx *cx, const char *message) {
  if (!cx->progress_token || !cx->out)
    return;
  cx->progress += 1;
  json_t *n = json_pack("{s:s, s:s, s:{s:O, s:f, s:s}}", "jsonrpc", "2.0", "method",
                        "notifications/progress", "params", "progressToken", cx->progress_token,
                        "progress", cx->progress, "message", message);
  if (n)
    cx->out->send(cx->out->arg, n);
}

bool mcp_tool_call(struct mcp_ctx *cx, struct hc_req *call, struct hc_answer *a) {
  call->cancel = cx->cancel;
  return hc_call(&cx->s->native, call, a);
}

bool mcp_tool_post(struct mcp_ctx *cx, const char *rest, json_t *body,
                   int (*line)(void *arg, json_t *obj), void *arg, long timeout_ms,
                   struct hc_answer *a) {
  char *text = json_dumps(body, JSON_COMPACT);
  json_decref(body);
  char path[512];
  mcp_sandbox_path(path, sizeof path, cx->sandbox, rest);
  struct hc_req call = {.method = "POST",
                          .path = path,
                          .body = text,
                          .body_len = strlen(text),
                          .line = line,
                          .arg = arg,
                          .timeout_ms = timeout_ms};
  bool ok = mcp_tool_call(cx, &call, a);
  free(text);
  return ok;
}

void mcp_copy_args(json_t *body, json_t *args, const char *const *names, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (json_object_get(args, names[i]))
      json_object_set(body, names[i], json_object_get(args, names[i]));
}

void mcp_sandbox_path(char *buf, size_t n, const char *id, const char *rest) {
  char *e = hc_escape(id);
  snprintf(buf, n, "/v1/sandboxes/%s%s", e, rest);
  free(e);
}

const char *mcp_arg_str(json_t *args, const char *key) {
  return json_string_value(json_object_get(args, key));
}
