/* The client side of one exec on the agent protocol, for hutch run: output
 * to our stdout/stderr as it comes, stdin fed within the agent's window,
 * our signals forwarded, the terminal in raw mode for --tty. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/signalfd.h>
#include <termios.h>
#include <unistd.h>

#include "cli.h"
#include "conn.h"
#include "util.h"

#define EXEC_STREAM 1

struct client {
  struct hutch_conn conn;
  const struct hutch_exec_req *req;
  struct hutch_verdict *v;
  int in_fd;
  uint32_t in_window;
  bool got_hello, done;
  int interrupts;
};

static void send_json(struct client *c, uint8_t type, json_t *j) {
  size_t n;
  char *s = hutch_json_dump(j, &n);
  hutch_conn_send(&c->conn, type, 0, EXEC_STREAM, s, n);
  free(s);
  json_decref(j);
}

static int on_frame(struct client *c, const struct hutch_frame *f, struct hutch_err *err) {
  json_t *j = NULL;
  if (f->type == HUTCH_F_HELLO || f->type == HUTCH_F_EVENT || f->type == HUTCH_F_ERROR) {
    j = json_loadb((const char *)f->payload, f->len, 0, NULL);
    if (!j)
      return hutch_err_set(err, EPROTO, "agent sent malformed JSON");
  }
  int r = 0;
  switch (f->type) {
  case HUTCH_F_HELLO:
    if (json_integer_value(json_object_get(j, "protocol")) != HUTCH_PROTOCOL_VERSION)
      r = hutch_err_set(err, EPROTO, "agent speaks another protocol version");
    c->got_hello = true;
    break;
  case HUTCH_F_STDOUT:
  case HUTCH_F_STDERR:
    if (write_all(f->type == HUTCH_F_STDOUT ? 1 : 2, f->payload, f->len) < 0 && errno != EPIPE)
      r = hutch_err_set(err, errno, "write output");
    hutch_conn_send_window(&c->conn, EXEC_STREAM, f->len);
    break;
  case HUTCH_F_WINDOW:
    c->in_window += hutch_window_increment(f);
    break;
  case HUTCH_F_EVENT:
    if (json_is_string(json_object_get(j, "event")) &&
        strcmp(json_string_value(json_object_get(j, "event")), "exit") == 0) {
      r = hutch_verdict_from_json(j, c->v, err);
      c->done = true;
    }
    break;
  case HUTCH_F_ERROR: {
    const char *msg = json_string_value(json_object_get(j, "message"));
    r = hutch_err_set(err, 0, "agent: %s", msg ? msg : "error");
    c->done = true;
    break;
  }
  default:
    break;
  }
  json_decref(j);
  return r;
}

/* Feed stdin within the window; EOF is sent once, with the last chunk. */
static int pump_stdin(struct client *c, struct hutch_err *err) {
  static uint8_t buf[HUTCH_DATA_CHUNK];
  size_t n = c->in_window < sizeof buf ? c->in_window : sizeof buf;
  ssize_t r = read(c->in_fd, buf, n);
  if (r < 0 && (errno == EINTR || errno == EAGAIN))
    return 0;
  if (r < 0)
    return hutch_err_set(err, errno, "read stdin");
  hutch_conn_send(&c->conn, HUTCH_F_STDIN, r == 0 ? HUTCH_FL_EOF : 0, EXEC_STREAM, buf, (size_t)r);
  c->in_window -= (uint32_t)r;
  if (r == 0)
    c->in_fd = -1;
  return 0;
}

static void on_signal(struct client *c, int sfd) {
  struct signalfd_siginfo si;
  while (read(sfd, &si, sizeof si) == sizeof si) {
    if (si.ssi_signo == SIGWINCH) {
      struct winsize ws;
      if (ioctl(0, TIOCGWINSZ, &ws) == 0)
        send_json(c, HUTCH_F_CONTROL,
                  json_pack("{s:{s:i, s:i}}", "resize", "rows", ws.ws_row, "cols", ws.ws_col));
      continue;
    }
    /* Forwarded, as docker run does; a third interrupt stops the workload. */
    if (++c->interrupts >= 3)
      send_json(c, HUTCH_F_CONTROL, json_pack("{s:b}", "kill", 1));
    else
      send_json(c, HUTCH_F_CONTROL, json_pack("{s:i}", "signal", (int)si.ssi_signo));
  }
}

static int loop(struct client *c, int sfd, struct hutch_err *err) {
  while (!c->done) {
    if (hutch_conn_flush(&c->conn, err) < 0)
      return -1;
    struct pollfd p[3] = {
        {c->conn.fd, POLLIN | (hutch_conn_queued(&c->conn) ? POLLOUT : 0), 0},
        {sfd, POLLIN, 0},
        {c->in_window > 0 ? c->in_fd : -1, POLLIN, 0},
    };
    if (poll(p, 3, -1) < 0 && errno != EINTR)
      return hutch_err_set(err, errno, "poll");
    if (p[1].revents)
      on_signal(c, sfd);
    if (p[2].revents && pump_stdin(c, err) < 0)
      return -1;
    if (p[0].revents & (POLLIN | POLLHUP | POLLERR)) {
      if (hutch_conn_fill(&c->conn, err) < 0)
        return -1;
      struct hutch_frame f;
      int r;
      while (!c->done && (r = hutch_conn_next(&c->conn, &f, err)) > 0)
        if (on_frame(c, &f, err) < 0)
          return -1;
      if (r < 0)
        return -1;
      if (c->conn.eof && !c->done)
        return hutch_err_set(err, 0, "the sandbox's agent went away");
    }
  }
  return 0;
}

int run_stream(int conn_fd, const struct hutch_exec_req *req, int stdin_fd,
               struct hutch_verdict *v, struct hutch_err *err) {
  struct client c = {.req = req, .v = v, .in_fd = stdin_fd, .in_window = HUTCH_WINDOW_INITIAL};
  struct hutch_exec_req r = *req;
  struct winsize ws;
  if (r.pty) {
    r.rows = 24, r.cols = 80;
    if (ioctl(0, TIOCGWINSZ, &ws) == 0 && ws.ws_row && ws.ws_col)
      r.rows = ws.ws_row, r.cols = ws.ws_col;
  }
  json_t *open = hutch_exec_req_to_json(&r, err);
  if (!open) {
    close(conn_fd);
    return -1;
  }
  size_t len;
  char *payload = hutch_json_dump(open, &len);
  json_decref(open);
  if (len > HUTCH_FRAME_MAX) {
    free(payload);
    close(conn_fd);
    return hutch_err_invalid(err, "the command and its environment exceed %u bytes",
                             HUTCH_FRAME_MAX);
  }
  hutch_conn_init(&c.conn, conn_fd);
  hutch_conn_send(&c.conn, HUTCH_F_OPEN, 0, EXEC_STREAM, payload, len);
  free(payload);

  static const int forwarded[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGWINCH};
  sigset_t set, old;
  sigemptyset(&set);
  for (size_t i = 0; i < ARRAY_SIZE(forwarded); i++)
    sigaddset(&set, forwarded[i]);
  sigprocmask(SIG_BLOCK, &set, &old);
  int sfd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);

  struct termios saved;
  bool raw = r.pty && isatty(0) && tcgetattr(0, &saved) == 0;
  if (raw) {
    struct termios t = saved;
    cfmakeraw(&t);
    tcsetattr(0, TCSANOW, &t);
  }
  int ret = sfd < 0 ? hutch_err_set(err, errno, "signalfd") : loop(&c, sfd, err);
  if (raw)
    tcsetattr(0, TCSANOW, &saved);
  if (sfd >= 0)
    close(sfd);
  sigprocmask(SIG_SETMASK, &old, NULL);
  hutch_conn_free(&c.conn);
  return ret;
}
