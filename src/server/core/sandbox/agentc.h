/* The server's end of one sandbox's agent connection (docs/protocol.md):
 * frames in and out on the event loop, and the streams open on it, each
 * with the callback its frames go to. */
#ifndef HUTCH_CORE_SANDBOX_AGENTC_H
#define HUTCH_CORE_SANDBOX_AGENTC_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "conn.h"

struct agentc;
struct astream;

/* A frame for a stream. f is valid only during the call. After a frame
 * with HUTCH_FL_END, or with f NULL (the connection is gone), the stream
 * is freed once the callback returns. */
typedef void (*astream_cb)(struct astream *s, const struct hutch_frame *f);

struct astream {
  struct astream *next;
  struct agentc *ac;
  uint32_t id;
  astream_cb cb;
  void *ctx;
  uint32_t window;  /* STDIN bytes the agent accepts now */
  uint64_t credit;  /* STDOUT/STDERR bytes the agent may send now (agentc_window) */
  uint8_t *pending; /* STDIN bytes waiting for window */
  size_t npending, pcap;
  uint32_t chunk;   /* largest STDIN payload sent */
  bool pending_eof; /* send EOF once pending is out */
  /* Called when pending STDIN has all gone out (after being held back). */
  void (*stdin_drained)(struct astream *s);
};

struct agentc {
  uv_poll_t poll;
  struct hutch_conn conn;
  struct astream *streams;
  uint32_t next_id;
  int events; /* what poll watches for (UV_READABLE, UV_WRITABLE); 0 stopped */
  bool dead;
  /* The connection failed or the agent is gone. */
  void (*on_dead)(struct agentc *ac);
  void (*on_closed)(struct agentc *ac); /* agentc_close is done */
  /* The agent's escape-attempt counts, from its HELLO and from EVENTs on
   * stream 0 ({"total", "syscalls"}, docs/protocol.md); optional. */
  void (*on_escapes)(struct agentc *ac, json_t *counts);
};

int agentc_init(struct agentc *ac, uv_loop_t *loop, int fd);
/* The same for an agent taken over from a server that went away: wait (up
 * to timeout_ms) for its HELLO and hand its "jobs" (execs still going, see
 * docs/protocol.md) to on_jobs, which takes each up with agentc_attach,
 * before any other frame is read. -1 when no HELLO came. */
int agentc_adopt(struct agentc *ac, uv_loop_t *loop, int fd, int timeout_ms,
                 void (*on_jobs)(struct agentc *ac, json_t *jobs, void *arg), void *arg);
/* A stream the agent already has open (an exec started before a restart). */
struct astream *agentc_attach(struct agentc *ac, uint32_t id, astream_cb cb, void *ctx);
/* Close the connection; every stream hears f NULL, then on_closed is
 * called from the loop: ac's memory may be freed from then on. */
void agentc_close(struct agentc *ac, void (*on_closed)(struct agentc *ac));

/* Open a stream with request req (a reference is taken). NULL when the
 * connection is gone. */
struct astream *agentc_open(struct agentc *ac, json_t *req, astream_cb cb, void *ctx);
/* A JSON payload (CONTROL); takes j's reference. */
void agentc_send_json(struct astream *s, uint8_t type, json_t *j);
/* Send input on s (exec stdin, file content), as the agent's window
 * allows; the rest waits for WINDOW frames. eof ends the input. */
void agentc_stdin(struct astream *s, const void *p, size_t n, bool eof);
/* STDIN bytes still waiting for window on s. */
size_t agentc_stdin_pending(const struct astream *s);
/* Give the agent n more bytes of window on s (we consumed them). */
void agentc_window(struct astream *s, uint32_t n);
/* Abandon s: the agent kills its processes. The callback is not called
 * again; s is freed. */
void agentc_abandon(struct astream *s);

#endif
