/* The agent wire protocol: frames on one byte stream (docs/protocol.md).
 *
 *   u32 length | u8 type | u8 flags | u16 reserved (0) | u32 stream | payload
 *
 * All integers big-endian. Control payloads are JSON, data payloads raw. */
#ifndef HUTCH_FRAME_H
#define HUTCH_FRAME_H

#include <stddef.h>
#include <stdint.h>

#define HUTCH_PROTOCOL_VERSION 1
#define HUTCH_FRAME_HEADER 12
#define HUTCH_FRAME_MAX (1u << 20)        /* largest payload accepted */
#define HUTCH_DATA_CHUNK (64u << 10)      /* largest data payload sent */
#define HUTCH_WINDOW_INITIAL (256u << 10) /* per stream, per direction */
/* A file's read or write: its data payloads and its window, which the
 * receiver of the data grants (the rest beyond the initial one) at open. */
#define HUTCH_FILE_CHUNK (256u << 10)
#define HUTCH_FILE_WINDOW (1u << 20)

enum hutch_frame_type {
  HUTCH_F_HELLO = 1,   /* agent -> client, stream 0: JSON */
  HUTCH_F_OPEN = 2,    /* client -> agent: JSON request, opens the stream */
  HUTCH_F_STDIN = 3,   /* client -> agent: raw input (exec stdin, file content) */
  HUTCH_F_STDOUT = 4,  /* agent -> client: raw output */
  HUTCH_F_STDERR = 5,  /* agent -> client: raw output */
  HUTCH_F_CONTROL = 6, /* client -> agent: JSON (signal, resize, kill) */
  HUTCH_F_EVENT = 7,   /* agent -> client: JSON (started, exit, done, entries) */
  HUTCH_F_ERROR = 8,   /* agent -> client: JSON {code, message} */
  HUTCH_F_WINDOW = 9,  /* both ways: u32 more bytes the sender may send */
  HUTCH_F_CLOSE = 10,  /* client -> agent: abandon the stream */
};
#define HUTCH_F_TYPE_MAX HUTCH_F_CLOSE

enum hutch_frame_flags {
  HUTCH_FL_EOF = 1, /* STDIN: no more input */
  HUTCH_FL_END = 2, /* last frame the agent sends on this stream */
};

struct hutch_frame {
  uint8_t type;
  uint8_t flags;
  uint32_t stream;
  uint32_t len;
  const uint8_t *payload; /* points into the receive buffer */
};

void hutch_frame_header(uint8_t out[HUTCH_FRAME_HEADER], uint8_t type, uint8_t flags,
                        uint32_t stream, uint32_t len);

/* Parse one frame from buf. Returns the bytes it occupies, 0 when buf holds
 * only part of a frame, -1 when the bytes cannot be a frame. */
long hutch_frame_parse(const uint8_t *buf, size_t n, struct hutch_frame *f);

const char *hutch_frame_type_name(uint8_t type);

#endif
