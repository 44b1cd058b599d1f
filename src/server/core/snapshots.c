/* Snapshots and forks. A snapshot is a sandbox's writable layer captured
 * (with the sandbox frozen for the copy) as a read-only layer in
 * STATE/snapshots/<id>, stacked on the layers the sandbox itself was made
 * from. It is a template: sandboxes made from it stack its layers under a
 * writable layer of their own, so layers are shared, never copied per
 * sandbox. A fork is a snapshot (kept only while its forks live) and N
 * sandboxes made from it. Process memory is not carried: the namespace
 * tier has no way to move it between sandboxes (docs/lifecycle.md). */
#include "core/snapshots.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <fcntl.h>

#include "cleanup.h"
#include "layer.h"
#include "util.h"
#include "api/api.h"
#include "api/handlers.h"
#include "core/diskroom.h"
#include "core/keys.h"
#include "http/body.h"
#include "state/store.h"

#define MAX_FORKS 32 /* sandboxes one fork request makes */
/* Copies under way on the whole server: each holds its sandbox frozen, so
 * one waiting for a thread of the pool would keep it frozen for nothing. */
#define MAX_CAPTURES 4

char *snapshots_dir(const struct server *srv, const char *id) {
  return xasprintf("%s/snapshots/%s", srv->cfg.state_dir, id);
}

static json_t *row_json(const struct store_snapshot *sn) {
  char created[32];
  iso8601(sn->created_ms, created);
  return json_pack("{s:s,s:s,s:s,s:s,s:s,s:O,s:I,s:I,s:b}", "id", sn->id, "tenant", sn->tenant,
                   "name", sn->name, "sandbox", sn->source, "created_at", created, "layers",
                   sn->layers, "size_bytes", (json_int_t)sn->bytes, "files",
                   (json_int_t)sn->files, "ephemeral", sn->ephemeral);
}

static void collect(const struct store_snapshot *sn, void *arg) {
  json_array_append_new(arg, row_json(sn));
}

json_t *snapshots_list(struct server *srv, const char *tenant) {
  struct hutch_err err = {0};
  json_t *a = json_array();
  if (store_snapshot_each(srv->store, tenant, collect, a, &err) < 0) {
    fprintf(stderr, "hutch serve: %s\n", err.msg);
    json_decref(a);
    return NULL;
  }
  return a;
}

json_t *snapshots_get(struct server *srv, const char *tenant, const char *id) {
  json_t *a = snapshots_list(srv, tenant), *found = NULL, *v;
  size_t i;
  json_array_foreach(a, i, v) if (strcmp(json_string_value(json_object_get(v, "id")), id) == 0)
      found = json_incref(v);
  json_decref(a);
  return found;
}

static bool has_layer(json_t *layers, const char *id) {
  json_t *v;
  size_t i;
  json_array_foreach(layers, i, v) if (strcmp(json_string_value(v), id) == 0) return true;
  return false;
}

/* Who stacks snapshot id: live sandboxes and other snapshots. */
static unsigned users_of(struct server *srv, json_t *all, const char *id, unsigned *snaps) {
  /* Sandboxes being made from it count: their create mounts its layers. */
  unsigned n = sandboxes_creating_users(srv, NULL, id);
  for (struct sbx *sb = srv->sandboxes; sb; sb = sb->next)
    n += sb->layers && has_layer(sb->layers, id);
  *snaps = 0;
  json_t *v;
  size_t i;
  json_array_foreach(all, i, v) {
    if (strcmp(json_string_value(json_object_get(v, "id")), id) != 0)
      *snaps += has_layer(json_object_get(v, "layers"), id);
  }
  return n;
}

/* A snapshot's files are removed off the loop: a copy of a sandbox's disk
 * is up to its quota (GiBs) in many files. The store's row goes first, so
 * nothing can use the snapshot meanwhile; a server that dies before the
 * files are gone removes them at its next start (snapshots_gc). */
static int remove_snapshot(struct server *srv, const char *id, struct http_conn *c,
                           struct hutch_err *err) {
  if (store_snapshot_delete(srv->store, id, err) < 0)
    return -1;
  offload_remove(srv, snapshots_dir(srv, id), true, c);
  return 0;
}

/* A fork's snapshot goes with the last sandbox that stacks it. */
void snapshots_release(struct server *srv, json_t *layers) {
  const char *top = json_string_value(json_array_get(layers, 0));
  json_t *all = top ? snapshots_list(srv, NULL) : NULL, *v;
  size_t i;
  json_array_foreach(all, i, v) {
    unsigned snaps;
    const char *id = json_string_value(json_object_get(v, "id"));
    if (strcmp(id, top) == 0 && json_is_true(json_object_get(v, "ephemeral")) &&
        users_of(srv, all, id, &snaps) == 0 && snaps == 0) {
      struct hutch_err err = {0};
      if (remove_snapshot(srv, id, NULL, &err) < 0)
        fprintf(stderr, "hutch serve: snapshot %s: %s\n", id, err.msg);
    }
  }
  json_decref(all);
}

void snapshots_gc(struct server *srv) {
  json_t *all = snapshots_list(srv, NULL), *v;
  size_t i;
  json_array_foreach(all, i, v) if (json_is_true(json_object_get(v, "ephemeral"))) {
    json_t *one = json_pack("[O]", json_object_get(v, "id"));
    snapshots_release(srv, one);
    json_decref(one);
  }
  json_decref(all);
  /* Copies a server that died mid-way left: a directory the store has no
   * row for. */
  _cleanup_free_ char *top = xasprintf("%s/snapshots", srv->cfg.state_dir);
  DIR *d = opendir(top);
  all = d ? snapshots_list(srv, NULL) : NULL;
  for (struct dirent *e; all && (e = readdir(d));) {
    bool known = e->d_name[0] == '.';
    json_array_foreach(all, i, v) known |=
        strcmp(json_string_value(json_object_get(v, "id")), e->d_name) == 0;
    if (!known) {
      _cleanup_free_ char *dir = snapshots_dir(srv, e->d_name);
      struct hutch_err err = {0};
      if (hutch_layer_remove(dir, &err) < 0)
        fprintf(stderr, "hutch serve: %s: %s\n", dir, err.msg);
    }
  }
  json_decref(all);
  if (d)
    closedir(d);
}

char **snapshots_layer_paths(const struct server *srv, json_t *layers, size_t *n) {
  *n = json_array_size(layers);
  char **paths = xcalloc(*n + 1, sizeof *paths);
  for (size_t i = 0; i < *n; i++)
    paths[i] = snapshots_dir(srv, json_string_value(json_array_get(layers, i)));
  return paths;
}

void snapshots_free_paths(char **paths, size_t n) {
  for (size_t i = 0; i < n; i++)
    free(paths[i]);
  free(paths);
}

/* A capture under way: the copy runs on libuv's thread pool (it reads
 * up to the sandbox's disk quota), the rest on the loop. */
struct capture {
  uv_work_t work;
  struct server *srv;
  struct http_conn *c; /* NULL once the client has gone */
  struct principal p;
  char sandbox[17];
  char id[22];
  char *dir, *name;
  json_t *layers; /* its own first, then the sandbox's */
  bool ephemeral;
  int storage_fd; /* a copy: the sandbox may go meanwhile */
  uid_t uid_base;
  uint64_t t0;
  struct hutch_layer_stats stats;
  struct hutch_err err;
  int r;
  snapshot_done_fn done;
  void *arg;
};

static void capture_abort(void *ctx) {
  struct capture *cap = ctx;
  cap->c = NULL;
}

static const struct http_stream_ops capture_ops = {.abort = capture_abort};

static void capture_work(uv_work_t *w) {
  struct capture *cap = w->data;
  cap->r = hutch_layer_capture(cap->storage_fd, cap->uid_base, cap->dir, &cap->stats, &cap->err);
}

/* Whether every layer but the first (the new one) is still a snapshot. */
static bool layers_exist(struct server *srv, json_t *layers) {
  json_t *all = snapshots_list(srv, NULL), *v;
  size_t i, found = 0;
  json_array_foreach(all, i, v) {
    const char *id = json_string_value(json_object_get(v, "id"));
    found += has_layer(layers, id) && strcmp(id, json_string_value(json_array_get(layers, 0))) != 0;
  }
  json_decref(all);
  return all && found + 1 == json_array_size(layers);
}

static void capture_after(uv_work_t *w, int status);

static void capture_start(struct capture *cap) {
  if (cap->c)
    http_own(cap->c, &capture_ops, cap);
  uv_queue_work(cap->srv->loop, &cap->work, capture_work, capture_after);
}

static void capture_free(struct capture *cap) {
  json_decref(cap->layers);
  free(cap->dir);
  free(cap->name);
  free(cap);
}

/* The sandbox is frozen for the copy, or could not be: then no copy. */
static void capture_frozen(struct sbx *sb, int r, struct hutch_err *err, void *arg) {
  struct capture *cap = arg;
  struct http_conn *c = cap->c;
  if (c)
    http_own(c, NULL, NULL);
  if (r == 0) {
    capture_start(cap);
    return;
  }
  close(cap->storage_fd);
  cap->srv->captures--;
  if (sb)
    sb->captures--;
  if (c && !sb)
    http_error(c, HUTCH_ERR_NOT_FOUND, "not_found", "sandbox %s was destroyed before its snapshot",
               cap->sandbox);
  else if (c)
    http_error(c, HUTCH_ERR_BUSY, "not_frozen", "sandbox %s: %s", cap->sandbox, err->msg);
  cap->done(c, &cap->p, NULL, cap->arg);
  capture_free(cap);
}

static void capture_after(uv_work_t *w, int status) {
  (void)status;
  struct capture *cap = w->data;
  struct server *srv = cap->srv;
  struct http_conn *c = cap->c;
  struct hutch_err err = {0};
  json_t *snap = NULL;
  close(cap->storage_fd);
  srv->captures--;
  /* The sandbox runs on, unless it was paused meanwhile or another capture
   * still reads it. */
  struct sbx *sb = NULL;
  for (struct sbx *x = srv->sandboxes; x; x = x->next)
    if (!x->dying && strcmp(x->id, cap->sandbox) == 0)
      sb = x;
  if (sb && --sb->captures == 0 && !sb->paused && hutch_sandbox_freeze(sb->hs, false, &err) < 0)
    fprintf(stderr, "hutch serve: sandbox %s: thaw: %s\n", sb->id, err.msg);
  if (c)
    http_own(c, NULL, NULL);
  if (cap->r < 0) {
    /* Never a half copy left behind, and a full disk is said so. */
    offload_remove(srv, xstrdup(cap->dir), true, NULL);
    bool full = cap->err.errnum == ENOSPC || cap->err.errnum == EDQUOT;
    if (c && full)
      http_error(c, HUTCH_ERR_NO_SPACE, "no_space", "snapshot of sandbox %s: %s", cap->sandbox, cap->err.msg);
    else if (c)
      http_error(c, cap->err.kind == HUTCH_ERR_INVALID ? HUTCH_ERR_INVALID : HUTCH_ERR_SYSTEM,
                 cap->err.kind == HUTCH_ERR_INVALID ? "invalid" : "sandbox_error",
                 "snapshot of sandbox %s: %s", cap->sandbox, cap->err.msg);
  } else if (srv->stopping || (!c && cap->ephemeral)) {
    /* Nobody will use it: a server going away released the sandbox mid-copy,
     * or the client of a fork left. */
    offload_remove(srv, xstrdup(cap->dir), true, NULL);
  } else if (!layers_exist(srv, cap->layers)) {
    /* A snapshot it stacks went while it was copied (its sandbox, the last
     * to stack it, was destroyed): on its own it is of no use. */
    offload_remove(srv, xstrdup(cap->dir), true, NULL);
    if (c)
      http_error(c, HUTCH_ERR_CONFLICT, "snapshot_in_use",
                 "a snapshot sandbox %s was made from was deleted during the copy",
                 cap->sandbox);
  } else {
    struct store_snapshot sn = {cap->id,          cap->p.tenant, cap->name, cap->sandbox,
                                cap->layers,      wall_ms(),     cap->stats.bytes,
                                cap->stats.files, cap->ephemeral};
    if (store_snapshot_put(srv->store, &sn, &err) < 0) {
      offload_remove(srv, xstrdup(cap->dir), true, NULL);
      if (c)
        http_error(c, HUTCH_ERR_SYSTEM, "internal", "%s", err.msg);
    } else {
      snap = row_json(&sn);
      json_object_set_new(snap, "took_ms", json_real((double)(now_ns() - cap->t0) / 1e6));
    }
  }
  cap->done(c, &cap->p, snap, cap->arg);
  json_decref(snap);
  capture_free(cap);
}

int snapshots_capture(struct http_conn *c, const struct principal *p, struct sbx *sb,
                      const char *name, bool ephemeral, snapshot_done_fn done, void *arg) {
  struct server *srv = c->srv;
  struct hutch_err err = {0};
  size_t depth = json_array_size(sb->layers);
  if (depth + 1 > HUTCH_MAX_LAYERS) {
    http_error(c, HUTCH_ERR_CONFLICT, "too_many_layers",
               "sandbox %s stacks %zu snapshots already: a snapshot of it would pass the "
               "limit of %d",
               sb->id, depth, HUTCH_MAX_LAYERS);
    return -1;
  }
  if (sb->hs->storage_fd < 0) {
    http_error(c, HUTCH_ERR_CONFLICT, "unsupported",
               "sandbox %s was made by an older hutch whose agent does not hold its storage",
               sb->id);
    return -1;
  }
  _cleanup_free_ char *top = xasprintf("%s/snapshots", srv->cfg.state_dir);
  if (mkdir(top, 0700) < 0 && errno != EEXIST) {
    http_error(c, HUTCH_ERR_SYSTEM, "internal", "%s: %s", top, strerror(errno));
    return -1;
  }
  /* Sandboxes see a layer through an id-mapped mount: a state dir whose
   * filesystem has none could keep snapshots no sandbox can use. */
  if (!srv->layers_checked) {
    srv->layers_usable = hutch_layer_dir_usable(top);
    srv->layers_checked = true;
  }
  if (!srv->layers_usable) {
    http_error(c, HUTCH_ERR_CONFLICT, "unsupported",
               "snapshots need a state dir whose filesystem can be id-mapped (ext4, xfs, btrfs; "
               "tmpfs from Linux 6.3): %s cannot",
               top);
    return -1;
  }
  if (srv->captures >= MAX_CAPTURES) {
    http_error(c, HUTCH_ERR_QUOTA, "busy", "%d snapshots are being copied: try again in a moment",
               MAX_CAPTURES);
    return -1;
  }
  /* The copy holds at most what the sandbox's storage does now (it is
   * frozen for it): room for that in the tenant's quota and above the
   * state filesystem's reserve, or no copy at all (diskroom.c). */
  struct hutch_sandbox_usage use;
  if (hutch_sandbox_usage(sb->hs, &use, &err) < 0) {
    http_error(c, HUTCH_ERR_SYSTEM, "internal", "sandbox %s: %s", sb->id, err.msg);
    return -1;
  }
  if (disk_room(c, p, use.disk_used) < 0)
    return -1;
  int fd = fcntl(sb->hs->storage_fd, F_DUPFD_CLOEXEC, 3);
  if (fd < 0) {
    http_error(c, HUTCH_ERR_SYSTEM, "internal", "dup: %s", strerror(errno));
    return -1;
  }
  /* Frozen for the copy, off the loop (lifecycle.c): a paused one is
   * already, and a second capture finds it so, or waits for the same
   * freeze. */
  bool freeze = sb->freezing || (!sb->paused && !sb->captures);
  sb->captures++;
  srv->captures++;
  struct capture *cap = xcalloc(1, sizeof *cap);
  cap->work.data = cap;
  cap->srv = srv;
  cap->c = c;
  cap->p = *p;
  memcpy(cap->sandbox, sb->id, sizeof cap->sandbox);
  memcpy(cap->id, "snap_", 5);
  serve_random_hex(cap->id + 5, 16);
  cap->dir = snapshots_dir(srv, cap->id);
  cap->name = xstrdup(name ? name : "");
  cap->layers = json_pack("[s]", cap->id);
  if (sb->layers)
    json_array_extend(cap->layers, sb->layers);
  cap->ephemeral = ephemeral;
  cap->storage_fd = fd;
  cap->uid_base = sb->hs->uid_base;
  cap->t0 = now_ns();
  cap->done = done;
  cap->arg = arg;
  if (freeze) {
    if (c) { /* cap->c goes NULL if the client leaves meanwhile */
      http_own(c, &capture_ops, cap);
      http_watch(c);
    }
    sbx_freeze(sb, capture_frozen, cap);
  }
  else
    capture_start(cap);
  return 0;
}

static void answer_snapshot(struct http_conn *c, const struct principal *p, json_t *snap,
                            void *arg) {
  (void)p, (void)arg;
  if (c && snap)
    http_json(c, 201, json_incref(snap));
}

void api_snapshots_create(struct http_conn *c, const struct principal *p) {
  static const char *const known[] = {"name", NULL};
  struct sbx *sb = sbx_lookup(c, p);
  json_t *o = sb ? body_object(c) : NULL;
  const char *name = NULL;
  if (o && body_only(c, o, known) >= 0 && body_string(c, o, "name", 128, &name) >= 0)
    snapshots_capture(c, p, sb, name, false, answer_snapshot, NULL);
  json_decref(o);
}

void api_snapshots_list(struct http_conn *c, const struct principal *p) {
  json_t *a = snapshots_list(c->srv, p->tenant), *v;
  size_t i;
  if (!a) {
    http_error(c, HUTCH_ERR_SYSTEM, "internal", "reading snapshots failed");
    return;
  }
  json_array_foreach(a, i, v) json_object_del(v, "tenant");
  http_json(c, 200, json_pack("{s:o}", "snapshots", a));
}

static json_t *route_snapshot(struct http_conn *c, const struct principal *p) {
  json_t *s = snapshots_get(c->srv, p->tenant, c->req.params[0]);
  if (!s)
    http_error(c, HUTCH_ERR_NOT_FOUND, "not_found", "no snapshot %s", c->req.params[0]);
  else
    json_object_del(s, "tenant");
  return s;
}

void api_snapshots_get(struct http_conn *c, const struct principal *p) {
  json_t *s = route_snapshot(c, p);
  if (s)
    http_json(c, 200, s);
}

int snapshots_delete(struct http_conn *c, const struct principal *p, const char *id) {
  struct server *srv = c->srv;
  json_t *s = snapshots_get(srv, p->tenant, id);
  if (!s) {
    http_error(c, HUTCH_ERR_NOT_FOUND, "not_found", "no snapshot %s", id);
    return -1;
  }
  json_t *all = snapshots_list(srv, NULL);
  unsigned snaps, n = users_of(srv, all, id, &snaps);
  json_decref(all);
  struct hutch_err err = {0};
  if (n || snaps) {
    json_decref(s);
    http_error(c, HUTCH_ERR_CONFLICT, "snapshot_in_use",
               "snapshot %s is stacked by %u running sandboxes and %u snapshots: delete them "
               "first",
               id, n, snaps);
    return -1;
  }
  json_t *layers = json_deep_copy(json_object_get(s, "layers"));
  json_decref(s);
  if (remove_snapshot(srv, id, c, &err) < 0) {
    json_decref(layers);
    http_error(c, HUTCH_ERR_SYSTEM, "internal", "snapshot %s: %s", id, err.msg);
    return -1;
  }
  /* The fork snapshot it stacked may have nothing left stacking it. */
  json_array_remove(layers, 0);
  snapshots_release(srv, layers);
  json_decref(layers);
  return 0;
}

void api_snapshots_delete(struct http_conn *c, const struct principal *p) {
  snapshots_delete(c, p, c->req.params[0]);
}

/* A fork's plan: the request each copy is made by, once the snapshot is.
 * The copies are made one after the other (each off the loop), as one
 * create after another would be. */
struct fork_plan {
  json_t *req;
  json_t *snap_id;
  struct server *srv;
  uint64_t count;
  json_t *made; /* the copies made so far, as sbx_json */
  char (*ids)[17];
  fork_answer_fn answer;
};

static void fork_plan_free(struct fork_plan *plan) {
  json_decref(plan->req);
  json_decref(plan->snap_id);
  json_decref(plan->made);
  free(plan->ids);
  free(plan);
}

/* One copy failed (answered) or the client left: the copies made so far
 * go, and the snapshot with them. */
static void fork_fail(struct server *srv, const struct principal *p, struct fork_plan *plan) {
  for (size_t j = 0; j < json_array_size(plan->made); j++) {
    struct sbx *sb = sbx_find_own(srv, p, plan->ids[j]);
    if (sb)
      sbx_destroy(sb);
  }
  json_t *layers = json_pack("[O]", plan->snap_id);
  snapshots_release(srv, layers);
  json_decref(layers);
  fork_plan_free(plan);
}

static void fork_next(struct http_conn *c, const struct principal *p, struct fork_plan *plan);

static void fork_made(struct http_conn *c, const struct principal *p, struct sbx *sb,
                      void *arg) {
  struct fork_plan *plan = arg;
  if (!sb) {
    fork_fail(plan->srv, p, plan);
    return;
  }
  memcpy(plan->ids[json_array_size(plan->made)], sb->id, 17);
  json_array_append_new(plan->made, sbx_json(sb));
  fork_next(c, p, plan);
}

static void fork_next(struct http_conn *c, const struct principal *p, struct fork_plan *plan) {
  if (json_array_size(plan->made) == plan->count) {
    plan->answer(c, plan->snap_id, plan->made);
    fork_plan_free(plan);
    return;
  }
  if (sandboxes_create(c, p, plan->req, fork_made, plan) < 0)
    fork_fail(c->srv, p, plan);
}

static void make_forks(struct http_conn *c, const struct principal *p, json_t *snap, void *arg) {
  struct fork_plan *plan = arg;
  if (c && snap) {
    json_object_set(plan->req, "template", json_object_get(snap, "id"));
    plan->snap_id = json_incref(json_object_get(snap, "id"));
    plan->made = json_array();
    plan->ids = xcalloc(plan->count, sizeof *plan->ids);
    plan->srv = c->srv;
    fork_next(c, p, plan);
    return;
  } /* (a fork whose client left has no snapshot: capture_after removed it) */
  fork_plan_free(plan);
}

int snapshots_fork(struct http_conn *c, const struct principal *p, struct sbx *sb,
                   uint64_t count, double timeout_s, fork_answer_fn answer) {
  if (count < 1 || count > MAX_FORKS) {
    http_error(c, HUTCH_ERR_INVALID, "invalid_argument", "count must be from 1 to %d", MAX_FORKS);
    return -1;
  }
  if (sandboxes_check_room(c, p, sb->memory_mb, (unsigned)count) < 0)
    return -1;
  /* Each a sandbox as its parent was made: limits, env, metadata, life. */
  struct fork_plan *plan = xcalloc(1, sizeof *plan);
  plan->req = json_pack("{s:I,s:I,s:I,s:O,s:O,s:f,s:s,s:b}", "memory_mb",
                        (json_int_t)sb->memory_mb, "disk_mb", (json_int_t)sb->disk_mb, "pids",
                        (json_int_t)sb->pids, "env", sb->env, "metadata", sb->metadata,
                        "timeout_s", timeout_s > 0 ? timeout_s : (double)sb->timeout_ms / 1000,
                        "on_timeout", sb->pause_on_timeout ? "pause" : "kill", "auto_resume",
                        sb->auto_resume);
  if (sb->cpu_milli)
    json_object_set_new(plan->req, "cpus", json_real((double)sb->cpu_milli / 1000));
  json_object_set(plan->req, "network", sb->network);
  if (sb->secrets)
    json_object_set(plan->req, "secrets", sb->secrets);
  plan->count = count;
  plan->answer = answer;
  if (snapshots_capture(c, p, sb, "", true, make_forks, plan) < 0) {
    json_decref(plan->req);
    free(plan);
    return -1;
  }
  return 0;
}

static void answer_forks(struct http_conn *c, json_t *snapshot_id, json_t *made) {
  http_json(c, 201, json_pack("{s:O,s:O}", "snapshot_id", snapshot_id, "sandboxes", made));
}

/* {count, timeout_s?}: count new sandboxes holding the sandbox's files. */
void api_sandboxes_fork(struct http_conn *c, const struct principal *p) {
  static const char *const known[] = {"count", "timeout_s", NULL};
  struct sbx *sb = sbx_lookup(c, p);
  json_t *o = sb ? body_object(c) : NULL;
  uint64_t count = 0;
  double t = -1;
  if (o && body_only(c, o, known) >= 0 && body_uint(c, o, "count", 0, UINT32_MAX, &count) >= 0 &&
      body_number(c, o, "timeout_s", 1, SERVE_MAX_TIMEOUT_S, &t) >= 0) {
    snapshots_fork(c, p, sb, count, t, answer_forks);
  }
  json_decref(o);
}
