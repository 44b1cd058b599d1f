/* libFuzzer target: E2B envd's Connect RPC calls (connect.c's envelope
 * and unary bodies) into the handlers that parse them, process.Process
 * (e2b_process.c, down to api_exec_request) and filesystem.Filesystem
 * (e2b_fs.c), against a fake sandbox (fake_server.h). Also, on the same
 * bytes: base64 (http_b64_decode) and an envelope must survive a round trip.
 *
 * Input: a selector byte (the RPC), then fake_split's layout: a flags
 * byte, the request body, the agent's answer. */
#include <stdlib.h>
#include <string.h>

#include "e2b/fs.h"
#include "e2b/process.h"
#include "http/body.h"
#include "http/connect.h"
#include "fake_server.h"
#include "util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const struct {
  void (*fn)(struct http_conn *c, const struct principal *p);
  bool stream;
} rpcs[] = {
    {e2b_process_start, true},
    {e2b_process_connect, true},
    {e2b_process_list, false},
    {e2b_process_input, false},
    {e2b_process_close_stdin, false},
    {e2b_process_signal, false},
    {e2b_process_update, false},
    {e2b_fs_stat, false},
    {e2b_fs_list, false},
    {e2b_fs_mkdir, false},
    {e2b_fs_move, false},
    {e2b_fs_remove, false},
    {e2b_fs_watch, true},
    {e2b_fs_watcher_create, false},
    {e2b_fs_watcher_events, false},
    {e2b_fs_watcher_remove, false},
};

static const struct http_header headers[] = {
    {"Content-Type", "application/connect+json"},
    {"Connect-Timeout-Ms", "1500"},
};

/* The message http_connect_request takes from body, or NULL (it answered). */
static json_t *request_of(const uint8_t *body, size_t n, bool stream) {
  struct fake_script none = {.end = (const uint8_t *)"{}", .nend = 2};
  struct fake_req r = {
      (const char *)body, n, NULL, headers, 1, stream ? DIALECT_CONNECT_STREAM : DIALECT_CONNECT};
  struct http_conn *c = fake_request(&r, &none);
  json_t *m = http_connect_request(c, stream);
  if (!m && fake_status() != 400)
    fake_fail("http_connect_request refused a message without a 400");
  if (m) /* a handler would answer now */
    http_json(c, 200, json_object());
  fake_finish();
  return m;
}

/* A message taken from a unary body is taken again from its envelope.
 * Compared as written (reals keep 10 digits, SERVE_JSON_FLAGS). */
static void envelope_round_trip(const uint8_t *body, size_t n) {
  json_t *m = request_of(body, n, false);
  if (!m)
    return;
  size_t len;
  char *e = http_connect_envelope(0, json_incref(m), &len);
  json_t *again = request_of((const uint8_t *)e, len, true);
  char *before = json_dumps(m, SERVE_JSON_FLAGS), *after = json_dumps(again, SERVE_JSON_FLAGS);
  if (!again || !before || !after || strcmp(before, after) != 0)
    fake_fail("a message does not survive its envelope");
  free(before);
  free(after);
  free(e);
  json_decref(again);
  json_decref(m);
}

/* Whatever http_b64_decode takes, encoding it and decoding again gives the
 * same bytes. */
static void base64_round_trip(const uint8_t *body, size_t n) {
  char *s = strndup((const char *)body, n);
  uint8_t *raw, *again;
  size_t nraw, nagain;
  if (http_b64_decode(s, &raw, &nraw) == 0) {
    char *enc = http_b64_encode(raw, nraw);
    if (http_b64_decode(enc, &again, &nagain) < 0 || nagain != nraw ||
        memcmp(raw, again, nraw) != 0)
      fake_fail("base64 does not survive a round trip");
    free(again);
    free(enc);
    free(raw);
  }
  free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1)
    return 0;
  size_t which = data[0] % ARRAY_SIZE(rpcs), n;
  struct fake_script s;
  const uint8_t *body = fake_split(data + 1, size - 1, &n, &s);
  struct fake_req r = {(const char *)body,
                       n,
                       data[0] & 0x80 ? "username=root" : NULL,
                       headers,
                       ARRAY_SIZE(headers),
                       rpcs[which].stream ? DIALECT_CONNECT_STREAM : DIALECT_CONNECT};
  struct http_conn *c;
  if (rpcs[which].fn == e2b_fs_watcher_events || rpcs[which].fn == e2b_fs_watcher_remove) {
    /* A watcher to poll first: the agent's output makes it ready (or not). */
    static const char create[] = "{\"path\":\"/home/user\",\"recursive\":true}";
    struct fake_req first = {create, sizeof create - 1, NULL, headers, 1, DIALECT_CONNECT};
    e2b_fs_watcher_create(fake_request(&first, &s), fake_principal());
    fake_finish();
    c = fake_request_again(&r);
  } else {
    c = fake_request(&r, &s);
  }
  rpcs[which].fn(c, fake_principal());
  fake_finish();
  envelope_round_trip(body, n);
  base64_round_trip(body, n);
  return 0;
}
