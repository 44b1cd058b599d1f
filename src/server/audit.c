/* The audit log's writer (audit.h). */
#include "audit.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "serve.h"
#include "util.h"

struct audit {
  struct offload o;
  int fd;
  char *buf; /* lines not handed to a job yet */
  size_t len, cap;
  char *out; /* what the running job writes */
  size_t nout;
  bool writing;
  int err; /* the job's errno, 0: written */
};

struct audit *audit_open(int fd) {
  struct audit *a = xcalloc(1, sizeof *a);
  a->fd = fd;
  return a;
}

static int write_out(int fd, const char *p, size_t n) {
  while (n) {
    ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR)
      continue;
    if (w < 0)
      return errno;
    p += w;
    n -= (size_t)w;
  }
  return 0;
}

static void audit_run(struct offload *o) {
  struct audit *a = OFFLOAD_JOB(o, struct audit);
  a->err = write_out(a->fd, a->out, a->nout);
}

static void start(struct server *srv, struct audit *a);

static void audit_done(struct offload *o) {
  struct audit *a = OFFLOAD_JOB(o, struct audit);
  if (a->err)
    fprintf(stderr, "hutch serve: audit log: %zu bytes lost: %s\n", a->nout, strerror(a->err));
  free(a->out);
  a->out = NULL;
  a->writing = false;
  if (a->len)
    start(o->srv, a);
}

static void start(struct server *srv, struct audit *a) {
  a->out = a->buf;
  a->nout = a->len;
  a->buf = NULL;
  a->len = a->cap = 0;
  a->writing = true;
  offload(srv, OFFLOAD_OTHER, &a->o, audit_run, audit_done);
}

void audit_append(struct server *srv, struct audit *a, const char *line, size_t n) {
  if (a->len + n + 1 > a->cap) {
    a->cap = (a->len + n + 1) * 2 > 4096 ? (a->len + n + 1) * 2 : 4096;
    a->buf = xrealloc(a->buf, a->cap);
  }
  memcpy(a->buf + a->len, line, n);
  a->buf[a->len + n] = '\n';
  a->len += n + 1;
  if (!a->writing)
    start(srv, a);
}

void audit_close(struct audit *a) {
  if (!a)
    return;
  int e = a->len ? write_out(a->fd, a->buf, a->len) : 0;
  if (e)
    fprintf(stderr, "hutch serve: audit log: %zu bytes lost: %s\n", a->len, strerror(e));
  close(a->fd);
  free(a->buf);
  free(a);
}
