/* Result builders (result.h). */
#include "result.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

#define OUTPUT_KEEP (64u << 20) /* a command's output kept whole for its file */

json_t *mcp_block_text(const char *text, size_t len) {
  return json_pack("{s:s, s:s%}", "type", "text", "text", text, len);
}

json_t *mcp_block_image(const char *b64, const char *mime) {
  return json_pack("{s:s, s:s, s:s}", "type", "image", "data", b64, "mimeType", mime);
}

static json_t *result_of(const char *text, size_t len, bool is_error) {
  json_t *block = mcp_block_text(text, len);
  if (!block) /* not UTF-8: jansson refuses it */
    block = mcp_block_text("(output that is not UTF-8 text)", 31);
  return json_pack("{s:[o], s:b}", "content", block, "isError", is_error);
}

json_t *mcp_result_text(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *s = NULL;
  int n = vasprintf(&s, fmt, ap);
  va_end(ap);
  if (n < 0)
    abort();
  json_t *r = result_of(s, (size_t)n, false);
  free(s);
  return r;
}

json_t *mcp_result_error(const char *code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *msg = NULL;
  if (vasprintf(&msg, fmt, ap) < 0)
    abort();
  va_end(ap);
  char *s = NULL;
  int n = asprintf(&s, "%s: %s", code, msg);
  if (n < 0)
    abort();
  json_t *r = result_of(s, (size_t)n, true);
  free(s);
  free(msg);
  return r;
}

json_t *mcp_result_native(const struct hc_answer *a) {
  if (a->status == 0)
    return mcp_result_error("unavailable", "%s", a->message);
  json_t *r = mcp_result_error(a->code, "%s (HTTP %ld)", a->message, a->status);
  json_object_set_new(r, "structuredContent",
                      json_pack("{s:{s:s, s:s, s:I}}", "error", "code", a->code, "message",
                                a->message, "status", (json_int_t)a->status));
  return r;
}

json_t *mcp_result_json(json_t *v) {
  char *s = json_dumps(v, JSON_INDENT(1) | JSON_SORT_KEYS);
  json_t *r = result_of(s ? s : "null", s ? strlen(s) : 4, false);
  free(s);
  if (json_is_object(v))
    json_object_set_new(r, "structuredContent", v);
  else
    json_decref(v);
  return r;
}

void mcp_result_add(json_t *r, json_t *block) {
  if (block)
    json_array_append_new(json_object_get(r, "content"), block);
}

void mcp_output_add(struct mcp_output *o, const char *p, size_t n) {
  o->total += n;
  if (o->len >= OUTPUT_KEEP)
    return;
  if (n > OUTPUT_KEEP - o->len)
    n = OUTPUT_KEEP - o->len;
  if (o->len + n + 1 > o->cap) {
    size_t cap = o->cap ? o->cap : 4096;
    while (cap < o->len + n + 1)
      cap *= 2;
    o->data = realloc(o->data, cap);
    if (!o->data)
      abort();
    o->cap = cap;
  }
  memcpy(o->data + o->len, p, n);
  o->len += n;
  o->data[o->len] = '\0';
}

/* Back off from cut to the start of a UTF-8 character. */
static size_t char_start(const char *s, size_t cut) {
  while (cut > 0 && ((unsigned char)s[cut] & 0xC0) == 0x80)
    cut--;
  return cut;
}

char *mcp_output_show(const struct mcp_output *o, size_t max, const char *saved_as) {
  if (o->total <= max)
    return xstrdup(o->data ? o->data : "");

  size_t head = char_start(o->data, max / 2);
  size_t tail = char_start(o->data, o->len - max / 2);
  char marker[512];
  snprintf(marker, sizeof marker,
           "\n[... %zu of %zu bytes left out: shown are the first %zu and the last %zu; "
           "%s%s%s ...]\n",
           o->total - head - (o->len - tail), o->total, head, o->len - tail,
           saved_as ? "the whole output is in the sandbox at "
                    : "the whole output could not be kept",
           saved_as ? saved_as : "", o->total > o->len ? " (its first 64 MiB)" : "");
  char *s = NULL;
  if (asprintf(&s, "%.*s%s%s", (int)head, o->data, marker, o->data + tail) < 0)
    abort();
  return s;
}

void mcp_output_free(struct mcp_output *o) {
  free(o->data);
  memset(o, 0, sizeof *o);
}
