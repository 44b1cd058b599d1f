/* /v1/sandboxes/{id}/files: the file actions (core/files.h) over HTTP.
 * Stat, list, mkdir, move and remove answer JSON; a download streams the
 * bytes, a watch NDJSON, as fast as the client takes them; an upload
 * goes to the sandbox as it arrives, reading from the client paused while
 * the agent has not taken what came. */
#include "api/files.h"

#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "util.h"
#include "api/lifecycle.h"
#include "core/run/files.h"
#include "core/sandbox/sbx.h"
#include "http/body.h"
#include "http/errors.h"
#include "http/http.h"
#include "http/request.h"

/* ---- answers of the unary actions ---- */

struct files_wait {
  struct http_wait w;
  files_answer_fn answer;
};

void api_files_waited(const struct files_result *r, const struct hutch_err *err, void *arg) {
  struct files_wait *k = arg;
  struct http_conn *c = http_wait_end(&k->w);
  files_answer_fn answer = k->answer;
  free(k);
  if (c)
    answer(c, r, err);
}

struct files_wait *api_files_wait(struct http_conn *c, files_answer_fn answer) {
  struct files_wait *k = xcalloc(1, sizeof *k);
  k->answer = answer;
  http_wait_begin(&k->w, c);
  return k;
}

void api_files_wait_started(struct files_wait *k, int r, const struct hutch_err *err) {
  if (r == 0)
    return;
  struct http_conn *c = http_wait_end(&k->w);
  free(k);
  if (c)
    http_fail(c, err);
}

static void answer_empty(struct http_conn *c, const struct files_result *r,
                         const struct hutch_err *err) {
  (void)r;
  if (err)
    http_fail(c, err);
  else
    http_respond(c, 204, "application/json", "", 0, NULL);
}

static void answer_done(struct http_conn *c, const struct files_result *r,
                        const struct hutch_err *err) {
  if (err) {
    http_fail(c, err);
    return;
  }
  json_t *j = json_deep_copy(r->done);
  json_object_del(j, "event");
  http_json(c, 200, j);
}

static void answer_list(struct http_conn *c, const struct files_result *r,
                        const struct hutch_err *err) {
  if (err)
    http_fail(c, err);
  else
    http_json(c, 200, json_pack("{s:O}", "entries", r->entries));
}

/* ---- requests ---- */

/* The user a request's ?user= names: "user" (also when it names none),
 * "root", or NULL for any other. */
static const char *query_user(const char *u) {
  if (!u || strcmp(u, "user") == 0)
    return "user";
  if (strcmp(u, "root") == 0)
    return "root";
  return NULL;
}

/* The sandbox, the path and the user of a file request, or NULL after
 * an error answer. *path is malloc'd. */
static struct sbx *file_target(struct http_conn *c, const struct principal *p, char **path,
                               const char **user) {
  struct sbx *sb = api_sbx_lookup_live(c, p);
  struct hutch_err err = {0};
  *path = NULL;
  if (!sb)
    return NULL;
  char *u = http_query(&c->req, "user");
  *user = query_user(u);
  free(u);
  *path = http_query(&c->req, "path");
  if (!*user)
    http_error(c, HUTCH_ERR_INVALID, "invalid_argument", "user must be user or root");
  else if (files_path_check(*path, &err) < 0)
    http_fail(c, &err);
  else
    return sb;
  free(*path);
  *path = NULL;
  return NULL;
}

/* A query flag: true only when "true". */
static bool query_true(struct http_conn *c, const char *name) {
  char *v = http_query(&c->req, name);
  bool yes = v && strcmp(v, "true") == 0;
  free(v);
  return yes;
}

void api_files_delete(struct http_conn *c, const struct principal *p) {
  char *path;
  const char *user;
  bool recursive = query_true(c, "recursive");
  struct sbx *sb = file_target(c, p, &path, &user);
  struct hutch_err err = {0};
  if (sb) {
    struct files_wait *k = api_files_wait(c, answer_empty);
    int r = files_remove(sb, path, user, recursive, api_files_waited, k, &err);
    api_files_wait_started(k, r, &err);
  }
  free(path);
}

void api_files_stat(struct http_conn *c, const struct principal *p) {
  char *path;
  const char *user;
  struct sbx *sb = file_target(c, p, &path, &user);
  struct hutch_err err = {0};
  if (sb) {
    struct files_wait *k = api_files_wait(c, answer_done);
    int r = files_stat(sb, path, user, api_files_waited, k, &err);
    api_files_wait_started(k, r, &err);
  }
  free(path);
}

void api_files_list(struct http_conn *c, const struct principal *p) {
  char *path, *d = http_query(&c->req, "depth");
  const char *user;
  uint64_t depth = 1;
  struct sbx *sb = file_target(c, p, &path, &user);
  struct hutch_err err = {0};
  if (sb && d && (!parse_u64(d, &depth) || depth < 1 || depth > 64)) {
    http_error(c, HUTCH_ERR_INVALID, "invalid_argument", "depth must be from 1 to 64");
  } else if (sb) {
    struct files_wait *k = api_files_wait(c, answer_list);
    int r = files_list(sb, path, user, (unsigned)depth, api_files_waited, k, &err);
    api_files_wait_started(k, r, &err);
  }
  free(d);
  free(path);
}

/* mkdir and move take a JSON body: {path, parents} and {path, to}. */
static struct sbx *json_target(struct http_conn *c, const struct principal *p,
                               const char *const *known, json_t **o, const char **path,
                               const char **user) {
  struct sbx *sb = api_sbx_lookup_live(c, p);
  *path = NULL;
  *user = "user";
  if (!sb || !(*o = http_body_object(c)))
    return NULL;
  if (http_body_only(c, *o, known) < 0)
    return NULL;
  if (http_body_string(c, *o, "path", FILES_PATH_MAX, path) < 0)
    return NULL;
  if (http_body_string(c, *o, "user", 8, user) < 0)
    return NULL;

  if (!*path || !**path) {
    http_error(c, HUTCH_ERR_INVALID, "invalid_argument", "path is required");
    return NULL;
  }
  if (strcmp(*user, "user") != 0 && strcmp(*user, "root") != 0) {
    http_error(c, HUTCH_ERR_INVALID, "invalid_argument", "user must be user or root");
    return NULL;
  }
  return sb;
}

void api_files_mkdir(struct http_conn *c, const struct principal *p) {
  static const char *const known[] = {"path", "parents", "user", NULL};
  json_t *o = NULL;
  const char *path, *user;
  struct sbx *sb = json_target(c, p, known, &o, &path, &user);
  struct hutch_err err = {0};
  if (sb) {
    struct files_wait *k = api_files_wait(c, answer_done);
    bool parents = json_is_true(json_object_get(o, "parents"));
    int r = files_mkdir(sb, path, user, parents, api_files_waited, k, &err);
    api_files_wait_started(k, r, &err);
  }
  json_decref(o);
}

void api_files_move(struct http_conn *c, const struct principal *p) {
  static const char *const known[] = {"path", "to", "user", NULL};
  json_t *o = NULL;
  const char *path, *user, *to = NULL;
  struct sbx *sb = json_target(c, p, known, &o, &path, &user);
  int r = sb ? http_body_string(c, o, "to", FILES_PATH_MAX, &to) : -1;
  struct hutch_err err = {0};
  if (r == 0 || (r == 1 && !*to)) {
    http_error(c, HUTCH_ERR_INVALID, "invalid_argument", "to is required");
  } else if (r == 1) {
    struct files_wait *k = api_files_wait(c, answer_empty);
    int moved = files_move(sb, path, to, user, api_files_waited, k, &err);
    api_files_wait_started(k, moved, &err);
  }
  json_decref(o);
}

/* ---- downloads and watches: the bytes, or NDJSON ---- */

struct download {
  struct http_conn *c; /* NULL once the client is gone */
  struct files_op *op;
  const char *ctype;
  bool streaming;           /* answered 200: the first bytes came */
  bool busy;                /* in a sink call: the client's end must not free d under it */
  void (*ended)(void *arg); /* told once it is over, however it ended; or NULL */
  void *ended_arg;
};

static void dl_free(struct download *d) {
  if (d->ended)
    d->ended(d->ended_arg);
  free(d);
}

static void dl_abort(void *ctx) {
  struct download *d = ctx;
  d->c = NULL;
  files_cancel(d->op);
  if (!d->busy)
    dl_free(d);
}

static void dl_drain(void *ctx) {
  struct download *d = ctx;
  files_resume(d->op);
}

static const struct http_stream_ops dl_ops = {.abort = dl_abort, .drain = dl_drain};

/* Send n bytes; whether the client takes more now. */
static bool dl_send(struct download *d, const void *p, size_t n) {
  d->busy = true;
  if (!d->streaming) { /* the first bytes: it worked, answer 200 */
    d->streaming = true;
    http_stream_start(d->c, 200, d->ctype, &dl_ops, d);
  }
  if (d->c)
    http_stream_send(d->c, p, n);
  bool more = !d->c || http_queued(d->c) < HTTP_STREAM_HIGH;
  d->busy = false;
  if (!d->c)
    dl_free(d); /* the client left meanwhile: the action is cancelled */
  return more;
}

static bool dl_data(void *arg, const void *p, size_t n) {
  return dl_send(arg, p, n);
}

static bool dl_event(void *arg, json_t *ev) {
  size_t n;
  char *line = http_json_line(json_incref(ev), &n);
  bool more = dl_send(arg, line, n);
  free(line);
  return more;
}

static void dl_end(void *arg, const struct hutch_err *err) {
  struct download *d = arg;
  struct http_conn *c = d->c;
  bool streaming = d->streaming;
  dl_free(d);
  http_own(c, NULL, NULL);
  if (err && streaming)
    http_abort(c); /* a download failed after it began: cut it short */
  else if (err)
    http_fail(c, err);
  else if (streaming)
    http_stream_end(c);
  else
    http_respond(c, 200, "application/octet-stream", "", 0, NULL);
}

static struct download *dl_new(struct http_conn *c, const char *ctype, struct files_sink *sink) {
  struct download *d = xcalloc(1, sizeof *d);
  d->c = c;
  d->ctype = ctype;
  *sink = (struct files_sink){.data = dl_data, .event = dl_event, .end = dl_end, .arg = d};
  return d;
}

static void dl_start(struct http_conn *c, struct download *d, const struct hutch_err *err) {
  if (!d->op) {
    dl_free(d);
    http_fail(c, err);
    return;
  }
  http_own(c, &dl_ops, d);
  http_watch(c); /* a client that leaves before the first byte is heard */
}

void api_files_download_then(struct http_conn *c, struct sbx *sb, const char *path,
                             const char *user, void (*ended)(void *arg), void *arg) {
  struct hutch_err err = {0};
  struct files_sink sink;
  struct download *d = dl_new(c, "application/octet-stream", &sink);
  d->ended = ended;
  d->ended_arg = arg;
  d->op = files_read(sb, path, user, &sink, &err);
  dl_start(c, d, &err);
}

void api_files_download(struct http_conn *c, struct sbx *sb, const char *path, const char *user) {
  api_files_download_then(c, sb, path, user, NULL, NULL);
}

void api_files_read(struct http_conn *c, const struct principal *p) {
  char *path;
  const char *user;
  struct sbx *sb = file_target(c, p, &path, &user);
  if (sb)
    api_files_download(c, sb, path, user);
  free(path);
}

/* Changes under a directory as NDJSON, until the client goes (the agent
 * then kills the watcher). */
void api_files_watch(struct http_conn *c, const struct principal *p) {
  char *path;
  const char *user;
  bool recursive = query_true(c, "recursive");
  struct sbx *sb = file_target(c, p, &path, &user);
  struct hutch_err err = {0};
  struct files_sink sink;
  if (!sb)
    return;
  struct download *d = dl_new(c, "application/x-ndjson", &sink);
  d->op = files_watch(sb, path, user, recursive, false, &sink, &err);
  dl_start(c, d, &err);
  free(path);
}

/* ---- uploads ---- */

#define INFLATE_CHUNK (64u << 10) /* inflated bytes handed to the write at a time */

struct upload {
  struct http_conn *c;
  struct files_op *op; /* NULL before the write starts and once it has ended */
  bool started, gone;  /* api_files_upload_into came; the client left before it */
  bool body_done;      /* the body ended (maybe before the write started) */
  bool told_end;       /* the write was told the end */
  char *early;         /* what came before the write started */
  size_t nearly;
  files_written_fn answer;
  bool gzip;   /* the body is gzip (Content-Encoding), inflated here */
  bool gz_end; /* the last gzip member ended */
  bool bad;    /* the gzip was not: the write is cancelled, 400 at the body's end */
  z_stream z;
  char *in; /* a gzip piece of the body not inflated yet (reading paused) */
  size_t nin, off;
  void (*over)(void *arg); /* told once it is over, however it ended; or NULL */
  void *over_arg;
};

static void up_free(struct upload *up) {
  if (up->over)
    up->over(up->over_arg);
  if (up->gzip)
    inflateEnd(&up->z);
  free(up->early);
  free(up->in);
  free(up);
}

static void up_abort(void *ctx) {
  struct upload *up = ctx;
  if (up->op)
    files_cancel(up->op);
  up->op = NULL;
  if (up->started)
    up_free(up);
  else
    up->gone = true; /* api_files_upload_into frees it */
}

/* Inflate what is pending into the write, until it is all in or the agent
 * has not taken enough (then false: reading stays paused until resumed).
 * What is held for the agent is bounded by the write's own limit plus one
 * chunk, whatever the ratio: a gzip bomb fills the sandbox's disk quota,
 * never the server's memory. */
static bool up_inflate(struct upload *up) {
  char out[INFLATE_CHUNK];
  while (up->op && !up->bad && up->off < up->nin) {
    if (up->gz_end) { /* another gzip member follows, as gzip allows */
      inflateReset(&up->z);
      up->gz_end = false;
    }

    up->z.next_in = (Bytef *)up->in + up->off;
    up->z.avail_in = (uInt)(up->nin - up->off);
    up->z.next_out = (Bytef *)out;
    up->z.avail_out = sizeof out;
    int r = inflate(&up->z, Z_NO_FLUSH);
    up->off = up->nin - up->z.avail_in;
    if (r == Z_STREAM_END) {
      up->gz_end = true;
    } else if (r != Z_OK && r != Z_BUF_ERROR) {
      up->bad = true;
      files_cancel(up->op);
      up->op = NULL;
      break;
    }

    size_t n = sizeof out - up->z.avail_out;
    if (n && !files_write_data(up->op, out, n))
      return false;
  }

  free(up->in);
  up->in = NULL;
  up->nin = up->off = 0;
  return true;
}

/* The next bytes of the body, for the started write: false when it has
 * not taken enough (reading pauses until up_resume). data is taken over
 * when own. */
static bool up_feed(struct upload *up, char *data, size_t n, bool own) {
  if (!up->op || n == 0) { /* the write ended or was refused: the rest is dropped */
    if (own)
      free(data);
    return true;
  }
  if (!up->gzip) {
    bool more = files_write_data(up->op, data, n);
    if (own)
      free(data);
    return more;
  }
  up->in = own ? data : memcpy(xmalloc(n), data, n);
  up->nin = n;
  up->off = 0;
  return up_inflate(up);
}

static void up_answer_bad(struct upload *up) {
  struct http_conn *c = up->c;
  up_free(up);
  http_own(c, NULL, NULL);
  http_error(c, HUTCH_ERR_INVALID, "invalid_argument", "the body is not the gzip it says");
}

/* The body has ended and all of it is in the write (or dropped). */
static void up_finish(struct upload *up) {
  if (up->gzip && !up->bad && !up->gz_end) { /* cut short */
    up->bad = true;
    if (up->op)
      files_cancel(up->op);
    up->op = NULL;
  }
  if (up->bad) {
    up_answer_bad(up);
  } else if (up->op && !up->told_end) {
    up->told_end = true;
    files_write_end(up->op);
  }
}

static void up_body(void *ctx, const char *data, size_t n) {
  struct upload *up = ctx;
  if (!up->started) { /* kept until the write starts, reading paused meanwhile */
    up->early = xrealloc(up->early, up->nearly + n);
    memcpy(up->early + up->nearly, data, n);
    up->nearly += n;
    http_body_pause(up->c);
  } else if (!up_feed(up, (char *)data, n, false)) {
    http_body_pause(up->c);
  }
}

static void up_body_end(void *ctx) {
  struct upload *up = ctx;
  up->body_done = true;
  if (up->started && !up->in) /* else api_files_upload_into or up_resume ends it */
    up_finish(up);
}

static void up_resume(void *arg) {
  struct upload *up = arg;
  if (up->in && !up_inflate(up))
    return;
  if (!up->body_done)
    http_body_resume(up->c);
  else if (!up->told_end)
    up_finish(up);
}

static const struct http_stream_ops up_ops = {
    .abort = up_abort, .body = up_body, .body_end = up_body_end};

static void up_done(const struct files_result *r, const struct hutch_err *err, void *arg) {
  struct upload *up = arg;
  struct http_conn *c = up->c;
  files_written_fn answer = up->answer;
  up->op = NULL;
  up_free(up);
  http_own(c, NULL, NULL);
  if (err)
    http_fail(c, err);
  else
    answer(c, r);
}

struct upload *api_files_upload_later(struct http_conn *c, files_written_fn answer,
                                      void (*over)(void *arg), void *arg) {
  struct upload *up = xcalloc(1, sizeof *up);
  up->c = c;
  up->answer = answer;
  up->over = over;
  up->over_arg = arg;
  http_body_start(c, &up_ops, up);
  return up;
}

static void upload_into(struct upload *up, struct sbx *sb, const char *path, const char *user,
                        const struct files_upload_opts *o, const struct hutch_err *why) {
  struct hutch_err err = {0};
  if (up->gone) {
    up_free(up);
    return;
  }

  up->started = true;
  /* 16 + MAX_WBITS: gzip's header and trailer, nothing else. */
  if (sb && o && o->gzip && inflateInit2(&up->z, 16 + MAX_WBITS) != Z_OK) {
    hutch_err_fail(&err, HUTCH_ERR_SYSTEM, "internal", "cannot start inflating the body");
    up_done(NULL, &err, up);
    return;
  }

  up->gzip = sb && o && o->gzip;
  up->op =
      sb ? files_write(sb, path, user, o ? &o->write : NULL, up_resume, up_done, up, &err) : NULL;
  if (!up->op) {
    up_done(NULL, sb ? &err : why, up);
    return;
  }

  /* The write takes what came early, then the rest as it comes. */
  char *early = up->early;
  size_t n = up->nearly;
  up->early = NULL;
  bool more = up_feed(up, early, n, true);
  if (up->body_done && more)
    up_finish(up);
  else if (more)
    http_body_resume(up->c);
}

void api_files_upload_into(struct upload *up, struct sbx *sb, const char *path, const char *user,
                           const struct files_upload_opts *o, const struct hutch_err *why) {
  upload_into(up, sb, path, user, o, why);
}

void api_files_upload(struct http_conn *c, struct sbx *sb, const char *path, const char *user,
                      const struct files_upload_opts *o, files_written_fn answer) {
  upload_into(api_files_upload_later(c, answer, NULL, NULL), sb, path, user, o, NULL);
}

static void answer_written(struct http_conn *c, const struct files_result *r) {
  http_json(c, 200,
            json_pack("{s:s,s:O?}", "path", r->path, "size", json_object_get(r->done, "size")));
}

void api_files_write(struct http_conn *c, const struct principal *p) {
  char *path;
  const char *user;
  struct sbx *sb = file_target(c, p, &path, &user);
  if (sb)
    api_files_upload(c, sb, path, user, NULL, answer_written);
  free(path);
}
