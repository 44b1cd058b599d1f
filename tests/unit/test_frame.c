/* Frame header encoding and parsing (src/proto/frame.c, docs/protocol.md). */
#include <stdint.h>
#include <string.h>

#include "frame.h"
#include "tap.h"

/* A frame with a payload into buf; returns its size. */
static size_t make(uint8_t *buf, uint8_t type, uint8_t flags, uint32_t stream, const void *p,
                   uint32_t len) {
  hutch_frame_header(buf, type, flags, stream, len);
  memcpy(buf + HUTCH_FRAME_HEADER, p, len);
  return HUTCH_FRAME_HEADER + len;
}

static void test_header_layout(void) {
  uint8_t h[HUTCH_FRAME_HEADER];
  static const uint8_t want[HUTCH_FRAME_HEADER] = {0x00, 0x0a, 0x0b, 0x0c, 4,    2,
                                                   0,    0,    0x01, 0x02, 0x03, 0x04};
  memset(h, 0xee, sizeof h);
  hutch_frame_header(h, HUTCH_F_STDOUT, HUTCH_FL_END, 0x01020304, 0x000a0b0c);
  ok(memcmp(h, want, sizeof h) == 0,
     "header: big-endian length, type, flags, zero reserved, stream");
}

static void test_round_trip(void) {
  uint8_t buf[64];
  struct hutch_frame f;
  size_t n = make(buf, HUTCH_F_STDIN, HUTCH_FL_EOF, 0xdeadbeef, "hello", 5);
  is_int(hutch_frame_parse(buf, n, &f), 17, "round trip: parse returns header + payload size");
  is_int(f.type, HUTCH_F_STDIN, "round trip: type");
  is_int(f.flags, HUTCH_FL_EOF, "round trip: flags");
  is_u64(f.stream, 0xdeadbeef, "round trip: stream");
  is_int(f.len, 5, "round trip: len");
  ok(f.payload == buf + HUTCH_FRAME_HEADER && memcmp(f.payload, "hello", 5) == 0,
     "round trip: payload points at the bytes after the header");

  bool all = true;
  for (unsigned t = 1; t <= HUTCH_F_TYPE_MAX; t++)
    for (unsigned fl = 0; fl <= (HUTCH_FL_EOF | HUTCH_FL_END); fl++) {
      make(buf, (uint8_t)t, (uint8_t)fl, t * 1000, "x", 1);
      all &= hutch_frame_parse(buf, 13, &f) == 13 && f.type == t && f.flags == fl &&
             f.stream == t * 1000;
    }
  ok(all, "every type 1..%d with every flag combination parses", HUTCH_F_TYPE_MAX);
}

static void test_partial(void) {
  uint8_t buf[64];
  struct hutch_frame f;
  size_t n = make(buf, HUTCH_F_EVENT, 0, 3, "{\"a\":1}", 7);
  bool all_zero = true;
  for (size_t i = 0; i < n; i++) {
    long r = hutch_frame_parse(buf, i, &f);
    if (r != 0) {
      diag("prefix of %zu bytes gave %ld", i, r);
      all_zero = false;
    }
  }
  ok(all_zero, "every proper prefix (0..%zu bytes) of a frame returns 0", n - 1);
  is_int(hutch_frame_parse(buf, n, &f), (long)n, "the whole frame parses");

  hutch_frame_header(buf, HUTCH_F_STDOUT, 0, 1, HUTCH_FRAME_MAX);
  is_int(hutch_frame_parse(buf, HUTCH_FRAME_HEADER, &f), 0,
         "a header announcing HUTCH_FRAME_MAX bytes, payload not there yet: 0");
}

static void test_bad_headers(void) {
  uint8_t buf[HUTCH_FRAME_HEADER];
  struct hutch_frame f;

  hutch_frame_header(buf, HUTCH_F_STDOUT, 0, 1, HUTCH_FRAME_MAX + 1);
  is_int(hutch_frame_parse(buf, sizeof buf, &f), -1,
         "length HUTCH_FRAME_MAX+1: -1 from the header alone");
  hutch_frame_header(buf, HUTCH_F_STDOUT, 0, 1, UINT32_MAX);
  is_int(hutch_frame_parse(buf, sizeof buf, &f), -1, "length 0xffffffff: -1");

  hutch_frame_header(buf, 0, 0, 1, 0);
  is_int(hutch_frame_parse(buf, sizeof buf, &f), -1, "type 0: -1");
  hutch_frame_header(buf, HUTCH_F_TYPE_MAX + 1, 0, 1, 0);
  is_int(hutch_frame_parse(buf, sizeof buf, &f), -1, "type HUTCH_F_TYPE_MAX+1: -1");
  hutch_frame_header(buf, 255, 0, 1, 0);
  is_int(hutch_frame_parse(buf, sizeof buf, &f), -1, "type 255: -1");

  hutch_frame_header(buf, HUTCH_F_STDOUT, 0, 1, 0);
  buf[6] = 1;
  is_int(hutch_frame_parse(buf, sizeof buf, &f), -1, "reserved byte 6 nonzero: -1");
  hutch_frame_header(buf, HUTCH_F_STDOUT, 0, 1, 0);
  buf[7] = 0x80;
  is_int(hutch_frame_parse(buf, sizeof buf, &f), -1, "reserved byte 7 nonzero: -1");

  hutch_frame_header(buf, HUTCH_F_STDOUT, 4, 1, 0);
  is_int(hutch_frame_parse(buf, sizeof buf, &f), -1, "unknown flag 0x04: -1");
  hutch_frame_header(buf, HUTCH_F_STDOUT, 0x80 | HUTCH_FL_EOF, 1, 0);
  is_int(hutch_frame_parse(buf, sizeof buf, &f), -1, "known flag plus unknown 0x80: -1");
}

static void test_empty_and_back_to_back(void) {
  uint8_t buf[64];
  struct hutch_frame f;
  memset(&f, 0xaa, sizeof f);
  size_t n = make(buf, HUTCH_F_CLOSE, 0, 9, "", 0);
  is_int(hutch_frame_parse(buf, n, &f), HUTCH_FRAME_HEADER, "zero-length payload: header size");
  ok(f.type == HUTCH_F_CLOSE && f.len == 0 && f.stream == 9, "zero-length payload: fields");

  size_t n1 = make(buf, HUTCH_F_STDOUT, 0, 1, "abc", 3);
  size_t n2 = make(buf + n1, HUTCH_F_STDERR, HUTCH_FL_END, 2, "defgh", 5);
  long r = hutch_frame_parse(buf, n1 + n2, &f);
  is_int(r, (long)n1, "back to back: the first parse takes only the first frame");
  ok(f.type == HUTCH_F_STDOUT && f.len == 3 && memcmp(f.payload, "abc", 3) == 0,
     "back to back: first frame's fields");
  r = hutch_frame_parse(buf + n1, n2, &f);
  is_int(r, (long)n2, "back to back: the second frame follows");
  ok(f.type == HUTCH_F_STDERR && f.flags == HUTCH_FL_END && f.stream == 2 && f.len == 5 &&
         memcmp(f.payload, "defgh", 5) == 0,
     "back to back: second frame's fields");
  is_int(hutch_frame_parse(buf + n1, n2 - 1, &f), 0, "second frame cut by one byte: 0");
}

static void test_type_names(void) {
  static const char *const names[] = {"?",       "HELLO", "OPEN",  "STDIN",  "STDOUT", "STDERR",
                                      "CONTROL", "EVENT", "ERROR", "WINDOW", "CLOSE",  "?"};
  bool all = true;
  for (unsigned t = 0; t < sizeof names / sizeof *names; t++)
    all &= strcmp(hutch_frame_type_name((uint8_t)t), names[t]) == 0;
  ok(all, "hutch_frame_type_name for 0..%d", HUTCH_F_TYPE_MAX + 1);
  is_str(hutch_frame_type_name(255), "?", "hutch_frame_type_name(255)");
}

int main(void) {
  test_header_layout();
  test_round_trip();
  test_partial();
  test_bad_headers();
  test_empty_and_back_to_back();
  test_type_names();
  return done_testing();
}
