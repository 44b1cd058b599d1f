/* The file tools: read_file, write_file, list_files, remove. */
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "result.h"
#include "tools.h"
#include "util.h"

#define BINARY_INLINE_MAX (24u << 10) /* bytes of a binary file given whole, as base64 */

/* "/v1/sandboxes/ID/files<what>?path=P<more>" */
static void files_path(char *buf, size_t n, const char *id, const char *what, const char *file,
                       const char *more) {
  char *q = hc_escape(file);
  char *rest = NULL;
  if (asprintf(&rest, "/files%s?path=%s%s", what, q, more) < 0)
    abort();
  mcp_sandbox_path(buf, n, id, rest);
  free(rest);
  free(q);
}

static bool utf8_text(const unsigned char *p, size_t n) {
  if (memchr(p, '\0', n))
    return false;
  json_t *j = json_stringn((const char *)p, n);
  json_decref(j);
  return j != NULL;
}

/* The image type of p's bytes by their magic, or NULL. */
static const char *image_mime(const unsigned char *p, size_t n) {
  if (n >= 8 && memcmp(p, "\x89PNG\r\n\x1a\n", 8) == 0)
    return "image/png";
  if (n >= 3 && memcmp(p, "\xff\xd8\xff", 3) == 0)
    return "image/jpeg";
  if (n >= 6 && (memcmp(p, "GIF87a", 6) == 0 || memcmp(p, "GIF89a", 6) == 0))
    return "image/gif";
  if (n >= 12 && memcmp(p, "RIFF", 4) == 0 && memcmp(p + 8, "WEBP", 4) == 0)
    return "image/webp";
  return NULL;
}

static char *base64(const void *p, size_t n) {
  char *out = xmalloc(4 * ((n + 2) / 3) + 1);
  EVP_EncodeBlock((unsigned char *)out, p, (int)n);
  return out;
}

json_t *mcp_tool_read_file(struct mcp_ctx *cx, json_t *args) {
  const char *id = mcp_arg_str(args, "sandbox_id");
  const char *file = mcp_arg_str(args, "path");
  cx->sandbox = id;
  char path[8192];
  files_path(path, sizeof path, id, "", file, "");
  struct hc_req call = {.method = "GET", .path = path, .timeout_ms = 120000};
  struct hc_answer a;
  bool ok = mcp_tool_call(cx, &call, &a);
  json_t *r;
  if (!ok || a.status >= 300) {
    r = mcp_result_native(&a);
  } else if (a.len > MCP_FILE_MAX) {
    r = mcp_result_error("too_large",
                         "%s holds more than the %u bytes read_file gives; read a part of it "
                         "with exec (head -c, tail -c, sed -n)",
                         file, MCP_FILE_MAX);
  } else {
    const unsigned char *p = (const unsigned char *)a.body;
    const char *mime = image_mime(p, a.len);
    if (mime && a.len <= MCP_IMAGE_MAX) {
      char *b64 = base64(p, a.len);
      r = mcp_result_text("%s: %s, %zu bytes", file, mime, a.len);
      mcp_result_add(r, mcp_block_image(b64, mime));
      free(b64);
    } else if (utf8_text(p, a.len)) {
      struct mcp_output o = {0};
      mcp_output_add(&o, a.body, a.len);
      char *s = mcp_output_show(&o, MCP_TEXT_MAX * 4, file);
      r = mcp_result_text("%s", s);
      free(s);
      mcp_output_free(&o);
    } else if (a.len <= BINARY_INLINE_MAX) {
      char *b64 = base64(p, a.len);
      r = mcp_result_text("%s: %zu bytes that are not text, as base64:\n%s", file, a.len, b64);
      free(b64);
    } else {
      /* A model reads no megabytes of base64: it is told how to take a part. */
      char *b64 = base64(p, BINARY_INLINE_MAX);
      r = mcp_result_text("%s: %zu bytes that are not text; the first %u as base64 below. Read "
                          "other parts with exec (xxd -s OFFSET -l LEN, or dd | base64).\n%s",
                          file, a.len, BINARY_INLINE_MAX, b64);
      free(b64);
    }
  }
  hc_answer_free(&a);
  return r;
}

json_t *mcp_tool_write_file(struct mcp_ctx *cx, json_t *args) {
  const char *id = mcp_arg_str(args, "sandbox_id");
  const char *file = mcp_arg_str(args, "path");
  cx->sandbox = id;
  json_t *content = json_object_get(args, "content");
  const char *enc = mcp_arg_str(args, "encoding");
  const char *data = json_string_value(content);
  size_t len = json_string_length(content);
  unsigned char *bytes = NULL;
  if (enc && strcmp(enc, "base64") == 0) {
    bytes = xmalloc(len / 4 * 3 + 3);
    int n = EVP_DecodeBlock(bytes, (const unsigned char *)data, (int)len);
    if (n < 0 || len % 4) {
      free(bytes);
      return mcp_result_error("invalid_argument", "content is not base64 (encoding: base64)");
    }
    /* EVP_DecodeBlock counts the padding's bytes too. */
    while (len && data[len - 1] == '=' && n > 0)
      len--, n--;
    data = (const char *)bytes;
    len = (size_t)n;
  }
  if (len > MCP_FILE_MAX) {
    free(bytes);
    return mcp_result_error("too_large", "at most %u bytes per write_file", MCP_FILE_MAX);
  }
  char path[8192];
  files_path(path, sizeof path, id, "", file, "");
  struct hc_req call = {.method = "PUT",
                          .path = path,
                          .body = data,
                          .body_len = len,
                          .ctype = "application/octet-stream",
                          .timeout_ms = 120000};
  struct hc_answer a;
  bool ok = mcp_tool_call(cx, &call, &a);
  free(bytes);
  json_t *r = !ok || a.status >= 300 ? mcp_result_native(&a) : mcp_result_json(json_incref(a.json));
  hc_answer_free(&a);
  return r;
}

json_t *mcp_tool_list_files(struct mcp_ctx *cx, json_t *args) {
  const char *id = mcp_arg_str(args, "sandbox_id");
  const char *dir = mcp_arg_str(args, "path");
  cx->sandbox = id;
  char more[32] = "", path[8192];
  json_t *depth = json_object_get(args, "depth");
  if (depth)
    snprintf(more, sizeof more, "&depth=%lld", json_integer_value(depth));
  files_path(path, sizeof path, id, "/list", dir ? dir : "/home/user", more);
  struct hc_req call = {.method = "GET", .path = path, .timeout_ms = 60000};
  struct hc_answer a;
  bool ok = mcp_tool_call(cx, &call, &a);
  json_t *r = !ok || a.status >= 300 ? mcp_result_native(&a) : mcp_result_json(json_incref(a.json));
  hc_answer_free(&a);
  return r;
}

json_t *mcp_tool_remove(struct mcp_ctx *cx, json_t *args) {
  const char *id = mcp_arg_str(args, "sandbox_id");
  cx->sandbox = id;
  char path[8192];
  files_path(path, sizeof path, id, "", mcp_arg_str(args, "path"), "&recursive=true");
  struct hc_req call = {.method = "DELETE", .path = path, .timeout_ms = 60000};
  struct hc_answer a;
  bool ok = mcp_tool_call(cx, &call, &a);
  json_t *r = !ok || a.status >= 300 ? mcp_result_native(&a) : mcp_result_text("removed");
  hc_answer_free(&a);
  return r;
}
