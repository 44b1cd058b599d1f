/* E2B's volumes: /volumes, with an API key, are hutch's volumes
 * (core/volumes.c), of E2B_VOLUME_MB each (E2B's API gives no size); their
 * content, /volumecontent/{volumeID}/{path,dir,file}, with the volume's
 * token as a bearer, is acted on through the volume's worker
 * (core/volworker.c) as its user, in E2B's shapes
 * (spec/openapi-volumecontent.yml). */
#include "e2b/volumes.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cleanup.h"
#include "util.h"
#include "api/files.h"
#include "api/volumes.h"
#include "core/sandbox/fds.h"
#include "core/run/files.h"
#include "core/sandbox/sbx.h"
#include "core/base/server.h"
#include "core/disk/volumes.h"
#include "core/life/volworker.h"
#include "http/body.h"
#include "http/errors.h"
#include "http/http.h"
#include "http/request.h"

#define E2B_VOLUME_MB 512

static json_t *volume_and_token(struct server *srv, json_t *vol, const char *tenant) {
  char token[VOLWORKER_TOKEN_LEN + 1];
  const char *id = json_string_value(json_object_get(vol, "id"));
  volworker_token(srv, tenant, id, token);
  return json_pack("{s:s,s:O,s:s}", "volumeID", id, "name", json_object_get(vol, "name"), "token",
                   token);
}

static void render(struct http_conn *c, json_t *vol, const struct principal *p) {
  http_json(c, 201, volume_and_token(c->srv, vol, p->tenant));
}

/* POST /volumes {name} */
void e2b_volumes_create(struct http_conn *c, const struct principal *p) {
  static const char *const known[] = {"name", NULL};
  json_t *o = http_body_object(c);
  const char *name = NULL;
  if (!o)
    return;
  if (http_body_only(c, o, known) < 0)
    goto out;
  if (http_body_string(c, o, "name", 63, &name) < 0)
    goto out;
  if (*name && !name[strspn(name, "abcdefghijklmnopqrstuvwxyz"
                                  "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-")])
    api_volumes_make(c, p, name, E2B_VOLUME_MB, render);
  else
    http_error(c, HUTCH_ERR_INVALID, "invalid_argument", "name: letters, digits, '_' and '-'");
out:
  json_decref(o);
}

void e2b_volumes_list(struct http_conn *c, const struct principal *p) {
  json_t *all = volumes_list(c->srv, p->tenant), *out = json_array(), *v;
  size_t i;
  json_array_foreach(all, i, v)
    json_array_append_new(out, json_pack("{s:O,s:O}", "volumeID", json_object_get(v, "id"), "name",
                                         json_object_get(v, "name")));
  json_decref(all);
  http_json(c, 200, out);
}

void e2b_volumes_get(struct http_conn *c, const struct principal *p) {
  json_t *vol = volumes_find(c->srv, p->tenant, c->req.params[0]);
  if (!vol)
    http_error(c, HUTCH_ERR_NOT_FOUND, "not_found", "no volume %s", c->req.params[0]);
  else
    http_json(c, 200, volume_and_token(c->srv, vol, p->tenant));
  json_decref(vol);
}

struct volume_delete {
  struct http_wait w;
  struct server *srv;
  struct principal p;
  char *id;
};

static void delete_now(struct http_conn *c, struct server *srv, const struct principal *p,
                       const char *id) {
  struct hutch_err err = {0};
  int r = volumes_delete(srv, p, id, NULL, NULL, &err);
  if (c && r < 0)
    http_fail(c, &err);
  else if (c)
    http_respond(c, 204, "application/json", "", 0, NULL);
}

/* The worker gone, the volume goes, whether or not its client waited. */
static void worker_gone(void *arg) {
  struct volume_delete *d = arg;
  delete_now(http_wait_end(&d->w), d->srv, &d->p, d->id);
  free(d->id);
  free(d);
}

/* DELETE /volumes/{volumeID}: its worker goes first. */
void e2b_volumes_delete(struct http_conn *c, const struct principal *p) {
  struct volume_delete *d = xcalloc(1, sizeof *d);
  d->srv = c->srv;
  d->p = *p;
  d->id = xstrdup(c->req.params[0]);
  http_wait_begin(&d->w, c);
  if (volworker_end(c->srv, p, d->id, worker_gone, d) == 0)
    worker_gone(d);
}

/* ---- the content ---- */

enum content_op { C_STAT, C_REMOVE, C_LIST, C_MKDIR, C_READ, C_WRITE };

/* One action on a volume's content, from the request to its end; it
 * holds the worker (volworker_release) from when it has one. */
struct content {
  struct http_wait w; /* all but a write, which its upload holds */
  struct upload *up;
  struct server *srv;
  char volume[64];
  enum content_op op;
  char *path; /* in the worker: under VOLWORKER_MOUNT */
  unsigned depth;
  bool force;
  bool created; /* answered 201: a write's or a mkdir's stat */
  bool held;
  struct sbx *sb;
};

static struct content *content_new(struct server *srv, const char *volume, enum content_op op,
                                   char *path) {
  struct content *k = xcalloc(1, sizeof *k);
  k->srv = srv;
  snprintf(k->volume, sizeof k->volume, "%s", volume);
  k->op = op;
  k->path = path;
  k->depth = 1;
  return k;
}

static void content_end(void *arg) {
  struct content *k = arg;
  if (k->held)
    volworker_release(k->srv, k->volume);
  free(k->path);
  free(k);
}

/* The volume's path (absolute or not, E2B's are "/x") in the worker; NULL
 * when a ".." would leave the volume. */
static char *worker_path(const char *path) {
  char *out = xstrdup(VOLWORKER_MOUNT);
  for (const char *s = path; *s;) {
    size_t n = strcspn(s, "/");
    if (n == 2 && strncmp(s, "..", 2) == 0) {
      free(out);
      return NULL;
    }
    if (n && !(n == 1 && *s == '.')) {
      char *next = xasprintf("%s/%.*s", out, (int)n, s);
      free(out);
      out = next;
    }
    s += n + (s[n] == '/');
  }
  return out;
}

/* A worker's path as the volume's: VOLWORKER_MOUNT off ("/" for its root);
 * NULL when it is not beneath it. */
static const char *volume_path(const char *path) {
  size_t m = strlen(VOLWORKER_MOUNT);
  if (!path || strncmp(path, VOLWORKER_MOUNT, m) != 0 || (path[m] && path[m] != '/'))
    return NULL;
  return path[m] ? path + m : "/";
}

/* An agent's entry as E2B's VolumeEntryStat, its paths the volume's. */
static json_t *entry_stat(json_t *e) {
  static const char *const types[][2] = {
      {"file", "file"}, {"dir", "directory"}, {"symlink", "symlink"}};
  const char *type = json_string_value(json_object_get(e, "type")), *t = "unknown";
  for (size_t i = 0; type && i < ARRAY_SIZE(types); i++)
    if (strcmp(type, types[i][0]) == 0)
      t = types[i][1];

  const char *path = volume_path(json_string_value(json_object_get(e, "path")));
  /* A file's time is the workload's to set: kept to what a date can say. */
  double mtime = json_number_value(json_object_get(e, "mtime"));
  char when[32];
  iso8601(mtime >= 0 && mtime < 253402300800.0 ? (int64_t)(mtime * 1000) : 0, when);
  bool root = path && strcmp(path, "/") == 0;
  json_t *name = root ? json_string("") : json_incref(json_object_get(e, "name"));

  json_t *j = json_pack(
      "{s:o?,s:s,s:s,s:I,s:I,s:I,s:I,s:s,s:s,s:s}", "name", name, "type", t, "path",
      path ? path : "/", "size", json_integer_value(json_object_get(e, "size")), "mode",
      json_integer_value(json_object_get(e, "mode")), "uid",
      json_integer_value(json_object_get(e, "uid")), "gid",
      json_integer_value(json_object_get(e, "gid")), "atime", when, "mtime", when, "ctime", when);
  const char *target = json_string_value(json_object_get(e, "target"));
  if (target) /* where a link leads: the volume's path when it stays in it */
    json_object_set_new(j, "target",
                        json_string(volume_path(target) ? volume_path(target) : target));
  return j;
}

/* The principal a content request acts as: the tenant whose volume the
 * path names, when the bearer token is that volume's; false after an
 * error answer (401 for any other token: a volume that is not there is
 * not told from one that is another's). The connection is the tenant's
 * from then on, for its descriptor share and the audit log. */
static bool content_principal(struct http_conn *c, struct principal *p) {
  const char *auth = http_header(&c->req, "authorization");
  const char *token = auth && strncasecmp(auth, "Bearer ", 7) == 0 ? auth + 7 : NULL;
  struct hutch_err err = {0};
  if (!token || volworker_open(c->srv, c->req.params[0], token, p) < 0) {
    http_error(c, HUTCH_ERR_UNAUTHENTICATED, "unauthorized", "not this volume's token");
    return false;
  }
  if (fds_check(c->srv, p->tenant, NULL, 1, &err) < 0) {
    http_fail(c, &err);
    return false;
  }
  str_copy(c->tenant, sizeof c->tenant, p->tenant);
  return true;
}

static void content_go(struct content *k, struct sbx *sb, const struct hutch_err *why);

/* How an action on the worker ended: answered here (a mkdir, with what is
 * there now). */
static void content_done(const struct files_result *r, const struct hutch_err *err, void *arg) {
  struct content *k = arg;
  struct http_conn *c = http_wait_end(&k->w);
  struct hutch_err e = {0};
  if (c && !err && k->op == C_MKDIR && !k->force &&
      !json_is_true(json_object_get(r->done, "created"))) {
    hutch_err_fail(&e, HUTCH_ERR_CONFLICT, "exists", "a directory is there already (force)");
    err = &e;
  }

  if (c && !err && k->op == C_MKDIR) {
    k->op = C_STAT;
    k->created = true;
    http_wait_begin(&k->w, c);
    content_go(k, k->sb, NULL);
    return;
  }

  if (c && err) {
    http_fail(c, err);
  } else if (c && k->op == C_LIST) {
    json_t *out = json_array(), *v;
    size_t i;
    json_array_foreach(r->entries, i, v)
      json_array_append_new(out, entry_stat(v));
    http_json(c, 200, out);
  } else if (c && k->op == C_REMOVE) {
    http_respond(c, 204, "application/json", "", 0, NULL);
  } else if (c) {
    http_json(c, k->created ? 201 : 200, entry_stat(r->done));
  }
  content_end(k);
}

static void worker_ready(struct sbx *sb, const struct hutch_err *err, void *arg) {
  struct content *k = arg;
  k->held = sb != NULL;
  content_go(k, sb, err);
}

/* Start k on the volume's worker: now, or once it is made. */
static void content_start(struct content *k, const struct principal *p) {
  struct hutch_err err = {0};
  struct sbx *sb = NULL;
  int r = volworker_get(k->srv, p, k->volume, &sb, worker_ready, k, &err);
  if (r != 0) {
    k->held = r == 1;
    content_go(k, sb, &err);
  }
}

/* A write's answer: what the file is now (201). */
static void written(struct http_conn *c, const struct files_result *r) {
  struct principal p;
  if (!content_principal(c, &p))
    return;
  struct content *k = content_new(c->srv, c->req.params[0], C_STAT, xstrdup(r->path));
  k->created = true;
  http_wait_begin(&k->w, c);
  content_start(k, &p);
}

/* The worker is there (sb), or not (why): the action starts. k ends with
 * it: here, in content_done, or when its download or upload is over. */
static void content_go(struct content *k, struct sbx *sb, const struct hutch_err *why) {
  struct hutch_err err = {0};
  k->sb = sb;
  if (k->op == C_WRITE) {
    /* Without force, only where nothing is: the agent's O_EXCL decides,
     * so two such writes at once cannot both write. */
    const struct files_upload_opts o = {.write = {.exclusive = !k->force}};
    api_files_upload_into(k->up, sb, k->path, "user", &o, why);
    return;
  }

  struct http_conn *c = http_wait_end(&k->w);
  int r = -1;
  if (c && !sb) {
    http_fail(c, why);
  } else if (c && k->op == C_READ) {
    api_files_download_then(c, sb, k->path, "user", content_end, k);
    return;
  } else if (c) {
    http_wait_begin(&k->w, c);
    if (k->op == C_STAT)
      r = files_stat(sb, k->path, "user", content_done, k, &err);
    else if (k->op == C_LIST)
      r = files_list(sb, k->path, "user", k->depth, content_done, k, &err);
    else if (k->op == C_MKDIR)
      r = files_mkdir(sb, k->path, "user", k->force, content_done, k, &err);
    else
      r = files_remove(sb, k->path, "user", true, content_done, k, &err);
    if (r == 0)
      return;
    http_wait_end(&k->w);
    http_fail(c, &err);
  }
  content_end(k);
}

/* A query flag: true only when "true". */
static bool flag(struct http_conn *c, const char *name) {
  _cleanup_free_ char *v = http_query(&c->req, name);
  return v && strcmp(v, "true") == 0;
}

static void content(struct http_conn *c, enum content_op op) {
  struct principal p;
  if (!content_principal(c, &p))
    return;
  _cleanup_free_ char *path = http_query(&c->req, "path");
  _cleanup_free_ char *depth = http_query(&c->req, "depth");

  /* Ownership and mode are the sandbox user's, as for every file a
   * sandbox writes on a volume: asking for others is refused, not dropped. */
  static const char *const unsupported[] = {"uid", "gid", "mode", NULL};
  for (const char *const *u = unsupported; *u; u++) {
    _cleanup_free_ char *v = http_query(&c->req, *u);
    if (v) {
      http_error(c, HUTCH_ERR_UNSUPPORTED, "not_supported",
                 "%s: a volume's files belong to the sandbox user", *u);
      return;
    }
  }

  char *full = path && *path ? worker_path(path) : NULL;
  long d = depth ? strtol(depth, NULL, 10) : 1;
  if (!full || (depth && (d < 1 || d > 64 || strspn(depth, "0123456789") != strlen(depth))) ||
      (op == C_REMOVE && strcmp(full, VOLWORKER_MOUNT) == 0)) {
    free(full);
    http_error(
        c, HUTCH_ERR_INVALID, "invalid_argument",
        "path: the volume's path, without '..' (and not its root, to remove); depth: 1 to 64");
    return;
  }

  struct content *k = content_new(c->srv, c->req.params[0], op, full);
  k->depth = (unsigned)d;
  k->force = flag(c, "force");
  k->created = op == C_MKDIR || op == C_WRITE;
  if (op == C_WRITE)
    k->up = api_files_upload_later(c, written, content_end, k);
  else
    http_wait_begin(&k->w, c);
  content_start(k, &p);
}

/* Every content route: the action is the method's on what the path's
 * last part names (path, dir, file; routes.c has no other). */
void e2b_volume_content(struct http_conn *c, const struct principal *p) {
  static const struct {
    enum http_method method;
    const char *what;
    enum content_op op;
  } ops[] = {{HTTP_GET, "/path", C_STAT}, {HTTP_DELETE, "/path", C_REMOVE},
             {HTTP_GET, "/dir", C_LIST},  {HTTP_POST, "/dir", C_MKDIR},
             {HTTP_GET, "/file", C_READ}, {HTTP_PUT, "/file", C_WRITE}};
  (void)p;
  size_t n = strlen(c->req.path);
  for (size_t i = 0; i < ARRAY_SIZE(ops); i++) {
    size_t w = strlen(ops[i].what);
    if (c->req.method == ops[i].method && n > w && strcmp(c->req.path + n - w, ops[i].what) == 0) {
      content(c, ops[i].op);
      return;
    }
  }
  http_error(c, HUTCH_ERR_METHOD, "method_not_allowed", "no such action on a volume's content");
}

/* PATCH .../path {uid, gid, mode}: a volume's files are the sandbox
 * user's (docs/e2b.md). */
void e2b_volume_chmod(struct http_conn *c, const struct principal *p) {
  (void)p;
  struct principal owner;
  if (content_principal(c, &owner))
    http_error(c, HUTCH_ERR_UNSUPPORTED, "not_supported",
               "a volume's files belong to the sandbox user: uid, gid and mode are its own");
}
