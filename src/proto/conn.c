/* A framed connection (conn.h): the receive buffer that frames are parsed
 * out of as they complete, and the send queue, written as far as the
 * socket takes it. Both ends of the agent protocol use it. */
#include "conn.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "util.h"

static void buf_reserve(struct hutch_buf *b, size_t more) {
  if (b->cap - b->end >= more)
    return;
  if (b->start > 0) { /* compact first */
    memmove(b->data, b->data + b->start, b->end - b->start);
    b->end -= b->start;
    b->start = 0;
    if (b->cap - b->end >= more)
      return;
  }
  size_t cap = b->cap ? b->cap : 4096;
  while (cap - b->end < more)
    cap *= 2;
  b->data = xrealloc(b->data, cap);
  b->cap = cap;
}

static void buf_consumed(struct hutch_buf *b, size_t n) {
  b->start += n;
  if (b->start == b->end)
    b->start = b->end = 0;
}

void hutch_conn_init(struct hutch_conn *c, int fd) {
  memset(c, 0, sizeof *c);
  c->fd = fd;
}

void hutch_conn_free(struct hutch_conn *c) {
  free(c->in.data);
  free(c->out.data);
  if (c->fd >= 0)
    close(c->fd);
  memset(c, 0, sizeof *c);
  c->fd = -1;
}

static void buf_trim(struct hutch_buf *b) {
  if (b->start != b->end)
    return;
  free(b->data);
  *b = (struct hutch_buf){0};
}

void hutch_conn_trim(struct hutch_conn *c) {
  buf_trim(&c->in);
  buf_trim(&c->out);
}

int hutch_conn_fill(struct hutch_conn *c, struct hutch_err *err) {
  for (;;) {
    buf_reserve(&c->in, 64 << 10);
    ssize_t r = read(c->fd, c->in.data + c->in.end, c->in.cap - c->in.end);
    if (r > 0) {
      c->in.end += (size_t)r;
      if (c->in.end - c->in.start >= HUTCH_FRAME_HEADER + HUTCH_FRAME_MAX)
        return 0; /* a whole frame at most; parse before reading on */
      continue;
    }
    if (r == 0) {
      c->eof = true;
      return 0;
    }

    if (errno == EINTR)
      continue;
    if (errno == EAGAIN)
      return 0;
    if (errno == ECONNRESET) {
      c->eof = true;
      return 0;
    }
    return hutch_err_set(err, errno, "read from agent connection");
  }
}

int hutch_conn_next(struct hutch_conn *c, struct hutch_frame *f, struct hutch_err *err) {
  long n = hutch_frame_parse(c->in.data + c->in.start, c->in.end - c->in.start, f);
  if (n < 0)
    return hutch_err_set(err, EPROTO, "malformed frame on agent connection");
  if (n == 0)
    return 0;
  buf_consumed(&c->in, (size_t)n);
  /* The payload stays valid: consuming only moves the start offset, and the
   * buffer is compacted or grown only by the next fill. */
  return 1;
}

uint8_t *hutch_conn_room(struct hutch_conn *c, size_t len) {
  buf_reserve(&c->out, HUTCH_FRAME_HEADER + len);
  return c->out.data + c->out.end + HUTCH_FRAME_HEADER;
}

void hutch_conn_commit(struct hutch_conn *c, uint8_t type, uint8_t flags, uint32_t stream,
                       size_t len) {
  hutch_frame_header(c->out.data + c->out.end, type, flags, stream, (uint32_t)len);
  c->out.end += HUTCH_FRAME_HEADER + len;
}

void hutch_conn_send(struct hutch_conn *c, uint8_t type, uint8_t flags, uint32_t stream,
                     const void *payload, size_t len) {
  uint8_t *room = hutch_conn_room(c, len);
  if (len)
    memcpy(room, payload, len);
  hutch_conn_commit(c, type, flags, stream, len);
}

void hutch_conn_send_now(struct hutch_conn *c, uint8_t type, uint8_t flags, uint32_t stream,
                         const void *payload, size_t len) {
  uint8_t head[HUTCH_FRAME_HEADER];
  hutch_frame_header(head, type, flags, stream, (uint32_t)len);
  struct iovec iov[2] = {{head, sizeof head}, {(void *)payload, len}};
  struct msghdr m = {.msg_iov = iov, .msg_iovlen = 2};

  ssize_t w = c->out.end == c->out.start && c->fd >= 0
                  ? sendmsg(c->fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT)
                  : -1;
  size_t done = w > 0 ? (size_t)w : 0; /* a failure: the next flush meets it again */
  if (done == 0) {
    hutch_conn_send(c, type, flags, stream, payload, len);
    return;
  }

  /* The rest of the frame, queued as bytes (its header may be cut too). */
  size_t hrest = done < sizeof head ? sizeof head - done : 0;
  size_t pdone = done > sizeof head ? done - sizeof head : 0;
  if (hrest + len - pdone == 0)
    return; /* all of it went */
  buf_reserve(&c->out, hrest + len - pdone);
  memcpy(c->out.data + c->out.end, head + sizeof head - hrest, hrest);
  memcpy(c->out.data + c->out.end + hrest, (const uint8_t *)payload + pdone, len - pdone);
  c->out.end += hrest + len - pdone;
}

void hutch_conn_send_window(struct hutch_conn *c, uint32_t stream, uint32_t increment) {
  uint8_t p[4] = {(uint8_t)(increment >> 24), (uint8_t)(increment >> 16), (uint8_t)(increment >> 8),
                  (uint8_t)increment};
  hutch_conn_send(c, HUTCH_F_WINDOW, 0, stream, p, sizeof p);
}

uint32_t hutch_conn_window_increment(const struct hutch_frame *f) {
  if (f->len != 4)
    return 0;
  const uint8_t *p = f->payload;
  return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

int hutch_conn_flush(struct hutch_conn *c, struct hutch_err *err) {
  while (c->out.end > c->out.start) {
    ssize_t w = send(c->fd, c->out.data + c->out.start, c->out.end - c->out.start,
                     MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w < 0) {
      if (errno == EINTR)
        continue;
      if (errno == EAGAIN)
        return 1;
      return hutch_err_set(err, errno, "write to agent connection");
    }
    buf_consumed(&c->out, (size_t)w);
  }
  return 0;
}

size_t hutch_conn_queued(const struct hutch_conn *c) {
  return c->out.end - c->out.start;
}
