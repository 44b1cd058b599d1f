/* Connect framing (src/server/http/connect.c): envelopes out, a request
 * message in (http_connect_message), and base64. The parts of connect.c that
 * write to a connection are not exercised: the stubs below stand in for
 * the transport they call. */
#include <stdlib.h>
#include <string.h>

#include "http/body.h"
#include "http/connect.h"
#include "http/errors.h"
#include "http/http.h"
#include "tap.h"

/* ---- what connect.c links against, never called here ---- */

void http_error(struct http_conn *c, enum hutch_errkind kind, const char *code, const char *fmt,
                ...) {
  (void)c, (void)kind, (void)code, (void)fmt;
  abort();
}
void http_stream_start(struct http_conn *c, int status, const char *ctype,
                       const struct http_stream_ops *ops, void *ctx) {
  (void)c, (void)status, (void)ctype, (void)ops, (void)ctx;
  abort();
}
void http_stream_send(struct http_conn *c, const void *data, size_t len) {
  (void)c, (void)data, (void)len;
  abort();
}
void http_stream_end(struct http_conn *c) {
  (void)c;
  abort();
}
json_t *http_json_text(const char *s) {
  return json_string(s);
}
const char *http_connect_code(enum hutch_errkind kind, const char *code) {
  (void)kind, (void)code;
  abort();
}

/* ---- envelopes ---- */

static void test_envelope(void) {
  size_t n;
  char *e = http_connect_envelope(0, json_pack("{s:i}", "a", 1), &n);
  is_u64(n, 5 + 7, "an envelope is 5 bytes and the JSON");
  is_int((unsigned char)e[0], 0, "flags 0");
  ok(memcmp(e + 1, "\0\0\0\x07", 4) == 0, "the length, big-endian");
  ok(memcmp(e + 5, "{\"a\":1}", 7) == 0, "the compact JSON");
  free(e);

  e = http_connect_envelope(CONNECT_END_STREAM, json_object(), &n);
  is_u64(n, 7, "an empty end-of-stream envelope");
  is_int((unsigned char)e[0], CONNECT_END_STREAM, "its flags");
  ok(memcmp(e + 1, "\0\0\0\x02{}", 6) == 0, "length 2 and {}");
  free(e);

  /* A length over 16 bits and over 24: every byte of it counts. */
  size_t big = 0x012345;
  char *s = malloc(big - 8 + 1); /* {"a":"..."} */
  memset(s, 'x', big - 8);
  s[big - 8] = '\0';
  e = http_connect_envelope(0, json_pack("{s:s}", "a", s), &n);
  is_u64(n, 5 + big, "a long string's envelope");
  ok(memcmp(e + 1, "\x00\x01\x23\x45", 4) == 0, "its length 0x012345, big-endian");
  free(e);
  free(s);

  /* An envelope read back by http_connect_message. */
  e = http_connect_envelope(0, json_pack("{s:s}", "k", "v"), &n);
  char why[256];
  json_t *j = http_connect_message(e, n, 1, why, sizeof why);
  ok(j && json_is_string(json_object_get(j, "k")), "an envelope made is an envelope read");
  json_decref(j);
  free(e);
}

/* ---- request messages ---- */

/* http_connect_message on n bytes of b: whether it took a message. */
static bool takes(const char *b, size_t n, int stream, const char *what) {
  char why[256] = "";
  json_t *j = http_connect_message(b, n, stream, why, sizeof why);
  bool took = j != NULL;
  ok(took || why[0], "%s: %s", what, took ? "taken" : why);
  json_decref(j);
  return took;
}

static void test_message(void) {
  char why[256];
  json_t *j = http_connect_message("{\"pid\":7}", 9, 0, why, sizeof why);
  ok(j && json_integer_value(json_object_get(j, "pid")) == 7, "a unary body is the message");
  json_decref(j);
  j = http_connect_message("\0\0\0\0\x09{\"pid\":7}", 14, 1, why, sizeof why);
  ok(j && json_integer_value(json_object_get(j, "pid")) == 7, "a stream's one envelope");
  json_decref(j);

  ok(takes("\0\0\0\0\x02{}", 7, 1, "an empty object"), "an empty object is taken");
  ok(!takes("", 0, 1, "no bytes"), "an empty stream body is refused");
  ok(!takes("\0\0\0", 3, 1, "a truncated header"), "a header cut short is refused");
  ok(!takes("\0\0\0\0", 4, 1, "4 of 5 header bytes"), "4 header bytes are refused");
  ok(!takes("\0\0\0\0\x05{}", 7, 1, "length larger than the body"),
     "a length past the body is refused");
  ok(!takes("\0\0\0\0\x02{}x", 8, 1, "a trailing byte"), "bytes after the envelope are refused");
  ok(!takes("\0\0\0\0\x02{}\0\0\0\0\x02{}", 14, 1, "two envelopes"), "two envelopes are refused");
  ok(!takes("\x01\0\0\0\x02{}", 7, 1, "the compressed flag"), "a compressed envelope is refused");
  ok(!takes("\x02\0\0\0\x02{}", 7, 1, "the end-stream flag"), "other flags are refused");
  ok(!takes("\0\xff\xff\xff\xff{}", 7, 1, "a 4 GiB length"), "a huge length is refused");
  ok(!takes("\0\0\0\0\x03"
            "abc",
            8, 1, "a non-JSON payload"),
     "a payload that is not JSON");
  ok(!takes("\0\0\0\0\x02[]", 7, 1, "a JSON array"), "a JSON value other than an object");
  ok(!takes("\0\0\0\0\x01"
            "7",
            6, 1, "a JSON number"),
     "a number is not a message");
  ok(!takes("\0\0\0\0\x02{}", 7, 0, "an envelope sent unary"), "unary: an envelope is not JSON");
  ok(!takes("", 0, 0, "an empty unary body"), "unary: an empty body is refused");
  ok(!takes("{} {}", 5, 0, "two objects unary"), "unary: trailing JSON is refused");
  ok(!takes("{\"a\":\"\\u0000\"}x", 14, 0, "trailing garbage"), "unary: garbage after the object");

  /* The reason is cut to the buffer, never past it. */
  char small[8];
  memset(small, 'z', sizeof small);
  j = http_connect_message("", 0, 1, small, sizeof small);
  ok(!j && small[7] == '\0' && strlen(small) == 7, "the reason fits a small buffer");
}

/* ---- base64 ---- */

static void round_trip(const void *data, size_t n, const char *want) {
  char *s = http_b64_encode(data, n);
  is_str(s, want, "encode %zu bytes", n);
  uint8_t *out = NULL;
  size_t m = 99;
  int r = http_b64_decode(s, &out, &m);
  ok(r == 0 && m == n && memcmp(out, data, n) == 0, "decode '%s' gives them back", s);
  free(out);
  free(s);
}

static void decodes(const char *s, const char *want, size_t wn) {
  uint8_t *out = NULL;
  size_t n = 0;
  int r = http_b64_decode(s, &out, &n);
  ok(r == 0 && n == wn && memcmp(out, want, wn) == 0, "decode '%s'", s);
  free(out);
}

static void refused(const char *s, const char *what) {
  uint8_t *out = NULL;
  size_t n = 0;
  int r = http_b64_decode(s, &out, &n);
  is_int(r, -1, "refuse %s", what);
  if (r == 0)
    free(out);
}

static void test_b64(void) {
  round_trip("", 0, "");
  round_trip("f", 1, "Zg==");
  round_trip("fo", 2, "Zm8=");
  round_trip("foo", 3, "Zm9v");
  round_trip("foob", 4, "Zm9vYg==");
  round_trip("\xff\xfe\x00\x01", 4, "//4AAQ==");
  uint8_t all[256];
  for (int i = 0; i < 256; i++)
    all[i] = (uint8_t)i;
  char *s = http_b64_encode(all, sizeof all);
  uint8_t *out;
  size_t n;
  ok(http_b64_decode(s, &out, &n) == 0 && n == 256 && memcmp(out, all, 256) == 0,
     "every byte value round-trips");
  free(out);
  free(s);

  decodes("Zg", "f", 1); /* unpadded */
  decodes("Zm8", "fo", 2);
  decodes("__4AAQ", "\xff\xfe\x00\x01", 4); /* URL-safe */
  decodes("-_-_", "\xfb\xff\xbf", 3);
  decodes("Zg=", "f", 1); /* short padding */
  refused("Z", "one char left over");
  refused("Zm9vY", "5 chars");
  refused("Zm9v!A==", "a char outside both alphabets");
  refused("Zm 9v", "a space");
  refused("Zm 9vYg", "a space, length a multiple of 4");
  refused("Zm9v\n", "a trailing newline");
  refused("Zm9v\nZm9v", "a newline inside");
  refused("Zm9v====Zg", "padding inside");
  refused("Zg==Zg==", "two padded groups");
}

int main(void) {
  test_envelope();
  test_message();
  test_b64();
  return done_testing();
}
