/* The file actions on a sandbox (files.h), each one agent stream.
 *
 * Uploads and downloads stream: a write takes its bytes as the front end
 * feeds them and asks it to pause while the agent has not taken them; a
 * read is read from the agent as fast as the sink takes it. Neither is
 * ever held whole in memory. */
#include "core/run/files.h"

#include <stdlib.h>
#include <string.h>

#include "frame.h"
#include "util.h"
#include "core/sandbox/agentc.h"
#include "core/sandbox/sbx.h"

#define WRITE_HELD (1u << 20)      /* written bytes queued for the agent before a pause */
#define LIST_MAX (16u << 20)       /* a listing collected for one result */
#define WATCH_LINE_MAX (64u << 10) /* a watch event's line; longer ones are cut */

enum op_kind { OP_UNARY, OP_LIST, OP_READ, OP_WATCH, OP_WRITE };

struct files_op {
  struct astream *s; /* NULL once the agent's stream has ended or was abandoned */
  enum op_kind kind;
  files_done_fn done;        /* unary, list and write */
  struct files_sink sink;    /* read and watch */
  void (*resume)(void *arg); /* write */
  void *arg;
  char *path;
  char *out; /* a listing's lines, or a watch's line so far */
  size_t nout;
  uint32_t owed; /* window held back while the sink takes no more */
  bool over;     /* the front end has heard the end, or cancelled */
  int busy;      /* callbacks under way: a cancel they cause must not free op under them */
};

static void op_maybe_free(struct files_op *op) {
  if (op->s || !op->over || op->busy)
    return;
  free(op->path);
  free(op->out);
  free(op);
}

int files_path_check(const char *path, struct hutch_err *err) {
  json_t *utf8 = path ? json_string(path) : NULL;
  json_decref(utf8);
  if (utf8 && *path && strlen(path) <= FILES_PATH_MAX)
    return 0;
  return hutch_err_fail(err, HUTCH_ERR_INVALID, "invalid_argument",
                        "path is required (UTF-8, at most %d bytes, percent-encoded)",
                        FILES_PATH_MAX);
}

/* The agent's error event as an error: its codes (docs/protocol.md) as
 * kinds, the one place they are; any other is hutch's. */
static void agent_err(json_t *ev, struct hutch_err *err) {
  static const struct {
    const char *code;
    enum hutch_errkind kind;
  } map[] = {
      {"not_found", HUTCH_ERR_NOT_FOUND},       {"permission_denied", HUTCH_ERR_FORBIDDEN},
      {"exists", HUTCH_ERR_CONFLICT},           {"not_a_directory", HUTCH_ERR_INVALID},
      {"is_a_directory", HUTCH_ERR_INVALID},    {"not_empty", HUTCH_ERR_CONFLICT},
      {"no_space", HUTCH_ERR_NO_SPACE},         {"invalid", HUTCH_ERR_INVALID},
      {"not_supported", HUTCH_ERR_UNSUPPORTED},
  };
  const char *code = json_string_value(json_object_get(ev, "code"));
  const char *msg = json_string_value(json_object_get(ev, "message"));
  enum hutch_errkind kind = HUTCH_ERR_SYSTEM;
  const char *out = "sandbox_error";
  for (size_t i = 0; code && i < ARRAY_SIZE(map); i++)
    if (strcmp(code, map[i].code) == 0) {
      kind = map[i].kind;
      out = map[i].code;
    }
  hutch_err_fail(err, kind, out, "%s", msg ? msg : "the file operation failed");
}

/* How the operation ended, to the front end: once. */
static void op_end(struct files_op *op, const struct files_result *r, const struct hutch_err *err) {
  if (op->over)
    return;
  op->over = true;
  if (op->kind == OP_READ || op->kind == OP_WATCH)
    op->sink.end(op->sink.arg, err);
  else
    op->done(err ? NULL : r, err, op->arg);
}

/* The agent's bytes were taken: as many more may come. */
static void took(struct files_op *op, bool more, uint32_t n) {
  if (!op->s)
    return;
  if (more)
    agentc_window(op->s, n);
  else
    op->owed += n;
}

static void watch_line(struct files_op *op, const char *p, size_t n, bool *more) {
  json_t *ev = json_loadb(p, n, 0, NULL);
  if (json_is_object(ev) && !op->over)
    *more = op->sink.event(op->sink.arg, ev) && *more;
  json_decref(ev);
}

static void watch_output(struct files_op *op, const uint8_t *p, size_t n) {
  bool more = true;
  uint32_t len = (uint32_t)n;
  while (n > 0 && !op->over) {
    const uint8_t *nl = memchr(p, '\n', n);
    size_t take = nl ? (size_t)(nl - p) + 1 : n;
    if (op->nout + take <= WATCH_LINE_MAX) {
      op->out = xrealloc(op->out, op->nout + take);
      memcpy(op->out + op->nout, p, take);
      op->nout += take;
    }

    if (nl && op->nout)
      watch_line(op, op->out, op->nout - (op->out[op->nout - 1] == '\n'), &more);
    if (nl)
      op->nout = 0;

    p += take;
    n -= take;
  }

  took(op, more, len);
}

static void on_output(struct files_op *op, const struct hutch_frame *fr) {
  if (op->kind == OP_READ) {
    took(op, op->sink.data(op->sink.arg, fr->payload, fr->len), fr->len);
    return;
  }
  if (op->kind == OP_WATCH) {
    watch_output(op, fr->payload, fr->len);
    return;
  }
  if (op->kind != OP_LIST) { /* The other kinds send no output, and any is ignored. */
    agentc_window(op->s, fr->len);
    return;
  }

  if (op->nout + fr->len > LIST_MAX) {
    struct hutch_err err = {0};
    agentc_abandon(op->s);
    op->s = NULL;
    hutch_err_fail(&err, HUTCH_ERR_INVALID, "invalid_argument",
                   "the listing exceeds %u bytes: ask for less depth", LIST_MAX);
    op_end(op, NULL, &err);
    return;
  }

  op->out = xrealloc(op->out, op->nout + fr->len + 1);
  memcpy(op->out + op->nout, fr->payload, fr->len);
  op->nout += fr->len;
  agentc_window(op->s, fr->len);
}

/* A listing's lines, one entry each. */
static json_t *entries(const char *out, size_t nout) {
  json_t *list = json_array();
  for (const char *line = out, *end; line && line < out + nout; line = end + 1) {
    end = memchr(line, '\n', (size_t)(out + nout - line));
    if (!end)
      break;
    json_t *e = json_loadb(line, (size_t)(end - line), 0, NULL);
    if (e)
      json_array_append_new(list, e);
  }
  return list;
}

static void on_end(struct files_op *op, const struct hutch_frame *fr) {
  json_t *j = json_loadb((const char *)fr->payload, fr->len, 0, NULL);
  bool failed = fr->type == HUTCH_F_ERROR || !json_is_object(j);
  /* That is not what an agent sends: it is a failure, for a reason unknown. */
  if (!json_is_object(j)) {
    json_decref(j);
    j = json_object();
  }

  op->s = NULL;
  struct hutch_err err = {0};
  if (failed) {
    agent_err(j, &err);
    op_end(op, NULL, &err);
  } else {
    struct files_result r = {j, op->kind == OP_LIST ? entries(op->out, op->nout) : NULL, op->path};
    op_end(op, &r, NULL);
    json_decref(r.entries);
  }

  json_decref(j);
}

static void on_frame(struct astream *s, const struct hutch_frame *fr) {
  struct files_op *op = s->ctx;
  op->busy++;

  if (!fr) { /* The sandbox went away. */
    struct hutch_err err = {0};
    op->s = NULL;
    hutch_err_fail(&err, HUTCH_ERR_UNAVAILABLE, "sandbox_error",
                   "the sandbox ended during the file operation");
    op_end(op, NULL, &err);
  } else if (!op->over && fr->type == HUTCH_F_STDOUT) {
    on_output(op, fr);
  } else if (fr->flags & HUTCH_FL_END) {
    on_end(op, fr);
  }

  op->busy--;
  op_maybe_free(op);
}

static void on_stdin_drained(struct astream *s) {
  struct files_op *op = s->ctx;
  if (!op->over && op->resume)
    op->resume(op->arg);
}

/* Open the agent stream for req (a reference taken). */
static struct files_op *start(struct sbx *sb, json_t *req, const char *path, enum op_kind kind,
                              struct hutch_err *err) {
  if (!req) { /* It is a path or name that JSON cannot carry. */
    hutch_err_fail(err, HUTCH_ERR_INVALID, "invalid_argument", "the path is not UTF-8");
    return NULL;
  }

  /* The agent acts beneath that directory alone (agent/files.c, confined). */
  if (sb->file_root)
    json_object_set_new(req, "root", json_string(sb->file_root));

  struct files_op *op = xcalloc(1, sizeof *op);
  op->kind = kind;
  op->s = agentc_open(&sb->ac, req, on_frame, op);
  json_decref(req);
  if (!op->s) {
    free(op);
    hutch_err_fail(err, HUTCH_ERR_UNAVAILABLE, "sandbox_error",
                   "the sandbox's agent is not reachable");
    return NULL;
  }

  op->path = xstrdup(path);
  return op;
}

static int unary(struct sbx *sb, json_t *req, const char *path, enum op_kind kind,
                 files_done_fn done, void *arg, struct hutch_err *err) {
  struct files_op *op = start(sb, req, path, kind, err);
  if (!op)
    return -1;
  op->done = done;
  op->arg = arg;
  return 0;
}

int files_stat(struct sbx *sb, const char *path, const char *user, files_done_fn done, void *arg,
               struct hutch_err *err) {
  return unary(sb, json_pack("{s:s,s:s,s:s}", "op", "stat", "path", path, "user", user), path,
               OP_UNARY, done, arg, err);
}

int files_list(struct sbx *sb, const char *path, const char *user, unsigned depth,
               files_done_fn done, void *arg, struct hutch_err *err) {
  return unary(sb,
               json_pack("{s:s,s:s,s:s,s:I}", "op", "list", "path", path, "user", user, "depth",
                         (json_int_t)depth),
               path, OP_LIST, done, arg, err);
}

int files_changed(struct sbx *sb, const char *path, const char *user, int64_t since_ns,
                  files_done_fn done, void *arg, struct hutch_err *err) {
  return unary(sb,
               json_pack("{s:s,s:s,s:s,s:I}", "op", "changed", "path", path, "user", user,
                         "since_ns", (json_int_t)since_ns),
               path, OP_UNARY, done, arg, err);
}

int files_mkdir(struct sbx *sb, const char *path, const char *user, bool parents,
                files_done_fn done, void *arg, struct hutch_err *err) {
  return unary(
      sb,
      json_pack("{s:s,s:s,s:s,s:b}", "op", "mkdir", "path", path, "user", user, "parents", parents),
      path, OP_UNARY, done, arg, err);
}

int files_mkdir_owned(struct sbx *sb, const char *path, const char *user, files_done_fn done,
                      void *arg, struct hutch_err *err) {
  return unary(sb,
               json_pack("{s:s,s:s,s:s,s:b,s:b}", "op", "mkdir", "path", path, "user", user,
                         "parents", 1, "parents_owned", 1),
               path, OP_UNARY, done, arg, err);
}

int files_move(struct sbx *sb, const char *path, const char *to, const char *user,
               files_done_fn done, void *arg, struct hutch_err *err) {
  return unary(sb,
               json_pack("{s:s,s:s,s:s,s:s}", "op", "move", "path", path, "to", to, "user", user),
               to, OP_UNARY, done, arg, err);
}

int files_remove(struct sbx *sb, const char *path, const char *user, bool recursive,
                 files_done_fn done, void *arg, struct hutch_err *err) {
  return unary(sb,
               json_pack("{s:s,s:s,s:s,s:b}", "op", "remove", "path", path, "user", user,
                         "recursive", recursive),
               path, OP_UNARY, done, arg, err);
}

struct files_op *files_read(struct sbx *sb, const char *path, const char *user,
                            const struct files_sink *sink, struct hutch_err *err) {
  struct files_op *op = start(
      sb, json_pack("{s:s,s:s,s:s}", "op", "read", "path", path, "user", user), path, OP_READ, err);
  if (!op)
    return NULL;
  op->sink = *sink;
  /* A file's bytes come raw, in a file's window: what the server holds for
   * a slow client stays within it (and the HTTP high-water mark). */
  agentc_window(op->s, HUTCH_FILE_WINDOW - HUTCH_WINDOW_INITIAL);
  return op;
}

struct files_op *files_watch(struct sbx *sb, const char *path, const char *user, bool recursive,
                             bool entries, const struct files_sink *sink, struct hutch_err *err) {
  struct files_op *op = start(sb,
                              json_pack("{s:s,s:s,s:s,s:b,s:b}", "op", "watch", "path", path,
                                        "user", user, "recursive", recursive, "entry", entries),
                              path, OP_WATCH, err);
  if (op)
    op->sink = *sink;
  return op;
}

struct files_op *files_write(struct sbx *sb, const char *path, const char *user,
                             const struct files_write_opts *o, void (*resume)(void *arg),
                             files_done_fn done, void *arg, struct hutch_err *err) {
  struct files_op *op =
      start(sb,
            json_pack("{s:s,s:s,s:s,s:b,s:b,s:b,s:O*}", "op", "write", "path", path, "user", user,
                      "parents", 1, "parents_owned", o && o->owned_parents, "exclusive",
                      o && o->exclusive, "metadata", o ? o->metadata : NULL),
            path, OP_WRITE, err);
  if (!op)
    return NULL;
  op->resume = resume;
  op->done = done;
  op->arg = arg;
  op->s->stdin_drained = on_stdin_drained;
  op->s->chunk = HUTCH_FILE_CHUNK;
  return op;
}

bool files_write_data(struct files_op *op, const void *p, size_t n) {
  if (!op->s || n == 0)
    return true;
  agentc_stdin(op->s, p, n, false);
  return agentc_stdin_pending(op->s) <= WRITE_HELD;
}

void files_write_end(struct files_op *op) {
  if (op->s)
    agentc_stdin(op->s, NULL, 0, true);
}

void files_resume(struct files_op *op) {
  if (op->s && op->owed) {
    agentc_window(op->s, op->owed);
    op->owed = 0;
  }
}

void files_cancel(struct files_op *op) {
  op->over = true;
  if (op->s) {
    agentc_abandon(op->s);
    op->s = NULL;
  }
  op_maybe_free(op);
}
