/* NDJSON lines of a workload's output (ndjson.h). */

#include "core/run/ndjson.h"

#include <jansson.h>
#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>

#include "frame.h"
#include "util.h"
#include "http/body.h"
#include "http/http.h"

/* How many bytes the UTF-8 sequence that b leads has (1 for a byte that
 * leads none). */
static size_t sequence_length(uint8_t b) {
  if ((b & 0xe0) == 0xc0)
    return 2;
  if ((b & 0xf0) == 0xe0)
    return 3;
  if ((b & 0xf8) == 0xf0)
    return 4;
  return 1;
}

/* Where a UTF-8 sequence that the buffer's end cuts short begins (n when
 * none is cut). */
static size_t cut_point(const uint8_t *p, size_t n) {
  for (size_t back = 1; back <= 3 && back <= n; back++) {
    uint8_t b = p[n - back];
    if ((b & 0xc0) == 0x80)
      continue; /* A continuation byte: look further back. */
    size_t need = sequence_length(b);
    return need > back ? n - back : n;
  }
  return n;
}

char *ndjson_next(struct ndjson *o, int which, const uint8_t *data, size_t len, bool last,
                  size_t *line_len) {
  size_t n = o->ncarry[which] + len;
  uint8_t *buf = xmalloc(n + 1);
  memcpy(buf, o->carry[which], o->ncarry[which]);
  if (len)
    memcpy(buf + o->ncarry[which], data, len);

  size_t cut = last ? n : cut_point(buf, n);
  o->ncarry[which] = n - cut;
  memcpy(o->carry[which], buf + cut, n - cut);

  char *line = NULL;
  if (cut > 0) {
    const char *type = which ? "stderr" : "stdout";
    json_t *text = json_stringn((const char *)buf, cut);
    if (text) {
      line = http_json_line(json_pack("{s:s,s:o}", "type", type, "data", text), line_len);
    } else {
      char *b64 = xmalloc(4 * ((cut + 2) / 3) + 1);
      EVP_EncodeBlock((unsigned char *)b64, buf, (int)cut);
      line = http_json_line(json_pack("{s:s,s:s}", "type", type, "data_b64", b64), line_len);
      free(b64);
    }
  }

  free(buf);
  return line;
}

json_t *ndjson_exit(uint8_t frame_type, json_t *j) {
  if (frame_type == HUTCH_F_EVENT && json_is_object(j)) {
    json_t *line = json_deep_copy(j);
    json_object_del(line, "event");
    json_object_set_new(line, "type", json_string("exit"));
    return line;
  }
  const char *msg = json_string_value(json_object_get(j, "message"));
  return json_pack("{s:s,s:s,s:n,s:n,s:o}", "type", "exit", "status", "sandbox_error", "exit_code",
                   "signal", "message", http_json_text(msg ? msg : "the agent refused the exec"));
}

json_t *ndjson_exit_gone(const char *message) {
  return json_pack("{s:s,s:s,s:n,s:n,s:s}", "type", "exit", "status", "sandbox_error", "exit_code",
                   "signal", "message", message);
}
