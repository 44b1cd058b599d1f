/* /v1/sandboxes/{id}/files: the agent's file operations over HTTP. Every
 * path is resolved by the agent, inside the sandbox and as the sandbox
 * user (docs/protocol.md): the server never touches a sandbox's files.
 *
 * Uploads and downloads stream: a PUT body goes to the agent as it
 * arrives, and reading from the client pauses while the agent has not
 * taken what came; a download is read from the agent as fast as the client
 * takes it. Neither is ever held whole in memory. */
#include <stdlib.h>
#include <string.h>

#include "frame.h"
#include "util.h"
#include "api/api.h"
#include "api/handlers.h"
#include "http/body.h"

#define PATH_MAX_LEN 4095
#define UPLOAD_HELD (1u << 20)   /* upload bytes queued for the agent before reading pauses */
#define LIST_MAX (16u << 20)      /* a listing answered in one body */

struct fileop {
  struct http_conn *c; /* NULL once the client is gone or answered */
  struct astream *s;   /* NULL once the agent's stream has ended */
  enum { OP_READ, OP_WATCH, OP_WRITE, OP_OTHER } kind;
  files_answer_fn answer; /* OP_OTHER and OP_WRITE: the response */
  void *arg;
  char *path;
  char *out; /* OP_OTHER: STDOUT collected (a listing) */
  size_t nout;
  uint32_t owed;
  bool streaming;
  int busy; /* calls under way: an abort they cause must not free f under them */
};

static void fileop_maybe_free(struct fileop *f) {
  if (f->c || f->s || f->busy)
    return;
  free(f->path);
  free(f->out);
  free(f);
}

void files_error(struct http_conn *c, json_t *err) {
  const char *code = json_string_value(json_object_get(err, "code"));
  const char *msg = json_string_value(json_object_get(err, "message"));
  /* The agent's codes (docs/protocol.md) as kinds; any other is hutch's. */
  static const struct {
    const char *code;
    enum hutch_errkind kind;
  } map[] = {
      {"not_found", HUTCH_ERR_NOT_FOUND},     {"permission_denied", HUTCH_ERR_FORBIDDEN},
      {"exists", HUTCH_ERR_CONFLICT},         {"not_a_directory", HUTCH_ERR_INVALID},
      {"is_a_directory", HUTCH_ERR_INVALID},  {"not_empty", HUTCH_ERR_CONFLICT},
      {"no_space", HUTCH_ERR_NO_SPACE},       {"invalid", HUTCH_ERR_INVALID},
  };
  enum hutch_errkind kind = HUTCH_ERR_SYSTEM;
  const char *out = "sandbox_error";
  for (size_t i = 0; code && i < ARRAY_SIZE(map); i++)
    if (strcmp(code, map[i].code) == 0) {
      kind = map[i].kind;
      out = map[i].code;
    }
  http_error(c, kind, out, "%s", msg ? msg : "the file operation failed");
}

static void on_abort(void *ctx) {
  struct fileop *f = ctx;
  f->c = NULL;
  if (f->s) {
    agentc_abandon(f->s);
    f->s = NULL;
  }
  fileop_maybe_free(f);
}

static void on_drain(void *ctx) {
  struct fileop *f = ctx;
  if (f->s && f->owed) {
    agentc_window(f->s, f->owed);
    f->owed = 0;
  }
}

static void on_body(void *ctx, const char *data, size_t n) {
  struct fileop *f = ctx;
  if (!f->s)
    return;
  agentc_stdin(f->s, data, n, false);
  if (f->s && f->c && agentc_stdin_pending(f->s) > UPLOAD_HELD)
    http_body_pause(f->c);
}

static void on_body_end(void *ctx) {
  struct fileop *f = ctx;
  if (f->s)
    agentc_stdin(f->s, NULL, 0, true);
}

static void on_stdin_drained(struct astream *s) {
  struct fileop *f = s->ctx;
  if (f->c)
    http_body_resume(f->c);
}

static const struct http_stream_ops file_ops = {
    .abort = on_abort, .drain = on_drain, .body = on_body, .body_end = on_body_end};

static void on_output(struct fileop *f, const struct hutch_frame *fr) {
  if (f->kind == OP_READ || f->kind == OP_WATCH) {
    if (!f->streaming) { /* the first bytes: it worked, answer 200 */
      f->streaming = true;
      http_stream_start(f->c, 200,
                        f->kind == OP_READ ? "application/octet-stream" : "application/x-ndjson",
                        &file_ops, f);
    }
    http_stream_send(f->c, fr->payload, fr->len);
    if (http_queued(f->c) < HTTP_STREAM_HIGH)
      agentc_window(f->s, fr->len);
    else
      f->owed += fr->len;
    return;
  }
  if (f->nout + fr->len > LIST_MAX) {
    struct http_conn *c = f->c;
    f->c = NULL;
    agentc_abandon(f->s);
    f->s = NULL;
    http_error(c, HUTCH_ERR_INVALID, "invalid_argument", "the listing exceeds %u bytes: ask for less depth",
               LIST_MAX);
    return;
  }
  f->out = xrealloc(f->out, f->nout + fr->len + 1);
  memcpy(f->out + f->nout, fr->payload, fr->len);
  f->nout += fr->len;
  agentc_window(f->s, fr->len);
}

static void on_end(struct fileop *f, const struct hutch_frame *fr) {
  struct http_conn *c = f->c;
  json_t *j = json_loadb((const char *)fr->payload, fr->len, 0, NULL);
  bool failed = fr->type == HUTCH_F_ERROR || !json_is_object(j);
  if (!json_is_object(j)) { /* not what an agent sends: a failure, reason unknown */
    json_decref(j);
    j = json_object();
  }
  f->c = NULL;
  f->s = NULL;
  if (failed && f->streaming) {
    http_abort(c); /* a download failed after it began: cut it short */
  } else if (f->kind == OP_READ || f->kind == OP_WATCH) {
    if (failed)
      files_error(c, j);
    else if (f->streaming)
      http_stream_end(c);
    else
      http_respond(c, 200, "application/octet-stream", "", 0, NULL);
  } else {
    struct files_result r = {failed ? NULL : j, failed ? j : NULL, f->out, f->nout, f->path,
                             f->arg};
    f->answer(c, &r);
  }
  json_decref(j);
}

static void on_frame(struct astream *s, const struct hutch_frame *fr) {
  struct fileop *f = s->ctx;
  f->busy++;
  if (!fr) { /* the sandbox went away */
    f->s = NULL;
    if (f->c) {
      struct http_conn *c = f->c;
      f->c = NULL;
      if (f->streaming)
        http_abort(c);
      else
        http_error(c, HUTCH_ERR_UNAVAILABLE, "sandbox_error", "the sandbox ended during the file operation");
    }
  } else if (f->c && fr->type == HUTCH_F_STDOUT) {
    on_output(f, fr);
  } else if (f->c && (fr->flags & HUTCH_FL_END)) {
    on_end(f, fr);
  } else if (fr->flags & HUTCH_FL_END) {
    f->s = NULL;
  }
  f->busy--;
  fileop_maybe_free(f);
}

/* ---- requests ---- */

/* The sandbox, the path and the user of a file request, or NULL after
 * an error answer. *path is malloc'd. */
static struct sbx *file_target(struct http_conn *c, const struct principal *p, char **path,
                               const char **user) {
  struct sbx *sb = sbx_lookup_live(c, p);
  *path = NULL;
  if (!sb)
    return NULL;
  char *u = http_query(&c->req, "user");
  *user = !u || strcmp(u, "user") == 0 ? "user" : strcmp(u, "root") == 0 ? "root" : NULL;
  free(u);
  *path = http_query(&c->req, "path");
  if (!*user) {
    http_error(c, HUTCH_ERR_INVALID, "invalid_argument", "user must be user or root");
  } else if (!files_path_ok(c, *path)) {
  } else {
    return sb;
  }
  free(*path);
  *path = NULL;
  return NULL;
}

bool files_path_ok(struct http_conn *c, const char *path) {
  /* The agent's requests are JSON: a path must be UTF-8 to go in one. */
  json_t *utf8 = path ? json_string(path) : NULL;
  json_decref(utf8);
  if (utf8 && *path && strlen(path) <= PATH_MAX_LEN)
    return true;
  http_error(c, HUTCH_ERR_INVALID, "invalid_argument",
             "path is required (UTF-8, at most %d bytes, percent-encoded)", PATH_MAX_LEN);
  return false;
}

/* Open the agent stream for req (a reference taken); NULL after a 503. */
static struct fileop *start(struct http_conn *c, struct sbx *sb, json_t *req, char *path,
                            int kind) {
  struct fileop *f = xcalloc(1, sizeof *f);
  f->kind = kind;
  f->path = path;
  f->s = agentc_open(&sb->ac, req, on_frame, f);
  json_decref(req);
  if (!f->s) {
    free(f->path);
    free(f);
    http_error(c, HUTCH_ERR_UNAVAILABLE, "sandbox_error", "the sandbox's agent is not reachable");
    return NULL;
  }
  f->c = c;
  return f;
}

void files_read(struct http_conn *c, struct sbx *sb, char *path, const char *user) {
  struct fileop *f = start(c, sb, json_pack("{s:s,s:s,s:s}", "op", "read", "path", path, "user",
                                            user), path, OP_READ);
  if (f)
    http_own(c, &file_ops, f);
}

void api_files_read(struct http_conn *c, const struct principal *p) {
  char *path;
  const char *user;
  struct sbx *sb = file_target(c, p, &path, &user);
  if (sb)
    files_read(c, sb, path, user);
}

/* Changes under a directory as NDJSON, until the client goes (the agent
 * then kills the watcher). */
void api_files_watch(struct http_conn *c, const struct principal *p) {
  char *path, *rec = http_query(&c->req, "recursive");
  const char *user;
  struct sbx *sb = file_target(c, p, &path, &user);
  bool recursive = rec && strcmp(rec, "true") == 0;
  free(rec);
  if (!sb)
    return;
  struct fileop *f = start(c, sb,
                           json_pack("{s:s,s:s,s:s,s:b}", "op", "watch", "path", path, "user",
                                     user, "recursive", recursive),
                           path, OP_WATCH);
  if (f)
    http_own(c, &file_ops, f);
}

void files_write(struct http_conn *c, struct sbx *sb, char *path, const char *user,
                 files_answer_fn answer, void *arg) {
  struct fileop *f = start(c, sb,
                           json_pack("{s:s,s:s,s:s,s:b}", "op", "write", "path", path, "user",
                                     user, "parents", 1),
                           path, OP_WRITE);
  if (!f)
    return;
  f->answer = answer;
  f->arg = arg;
  f->s->stdin_drained = on_stdin_drained;
  http_body_start(c, &file_ops, f);
}

static void answer_written(struct http_conn *c, const struct files_result *r) {
  if (r->err)
    files_error(c, r->err);
  else
    http_json(c, 200,
              json_pack("{s:s,s:O?}", "path", r->path, "size", json_object_get(r->done, "size")));
}

void api_files_write(struct http_conn *c, const struct principal *p) {
  char *path;
  const char *user;
  struct sbx *sb = file_target(c, p, &path, &user);
  if (sb)
    files_write(c, sb, path, user, answer_written, NULL);
}

static void answer_empty(struct http_conn *c, const struct files_result *r) {
  if (r->err)
    files_error(c, r->err);
  else
    http_respond(c, 204, "application/json", "", 0, NULL);
}

static void answer_done(struct http_conn *c, const struct files_result *r) {
  if (r->err) {
    files_error(c, r->err);
    return;
  }
  json_t *j = json_deep_copy(r->done);
  json_object_del(j, "event");
  http_json(c, 200, j);
}

json_t *files_entries(const char *out, size_t nout) {
  json_t *entries = json_array();
  for (const char *line = out, *end; line && line < out + nout; line = end + 1) {
    end = memchr(line, '\n', (size_t)(out + nout - line));
    if (!end)
      break;
    json_t *e = json_loadb(line, (size_t)(end - line), 0, NULL);
    if (e)
      json_array_append_new(entries, e);
  }
  return entries;
}

static void answer_list(struct http_conn *c, const struct files_result *r) {
  if (r->err)
    files_error(c, r->err);
  else
    http_json(c, 200, json_pack("{s:o}", "entries", files_entries(r->out, r->nout)));
}

void files_call(struct http_conn *c, struct sbx *sb, json_t *req, char *path,
                files_answer_fn answer, void *arg) {
  struct fileop *f = start(c, sb, req, path, OP_OTHER);
  if (!f)
    return;
  f->answer = answer;
  f->arg = arg;
  http_own(c, &file_ops, f);
}

void api_files_delete(struct http_conn *c, const struct principal *p) {
  char *path, *rec = http_query(&c->req, "recursive");
  const char *user;
  struct sbx *sb = file_target(c, p, &path, &user);
  bool recursive = rec && strcmp(rec, "true") == 0;
  free(rec);
  if (sb)
    files_call(c, sb,
           json_pack("{s:s,s:s,s:s,s:b}", "op", "remove", "path", path, "user", user, "recursive",
                     recursive),
           NULL, answer_empty, NULL);
  free(path);
}

void api_files_stat(struct http_conn *c, const struct principal *p) {
  char *path;
  const char *user;
  struct sbx *sb = file_target(c, p, &path, &user);
  if (sb)
    files_call(c, sb, json_pack("{s:s,s:s,s:s}", "op", "stat", "path", path, "user", user),
           NULL, answer_done, NULL);
  free(path);
}

void api_files_list(struct http_conn *c, const struct principal *p) {
  char *path, *d = http_query(&c->req, "depth");
  const char *user;
  uint64_t depth = 1;
  struct sbx *sb = file_target(c, p, &path, &user);
  if (sb && d && (!parse_u64(d, &depth) || depth < 1 || depth > 64))
    http_error(c, HUTCH_ERR_INVALID, "invalid_argument", "depth must be from 1 to 64");
  else if (sb)
    files_call(c, sb,
           json_pack("{s:s,s:s,s:s,s:I}", "op", "list", "path", path, "user", user, "depth",
                     (json_int_t)depth),
           NULL, answer_list, NULL);
  free(d);
  free(path);
}

/* mkdir and move take a JSON body: {path, parents} and {path, to}. */
static struct sbx *json_target(struct http_conn *c, const struct principal *p,
                               const char *const *known, json_t **o, const char **path,
                               const char **user) {
  struct sbx *sb = sbx_lookup_live(c, p);
  *path = NULL;
  *user = "user";
  if (!sb || !(*o = body_object(c)))
    return NULL;
  if (body_only(c, *o, known) < 0 || body_string(c, *o, "path", PATH_MAX_LEN, path) < 0 ||
      body_string(c, *o, "user", 8, user) < 0)
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
  if (sb)
    files_call(c, sb,
           json_pack("{s:s,s:s,s:s,s:b}", "op", "mkdir", "path", path, "user", user, "parents",
                     json_is_true(json_object_get(o, "parents"))),
           NULL, answer_done, NULL);
  json_decref(o);
}

void api_files_move(struct http_conn *c, const struct principal *p) {
  static const char *const known[] = {"path", "to", "user", NULL};
  json_t *o = NULL;
  const char *path, *user, *to = NULL;
  struct sbx *sb = json_target(c, p, known, &o, &path, &user);
  int r = sb ? body_string(c, o, "to", PATH_MAX_LEN, &to) : -1;
  if (r == 0 || (r == 1 && !*to))
    http_error(c, HUTCH_ERR_INVALID, "invalid_argument", "to is required");
  else if (r == 1)
    files_call(c, sb,
           json_pack("{s:s,s:s,s:s,s:s}", "op", "move", "path", path, "user", user, "to", to),
           NULL, answer_empty, NULL);
  json_decref(o);
}
