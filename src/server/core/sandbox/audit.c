/* The audit log's writer (audit.h). */

#include "core/sandbox/audit.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util.h"
#include "core/sandbox/sbx.h"
#include "core/base/server.h"
#include "http/body.h"

#define AUDIT_NAME "audit.jsonl"
#define AUDIT_OLD "audit.jsonl.1"

struct audit {
  struct offload o;
  int dirfd, fd;
  uint64_t size, max; /* of the current file; its maximum */
  char *buf;          /* lines not handed to a job yet */
  size_t len, cap;
  char *out; /* what the running job writes */
  size_t nout;
  bool writing;
  int err; /* the job's errno, 0: written */
};

static int open_log(int dirfd) {
  return openat(dirfd, AUDIT_NAME, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0600);
}

struct audit *audit_open(const char *dir, uint64_t max_bytes, struct hutch_err *err) {
  int dirfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
  int fd = -1;
  if (dirfd >= 0)
    fd = open_log(dirfd);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) < 0) {
    hutch_err_set(err, errno, "audit log %s/%s", dir, AUDIT_NAME);
    if (fd >= 0)
      close(fd);
    if (dirfd >= 0)
      close(dirfd);
    return NULL;
  }

  struct audit *a = xcalloc(1, sizeof *a);
  a->dirfd = dirfd;
  a->fd = fd;
  a->size = (uint64_t)st.st_size;
  a->max = max_bytes;
  return a;
}

/* On the job's thread (or at close, when none runs): the file would pass
 * its maximum with n more bytes, so it becomes the old one. A failure
 * keeps writing to the file as it is: lines are worth more than the
 * bound. */
static void rotate(struct audit *a, size_t n) {
  if (a->size == 0 || a->size + n <= a->max)
    return;
  if (renameat(a->dirfd, AUDIT_NAME, a->dirfd, AUDIT_OLD) < 0) {
    fprintf(stderr, "hutch serve: audit log: rotating: %s\n", strerror(errno));
    return;
  }

  int fd = open_log(a->dirfd);
  if (fd < 0) {
    /* Out of descriptors, say: the file goes back to its name, to rotate
     * at the next write, rather than grow on as audit.jsonl.1. */
    fprintf(stderr, "hutch serve: audit log: a new %s: %s\n", AUDIT_NAME, strerror(errno));
    renameat(a->dirfd, AUDIT_OLD, a->dirfd, AUDIT_NAME);
    return;
  }

  close(a->fd);
  a->fd = fd;
  a->size = 0;
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
  rotate(a, a->nout);
  a->err = write_out(a->fd, a->out, a->nout);
  a->size += a->nout;
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
  if (a->len)
    rotate(a, a->len);
  int e = a->len ? write_out(a->fd, a->buf, a->len) : 0;
  if (e)
    fprintf(stderr, "hutch serve: audit log: %zu bytes lost: %s\n", a->len, strerror(e));
  close(a->fd);
  close(a->dirfd);
  free(a->buf);
  free(a);
}

/* A sandbox's own lines, kept in memory while it lives (the last
 * SBX_LOG_MAX): what E2B shows as a sandbox's logs. They are its owner's
 * actions on it and what it did (egress, ports, escapes): nothing another
 * tenant did, as no other tenant reaches it. */
static void keep_for_sandbox(struct server *srv, json_t *line) {
  const char *id = json_string_value(json_object_get(line, "sandbox"));
  const char *tenant = json_string_value(json_object_get(line, "tenant"));
  struct principal p = {0};
  if (!id || !tenant)
    return;
  str_copy(p.tenant, sizeof p.tenant, tenant);
  struct sbx *sb = sbx_find_own(srv, &p, id);
  if (!sb)
    return;

  if (!sb->log)
    sb->log = json_array();
  if (json_array_size(sb->log) == SBX_LOG_MAX)
    json_array_remove(sb->log, 0);
  json_array_append(sb->log, line);
}

void audit_record(struct server *srv, json_t *j) {
  /* No line must go missing unseen: one that could not be made is said. */
  if (!j)
    j = json_pack("{s:s}", "error", "an audit line could not be written as JSON");

  char when[32];
  iso8601(wall_ms(), when);
  /* "time" first: a reader sees when before what. */
  json_t *line = json_pack("{s:s}", "time", when);
  json_object_update(line, j);

  if (srv->audit) {
    char *text = json_dumps(line, SERVE_JSON_FLAGS | JSON_PRESERVE_ORDER);
    if (!text)
      abort(); /* out of memory */
    audit_append(srv, srv->audit, text, strlen(text));
    free(text);
  }

  keep_for_sandbox(srv, line);
  json_decref(line);
  json_decref(j);
}
