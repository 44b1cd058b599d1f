/* Frame headers of the agent protocol (frame.h), written and parsed: the
 * big-endian fields, and what makes a header malformed. */
#include "frame.h"

static void put32(uint8_t *p, uint32_t v) {
  p[0] = (uint8_t)(v >> 24);
  p[1] = (uint8_t)(v >> 16);
  p[2] = (uint8_t)(v >> 8);
  p[3] = (uint8_t)v;
}

static uint32_t get32(const uint8_t *p) {
  return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

void hutch_frame_header(uint8_t out[HUTCH_FRAME_HEADER], uint8_t type, uint8_t flags,
                        uint32_t stream, uint32_t len) {
  put32(out, len);
  out[4] = type;
  out[5] = flags;
  out[6] = 0;
  out[7] = 0;
  put32(out + 8, stream);
}

long hutch_frame_parse(const uint8_t *buf, size_t n, struct hutch_frame *f) {
  if (n < HUTCH_FRAME_HEADER)
    return 0;
  uint32_t len = get32(buf);
  uint8_t type = buf[4], flags = buf[5];
  if (len > HUTCH_FRAME_MAX || type == 0 || type > HUTCH_F_TYPE_MAX || buf[6] || buf[7] ||
      (flags & ~(HUTCH_FL_EOF | HUTCH_FL_END)))
    return -1;
  if (n - HUTCH_FRAME_HEADER < len)
    return 0;
  f->type = type;
  f->flags = flags;
  f->len = len;
  f->stream = get32(buf + 8);
  f->payload = buf + HUTCH_FRAME_HEADER;
  return (long)(HUTCH_FRAME_HEADER + len);
}

const char *hutch_frame_type_name(uint8_t type) {
  static const char *const names[] = {
      [HUTCH_F_HELLO] = "HELLO",   [HUTCH_F_OPEN] = "OPEN",     [HUTCH_F_STDIN] = "STDIN",
      [HUTCH_F_STDOUT] = "STDOUT", [HUTCH_F_STDERR] = "STDERR", [HUTCH_F_CONTROL] = "CONTROL",
      [HUTCH_F_EVENT] = "EVENT",   [HUTCH_F_ERROR] = "ERROR",   [HUTCH_F_WINDOW] = "WINDOW",
      [HUTCH_F_CLOSE] = "CLOSE",
  };
  return type >= 1 && type <= HUTCH_F_TYPE_MAX ? names[type] : "?";
}
