/* The stdio transport (serve_stdio.h). The main thread reads messages; each
 * request runs on a thread of its own, so that a long exec does not hold
 * up a ping, a cancellation or another call; replies and notifications
 * go out whole, one line each, under one lock. */
#include "serve_stdio.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "engine.h"
#include "util.h"

struct out {
  pthread_mutex_t lock;
  FILE *f;
};

static void send_line(void *arg, json_t *msg) {
  struct out *o = arg;
  char *s = json_dumps(msg, JSON_COMPACT);
  json_decref(msg);
  if (!s)
    return;
  pthread_mutex_lock(&o->lock);
  fputs(s, o->f);
  fputc('\n', o->f);
  fflush(o->f);
  pthread_mutex_unlock(&o->lock);
  free(s);
}

struct job {
  struct mcp_session *s;
  const struct mcp_sink *sink;
  json_t *msg;
};

static void *job_main(void *arg) {
  struct job *j = arg;
  json_t *res = mcp_handle(j->s, j->msg, j->sink);
  if (res)
    j->sink->send(j->sink->arg, res);
  json_decref(j->msg);
  pthread_mutex_lock(&j->s->lock);
  j->s->running--;
  pthread_cond_broadcast(&j->s->changed);
  pthread_mutex_unlock(&j->s->lock);
  free(j);
  return NULL;
}

static void audit(void *arg, const char *tool, const char *sandbox, bool ok, const char *code) {
  (void)arg;
  fprintf(stderr, "hutch mcp: tool %s%s%s: %s%s%s\n", tool, sandbox ? " sandbox " : "",
          sandbox ? sandbox : "", ok ? "ok" : "error", code ? " " : "", code ? code : "");
}

/* One message: answered on its own thread when it may take long (a
 * request), here when it cannot (notifications, parse errors). */
static void dispatch(struct mcp_session *s, const struct mcp_sink *sink, json_t *msg) {
  if (!mcp_is_request(msg)) {
    json_t *res = mcp_handle(s, msg, sink);
    if (res)
      sink->send(sink->arg, res);
    json_decref(msg);
    return;
  }
  struct job *j = xmalloc(sizeof *j);
  *j = (struct job){.s = s, .sink = sink, .msg = msg};
  pthread_mutex_lock(&s->lock);
  s->running++;
  pthread_mutex_unlock(&s->lock);
  pthread_attr_t attr;
  pthread_t th;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  if (pthread_create(&th, &attr, job_main, j) != 0)
    job_main(j); /* no thread to spare: answer it here */
  pthread_attr_destroy(&attr);
}

/* The lines of stdin, each bounded: a longer one is read past, not held.
 * Reading waits on stdin and on sigfd together, so that SIGTERM or SIGINT
 * (a client's way to stop its server when closing stdin did not) ends the
 * session as the end of stdin does. */
struct reader {
  int sigfd;
  char buf[64 << 10];
  size_t pos, end;
  bool eof;
};

/* The next byte, or -1 at the end (of stdin, or by a signal). */
static int next_byte(struct reader *rd) {
  if (rd->pos < rd->end)
    return (unsigned char)rd->buf[rd->pos++];
  while (!rd->eof) {
    struct pollfd fds[2] = {{.fd = 0, .events = POLLIN}, {.fd = rd->sigfd, .events = POLLIN}};
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR)
        continue;
      rd->eof = true;
      break;
    }
    if (fds[1].revents & POLLIN) {
      struct signalfd_siginfo si;
      if (read(rd->sigfd, &si, sizeof si) == (ssize_t)sizeof si)
        fprintf(stderr, "hutch mcp: signal %u: ending the session\n", si.ssi_signo);
      rd->eof = true;
      break;
    }
    ssize_t got = read(0, rd->buf, sizeof rd->buf);
    if (got < 0 && (errno == EINTR || errno == EAGAIN))
      continue;
    if (got <= 0) {
      rd->eof = true;
      break;
    }
    rd->pos = 1;
    rd->end = (size_t)got;
    return (unsigned char)rd->buf[0];
  }
  return -1;
}

int mcp_stdio_serve(const struct hc_client *n) {
  /* The signals are taken as events before any thread starts (threads
   * inherit the mask): none of them ends the process under a request. */
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &stop, NULL);
  struct reader *rd = xmalloc(sizeof *rd);
  rd->sigfd = signalfd(-1, &stop, SFD_CLOEXEC);
  rd->pos = rd->end = 0;
  rd->eof = false;

  struct out o = {.f = stdout};
  pthread_mutex_init(&o.lock, NULL);
  struct mcp_sink sink = {.send = send_line, .arg = &o, .lasting = true};
  struct mcp_hooks hooks = {.tool_called = audit};
  struct mcp_session s;
  mcp_session_init(&s, n, &hooks);

  char *line = xmalloc(4096);
  size_t cap = 4096, len;
  int ch = 0;
  while (ch != -1) {
    bool too_long = false;
    len = 0;
    while ((ch = next_byte(rd)) != -1 && ch != '\n') {
      if (len >= MCP_STDIO_LINE_MAX) {
        too_long = true;
        continue;
      }
      if (len + 1 >= cap) {
        cap *= 2;
        line = realloc(line, cap);
        if (!line)
          abort();
      }
      line[len++] = (char)ch;
    }
    while (len > 0 && line[len - 1] == '\r')
      len--;
    line[len] = '\0';
    if (too_long) {
      sink.send(&o, mcp_rpc_error(NULL, RPC_INVALID_REQUEST,
                                  "a message over %u bytes (at most %u a line)", MCP_STDIO_LINE_MAX,
                                  MCP_STDIO_LINE_MAX));
      continue;
    }
    if (len == 0)
      continue;
    json_error_t jerr;
    json_t *msg = json_loadb(line, len, 0, &jerr);
    if (!msg) {
      sink.send(&o, mcp_rpc_error(NULL, RPC_PARSE_ERROR, "not JSON: %s", jerr.text));
      continue;
    }
    dispatch(&s, &sink, msg);
  }
  free(line);
  if (rd->sigfd >= 0)
    close(rd->sigfd);
  free(rd);

  /* The client closed its end (or stopped us): what runs is cancelled,
   * and the sandboxes the session made go with it. */
  mcp_session_end(&s);
  pthread_mutex_destroy(&o.lock);
  return 0;
}
