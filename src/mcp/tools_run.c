/* The tools that run things: exec (to its end, output streamed as
 * progress), run_code (cells in a stateful context, charts as images),
 * and exec_start / exec_read / exec_write / exec_signal for commands that
 * keep running. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "result.h"
#include "tools.h"
#include "util.h"

#define PROGRESS_PIECE 4096 /* the most of one piece a progress message carries */

/* A whole output kept in the sandbox, where the cut result points: the
 * model reads the rest with read_file or exec. NULL when it was not kept. */
static char *save_output(struct mcp_ctx *cx, const char *id, const char *what,
                         const struct mcp_output *o) {
  char hex[13], file[96], path[512];
  random_hex(hex, 12);
  snprintf(file, sizeof file, "/tmp/hutch-mcp/%s-%s.txt", what, hex);
  char *q = hc_escape(file);
  char rest[256];
  snprintf(rest, sizeof rest, "/files?path=%s", q);
  free(q);
  mcp_sandbox_path(path, sizeof path, id, rest);
  struct hc_req call = {.method = "PUT",
                          .path = path,
                          .body = o->data ? o->data : "",
                          .body_len = o->len,
                          .ctype = "application/octet-stream",
                          .timeout_ms = 120000};
  struct hc_answer a;
  bool ok = mcp_tool_call(cx, &call, &a) && a.status < 300;
  hc_answer_free(&a);
  return ok ? xstrdup(file) : NULL;
}

/* o as a result shows it, saved whole first when it must be cut. */
static char *shown(struct mcp_ctx *cx, const char *id, const char *what, const struct mcp_output *o,
                   size_t max) {
  char *saved = o->total > max ? save_output(cx, id, what, o) : NULL;
  char *s = mcp_output_show(o, max, saved);
  free(saved);
  return s;
}

/* --- exec --------------------------------------------------------------- */

struct exec_run {
  struct mcp_ctx *cx;
  struct mcp_output out, err;
  json_t *exit; /* the exit line */
  long long pid;
};

static int exec_line(void *arg, json_t *obj) {
  struct exec_run *x = arg;
  const char *type = json_string_value(json_object_get(obj, "type"));
  if (!type)
    return HC_LINE_MORE;
  if (strcmp(type, "start") == 0) {
    x->pid = json_integer_value(json_object_get(obj, "pid"));
    return HC_LINE_MORE;
  }
  if (strcmp(type, "exit") == 0) {
    x->exit = json_incref(obj);
    return HC_LINE_MORE;
  }
  bool is_out = strcmp(type, "stdout") == 0;
  if (!is_out && strcmp(type, "stderr") != 0)
    return HC_LINE_MORE;
  const char *data = json_string_value(json_object_get(obj, "data"));
  size_t n = json_string_length(json_object_get(obj, "data"));
  if (!data) {
    data = "(bytes that are not UTF-8)\n";
    n = strlen(data);
  }
  mcp_output_add(is_out ? &x->out : &x->err, data, n);
  if (x->cx->progress_token) {
    char piece[PROGRESS_PIECE + 16];
    snprintf(piece, sizeof piece, "%s%.*s", is_out ? "" : "[stderr] ",
             (int)(n < PROGRESS_PIECE ? n : PROGRESS_PIECE), data);
    mcp_progress(x->cx, piece);
  }
  return HC_LINE_MORE;
}

json_t *mcp_tool_exec(struct mcp_ctx *cx, json_t *args) {
  const char *id = mcp_arg_str(args, "sandbox_id");
  cx->sandbox = id;
  json_t *body = json_pack("{s:O}", "shell", json_object_get(args, "command"));
  static const char *const same[] = {"cwd", "env", "user", "timeout_s", "stdin"};
  mcp_copy_args(body, args, same, ARRAY_SIZE(same));
  struct exec_run x = {.cx = cx};
  struct hc_answer a;
  bool ok = mcp_tool_post(cx, "/exec", body, exec_line, &x, 0, &a);

  json_t *r;
  if (!ok || a.status >= 300) {
    r = mcp_result_native(&a);
  } else if (!x.exit) {
    r = mcp_result_error("sandbox_error", "the command's stream ended before its exit line");
  } else {
    const char *status = json_string_value(json_object_get(x.exit, "status"));
    json_t *code = json_object_get(x.exit, "exit_code");
    char *out = shown(cx, id, "stdout", &x.out, MCP_TEXT_MAX);
    char *err = shown(cx, id, "stderr", &x.err, MCP_TEXT_MAX / 2);
    char head[256];
    if (json_is_integer(code))
      snprintf(head, sizeof head, "exit code %lld (%s)", json_integer_value(code), status);
    else
      snprintf(head, sizeof head, "ended: %s%s%s", status ? status : "?",
               json_string_value(json_object_get(x.exit, "message")) ? ": " : "",
               json_string_value(json_object_get(x.exit, "message"))
                   ? json_string_value(json_object_get(x.exit, "message"))
                   : "");
    r = mcp_result_text("%s\n--- stdout ---\n%s%s--- stderr ---\n%s", head, out,
                        *out && out[strlen(out) - 1] != '\n' ? "\n" : "", err);
    /* A command that failed is the model's to read, not a tool error. */
    json_t *sc = json_pack("{s:O, s:I, s:I}", "exit", x.exit, "stdout_bytes",
                           (json_int_t)x.out.total, "stderr_bytes", (json_int_t)x.err.total);
    json_object_set_new(r, "structuredContent", sc);
    free(out);
    free(err);
  }
  hc_answer_free(&a);
  json_decref(x.exit);
  mcp_output_free(&x.out);
  mcp_output_free(&x.err);
  return r;
}

/* --- run_code ----------------------------------------------------------- */

struct cell_run {
  struct mcp_ctx *cx;
  const char *id;
  struct mcp_output out, err, results;
  json_t *blocks; /* images, in the order they came */
  json_t *error;
};

/* An image of a result: as MCP image content when small enough, else
 * saved in the sandbox and named. */
static void cell_image(struct cell_run *x, const char *b64, const char *mime, const char *ext) {
  size_t bytes = strlen(b64) / 4 * 3;
  char line[512];
  if (bytes <= MCP_IMAGE_MAX) {
    snprintf(line, sizeof line, "[image %zu: %s, %zu bytes, a figure the cell made]",
             json_array_size(x->blocks) / 2 + 1, mime, bytes);
    json_array_append_new(x->blocks, mcp_block_text(line, strlen(line)));
    json_array_append_new(x->blocks, mcp_block_image(b64, mime));
    return;
  }
  struct mcp_output o = {0};
  mcp_output_add(&o, b64, strlen(b64));
  char *saved = save_output(x->cx, x->id, ext, &o);
  mcp_output_free(&o);
  snprintf(line, sizeof line,
           "[image: %s of %zu bytes, over the %u bytes a result carries; its base64 is in "
           "the sandbox at %s]",
           mime, bytes, MCP_IMAGE_MAX, saved ? saved : "(not kept)");
  free(saved);
  json_array_append_new(x->blocks, mcp_block_text(line, strlen(line)));
}

static int cell_line(void *arg, json_t *obj) {
  struct cell_run *x = arg;
  const char *type = json_string_value(json_object_get(obj, "type"));
  const char *text = json_string_value(json_object_get(obj, "text"));
  if (!type)
    return HC_LINE_MORE;
  if ((strcmp(type, "stdout") == 0 || strcmp(type, "stderr") == 0) && text) {
    mcp_output_add(type[3] == 'o' ? &x->out : &x->err, text, strlen(text));
    mcp_progress(x->cx, text);
  } else if (strcmp(type, "result") == 0) {
    const char *png = json_string_value(json_object_get(obj, "png"));
    const char *jpeg = json_string_value(json_object_get(obj, "jpeg"));
    if (png)
      cell_image(x, png, "image/png", "png");
    else if (jpeg)
      cell_image(x, jpeg, "image/jpeg", "jpeg");
    else if (text) {
      mcp_output_add(&x->results, text, strlen(text));
      mcp_output_add(&x->results, "\n", 1);
    }
  } else if (strcmp(type, "error") == 0) {
    json_decref(x->error);
    x->error = json_incref(obj);
  }
  return HC_LINE_MORE;
}

json_t *mcp_tool_run_code(struct mcp_ctx *cx, json_t *args) {
  const char *id = mcp_arg_str(args, "sandbox_id");
  cx->sandbox = id;
  json_t *body = json_object();
  static const char *const same[] = {"code", "language", "context_id", "timeout_s", "env"};
  mcp_copy_args(body, args, same, ARRAY_SIZE(same));
  struct cell_run x = {.cx = cx, .id = id, .blocks = json_array()};
  struct hc_answer a;
  bool ok = mcp_tool_post(cx, "/code", body, cell_line, &x, 0, &a);

  json_t *r;
  if (!ok || a.status >= 300) {
    r = mcp_result_native(&a);
  } else {
    char *out = shown(cx, id, "stdout", &x.out, MCP_TEXT_MAX);
    char *err = shown(cx, id, "stderr", &x.err, MCP_TEXT_MAX / 4);
    char *res = shown(cx, id, "result", &x.results, MCP_TEXT_MAX / 4);
    char *trace = NULL;
    if (x.error &&
        asprintf(&trace, "%s: %s\n%s", json_string_value(json_object_get(x.error, "name")),
                 json_string_value(json_object_get(x.error, "value")),
                 json_string_value(json_object_get(x.error, "traceback"))
                     ? json_string_value(json_object_get(x.error, "traceback"))
                     : "") < 0)
      abort();
    r = mcp_result_text("%s%s%s%s%s%s%s%s", *res ? "result:\n" : "", res, *out ? "stdout:\n" : "",
                        out, *err ? "stderr:\n" : "", err, trace ? "error:\n" : "",
                        trace ? trace : "");
    json_t *first = json_array_get(json_object_get(r, "content"), 0);
    if (!*res && !*out && !*err && !trace)
      json_object_set_new(first, "text", json_string("(no output)"));
    size_t i;
    json_t *b;
    json_array_foreach(x.blocks, i, b)
      mcp_result_add(r, json_incref(b));
    /* An exception in the cell is the model's to read; the call worked. */
    free(out);
    free(err);
    free(res);
    free(trace);
  }
  hc_answer_free(&a);
  json_decref(x.blocks);
  json_decref(x.error);
  mcp_output_free(&x.out);
  mcp_output_free(&x.err);
  mcp_output_free(&x.results);
  return r;
}

/* --- background commands ------------------------------------------------ */

json_t *mcp_tool_exec_start(struct mcp_ctx *cx, json_t *args) {
  const char *id = mcp_arg_str(args, "sandbox_id");
  cx->sandbox = id;
  json_t *body = json_pack("{s:O, s:b, s:b}", "shell", json_object_get(args, "command"),
                           "background", 1, "keep_stdin", 1);
  static const char *const same[] = {"cwd", "env", "user"};
  mcp_copy_args(body, args, same, ARRAY_SIZE(same));
  struct hc_answer a;
  bool ok = mcp_tool_post(cx, "/exec", body, NULL, NULL, 60000, &a);
  json_t *r = !ok || a.status >= 300 ? mcp_result_native(&a) : mcp_result_json(json_incref(a.json));
  hc_answer_free(&a);
  return r;
}

struct reader {
  struct mcp_ctx *cx;
  long long skip; /* bytes before the offset asked for */
  long long seen; /* bytes of output so far */
  struct mcp_output text;
  json_t *exit;
};

static int read_line(void *arg, json_t *obj) {
  struct reader *x = arg;
  const char *type = json_string_value(json_object_get(obj, "type"));
  if (type && strcmp(type, "exit") == 0) {
    x->exit = json_incref(obj);
    return HC_LINE_STOP;
  }
  const char *data = json_string_value(json_object_get(obj, "data"));
  if (!type || !data || (strcmp(type, "stdout") != 0 && strcmp(type, "stderr") != 0))
    return HC_LINE_MORE;
  long long n = (long long)json_string_length(json_object_get(obj, "data"));
  long long from = x->skip > x->seen ? x->skip - x->seen : 0;
  bool fresh = from < n;
  if (fresh)
    mcp_output_add(&x->text, data + from, (size_t)(n - from));
  x->seen += n;
  if (x->text.total >= MCP_TEXT_MAX)
    return HC_LINE_STOP; /* enough for one read */
  return fresh ? HC_LINE_NEW : HC_LINE_MORE;
}

json_t *mcp_tool_exec_read(struct mcp_ctx *cx, json_t *args) {
  const char *id = mcp_arg_str(args, "sandbox_id");
  cx->sandbox = id;
  char rest[64], path[256];
  snprintf(rest, sizeof rest, "/processes/%lld/output",
           json_integer_value(json_object_get(args, "pid")));
  mcp_sandbox_path(path, sizeof path, id, rest);
  json_t *w = json_object_get(args, "wait_ms");
  struct reader x = {.cx = cx, .skip = json_integer_value(json_object_get(args, "offset"))};
  /* The attach streams until the process ends: what came within wait_ms
   * is this read's. */
  struct hc_req call = {.method = "GET",
                          .path = path,
                          .line = read_line,
                          .arg = &x,
                          .timeout_ms = w ? json_integer_value(w) + 200 : 1200,
                          .idle_ms = 100};
  struct hc_answer a;
  bool ok = mcp_tool_call(cx, &call, &a);
  json_t *r;
  if (!ok && !a.timed_out) {
    r = mcp_result_native(&a);
  } else if (ok && a.status >= 300) {
    r = mcp_result_native(&a);
  } else {
    long long next = x.skip + (long long)x.text.len;
    json_t *v =
        json_pack("{s:s%, s:I, s:b, s:O?}", "output", x.text.data ? x.text.data : "", x.text.len,
                  "next_offset", (json_int_t)next, "running", !x.exit, "exit", x.exit);
    r = v ? mcp_result_json(v) : mcp_result_error("invalid_output", "output is not UTF-8");
  }
  hc_answer_free(&a);
  mcp_output_free(&x.text);
  json_decref(x.exit);
  return r;
}

json_t *mcp_tool_exec_write(struct mcp_ctx *cx, json_t *args) {
  const char *id = mcp_arg_str(args, "sandbox_id");
  cx->sandbox = id;
  char rest[64];
  snprintf(rest, sizeof rest, "/processes/%lld/stdin",
           json_integer_value(json_object_get(args, "pid")));
  json_t *body = json_pack("{s:O, s:b}", "data", json_object_get(args, "data"), "eof",
                           json_is_true(json_object_get(args, "eof")));
  struct hc_answer a;
  bool ok = mcp_tool_post(cx, rest, body, NULL, NULL, 30000, &a);
  json_t *r = !ok || a.status >= 300 ? mcp_result_native(&a) : mcp_result_text("written");
  hc_answer_free(&a);
  return r;
}

json_t *mcp_tool_exec_signal(struct mcp_ctx *cx, json_t *args) {
  const char *id = mcp_arg_str(args, "sandbox_id");
  cx->sandbox = id;
  char rest[64], path[256];
  snprintf(rest, sizeof rest, "/processes/%lld/signal",
           json_integer_value(json_object_get(args, "pid")));
  mcp_sandbox_path(path, sizeof path, id, rest);
  json_t *sig = json_object_get(args, "signal");
  char body[64];
  snprintf(body, sizeof body, "{\"signal\":%lld}", sig ? json_integer_value(sig) : 15);
  struct hc_req call = {
      .method = "POST", .path = path, .body = body, .body_len = strlen(body), .timeout_ms = 30000};
  struct hc_answer a;
  bool ok = mcp_tool_call(cx, &call, &a);
  json_t *r = !ok || a.status >= 300 ? mcp_result_native(&a) : mcp_result_text("signalled");
  hc_answer_free(&a);
  return r;
}
