/* envd's filesystem.Filesystem service (E2B's spec/envd/filesystem/
 * filesystem.proto) over Connect RPC, and envd's GET and POST /files, on
 * the file actions (core/files.h): paths resolve inside the
 * sandbox, as its user, exactly as for the native routes. A relative path
 * is taken from the user's home, as envd does.
 *
 *   Stat, ListDir, MakeDir, Move, Remove     unary, EntryInfo shapes
 *   WatchDir                                 stream: {start:{}}, then
 *                                            {filesystem:{name,type}}
 *   CreateWatcher, GetWatcherEvents,         the same events, polled
 *   RemoveWatcher
 *   GET /files?path=&username=               the bytes
 *   POST /files?path=                        multipart/form-data (a part
 *                                            "file" per file, its filename
 *                                            the path) or the bytes as
 *                                            application/octet-stream;
 *                                            → [{name, type, path}] */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "util.h"
#include "api/api.h"
#include "core/files.h"
#include "core/keys.h"
#include "core/sbx.h"
#include "e2b/e2b.h"
#include "http/connect.h"
#include "http/json.h"
#include "http/multipart.h"

#define WATCHERS_MAX 16          /* polled watchers per sandbox */
#define WATCH_EVENTS_MAX 4096    /* events a polled watcher keeps between polls */

/* ---- EntryInfo ---- */

static json_t *entry_info(json_t *e) {
  static const char *const types[][2] = {{"file", "FILE_TYPE_FILE"},
                                         {"dir", "FILE_TYPE_DIRECTORY"},
                                         {"symlink", "FILE_TYPE_SYMLINK"}};
  const char *type = json_string_value(json_object_get(e, "type"));
  int mode = (int)json_integer_value(json_object_get(e, "mode"));
  json_int_t uid = json_integer_value(json_object_get(e, "uid"));
  json_int_t gid = json_integer_value(json_object_get(e, "gid"));
  char perms[11] = "----------", owner[24], group[24], size[24], when[32];
  const char *ptype = NULL;
  for (size_t i = 0; type && i < ARRAY_SIZE(types); i++)
    if (strcmp(type, types[i][0]) == 0)
      ptype = types[i][1];
  perms[0] = !type ? '-' : strcmp(type, "dir") == 0 ? 'd' : strcmp(type, "symlink") == 0 ? 'L' : '-';
  for (int i = 0; i < 9; i++)
    if (mode & (0400 >> i))
      perms[1 + i] = "rwxrwxrwx"[i];
  snprintf(owner, sizeof owner, "%s", uid == 0 ? "root" : uid == 1000 ? "user" : "");
  if (!owner[0])
    snprintf(owner, sizeof owner, "%lld", (long long)uid);
  snprintf(group, sizeof group, "%s", gid == 0 ? "root" : gid == 1000 ? "user" : "");
  if (!group[0])
    snprintf(group, sizeof group, "%lld", (long long)gid);
  snprintf(size, sizeof size, "%lld", (long long)json_integer_value(json_object_get(e, "size")));
  /* A file's time is the workload's to set: kept to what a date can say
   * (1970 to 9999), so that it converts to ms without overflow. */
  double mtime = json_number_value(json_object_get(e, "mtime"));
  iso8601(mtime >= 0 && mtime < 253402300800.0 ? (int64_t)(mtime * 1000) : 0, when);
  json_t *j = json_pack("{s:O?,s:O?,s:s,s:i,s:s,s:s,s:s,s:s}", "name", json_object_get(e, "name"),
                        "path", json_object_get(e, "path"), "size", size, "mode", mode & 0777,
                        "permissions", perms, "owner", owner, "group", group, "modifiedTime", when);
  if (ptype)
    json_object_set_new(j, "type", json_string(ptype));
  if (json_object_get(e, "target"))
    json_object_set(j, "symlinkTarget", json_object_get(e, "target"));
  if (json_object_get(e, "metadata"))
    json_object_set(j, "metadata", json_object_get(e, "metadata"));
  return j;
}

/* A usable path, or false after a 400. */
static bool path_ok(struct http_conn *c, const char *path) {
  struct hutch_err err = {0};
  if (files_path_check(path, &err) == 0)
    return true;
  http_fail(c, &err);
  return false;
}

/* The message, the user and the absolute path of a call on one path (the
 * field key); NULL after an error answer. */
static struct sbx *path_call(struct http_conn *c, const struct principal *p, const char *key,
                             json_t **m, char **path, const char **user) {
  struct sbx *sb = api_sbx_lookup(c, p);
  *m = NULL;
  *path = NULL;
  if (!sb || !(*user = e2b_user(c, sb)) ||
      !(*m = http_connect_request(c, c->dialect == DIALECT_CONNECT_STREAM)))
    return NULL;
  json_t *v = json_object_get(*m, key);
  if (!path_ok(c, json_string_value(v))) /* NULL when not a string: answered too */
    return NULL;
  *path = e2b_path(json_string_value(v), *user);
  return sb;
}

/* ---- the unary calls ---- */

/* A call on the message's path, started by start as the user, answered
 * by answer. */
typedef int (*start_fn)(struct sbx *sb, const char *path, const char *user, files_done_fn done,
                        void *arg, struct hutch_err *err);

static void one_path(struct http_conn *c, const struct principal *p, start_fn start,
                     files_answer_fn answer) {
  json_t *m;
  char *path;
  const char *user;
  struct sbx *sb = path_call(c, p, "path", &m, &path, &user);
  struct hutch_err err = {0};
  if (sb) {
    struct files_wait *k = api_files_wait(c, answer);
    api_files_wait_started(k, start(sb, path, user, api_files_waited, k, &err), &err);
  }
  free(path);
  json_decref(m);
}

static void answer_entry(struct http_conn *c, const struct files_result *r,
                         const struct hutch_err *err) {
  if (err)
    http_fail(c, err);
  else
    http_json(c, 200, json_pack("{s:o}", "entry", entry_info(r->done)));
}

void e2b_fs_stat(struct http_conn *c, const struct principal *p) {
  one_path(c, p, files_stat, answer_entry);
}

static void answer_list(struct http_conn *c, const struct files_result *r,
                        const struct hutch_err *err) {
  if (err) {
    http_fail(c, err);
    return;
  }
  json_t *e, *entries = json_array();
  size_t i;
  json_array_foreach(r->entries, i, e) json_array_append_new(entries, entry_info(e));
  http_json(c, 200, json_pack("{s:o}", "entries", entries));
}

void e2b_fs_list(struct http_conn *c, const struct principal *p) {
  json_t *m;
  char *path;
  const char *user;
  struct sbx *sb = path_call(c, p, "path", &m, &path, &user);
  json_t *d = sb ? json_object_get(m, "depth") : NULL;
  json_int_t depth = d ? json_integer_value(d) : 1;
  struct hutch_err err = {0};
  if (sb && (depth < 1 || depth > 64 || (d && !json_is_integer(d)))) {
    http_error(c, HUTCH_ERR_INVALID, "invalid_argument", "depth is from 1 to 64");
  } else if (sb) {
    struct files_wait *k = api_files_wait(c, answer_list);
    api_files_wait_started(k, files_list(sb, path, user, (unsigned)depth, api_files_waited, k, &err),
                           &err);
  }
  free(path);
  json_decref(m);
}

static void answer_mkdir(struct http_conn *c, const struct files_result *r,
                         const struct hutch_err *err) {
  if (err) {
    http_fail(c, err);
  } else if (!json_is_true(json_object_get(r->done, "created"))) {
    http_error(c, HUTCH_ERR_CONFLICT, "exists", "%s already exists", r->path);
  } else {
    const char *slash = strrchr(r->path, '/');
    http_json(c, 200, json_pack("{s:{s:s,s:s,s:s}}", "entry", "name", slash ? slash + 1 : r->path,
                                "type", "FILE_TYPE_DIRECTORY", "path", r->path));
  }
}

static int mkdir_parents(struct sbx *sb, const char *path, const char *user, files_done_fn done,
                         void *arg, struct hutch_err *err) {
  return files_mkdir_owned(sb, path, user, done, arg, err);
}

void e2b_fs_mkdir(struct http_conn *c, const struct principal *p) {
  one_path(c, p, mkdir_parents, answer_mkdir);
}

/* Move answers with the entry at its destination: a stat follows, as the
 * same user, in the same sandbox (there: its agent just answered). */
static void answer_moved(struct http_conn *c, const struct files_result *r,
                         const struct hutch_err *err) {
  struct sbx *sb = e2b_sandbox(c);
  const char *user = sb ? e2b_user(c, sb) : NULL; /* it was good for the move */
  struct hutch_err serr = {0};
  if (err) {
    http_fail(c, err);
  } else if (!sb) {
    http_error(c, HUTCH_ERR_UNAVAILABLE, "sandbox_error", "the sandbox ended during the move");
  } else if (user) {
    struct files_wait *k = api_files_wait(c, answer_entry);
    api_files_wait_started(k, files_stat(sb, r->path, user, api_files_waited, k, &serr), &serr);
  }
}

void e2b_fs_move(struct http_conn *c, const struct principal *p) {
  json_t *m;
  char *from;
  const char *user;
  struct sbx *sb = path_call(c, p, "source", &m, &from, &user);
  json_t *dest = sb ? json_object_get(m, "destination") : NULL;
  struct hutch_err err = {0};
  if (sb && json_is_string(dest) && path_ok(c, json_string_value(dest))) {
    char *to = e2b_path(json_string_value(dest), user);
    struct files_wait *k = api_files_wait(c, answer_moved);
    api_files_wait_started(k, files_move(sb, from, to, user, api_files_waited, k, &err), &err);
    free(to);
  } else if (sb && !json_is_string(dest)) {
    http_error(c, HUTCH_ERR_INVALID, "invalid_argument", "destination is required");
  }
  free(from);
  json_decref(m);
}

/* envd removes recursively, and a path already gone is no error. */
static void answer_removed(struct http_conn *c, const struct files_result *r,
                           const struct hutch_err *err) {
  (void)r;
  if (err && !(err->code && strcmp(err->code, "not_found") == 0))
    http_fail(c, err);
  else
    http_json(c, 200, json_object());
}

static int remove_all(struct sbx *sb, const char *path, const char *user, files_done_fn done,
                      void *arg, struct hutch_err *err) {
  return files_remove(sb, path, user, true, done, arg, err);
}

void e2b_fs_remove(struct http_conn *c, const struct principal *p) {
  one_path(c, p, remove_all, answer_removed);
}

/* ---- watching: a stream (WatchDir) or a watcher polled for events ---- */

struct watch {
  struct watch *next;  /* the sandbox's polled watchers */
  struct sbx *sb;
  struct files_op *op; /* NULL once the watch has ended */
  struct http_conn *c; /* WatchDir: the stream; a watcher: its CreateWatcher until answered */
  bool polled;
  bool ready;
  bool busy;           /* in an event: the client's end must not free w under it */
  bool gone;           /* WatchDir: the client left during an event */
  char id[17];
  char *root;          /* names are relative to it */
  json_t *events;      /* a watcher's, until polled */
  bool overflowed;
};

static void watch_free(struct watch *w) {
  if (w->op)
    files_cancel(w->op);
  free(w->root);
  json_decref(w->events);
  free(w);
}

static void watch_unlink(struct watch *w) {
  for (struct watch **p = &w->sb->watches; *p; p = &(*p)->next)
    if (*p == w) {
      *p = w->next;
      break;
    }
}

static void watch_gone(void *ctx) { /* the WatchDir client went away: the agent ends the watch */
  struct watch *w = ctx;
  w->c = NULL;
  w->gone = true;
  if (!w->busy)
    watch_free(w);
}

/* The client took what was queued: the agent's events may come again. */
static void watch_drain(void *ctx) {
  struct watch *w = ctx;
  if (w->op)
    files_resume(w->op);
}

static const struct http_stream_ops watch_ops = {.abort = watch_gone, .drain = watch_drain};

static json_t *fs_event(const struct watch *w, json_t *ev) {
  static const char *const types[][2] = {{"create", "EVENT_TYPE_CREATE"},
                                         {"write", "EVENT_TYPE_WRITE"},
                                         {"remove", "EVENT_TYPE_REMOVE"},
                                         {"rename", "EVENT_TYPE_RENAME"},
                                         {"chmod", "EVENT_TYPE_CHMOD"}};
  const char *type = json_string_value(json_object_get(ev, "type"));
  const char *path = json_string_value(json_object_get(ev, "path"));
  size_t n = strlen(w->root);
  while (n > 1 && w->root[n - 1] == '/')
    n--;
  for (size_t i = 0; type && path && i < ARRAY_SIZE(types); i++)
    if (strcmp(type, types[i][0]) == 0) {
      const char *name = strncmp(path, w->root, n) == 0 && path[n] == '/' ? path + n + 1 : path;
      json_t *fe = json_pack("{s:o,s:s}", "name", http_json_text(name), "type", types[i][1]);
      if (json_is_object(json_object_get(ev, "entry")))
        json_object_set_new(fe, "entry", entry_info(json_object_get(ev, "entry")));
      return fe;
    }
  return NULL;
}

static void watch_ready(struct watch *w) {
  w->ready = true;
  struct http_conn *c = w->c;
  if (!w->polled) {
    http_connect_stream_start(c, &watch_ops, w);
    if (w->c)
      http_connect_send(c, json_pack("{s:{}}", "start"));
  } else {
    w->c = NULL;
    w->next = w->sb->watches;
    w->sb->watches = w;
    http_json(c, 200, json_pack("{s:s}", "watcherId", w->id));
  }
}

static bool watch_event(void *arg, json_t *ev) {
  struct watch *w = arg;
  const char *type = json_string_value(json_object_get(ev, "type"));
  w->busy = true;
  if (type && strcmp(type, "ready") == 0 && !w->ready) {
    watch_ready(w);
  } else if (type && strcmp(type, "overflow") == 0) {
    w->overflowed = true;
  } else if (w->ready) {
    json_t *fe = fs_event(w, ev);
    if (fe && !w->polled)
      http_connect_send(w->c, json_pack("{s:o}", "filesystem", fe));
    else if (fe && json_array_size(w->events) < WATCH_EVENTS_MAX)
      json_array_append_new(w->events, fe);
    else if (fe) {
      w->overflowed = true;
      json_decref(fe);
    }
  }
  /* A streamed watch whose client reads slower than files change waits
   * (watch_drain), rather than queue without bound in the server. */
  bool more = w->polled || !w->c || http_queued(w->c) < HTTP_STREAM_HIGH;
  w->busy = false;
  if (w->gone) { /* the client left meanwhile */
    watch_free(w);
    return false;
  }
  return more;
}

/* The watch ended: refused, or its sandbox or worker went away. */
static void watch_end(void *arg, const struct hutch_err *err) {
  struct watch *w = arg;
  struct http_conn *c = w->c;
  w->op = NULL;
  w->c = NULL;
  if (!w->ready) {
    http_own(c, NULL, NULL);
    if (err)
      http_fail(c, err);
    else
      http_error(c, HUTCH_ERR_UNAVAILABLE, "sandbox_error", "the sandbox ended before the watch began");
    watch_free(w);
  } else if (!w->polled && !e2b_sandbox(c)) {
    e2b_cut(c); /* the sandbox was killed: cut, as E2B's proxy does */
    watch_free(w);
  } else if (!w->polled) {
    http_own(c, NULL, NULL);
    struct hutch_err end = {0};
    hutch_err_fail(&end, HUTCH_ERR_UNAVAILABLE, NULL, "%s", err ? err->msg : "the watch ended");
    http_connect_end(c, &end);
    watch_free(w);
  } /* a polled watcher stays until removed: its events can still be read */
}

static void watch_start(struct http_conn *c, const struct principal *p, bool polled) {
  json_t *m;
  char *path;
  const char *user;
  struct sbx *sb = path_call(c, p, "path", &m, &path, &user);
  unsigned n = 0;
  for (struct watch *w = sb ? sb->watches : NULL; w; w = w->next)
    n++;
  if (sb && polled && n >= WATCHERS_MAX) {
    http_error(c, HUTCH_ERR_QUOTA, "quota_exceeded", "a sandbox has at most %d polled watchers", WATCHERS_MAX);
    sb = NULL;
  }
  if (!sb) {
    free(path);
    json_decref(m);
    return;
  }
  /* allowNetworkMounts asks envd to watch a network file system too:
   * hutch's sandboxes have none (volumes are local), nothing to refuse. */
  bool recursive = json_is_true(json_object_get(m, "recursive"));
  bool entries = json_is_true(json_object_get(m, "includeEntry"));
  json_decref(m);
  struct watch *w = xcalloc(1, sizeof *w);
  w->sb = sb;
  w->polled = polled;
  w->root = path;
  w->events = json_array();
  serve_random_hex(w->id, sizeof w->id - 1);
  struct files_sink sink = {.event = watch_event, .end = watch_end, .arg = w};
  struct hutch_err err = {0};
  w->op = files_watch(sb, path, user, recursive, entries, &sink, &err);
  if (!w->op) {
    watch_free(w);
    http_fail(c, &err);
    return;
  }
  w->c = c;
  http_own(c, &watch_ops, w);
  http_watch(c); /* a client that leaves before the watch is ready is heard */
}

void e2b_fs_watch(struct http_conn *c, const struct principal *p) { watch_start(c, p, false); }

void e2b_fs_watcher_create(struct http_conn *c, const struct principal *p) {
  watch_start(c, p, true);
}

static struct watch *watcher(struct http_conn *c, const struct principal *p, json_t **m) {
  struct sbx *sb = api_sbx_lookup(c, p);
  *m = sb ? http_connect_request(c, 0) : NULL;
  const char *id = json_string_value(json_object_get(*m, "watcherId"));
  for (struct watch *w = *m ? sb->watches : NULL; w; w = w->next)
    if (id && strcmp(w->id, id) == 0)
      return w;
  if (*m)
    http_error(c, HUTCH_ERR_NOT_FOUND, "not_found", "no watcher %.32s", id ? id : "(watcherId is required)");
  return NULL;
}

void e2b_fs_watcher_events(struct http_conn *c, const struct principal *p) {
  json_t *m;
  struct watch *w = watcher(c, p, &m);
  if (w && w->overflowed) {
    w->overflowed = false;
    json_array_clear(w->events);
    http_error(c, HUTCH_ERR_CONFLICT, "watch_overflow",
               "more changes came than the watcher keeps: events were lost; list the directory");
  } else if (w) {
    http_json(c, 200, json_pack("{s:o}", "events", w->events));
    w->events = json_array();
  }
  json_decref(m);
}

void e2b_fs_watcher_remove(struct http_conn *c, const struct principal *p) {
  json_t *m;
  struct watch *w = watcher(c, p, &m);
  if (w) {
    watch_unlink(w);
    watch_free(w); /* the agent ends the watch */
    http_json(c, 200, json_object());
  }
  json_decref(m);
}

void e2b_watches_free(struct sbx *sb) {
  while (sb->watches) {
    struct watch *w = sb->watches;
    sb->watches = w->next;
    watch_free(w); /* its watch ended with the sandbox */
  }
}

/* ---- GET /files and POST /files ---- */

/* The user and the absolute path a /files request names (path and
 * username in the query); NULL after an error answer. */
static struct sbx *files_target(struct http_conn *c, const struct principal *p, char **path,
                                const char **user, bool required) {
  struct sbx *sb = api_sbx_lookup(c, p);
  *path = NULL;
  if (!sb || !(*user = e2b_user(c, sb)))
    return NULL;
  char *q = http_query(&c->req, "path");
  if (q || required) {
    if (!path_ok(c, q)) {
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
  return json_pack("{s:o,s:s,s:o,s:O*}", "name", http_json_text(slash ? slash + 1 : path),
                   "type", "file", "path", http_json_text(path), "metadata",
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
  size_t index;        /* its place in the answer: the request's order */
};

struct upload {
  struct http_conn *c; /* NULL once the client is gone */
  char user[8];
  char *path;          /* ?path=, for every part */
  struct multipart mp;
  struct part *parts;  /* writes not ended */
  struct part *cur;    /* the part being read; NULL: one not wanted */
  json_t *results;     /* a place per part, filled as its write ends */
  json_t *metadata;    /* every part's */
  struct hutch_err err; /* the first write that failed, when failed */
  bool failed;
  bool body_done;
  bool bad;            /* a "file" part not writable as named, or the body cut short */
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
    http_error(c, HUTCH_ERR_INVALID, "invalid_argument", "the body is not multipart/form-data as it says");
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
  json_t *meta = NULL;
  if (enc && strcasecmp(enc, "identity") != 0 && (!gzip || multipart)) {
    http_error(c, HUTCH_ERR_MEDIA, "unsupported_encoding",
               "Content-Encoding %.32s: hutch takes gzip on application/octet-stream uploads only",
               enc);
  } else if (!(meta = upload_metadata(c))) {
    /* answered */
  } else if (multipart) {
    char *b = http_multipart_boundary(ctype);
    if (!b) {
      http_error(c, HUTCH_ERR_INVALID, "invalid_argument", "multipart/form-data needs a boundary");
    } else {
      struct upload *up = xcalloc(1, sizeof *up);
      up->c = c;
      str_copy(up->user, sizeof up->user, user);
      up->path = path;
      path = NULL;
      http_multipart_init(&up->mp, b, &part_ops, up);
      up->results = json_array();
      up->metadata = json_incref(meta);
      free(b);
      http_body_start(c, &mp_ops, up);
    }
  } else if (!path) { /* the bytes themselves: one file, at ?path= */
    http_error(c, HUTCH_ERR_INVALID, "invalid_argument", "path is required (a query parameter)");
  } else {
    struct files_upload_opts o = {.gzip = gzip, .write = {meta, true}};
    api_files_upload(c, sb, path, user, &o, answer_written);
  }
  json_decref(meta);
  free(path);
}
