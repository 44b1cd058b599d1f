/* A framed connection over a non-blocking stream socket: a receive buffer
 * frames are parsed out of, and a send queue flushed when the socket is
 * writable. Used by the agent and by the host-side client alike. */
#ifndef HUTCH_CONN_H
#define HUTCH_CONN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "frame.h"

struct hutch_buf {
  uint8_t *data;
  size_t start, end, cap;
};

struct hutch_conn {
  int fd;
  struct hutch_buf in, out;
  bool eof; /* the peer closed its side */
};

void hutch_conn_init(struct hutch_conn *c, int fd);
void hutch_conn_free(struct hutch_conn *c);
/* Give back the memory of buffers that hold nothing (an idle connection's:
 * a read makes one of 64-128 KiB); the next fill or send makes them
 * again. Frames from hutch_conn_next are invalid after it. */
void hutch_conn_trim(struct hutch_conn *c);

/* Read what the socket has. 0: read something or nothing available;
 * -1: error (err set). Sets c->eof when the peer closed. */
int hutch_conn_fill(struct hutch_conn *c, struct hutch_err *err);
/* Next complete frame in the receive buffer: 1 and *f filled (valid until the
 * next fill), 0 when none is complete, -1 on a malformed frame. */
int hutch_conn_next(struct hutch_conn *c, struct hutch_frame *f, struct hutch_err *err);

void hutch_conn_send(struct hutch_conn *c, uint8_t type, uint8_t flags, uint32_t stream,
                     const void *payload, size_t len);
/* The same, sent at once as far as the socket takes it when nothing is
 * queued before it (no copy of the payload); the rest is queued. */
void hutch_conn_send_now(struct hutch_conn *c, uint8_t type, uint8_t flags, uint32_t stream,
                         const void *payload, size_t len);
/* Room for a frame's payload of up to len bytes in the send buffer, to be
 * filled in place (read into) and queued by hutch_conn_commit with the
 * length it got; valid until the next send. */
uint8_t *hutch_conn_room(struct hutch_conn *c, size_t len);
void hutch_conn_commit(struct hutch_conn *c, uint8_t type, uint8_t flags, uint32_t stream,
                       size_t len);
void hutch_conn_send_window(struct hutch_conn *c, uint32_t stream, uint32_t increment);
/* Write queued bytes. 0: all sent; 1: some remain (wait for POLLOUT); -1 error. */
int hutch_conn_flush(struct hutch_conn *c, struct hutch_err *err);
size_t hutch_conn_queued(const struct hutch_conn *c);

/* The increment a WINDOW frame carries; 0 when the frame is malformed. */
uint32_t hutch_conn_window_increment(const struct hutch_frame *f);

#endif
