/* envd's filesystem.Filesystem service (E2B's spec/envd/filesystem/
 * filesystem.proto) over Connect RPC, on the file actions (core/files.h):
 * paths resolve inside the sandbox, as its user, exactly as for the
 * native routes. A relative path is taken from the user's home, as envd
 * does. envd's GET and POST /files are e2b/files.c's.
 *
 *   Stat, ListDir, MakeDir, Move, Remove     unary, EntryInfo shapes
 *   WatchDir                                 stream: {start:{}}, then
 *                                            {filesystem:{name,type}}
 *   CreateWatcher, GetWatcherEvents,         the same events, polled
 *   RemoveWatcher */
#include "e2b/fs.h"

#include <stdlib.h>
#include <string.h>

#include "util.h"
#include "api/files.h"
#include "api/lifecycle.h"
#include "core/run/files.h"
#include "core/sandbox/sbx.h"
#include "e2b/control.h"
#include "http/body.h"
#include "http/connect.h"
#include "http/errors.h"
#include "http/http.h"

#define WATCHERS_MAX 16       /* polled watchers per sandbox */
#define WATCH_EVENTS_MAX 4096 /* events a polled watcher keeps between polls */

/* ---- EntryInfo ---- */

/* The first character of an entry's permissions: its type. */
static char type_char(const char *type) {
  if (type && strcmp(type, "dir") == 0)
    return 'd';
  if (type && strcmp(type, "symlink") == 0)
    return 'L';
  return '-';
}

/* A uid or gid as envd names it: root, user (1000), else its number. */
static void id_name(char *out, size_t n, json_int_t id) {
  if (id == 0)
    snprintf(out, n, "root");
  else if (id == 1000)
    snprintf(out, n, "user");
  else
    snprintf(out, n, "%lld", (long long)id);
}

static json_t *entry_info(json_t *e) {
  static const char *const types[][2] = {
      {"file", "FILE_TYPE_FILE"}, {"dir", "FILE_TYPE_DIRECTORY"}, {"symlink", "FILE_TYPE_SYMLINK"}};
  const char *type = json_string_value(json_object_get(e, "type"));
  int mode = (int)json_integer_value(json_object_get(e, "mode"));
  json_int_t uid = json_integer_value(json_object_get(e, "uid"));
  json_int_t gid = json_integer_value(json_object_get(e, "gid"));
  char perms[11] = "----------", owner[24], group[24], size[24], when[32];
  const char *ptype = NULL;
  for (size_t i = 0; type && i < ARRAY_SIZE(types); i++)
    if (strcmp(type, types[i][0]) == 0)
      ptype = types[i][1];

  perms[0] = type_char(type);
  for (int i = 0; i < 9; i++)
    if (mode & (0400 >> i))
      perms[1 + i] = "rwxrwxrwx"[i];
  id_name(owner, sizeof owner, uid);
  id_name(group, sizeof group, gid);
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

bool e2b_path_ok(struct http_conn *c, const char *path) {
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
  if (!sb)
    return NULL;
  *user = e2b_user(c, sb);
  if (!*user)
    return NULL;
  *m = http_connect_request(c, c->dialect == DIALECT_CONNECT_STREAM);
  if (!*m)
    return NULL;

  json_t *v = json_object_get(*m, key);
  if (!e2b_path_ok(c, json_string_value(v))) /* NULL when not a string: answered too */
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
    int r = start(sb, path, user, api_files_waited, k, &err);
    api_files_wait_started(k, r, &err);
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
  json_array_foreach(r->entries, i, e)
    json_array_append_new(entries, entry_info(e));
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
    int r = files_list(sb, path, user, (unsigned)depth, api_files_waited, k, &err);
    api_files_wait_started(k, r, &err);
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
    http_json(c, 200,
              json_pack("{s:{s:s,s:s,s:s}}", "entry", "name", slash ? slash + 1 : r->path, "type",
                        "FILE_TYPE_DIRECTORY", "path", r->path));
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
    int started = files_stat(sb, r->path, user, api_files_waited, k, &serr);
    api_files_wait_started(k, started, &serr);
  }
}

void e2b_fs_move(struct http_conn *c, const struct principal *p) {
  json_t *m;
  char *from;
  const char *user;
  struct sbx *sb = path_call(c, p, "source", &m, &from, &user);
  json_t *dest = sb ? json_object_get(m, "destination") : NULL;
  struct hutch_err err = {0};
  if (sb && json_is_string(dest) && e2b_path_ok(c, json_string_value(dest))) {
    char *to = e2b_path(json_string_value(dest), user);
    struct files_wait *k = api_files_wait(c, answer_moved);
    int r = files_move(sb, from, to, user, api_files_waited, k, &err);
    api_files_wait_started(k, r, &err);
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
  struct watch *next; /* the sandbox's polled watchers */
  struct sbx *sb;
  struct files_op *op; /* NULL once the watch has ended */
  struct http_conn *c; /* WatchDir: the stream; a watcher: its CreateWatcher until answered */
  bool polled;
  bool ready;
  bool busy; /* in an event: the client's end must not free w under it */
  bool gone; /* WatchDir: the client left during an event */
  char id[17];
  char *root;     /* names are relative to it */
  json_t *events; /* a watcher's, until polled */
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
      http_error(c, HUTCH_ERR_UNAVAILABLE, "sandbox_error",
                 "the sandbox ended before the watch began");
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
    http_error(c, HUTCH_ERR_QUOTA, "quota_exceeded", "a sandbox has at most %d polled watchers",
               WATCHERS_MAX);
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
  random_hex(w->id, sizeof w->id - 1);
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

void e2b_fs_watch(struct http_conn *c, const struct principal *p) {
  watch_start(c, p, false);
}

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
    http_error(c, HUTCH_ERR_NOT_FOUND, "not_found", "no watcher %.32s",
               id ? id : "(watcherId is required)");
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
