/* envd's GET and POST /files, on the file actions (core/files.h) through
 * the native API's streams (api/files.c): the path and the user resolve
 * as for envd's filesystem service (e2b/fs.c).
 *
 *   GET /files?path=&username=               the bytes
 *   POST /files?path=                        multipart/form-data (a part
 *                                            "file" per file, its filename
 *                                            the path) or the bytes as
 *                                            application/octet-stream;
 *                                            → [{name, type, path}] */
#include "e2b/files.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "util.h"
#include "api/files.h"
#include "api/lifecycle.h"
#include "core/run/files.h"
#include "core/sandbox/sbx.h"
#include "e2b/control.h"
#include "e2b/fs.h"
#include "http/body.h"
#include "http/errors.h"
#include "http/http.h"
#include "http/multipart.h"
#include "http/request.h"

/* The user and the absolute path a /files request names (path and
 * username in the query); NULL after an error answer. */
static struct sbx *files_target(struct http_conn *c, const struct principal *p, char **path,
                                const char **user, bool required) {
  struct sbx *sb = api_sbx_lookup(c, p);
  *path = NULL;
  if (!sb)
    return NULL;
  *user = e2b_user(c, sb);
  if (!*user)
    return NULL;

  char *q = http_query(&c->req, "path");
  if (q || required) {
    if (!e2b_path_ok(c, q)) {
      free(q);
      return NULL;
    }
    *path = e2b_path(q, *user);
  }
  free(q);
  return sb;
}

void e2b_files_read(struct http_conn *c, const struct principal *p) {
  char *path;
  const char *user;
  struct sbx *sb = files_target(c, p, &path, &user, true);
  if (sb)
    api_files_download(c, sb, path, user);
  free(path);
}

/* What envd answers for a file written: [{name, type, path, metadata?}]
 * (done: the write's result, which has the metadata set). */
static json_t *written(const char *path, json_t *done) {
  const char *slash = strrchr(path, '/');
  return json_pack("{s:o,s:s,s:o,s:O*}", "name", http_json_text(slash ? slash + 1 : path), "type",
                   "file", "path", http_json_text(path), "metadata",
                   json_object_get(done, "metadata"));
}

static void answer_written(struct http_conn *c, const struct files_result *r) {
  http_json(c, 200, json_pack("[o]", written(r->path, r->done)));
}

/* An upload's metadata, envd's: each X-Metadata-KEY header, KEY
 * lowercased, the first of a name; keys and values printable ASCII, a key
 * at most 246 bytes, all of them (with "user.e2b." before each key) at
 * most 4096. An object (maybe empty: the file's metadata is cleared), or
 * NULL after a 400. */
#define META_PREFIX "X-Metadata-"
#define META_NS_LEN 9 /* "user.e2b." */

static bool printable(const char *s) {
  for (; *s; s++)
    if (*s < 0x20 || *s > 0x7e)
      return false;
  return true;
}

static json_t *upload_metadata(struct http_conn *c) {
  json_t *m = json_object();
  size_t total = 0, plen = strlen(META_PREFIX);
  for (size_t i = 0; i < c->req.nheaders; i++) {
    const struct http_header *h = &c->req.headers[i];
    if (strncasecmp(h->name, META_PREFIX, plen) != 0)
      continue;

    char key[256];
    size_t klen = strlen(h->name + plen);
    if (klen == 0 || klen > 246 || !printable(h->name + plen) || !printable(h->value)) {
      http_error(c, HUTCH_ERR_INVALID, "invalid_argument",
                 "metadata keys (1 to 246 bytes) and values are printable ASCII");
      json_decref(m);
      return NULL;
    }
    for (size_t k = 0; k <= klen; k++)
      key[k] = (char)tolower((unsigned char)h->name[plen + k]);
    if (json_object_get(m, key))
      continue;

    total += META_NS_LEN + klen + strlen(h->value);
    if (total > 4096) {
      http_error(c, HUTCH_ERR_INVALID, "invalid_argument",
                 "a file's metadata is at most 4096 bytes");
      json_decref(m);
      return NULL;
    }
    json_object_set_new(m, key, json_string(h->value));
  }
  return m;
}

/* A multipart/form-data upload: its parts are parsed as the body comes,
 * each part named "file" is written (to ?path= if given, else to its
 * filename) by its own write action, started as its headers end and fed
 * as its bytes come. Reading pauses while a part's write has not taken
 * what it was sent. The answer waits for every write. */
struct part {
  struct part *next;
  struct upload *up;
  struct files_op *op; /* NULL once its write has ended */
  char *path;
  size_t index; /* its place in the answer: the request's order */
};

struct upload {
  struct http_conn *c; /* NULL once the client is gone */
  char user[8];
  char *path; /* ?path=, for every part */
  struct multipart mp;
  struct part *parts;   /* writes not ended */
  struct part *cur;     /* the part being read; NULL: one not wanted */
  json_t *results;      /* a place per part, filled as its write ends */
  json_t *metadata;     /* every part's */
  struct hutch_err err; /* the first write that failed, when failed */
  bool failed;
  bool body_done;
  bool bad; /* a "file" part not writable as named, or the body cut short */
};

static void upload_maybe_end(struct upload *up) {
  if (up->parts || (!up->body_done && up->c))
    return;

  struct http_conn *c = up->c;
  if (c)
    http_own(c, NULL, NULL);
  if (c && up->failed)
    http_fail(c, &up->err);
  else if (c && (up->bad || up->mp.bad))
    http_error(c, HUTCH_ERR_INVALID, "invalid_argument",
               "the body is not multipart/form-data as it says");
  else if (c && json_array_size(up->results) == 0)
    http_error(c, HUTCH_ERR_INVALID, "invalid_argument", "no part named \"file\" in the form");
  else if (c)
    http_json(c, 200, json_incref(up->results));

  free(up->path);
  http_multipart_free(&up->mp);
  json_decref(up->results);
  json_decref(up->metadata);
  free(up);
}

/* done: the write's result (NULL when it failed or was cancelled). */
static void part_end(struct part *pt, json_t *done, const struct hutch_err *err) {
  struct upload *up = pt->up;
  for (struct part **q = &up->parts; *q; q = &(*q)->next)
    if (*q == pt) {
      *q = pt->next;
      break;
    }
  if (up->cur == pt)
    up->cur = NULL;
  if (err && !up->failed) {
    up->failed = true;
    up->err = *err;
  } else if (!err) {
    json_array_set_new(up->results, pt->index, written(pt->path, done));
  }
  free(pt->path);
  free(pt);
  /* A write that ended while the body was paused for it will never
   * resume it: the rest of the body is read (and dropped, or written to
   * the next parts), or the upload would wait for ever. */
  if (!up->body_done && up->c)
    http_body_resume(up->c);
  upload_maybe_end(up);
}

static void part_done(const struct files_result *r, const struct hutch_err *err, void *arg) {
  struct part *pt = arg;
  pt->op = NULL;
  part_end(pt, r ? r->done : NULL, err);
}

static void part_resume(void *arg) {
  struct part *pt = arg;
  if (pt->up->c)
    http_body_resume(pt->up->c);
}

static void part_begin(void *ctx, const char *headers) {
  struct upload *up = ctx;
  char *name = http_multipart_filename(headers);
  up->cur = NULL;
  if (!name)
    return; /* not a file: its bytes are skipped */
  if (!up->path && (!*name || strlen(name) > FILES_PATH_MAX)) {
    free(name);
    up->bad = true;
    return;
  }

  /* The sandbox is found again for each part: it may have ended since
   * the upload began (its memory gone with it). */
  struct sbx *sb = up->c ? e2b_sandbox(up->c) : NULL;
  if (!sb) {
    free(name);
    if (!up->failed)
      hutch_err_fail(&up->err, HUTCH_ERR_UNAVAILABLE, "sandbox_error",
                     "the sandbox ended during the upload");
    up->failed = true;
    return;
  }

  struct part *pt = xcalloc(1, sizeof *pt);
  struct hutch_err err = {0};
  pt->up = up;
  pt->path = up->path ? xstrdup(up->path) : e2b_path(name, up->user);
  free(name);
  /* Fails too when the filename is not UTF-8: no request for the agent. */
  struct files_write_opts o = {up->metadata, true};
  pt->op = files_write(sb, pt->path, up->user, &o, part_resume, part_done, pt, &err);
  if (!pt->op) {
    up->bad = true;
    free(pt->path);
    free(pt);
    return;
  }

  pt->index = json_array_size(up->results);
  json_array_append_new(up->results, json_null());
  pt->next = up->parts;
  up->parts = pt;
  up->cur = pt;
}

static void part_data(void *ctx, const char *p, size_t n) {
  struct upload *up = ctx;
  if (!up->cur || !up->cur->op || n == 0)
    return;
  if (!files_write_data(up->cur->op, p, n) && up->c)
    http_body_pause(up->c);
}

static void part_close(void *ctx) {
  struct upload *up = ctx;
  if (up->cur && up->cur->op)
    files_write_end(up->cur->op);
  up->cur = NULL;
}

static const struct multipart_ops part_ops = {
    .begin = part_begin, .data = part_data, .end = part_close};

static void mp_body(void *ctx, const char *data, size_t n) {
  struct upload *up = ctx;
  http_multipart_feed(&up->mp, data, n);
}

static void mp_body_end(void *ctx) {
  struct upload *up = ctx;
  if (!http_multipart_done(&up->mp)) { /* cut short: what was written in part is an error */
    up->bad = true;
    part_close(up);
  }
  up->body_done = true;
  upload_maybe_end(up);
}

static void mp_abort(void *ctx) {
  struct upload *up = ctx;
  up->c = NULL;
  up->body_done = true;
  if (!up->parts) {
    upload_maybe_end(up);
    return;
  }
  /* Every write is cancelled (the agent ends it); the last part's end
   * frees up. */
  for (;;) {
    struct part *pt = up->parts;
    bool last = !pt->next;
    if (pt->op)
      files_cancel(pt->op);
    pt->op = NULL;
    part_end(pt, NULL, NULL);
    if (last)
      return;
  }
}

static const struct http_stream_ops mp_ops = {
    .abort = mp_abort, .body = mp_body, .body_end = mp_body_end};

/* A multipart/form-data body: its parts written as they come (struct
 * upload), as user, each to *path when given (then taken), else to its
 * file name. */
static void multipart_start(struct http_conn *c, const char *ctype, const char *user, char **path,
                            json_t *meta) {
  char *b = http_multipart_boundary(ctype);
  if (!b) {
    http_error(c, HUTCH_ERR_INVALID, "invalid_argument", "multipart/form-data needs a boundary");
    return;
  }
  struct upload *up = xcalloc(1, sizeof *up);
  up->c = c;
  str_copy(up->user, sizeof up->user, user);
  up->path = *path;
  *path = NULL;
  http_multipart_init(&up->mp, b, &part_ops, up);
  up->results = json_array();
  up->metadata = json_incref(meta);
  free(b);
  http_body_start(c, &mp_ops, up);
}

void e2b_files_write(struct http_conn *c, const struct principal *p) {
  char *path;
  const char *user;
  struct sbx *sb = files_target(c, p, &path, &user, false);
  if (!sb)
    return;

  const char *ctype = http_header(&c->req, "Content-Type");
  const char *enc = http_header(&c->req, "Content-Encoding");
  bool multipart = ctype && strncasecmp(ctype, "multipart/form-data", 19) == 0;
  bool gzip = enc && strcasecmp(enc, "gzip") == 0;
  if (enc && strcasecmp(enc, "identity") != 0 && (!gzip || multipart)) {
    http_error(c, HUTCH_ERR_MEDIA, "unsupported_encoding",
               "Content-Encoding %.32s: hutch takes gzip on application/octet-stream uploads only",
               enc);
    free(path);
    return;
  }
  json_t *meta = upload_metadata(c);
  if (!meta) { /* answered */
    free(path);
    return;
  }

  if (multipart) {
    multipart_start(c, ctype, user, &path, meta);
  } else if (!path) { /* the bytes themselves: one file, at ?path= */
    http_error(c, HUTCH_ERR_INVALID, "invalid_argument", "path is required (a query parameter)");
  } else {
    struct files_upload_opts o = {.gzip = gzip, .write = {meta, true}};
    api_files_upload(c, sb, path, user, &o, answer_written);
  }
  json_decref(meta);
  free(path);
}
