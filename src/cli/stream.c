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
  struct hutch_verdict *v;
  int in_fd;
  uint32_t in_window;
  bool got_hello, done;
  bool out_gone[2]; /* our stdout, stderr: their reader went away */
  int interrupts;
};

static void send_json(struct client *c, uint8_t type, json_t *j) {
  size_t n;
  char *s = hutch_json_dump(j, &n);
  hutch_conn_send(&c->conn, type, 0, EXEC_STREAM, s, n);
  free(s);
  json_decref(j);
}

/* Output to our stdout or stderr. When its reader goes away (`hutch run ...
 * | head`), the workload's own pipe is closed in the sandbox, so its next
 * write fails as it would have outside: SIGPIPE, or EPIPE where ignored. */
static int forward_output(struct client *c, int fd, const struct hutch_frame *f,
                          struct hutch_err *err) {
  bool *gone = &c->out_gone[fd - 1];
  if (!*gone && write_all(fd, f->payload, f->len) < 0) {
    if (errno != EPIPE)
      return hutch_err_set(err, errno, "write output");
    *gone = true;
    send_json(c, HUTCH_F_CONTROL, json_pack("{s:s}", "close", fd == 1 ? "stdout" : "stderr"));
  }
  hutch_conn_send_window(&c->conn, EXEC_STREAM, f->len);
  return 0;
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
    r = forward_output(c, f->type == HUTCH_F_STDOUT ? 1 : 2, f, err);
    break;
  case HUTCH_F_WINDOW:
    c->in_window += hutch_conn_window_increment(f);
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

/* What the kernel would refuse at execve, or the agent as a frame. */
static int check_request(const struct hutch_exec_req *r, struct hutch_err *err) {
  for (char **e = r->env; e && *e; e++)
    if (strlen(*e) >= HUTCH_STRING_MAX)
      return hutch_err_invalid(err, "--env %.20s...: longer than %u bytes", *e,
                               HUTCH_STRING_MAX - 1);
  for (size_t i = 0; r->argv[i]; i++)
    if (strlen(r->argv[i]) >= HUTCH_STRING_MAX)
      return hutch_err_invalid(err, "argument %zu of the command is longer than %u bytes", i,
                               HUTCH_STRING_MAX - 1);
  return 0;
}

char *stream_request(const struct hutch_exec_req *req, size_t *len, struct hutch_err *err) {
  struct hutch_exec_req r = *req;
  struct winsize ws;
  if (r.pty) {
    r.rows = 24, r.cols = 80;
    if (ioctl(0, TIOCGWINSZ, &ws) == 0 && ws.ws_row && ws.ws_col)
      r.rows = ws.ws_row, r.cols = ws.ws_col;
  }

  if (check_request(&r, err) < 0)
    return NULL;
  json_t *open = hutch_exec_req_to_json(&r, err);
  if (!open)
    return NULL;

  char *payload = hutch_json_dump(open, len);
  json_decref(open);
  if (*len > HUTCH_FRAME_MAX) {
    free(payload);
    hutch_err_invalid(err, "the command and its environment exceed %u bytes", HUTCH_FRAME_MAX);
    return NULL;
  }
  return payload;
}

int stream_exec(int conn_fd, const char *request, size_t len, bool pty, int stdin_fd,
                struct hutch_verdict *v, struct hutch_err *err) {
  struct client c = {.v = v, .in_fd = stdin_fd, .in_window = HUTCH_WINDOW_INITIAL};
  hutch_conn_init(&c.conn, conn_fd);
  hutch_conn_send(&c.conn, HUTCH_F_OPEN, 0, EXEC_STREAM, request, len);

  static const int forwarded[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGWINCH};
  sigset_t set, old;
  sigemptyset(&set);
  for (size_t i = 0; i < ARRAY_SIZE(forwarded); i++)
    sigaddset(&set, forwarded[i]);
  sigprocmask(SIG_BLOCK, &set, &old);
  int sfd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);

  /* Raw mode only while this terminal's keys go to the workload: with -t
   * alone, ^C must stay an interrupt for us to forward. */
  struct termios saved;
  bool raw = pty && stdin_fd == 0 && isatty(0) && tcgetattr(0, &saved) == 0;
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
