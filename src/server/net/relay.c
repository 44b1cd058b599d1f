/* Relays between two sockets (relay.h): connecting the second side,
 * replying instead of relaying, and the splicing both ways. */

#include "net/relay.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "util.h"

#define RELAY_PIPE (1u << 20) /* a pipe's size: what a direction holds in flight */
#define RELAY_ROUNDS 16       /* splices of one wake-up, not to starve the loop */

struct relay_attempt {
  uv_tcp_t tcp;
  uv_connect_t req;
  struct relay *r; /* NULL once the relay has closed */
  relay_connect_fn cb;
};

static void closed(uv_handle_t *h) {
  struct relay *r = h->data;
  if (--r->open == 0 && r->closing) {
    for (int i = 0; i < 2; i++) {
      if (r->fd[i] >= 0)
        close(r->fd[i]);
      for (int k = 0; k < 2; k++)
        if (r->pipe[i][k] >= 0)
          close(r->pipe[i][k]);
      free(r->pre[i]);
    }
    r->done(r);
  }
}

static void attempt_closed(uv_handle_t *h) {
  free(h->data);
}

static void attempt_end(struct relay *r) {
  if (!r->attempt)
    return;
  r->attempt->r = NULL;
  uv_close((uv_handle_t *)&r->attempt->tcp, attempt_closed);
  r->attempt = NULL;
}

void relay_close(struct relay *r) {
  if (r->closing)
    return;
  r->closing = true;
  attempt_end(r);
  r->open++; /* held while closing them all, so that done comes last */
  for (int i = 0; i < 2; i++) {
    uv_handle_t *h = r->started ? (uv_handle_t *)&r->poll[i] : (uv_handle_t *)&r->side[i];
    if ((!r->started || r->polled[i]) && !uv_is_closing(h))
      uv_close(h, closed);
    else if (r->started && !r->polled[i])
      r->open--; /* never made: nothing to close */
  }
  closed((uv_handle_t *)&r->side[0]);
}

void relay_init(struct relay *r, uv_loop_t *loop, relay_done_fn done) {
  memset(r, 0, sizeof *r);
  r->done = done;
  for (int i = 0; i < 2; i++) {
    uv_tcp_init(loop, &r->side[i]);
    r->side[i].data = r;
    r->fd[i] = r->pipe[i][0] = r->pipe[i][1] = -1;
    r->limit[i] = UINT64_MAX;
  }
  r->open = 2;
}

void relay_set_join(struct relay_set *s, struct relay *r) {
  r->set = s;
  r->prev = NULL;
  r->next = s->first;
  if (s->first)
    s->first->prev = r;
  s->first = r;
  s->n++;
  for (int i = 0; i < 2; i++)
    if (s->tally[i])
      (*s->tally[i])++;
}

void relay_set_leave(struct relay *r) {
  struct relay_set *s = r->set;
  if (!s)
    return;
  if (r->prev)
    r->prev->next = r->next;
  else
    s->first = r->next;
  if (r->next)
    r->next->prev = r->prev;
  s->n--;
  for (int i = 0; i < 2; i++)
    if (s->tally[i])
      (*s->tally[i])--;
  r->set = NULL;
}

/* ---- connecting side 1 ---- */

static void on_connected(uv_connect_t *req, int status) {
  struct relay_attempt *a = req->data;
  struct relay *r = a->r;
  if (!r)
    return;
  relay_connect_fn cb = a->cb;
  /* The connected socket is side 1's from now on. */
  uv_os_fd_t fd;
  int moved = -1;
  if (status == 0 && uv_fileno((uv_handle_t *)&a->tcp, &fd) == 0)
    moved = fcntl(fd, F_DUPFD_CLOEXEC, 3);
  attempt_end(r);
  if (status == 0 && moved < 0)
    status = UV_EIO;
  r->fd[1] = moved;
  cb(r, status);
}

void relay_connect(struct relay *r, int fd, const struct sockaddr *sa, relay_connect_fn cb) {
  struct relay_attempt *a = xcalloc(1, sizeof *a);
  a->r = r;
  a->cb = cb;
  a->req.data = a;
  uv_tcp_init(r->side[1].loop, &a->tcp);
  a->tcp.data = a;
  r->attempt = a;
  int rc = fd >= 0 ? uv_tcp_open(&a->tcp, fd) : 0;
  if (rc < 0)
    close(fd);
  if (rc == 0)
    rc = uv_tcp_connect(&a->req, &a->tcp, sa, on_connected);
  if (rc < 0) {
    attempt_end(r);
    cb(r, rc);
  }
}

/* ---- a reply instead ---- */

struct reply {
  uv_write_t w;
  uv_shutdown_t s;
  struct relay *r;
  char data[];
};

static void reply_shut(uv_shutdown_t *s, int status) {
  (void)status;
  struct reply *q = s->data;
  relay_close(q->r);
  free(q);
}

static void reply_written(uv_write_t *w, int status) {
  struct reply *q = (struct reply *)w;
  int i = (uv_tcp_t *)w->handle == &q->r->side[0] ? 0 : 1;
  q->s.data = q;
  if (status < 0 || q->r->closing ||
      uv_shutdown(&q->s, (uv_stream_t *)&q->r->side[i], reply_shut) < 0) {
    relay_close(q->r);
    free(q);
  }
}

void relay_reply(struct relay *r, int i, const void *data, size_t n) {
  struct reply *q = xmalloc(sizeof *q + n);
  q->r = r;
  memcpy(q->data, data, n);
  uv_buf_t b = uv_buf_init(q->data, (unsigned)n);
  uv_read_stop((uv_stream_t *)&r->side[i]);
  if (r->closing || uv_write(&q->w, (uv_stream_t *)&r->side[i], &b, 1, reply_written) < 0) {
    free(q);
    relay_close(r);
  }
}

/* ---- relaying ---- */

void relay_adopt(struct relay *r, int i, int fd) {
  r->fd[i] = fd;
}

void relay_limit(struct relay *r, int i, uint64_t n) {
  r->limit[i] = n;
}

void relay_first(struct relay *r, int i, bool (*fn)(struct relay *r, const char *data, size_t n)) {
  r->first_fn = fn;
  r->first_side = i;
  r->first_got = 0;
}

void relay_send(struct relay *r, int i, const void *data, size_t n) {
  r->pre[i] = xrealloc(r->pre[i], r->npre[i] + n + 1);
  memcpy(r->pre[i] + r->npre[i], data, n);
  r->npre[i] += n;
}

static void on_poll(uv_poll_t *h, int status, int events);

/* What side i waits for: to be read while its pipe has room, to be
 * written while something waits for it. */
static void interest(struct relay *r, int i) {
  if (r->closing)
    return;
  int ev = 0;
  if (!r->eof[i] && !r->full[i] && r->piped[i] < RELAY_PIPE)
    ev |= UV_READABLE;
  if (!r->shut[i] && (r->npre[i] || r->piped[1 - i]))
    ev |= UV_WRITABLE;
  int rc = ev ? uv_poll_start(&r->poll[i], ev, on_poll) : uv_poll_stop(&r->poll[i]);
  if (rc < 0)
    relay_close(r);
}

/* Move what waits for side t to it: relay_send's bytes, then the pipe of
 * the other direction. -1 after the relay closed. */
static int flush_to(struct relay *r, int t) {
  int d = 1 - t;
  while (r->npre[t]) {
    ssize_t n = send(r->fd[t], r->pre[t], r->npre[t], MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EAGAIN)
        return 0;
      relay_close(r);
      return -1;
    }
    memmove(r->pre[t], r->pre[t] + n, r->npre[t] - (size_t)n);
    r->npre[t] -= (size_t)n;
  }

  while (r->piped[d]) {
    ssize_t n =
        splice(r->pipe[d][0], NULL, r->fd[t], NULL, r->piped[d], SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
    if (n < 0) {
      if (errno == EAGAIN)
        return 0;
      relay_close(r);
      return -1;
    }
    r->piped[d] -= (size_t)n;
    r->full[d] = false;
    r->active = uv_now(r->poll[t].loop);
  }

  /* All of d's bytes have gone: its end is passed on. */
  if (r->eof[d] && !r->shut[t]) {
    r->shut[t] = true;
    shutdown(r->fd[t], SHUT_WR);
    if (r->shut[1 - t]) {
      relay_close(r);
      return -1;
    }
  }
  return 0;
}

/* Side d has reached its limit: what it sends now is more than it may
 * (the relay ends); its end is passed on as any other. */
static int past_limit(struct relay *r, int d) {
  char c;
  ssize_t n = recv(r->fd[d], &c, 1, MSG_PEEK | MSG_DONTWAIT);
  if (n > 0 || (n < 0 && errno != EAGAIN)) {
    relay_close(r);
    return -1;
  }
  if (n == 0) {
    r->eof[d] = true;
    return flush_to(r, 1 - d);
  }
  return 0;
}

/* relay_first's bytes of side d, read (not spliced: they are looked at)
 * and held; fn sends them on once the line is there, the buffer full or
 * side d ended. -1 after the relay closed. */
static int read_first(struct relay *r, int d) {
  ssize_t n =
      recv(r->fd[d], r->first_buf + r->first_got, sizeof r->first_buf - r->first_got, MSG_DONTWAIT);
  if (n < 0 && errno == EAGAIN)
    return 0;
  if (n < 0) {
    relay_close(r);
    return -1;
  }
  bool line = memchr(r->first_buf + r->first_got, '\n', (size_t)n) != NULL;
  r->first_got += (size_t)n;
  r->bytes[d] += (uint64_t)n;
  r->active = uv_now(r->poll[d].loop);
  if (n == 0)
    r->eof[d] = true;
  if (n == 0 || line || r->first_got == sizeof r->first_buf) {
    bool (*fn)(struct relay *, const char *, size_t) = r->first_fn;
    r->first_fn = NULL;
    if (!fn(r, r->first_buf, r->first_got)) {
      relay_close(r);
      return -1;
    }
  }
  return flush_to(r, 1 - d);
}

/* Read side d into its pipe and on to the other side, while both go. */
static int pump(struct relay *r, int d) {
  if (r->first_fn && r->first_side == d && !r->eof[d])
    return read_first(r, d);

  for (int round = 0; round < RELAY_ROUNDS && !r->eof[d] && !r->full[d] && r->piped[d] < RELAY_PIPE;
       round++) {
    if (r->limit[d] == 0)
      return past_limit(r, d);
    size_t room = RELAY_PIPE - r->piped[d];
    if (room > r->limit[d])
      room = (size_t)r->limit[d];

    ssize_t n =
        splice(r->fd[d], NULL, r->pipe[d][1], NULL, room, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
    if (n < 0 && errno == EAGAIN) {
      /* No data, or no room: a pipe holds a chunk a slot, and small chunks
       * fill it long before its size in bytes. With data waiting, reading
       * waits for the pipe to drain (else the loop would spin on it). */
      int waiting = 0;
      if (r->piped[d] && ioctl(r->fd[d], FIONREAD, &waiting) == 0 && waiting > 0)
        r->full[d] = true;
      break;
    }
    if (n < 0) {
      relay_close(r);
      return -1;
    }

    if (n == 0)
      r->eof[d] = true;
    r->piped[d] += (size_t)n;
    r->bytes[d] += (uint64_t)n;
    r->active = uv_now(r->poll[d].loop);
    if (r->limit[d] != UINT64_MAX)
      r->limit[d] -= (uint64_t)n;
    if (flush_to(r, 1 - d) < 0)
      return -1;
  }
  return 0;
}

static void on_poll(uv_poll_t *h, int status, int events) {
  struct relay *r = h->data;
  int i = h == &r->poll[0] ? 0 : 1;
  if (r->closing)
    return;
  if (status < 0) {
    relay_close(r);
    return;
  }
  if ((events & UV_WRITABLE) && flush_to(r, i) < 0)
    return;
  if ((events & (UV_READABLE | UV_DISCONNECT)) && pump(r, i) < 0)
    return;
  interest(r, 0);
  interest(r, 1);
}

bool relay_idle(const struct relay *r, uint64_t ms) {
  return r->started && !r->closing && uv_now(r->poll[0].loop) - r->active >= ms;
}

void relay_start(struct relay *r) {
  if (r->closing)
    return;
  /* The sockets leave libuv's stream handles (if they were in one) for
   * poll handles: duplicated first, as closing a handle closes its socket.
   * Whatever fails (out of descriptors) ends it before anything moves. */
  for (int i = 0; i < 2; i++) {
    uv_os_fd_t fd;
    if (r->fd[i] < 0 && uv_fileno((uv_handle_t *)&r->side[i], &fd) == 0)
      r->fd[i] = fcntl(fd, F_DUPFD_CLOEXEC, 3);
    if (r->fd[i] < 0 || pipe2(r->pipe[i], O_CLOEXEC | O_NONBLOCK) < 0) {
      relay_close(r);
      return;
    }
    fcntl(r->pipe[i][1], F_SETPIPE_SZ, RELAY_PIPE); /* else the default: slower, no worse */
  }

  for (int i = 0; i < 2; i++)
    uv_close((uv_handle_t *)&r->side[i], closed);
  r->started = true;
  r->active = uv_now(r->side[0].loop);
  r->open += 2;

  for (int i = 0; i < 2; i++) {
    r->polled[i] = uv_poll_init(r->side[i].loop, &r->poll[i], r->fd[i]) == 0;
    r->poll[i].data = r;
  }
  if (!r->polled[0] || !r->polled[1]) {
    relay_close(r);
    return;
  }

  int one = 1;
  for (int i = 0; i < 2; i++)
    setsockopt(r->fd[i], IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (flush_to(r, 0) < 0)
    return;
  if (flush_to(r, 1) < 0)
    return;
  interest(r, 0);
  interest(r, 1);
}
