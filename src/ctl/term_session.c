/* An interactive session (term_session.h): the process started, the
 * WebSocket attached, then one poll loop over the socket, our stdin and
 * a signalfd until the process's exit line comes or the connection ends.
 *
 * Keys are bytes: in raw mode Ctrl-C and Ctrl-D reach the remote
 * terminal, whose line discipline makes them an interrupt and an end of
 * input, as on a local terminal. Signals sent to hutch itself: SIGWINCH
 * resizes the remote terminal; SIGINT and SIGQUIT go to the process;
 * SIGTERM and SIGHUP hang up (the process gets SIGHUP, as ssh's remote
 * shell does) and end hutch with 128+N. */
#include "term_session.h"

#include <errno.h>
#include <openssl/evp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "ctl.h"
#include "term_tty.h"
#include "term_ws.h"
#include "util.h"

#define IN_CHUNK 32768
#define QUEUED_MAX 64 /* messages queued for the server before our stdin waits */

struct session {
  struct ctl *ctl;
  const struct term_session_opts *o;
  struct term_ws *ws;
  bool raw;
  bool in_open;
  json_t *exit; /* the exit line, once it came */
};

/* ---- what the server sends ---- */

static void write_b64(int fd, const char *b64) {
  size_t n = strlen(b64);
  unsigned char *out = xmalloc(n / 4 * 3 + 3);
  int len = EVP_DecodeBlock(out, (const unsigned char *)b64, (int)n);
  if (len > 0) {
    /* EVP_DecodeBlock counts the padding's bytes as zeros */
    for (size_t i = n; i > 0 && b64[i - 1] == '='; i--)
      len--;
    write_all(fd, out, (size_t)len); /* our own output gone: nothing left to tell */
  }
  free(out);
}

/* A line on stderr in the midst of the session: at the start of a line
 * when the terminal is raw (its \n does not return the carriage). */
static void say(const struct session *s, const char *code, const char *msg) {
  char *c = ctl_clean(code, CTL_CLEAN_TEXT), *m = ctl_clean(msg, CTL_CLEAN_TEXT);
  fprintf(stderr, "%shutch %s: %s: %s%s", s->raw ? "\r\n" : "", s->ctl->verb->name, c, m,
          s->raw ? "\r\n" : "\n");
  free(m);
  free(c);
}

static void on_msg(void *arg, bool text, const uint8_t *data, size_t n) {
  struct session *s = arg;
  if (!text)
    return;
  json_t *j = json_loadb((const char *)data, n, 0, NULL);
  const char *type = json_string_value(json_object_get(j, "type"));
  if (!type) {
    json_decref(j);
    return;
  }

  if (strcmp(type, "stdout") == 0 || strcmp(type, "stderr") == 0) {
    int fd = strcmp(type, "stdout") == 0 ? 1 : 2;
    const char *d = json_string_value(json_object_get(j, "data"));
    const char *b64 = json_string_value(json_object_get(j, "data_b64"));
    if (d)
      write_all(fd, d, strlen(d));
    else if (b64)
      write_b64(fd, b64);
  } else if (strcmp(type, "exit") == 0 && !s->exit) {
    s->exit = json_incref(j);
  } else if (strcmp(type, "error") == 0) {
    const char *code = json_string_value(json_object_get(j, "code"));
    const char *msg = json_string_value(json_object_get(j, "message"));
    say(s, code ? code : "error", msg ? msg : "the server refused a command");
  }
  json_decref(j);
}

/* ---- what we send ---- */

static void send_json(struct session *s, json_t *j) {
  char *text = json_dumps(j, JSON_COMPACT);
  term_ws_queue(s->ws, true, text, strlen(text));
  free(text);
  json_decref(j);
}

/* The remote terminal made our terminal's size. A terminal that tells
 * none (0x0) is left as it was; one past the server's bounds is sent at
 * them (term_tty_size). */
static void send_size(struct session *s) {
  int rows, cols;
  if (s->o->tty && term_tty_size(0, &rows, &cols))
    send_json(s, json_pack("{s:s,s:i,s:i}", "type", "resize", "rows", rows, "cols", cols));
}

static void send_signal(struct session *s, int sig) {
  send_json(s, json_pack("{s:s,s:i}", "type", "signal", "signal", sig));
}

static void read_stdin(struct session *s) {
  char buf[IN_CHUNK];
  ssize_t n = read(0, buf, sizeof buf);
  if (n < 0 && (errno == EINTR || errno == EAGAIN))
    return;
  if (n > 0) {
    term_ws_queue(s->ws, false, buf, (size_t)n);
    return;
  }
  s->in_open = false;
  send_json(s, json_pack("{s:s}", "type", "eof"));
}

/* A signal to hutch; a nonzero return ends the session with it. */
static int on_signal(struct session *s, int sfd) {
  struct signalfd_siginfo si;
  if (read(sfd, &si, sizeof si) != sizeof si)
    return 0;
  switch (si.ssi_signo) {
  case SIGWINCH:
    send_size(s);
    return 0;
  case SIGINT:
  case SIGQUIT:
    send_signal(s, (int)si.ssi_signo);
    return 0;
  default: /* SIGTERM, SIGHUP */
    send_signal(s, SIGHUP);
    return 128 + (int)si.ssi_signo;
  }
}

/* ---- the loop ---- */

/* Until the exit line, the end of the connection, or a signal that ends
 * us: 0, -1 (the connection broke), or 128+N. */
static int loop(struct session *s, int sfd) {
  int fd = term_ws_fd(s->ws);
  while (!s->exit) {
    struct pollfd p[3] = {{.fd = fd, .events = POLLIN}, {.fd = sfd, .events = POLLIN}, {.fd = -1}};
    if (term_ws_want_write(s->ws))
      p[0].events |= POLLOUT;
    if (s->in_open && term_ws_queued(s->ws) < QUEUED_MAX)
      p[2] = (struct pollfd){.fd = 0, .events = POLLIN};
    if (poll(p, 3, -1) < 0) {
      if (errno == EINTR)
        continue;
      return -1;
    }

    if (p[1].revents & POLLIN) {
      int end = on_signal(s, sfd);
      if (end) {
        term_ws_flush(s->ws);
        return end;
      }
    }
    if (p[2].revents & (POLLIN | POLLHUP | POLLERR))
      read_stdin(s);
    if (p[0].revents) {
      int r = term_ws_read(s->ws, on_msg, s);
      if (r != 0 && !s->exit)
        return -1;
    }
    if (term_ws_flush(s->ws) < 0 && !s->exit)
      return -1;
  }
  return 0;
}

/* Start the command as a background process; its pid, or -1 with *code
 * (said). */
static long start(struct ctl *ctl, const struct term_session_opts *o, int *code) {
  json_t *body = json_copy(o->body);
  json_object_set_new(body, "background", json_true());
  json_object_set_new(body, "keep_stdin", json_boolean(o->in));
  if (o->tty) {
    int rows = 24, cols = 80;
    term_tty_size(0, &rows, &cols);
    json_object_set_new(body, "pty", json_pack("{s:i,s:i}", "rows", rows, "cols", cols));
  }

  char *path = ctl_path("/v1/sandboxes/%s/exec", o->sandbox);
  json_t *out = NULL;
  *code = ctl_api(ctl, "POST", path, body, &out);
  json_t *pid = json_object_get(out, "pid");
  if (*code == 0 && !json_is_integer(pid))
    *code = ctl_fail(ctl, CTL_EXIT_FAILED, "the server started no process");
  long n = *code ? -1 : (long)json_integer_value(pid);
  json_decref(out);
  json_decref(body);
  free(path);
  return n;
}

/* A session whose connection broke leaves its process waiting on a stdin
 * nobody will write again: it is killed, when the server still answers
 * (a connection it cut, say for a client too far behind). */
static void kill_left(struct ctl *ctl, const char *sandbox, long pid) {
  char *base = ctl_path("/v1/sandboxes/%s/processes/", sandbox);
  char *path = xasprintf("%s%ld", base, pid);
  struct hc_req req = {.method = "DELETE", .path = path, .timeout_ms = 5000};
  struct hc_answer a;
  hc_call(&ctl->client, &req, &a);
  hc_answer_free(&a);
  free(path);
  free(base);
}

int term_session_run(struct ctl *ctl, const struct term_session_opts *o) {
  if (o->tty && o->in && !isatty(0))
    return ctl_fail(ctl, CTL_EXIT_FAILED,
                    "the input is not a terminal: -t needs one (leave out -t to pipe it)");
  int code;
  long pid = start(ctl, o, &code);
  if (pid < 0)
    return code;

  char *path = ctl_path("/v1/sandboxes/%s/exec/", o->sandbox);
  char *ws_path = xasprintf("%s%ld/ws", path, pid);
  free(path);
  struct term_ws_err err;
  struct session s = {.ctl = ctl, .o = o, .in_open = o->in};
  s.ws = term_ws_open(&ctl->client, ws_path, &err);
  free(ws_path);
  if (!s.ws && err.status == 0)
    return ctl_fail(ctl, CTL_EXIT_UNREACHABLE, "%s", err.message);
  if (!s.ws)
    return ctl_refused(ctl, err.status, err.code, err.message);

  /* The signals are the loop's from before raw mode to after it is
   * undone, so none can end hutch with the terminal raw. */
  sigset_t set, old;
  sigemptyset(&set);
  int sigs[] = {SIGWINCH, SIGINT, SIGQUIT, SIGTERM, SIGHUP};
  for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
    sigaddset(&set, sigs[i]);
  sigprocmask(SIG_BLOCK, &set, &old);
  int sfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
  if (o->tty && o->in)
    s.raw = term_tty_raw(0, true) == 0;
  else if (o->tty)
    s.raw = term_tty_raw(1, false) == 0;
  send_size(&s); /* the size may have changed since the start */

  int end = sfd < 0 ? -1 : loop(&s, sfd);

  term_tty_restore();
  term_ws_close(s.ws);
  if (sfd >= 0)
    close(sfd);
  sigprocmask(SIG_SETMASK, &old, NULL);

  if (end > 0)
    code = end;
  else if (s.exit)
    code = ctl_exit_status(ctl, s.exit);
  else
    code =
        ctl_fail(ctl, CTL_EXIT_FAILED, "the connection to the server ended before the command did");
  if (end < 0 && !s.exit)
    kill_left(ctl, o->sandbox, pid);
  json_decref(s.exit);
  return code;
}

int ctl_exec_tty(struct ctl *ctl, const char *id, json_t *body, bool in) {
  struct term_session_opts o = {.sandbox = id, .body = body, .in = in, .tty = true};
  return term_session_run(ctl, &o);
}
