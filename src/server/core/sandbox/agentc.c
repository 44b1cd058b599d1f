/* The server's end of an agent connection (agentc.h). */

#include "core/sandbox/agentc.h"

#include <poll.h>
#include <stdlib.h>
#include <string.h>

#include "msg.h"
#include "util.h"

static void update_poll(struct agentc *ac);

static void stream_unlink(struct agentc *ac, struct astream *s) {
  for (struct astream **p = &ac->streams; *p; p = &(*p)->next)
    if (*p == s) {
      *p = s->next;
      break;
    }
  free(s->pending);
  free(s);
}

static struct astream *find(struct agentc *ac, uint32_t id) {
  for (struct astream *s = ac->streams; s; s = s->next)
    if (s->id == id)
      return s;
  return NULL;
}

/* Every stream hears that the connection is gone, once. */
static void fail_all(struct agentc *ac) {
  while (ac->streams) {
    struct astream *s = ac->streams;
    ac->streams = s->next;
    s->next = NULL;
    if (s->cb)
      s->cb(s, NULL);
    free(s->pending);
    free(s);
  }
}

static void go_dead(struct agentc *ac) {
  if (ac->dead)
    return;
  ac->dead = true;
  ac->events = 0;
  uv_poll_stop(&ac->poll);
  fail_all(ac);
  if (ac->on_dead)
    ac->on_dead(ac);
}

/* Up to the window's bytes of p[0..n) as STDIN frames; how many went. */
static size_t send_stdin(struct astream *s, const uint8_t *p, size_t n) {
  if (n > s->window)
    n = s->window;
  for (size_t off = 0, chunk; off < n; off += chunk) {
    chunk = n - off < s->chunk ? n - off : s->chunk;
    hutch_conn_send_now(&s->ac->conn, HUTCH_F_STDIN, 0, s->id, p + off, chunk);
  }
  s->window -= (uint32_t)n;
  return n;
}

static void pump_stdin(struct astream *s) {
  if (s->npending == 0 && !s->pending_eof)
    return;
  size_t n = send_stdin(s, s->pending, s->npending);
  if (n)
    memmove(s->pending, s->pending + n, s->npending - n);
  s->npending -= n;
  if (s->npending == 0 && s->pending_eof) {
    s->pending_eof = false;
    hutch_conn_send(&s->ac->conn, HUTCH_F_STDIN, HUTCH_FL_EOF, s->id, NULL, 0);
  }
}

/* Stream 0: what the agent says of the whole sandbox. */
static void sandbox_frame(struct agentc *ac, const struct hutch_frame *f) {
  if (!ac->on_escapes || (f->type != HUTCH_F_HELLO && f->type != HUTCH_F_EVENT))
    return;
  json_t *j = json_loadb((const char *)f->payload, f->len, 0, NULL);
  const char *event = json_string_value(json_object_get(j, "event"));
  if (f->type == HUTCH_F_HELLO)
    ac->on_escapes(ac, json_object_get(j, "escape_attempts"));
  else if (event && strcmp(event, "escape_attempts") == 0)
    ac->on_escapes(ac, j);
  json_decref(j);
}

static void handle(struct agentc *ac, const struct hutch_frame *f) {
  if (f->stream == 0) {
    sandbox_frame(ac, f);
    return;
  }

  struct astream *s = find(ac, f->stream);
  if (!s)
    return; /* It is a stream we abandoned. */

  if (f->type == HUTCH_F_WINDOW) {
    uint32_t more = hutch_conn_window_increment(f);
    s->window = s->window + more < s->window ? UINT32_MAX : s->window + more;
    bool held = s->npending > 0;
    pump_stdin(s);
    if (held && s->npending == 0 && s->stdin_drained)
      s->stdin_drained(s);
    return;
  }

  /* The agent's output stays within what was granted, or the connection
   * ends: whatever becomes of the agent, the server holds no more of a
   * stream's output than its window, however slowly its client reads. */
  if (f->type == HUTCH_F_STDOUT || f->type == HUTCH_F_STDERR) {
    if (f->len > s->credit) {
      go_dead(ac);
      return;
    }
    s->credit -= f->len;
  }

  uint32_t id = s->id;
  s->cb(s, f);

  /* The callback may have abandoned the stream, or the connection. */
  if ((f->flags & HUTCH_FL_END) && !ac->dead && (s = find(ac, id)))
    stream_unlink(ac, s);
}

static void on_poll(uv_poll_t *p, int status, int events) {
  struct agentc *ac = p->data;
  struct hutch_err err = {0};

  if (status < 0) {
    go_dead(ac);
    return;
  }

  if (events & UV_WRITABLE && hutch_conn_flush(&ac->conn, &err) < 0) {
    go_dead(ac);
    return;
  }

  if (events & UV_READABLE) {
    if (hutch_conn_fill(&ac->conn, &err) < 0) {
      go_dead(ac);
      return;
    }

    struct hutch_frame f;
    int r = 0;
    while (!ac->dead && (r = hutch_conn_next(&ac->conn, &f, &err)) > 0)
      handle(ac, &f);
    if (ac->dead)
      return;

    if (r < 0 || ac->conn.eof) {
      go_dead(ac);
      return;
    }
  }

  update_poll(ac);

  /* Thousands of sandboxes sit idle: with no stream open, a connection
   * keeps no buffer between its frames. */
  if (!ac->streams)
    hutch_conn_trim(&ac->conn);
}

/* Watch for reading always, for writing while frames wait to go out. */
static void update_poll(struct agentc *ac) {
  if (ac->dead)
    return;
  struct hutch_err err = {0};

  /* A failed flush is not acted on here, inside whoever sent: the frames
   * stay queued, and the poll callback finds the error and ends it all. */
  if (hutch_conn_queued(&ac->conn))
    hutch_conn_flush(&ac->conn, &err);

  int events = UV_READABLE | (hutch_conn_queued(&ac->conn) ? UV_WRITABLE : 0);
  /* libuv's restart of a poll is two epoll_ctl calls, and most turns
   * change nothing (several per exec). */
  if (events != ac->events) {
    ac->events = events;
    uv_poll_start(&ac->poll, events, on_poll);
  }
}

int agentc_init(struct agentc *ac, uv_loop_t *loop, int fd) {
  memset(ac, 0, sizeof *ac);
  hutch_conn_init(&ac->conn, fd);
  ac->next_id = 1;
  if (uv_poll_init(loop, &ac->poll, fd) < 0)
    return -1;
  ac->poll.data = ac;
  ac->events = UV_READABLE;
  uv_poll_start(&ac->poll, UV_READABLE, on_poll);
  return 0;
}

static void poll_closed(uv_handle_t *h) {
  struct agentc *ac = h->data;
  hutch_conn_free(&ac->conn); /* the fd is closed after libuv let go of it */
  ac->on_closed(ac);
}

void agentc_close(struct agentc *ac, void (*on_closed)(struct agentc *ac)) {
  ac->on_dead = NULL;
  go_dead(ac);
  ac->on_closed = on_closed;
  uv_close((uv_handle_t *)&ac->poll, poll_closed);
}

struct astream *agentc_attach(struct agentc *ac, uint32_t id, astream_cb cb, void *ctx) {
  struct astream *s = xcalloc(1, sizeof *s);
  s->ac = ac;
  s->cb = cb;
  s->ctx = ctx;
  s->window = HUTCH_WINDOW_INITIAL;
  s->chunk = HUTCH_DATA_CHUNK;
  s->credit = HUTCH_WINDOW_INITIAL;
  s->id = id;
  s->next = ac->streams;
  ac->streams = s;
  if (id >= ac->next_id)
    ac->next_id = id + 1;
  return s;
}

int agentc_adopt(struct agentc *ac, uv_loop_t *loop, int fd, int timeout_ms,
                 void (*on_jobs)(struct agentc *ac, json_t *jobs, void *arg), void *arg) {
  if (agentc_init(ac, loop, fd) < 0)
    return -1;
  ac->events = 0;
  uv_poll_stop(&ac->poll);

  /* The agent's HELLO is awaited here, blocking, until the deadline. */
  struct hutch_err err = {0};
  struct hutch_frame f;
  uint64_t deadline = now_ns() + (uint64_t)timeout_ms * 1000000;
  int r;
  while ((r = hutch_conn_next(&ac->conn, &f, &err)) == 0) {
    struct pollfd p = {.fd = fd, .events = POLLIN};
    uint64_t now = now_ns();
    if (now >= deadline)
      return -1;
    if (poll(&p, 1, (int)((deadline - now) / 1000000) + 1) < 0)
      return -1;
    if (hutch_conn_fill(&ac->conn, &err) < 0 || ac->conn.eof)
      return -1;
  }
  if (r < 0 || f.type != HUTCH_F_HELLO)
    return -1;

  json_t *hello = json_loadb((const char *)f.payload, f.len, 0, NULL);
  json_t *jobs = json_object_get(hello, "jobs");
  on_jobs(ac, json_is_array(jobs) ? jobs : NULL, arg);
  json_decref(hello);
  sandbox_frame(ac, &f);

  /* What came after the HELLO is output kept while no one was connected. */
  while (!ac->dead && (r = hutch_conn_next(&ac->conn, &f, &err)) > 0)
    handle(ac, &f);
  if (r < 0)
    return -1;

  update_poll(ac);
  return 0;
}

struct astream *agentc_open(struct agentc *ac, json_t *req, astream_cb cb, void *ctx) {
  if (ac->dead)
    return NULL;
  uint32_t id;
  do /* ids wrap after 4 billion streams; skip 0 and those in use */
    id = ac->next_id++;
  while (id == 0 || find(ac, id));
  struct astream *s = agentc_attach(ac, id, cb, ctx);
  size_t len = 0;
  char *p = hutch_json_dump(req, &len);
  hutch_conn_send(&ac->conn, HUTCH_F_OPEN, 0, s->id, p, len);
  free(p);
  update_poll(ac);
  return s;
}

static void send_frame(struct astream *s, uint8_t type, uint8_t flags, const void *p, size_t n) {
  if (s->ac->dead)
    return;
  hutch_conn_send(&s->ac->conn, type, flags, s->id, p, n);
  update_poll(s->ac);
}

void agentc_send_json(struct astream *s, uint8_t type, json_t *j) {
  size_t len = 0;
  char *p = hutch_json_dump(j, &len);
  json_decref(j);
  send_frame(s, type, 0, p, len);
  free(p);
}

void agentc_stdin(struct astream *s, const void *p, size_t n, bool eof) {
  if (s->ac->dead)
    return;
  /* Nothing held before these bytes: what the window allows goes at once,
   * only the rest is kept. */
  size_t sent = s->npending ? 0 : send_stdin(s, p, n);
  if (n > sent) {
    s->pending = xgrow(s->pending, &s->pcap, s->npending + n - sent);
    memcpy(s->pending + s->npending, (const uint8_t *)p + sent, n - sent);
    s->npending += n - sent;
  }
  s->pending_eof |= eof;
  pump_stdin(s);
  update_poll(s->ac);
}

size_t agentc_stdin_pending(const struct astream *s) {
  return s->npending;
}

void agentc_window(struct astream *s, uint32_t n) {
  if (s->ac->dead || n == 0)
    return;
  s->credit += n;
  hutch_conn_send_window(&s->ac->conn, s->id, n);
  update_poll(s->ac);
}

void agentc_abandon(struct astream *s) {
  struct agentc *ac = s->ac;
  if (!ac->dead) {
    hutch_conn_send(&ac->conn, HUTCH_F_CLOSE, 0, s->id, NULL, 0);
    update_poll(ac);
  }
  /* Its remaining frames, END included, find no stream and are dropped. */
  stream_unlink(ac, s);
}
