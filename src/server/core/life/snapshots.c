/* Snapshots and forks. A snapshot is a sandbox's writable layer captured
 * (with the sandbox frozen for the copy) as a read-only layer in
 * STATE/snapshots/<id>, stacked on the layers the sandbox itself was made
 * from. It is a template: sandboxes made from it stack its layers under a
 * writable layer of their own, so layers are shared, never copied per
 * sandbox. A fork is a snapshot (kept only while its forks live) and N
 * sandboxes made from it. Process memory is not carried: the namespace
 * tier has no way to move it between sandboxes (docs/lifecycle.md). */
#include "core/life/snapshots.h"

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
#include "core/events/events.h"
#include "core/life/sbx_create.h"
#include "core/disk/diskroom.h"
#include "core/disk/layers.h"
#include "core/base/server.h"
#include "state/store.h"
#include "core/life/sbx_pause.h"
#include "core/life/sbx_teardown.h"

/* Copies under way on the whole server: each holds its sandbox frozen, so
 * one waiting for a thread of the pool would keep it frozen for nothing. */
#define MAX_CAPTURES 4

static json_t *row_json(const struct store_snapshot *sn) {
  char created[32];
  iso8601(sn->created_ms, created);
  return json_pack("{s:s,s:s,s:s,s:s,s:s,s:O,s:I,s:I,s:b,s:s}", "id", sn->id, "tenant", sn->tenant,
                   "name", sn->name, "sandbox", sn->source, "created_at", created, "layers",
                   sn->layers, "size_bytes", (json_int_t)sn->bytes, "files", (json_int_t)sn->files,
                   "ephemeral", sn->ephemeral, "isolation", sn->isolation ? sn->isolation : "ns");
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
  json_array_foreach(a, i, v) {
    if (strcmp(json_string_value(json_object_get(v, "id")), id) == 0)
      found = json_incref(v);
  }
  json_decref(a);
  return found;
}

static bool has_layer(json_t *layers, const char *id) {
  json_t *v;
  size_t i;
  json_array_foreach(layers, i, v) {
    if (strcmp(json_string_value(v), id) == 0)
      return true;
  }
  return false;
}

/* Who stacks snapshot id: live sandboxes and other snapshots. */
static unsigned users_of(struct server *srv, json_t *all, const char *id, unsigned *snaps) {
  /* Sandboxes being made from it count: their create mounts its layers. */
  unsigned n = sbx_create_users(srv, id) + sbx_teardown_users(srv, id);
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
static int remove_snapshot(struct server *srv, const char *id, json_t *layers, offload_done_fn done,
                           void *arg, struct hutch_err *err) {
  if (store_snapshot_delete(srv->store, id, err) < 0)
    return -1;
  layers_hold(srv, layers, id, false);
  offload_remove(srv, layers_snapshot_dir(srv, id), true, done, arg);
  return 0;
}

/* A fork's snapshot goes with the last sandbox that stacks it. */
void snapshots_release(struct server *srv, json_t *layers) {
  const char *top = json_string_value(json_array_get(layers, 0));
  json_t *all = NULL, *v;
  if (top)
    all = snapshots_list(srv, NULL);

  size_t i;
  json_array_foreach(all, i, v) {
    unsigned snaps;
    const char *id = json_string_value(json_object_get(v, "id"));
    if (strcmp(id, top) == 0 && json_is_true(json_object_get(v, "ephemeral")) &&
        users_of(srv, all, id, &snaps) == 0 && snaps == 0) {
      struct hutch_err err = {0};
      if (remove_snapshot(srv, id, json_object_get(v, "layers"), NULL, NULL, &err) < 0)
        fprintf(stderr, "hutch serve: snapshot %s: %s\n", id, err.msg);
    }
  }
  json_decref(all);
}

void snapshots_gc(struct server *srv) {
  json_t *all = snapshots_list(srv, NULL), *v;
  size_t i;
  json_array_foreach(all, i, v) {
    if (!json_is_true(json_object_get(v, "ephemeral")))
      continue;
    json_t *one = json_pack("[O]", json_object_get(v, "id"));
    snapshots_release(srv, one);
    json_decref(one);
  }
  json_decref(all);

  /* Copies a server that died mid-way left: a directory the store has no
   * row for. */
  _cleanup_free_ char *top = xasprintf("%s/snapshots", srv->cfg.state_dir);
  DIR *d = opendir(top);
  all = NULL;
  if (d)
    all = snapshots_list(srv, NULL);
  for (struct dirent *e; all && (e = readdir(d));) {
    bool known = e->d_name[0] == '.';
    json_array_foreach(all, i, v) {
      known |= strcmp(json_string_value(json_object_get(v, "id")), e->d_name) == 0;
    }
    if (!known) {
      _cleanup_free_ char *dir = layers_snapshot_dir(srv, e->d_name);
      struct hutch_err err = {0};
      if (hutch_layer_remove(dir, &err) < 0)
        fprintf(stderr, "hutch serve: %s: %s\n", dir, err.msg);
    }
  }

  json_decref(all);
  if (d)
    closedir(d);
}

/* A capture under way: the copy runs on libuv's thread pool (it reads
 * up to the sandbox's disk quota), the rest on the loop. */
struct capture {
  uv_work_t work;
  struct server *srv;
  char tenant[SERVE_TENANT_LEN + 1];
  char sandbox[17];
  char id[22];
  char *dir, *name;
  json_t *layers; /* its own first, then the sandbox's */
  bool ephemeral;
  enum hutch_isolation isolation; /* the sandbox's: a create from it runs in it */
  int storage_fd;                 /* a copy: the sandbox may go meanwhile */
  uid_t uid_base;
  uint64_t t0;
  struct hutch_layer_stats stats;
  struct hutch_err err;
  int r;
  snapshot_done_fn done;
  void *arg;
};

static void capture_work(uv_work_t *w) {
  struct capture *cap = w->data;
  cap->r = hutch_layer_capture(cap->storage_fd, cap->uid_base, cap->dir, &cap->stats, &cap->err);
}

/* Whether every layer but the first (the new one) is still a snapshot
 * (a template's entry is: the sandbox's pin keeps it). */
static bool layers_exist(struct server *srv, json_t *layers) {
  json_t *all = snapshots_list(srv, NULL), *v;
  size_t i, found = layers_template(layers) ? 1 : 0;
  json_array_foreach(all, i, v) {
    const char *id = json_string_value(json_object_get(v, "id"));
    found += has_layer(layers, id) && strcmp(id, json_string_value(json_array_get(layers, 0))) != 0;
  }
  json_decref(all);
  return all && found + 1 == json_array_size(layers);
}

static void capture_after(uv_work_t *w, int status);

static void capture_start(struct capture *cap) {
  uv_queue_work(cap->srv->loop, &cap->work, capture_work, capture_after);
}

static void capture_free(struct capture *cap) {
  json_decref(cap->layers);
  free(cap->dir);
  free(cap->name);
  free(cap);
}

/* The sandbox is frozen for the copy, or could not be: then no copy. */
static void capture_frozen(struct sbx *sb, int r, struct hutch_err *why, void *arg) {
  struct capture *cap = arg;
  struct hutch_err err = {0};
  if (r == 0) {
    capture_start(cap);
    return;
  }

  close(cap->storage_fd);
  cap->srv->captures--;
  if (sb)
    sb->captures--;

  if (!sb)
    hutch_err_fail(&err, HUTCH_ERR_NOT_FOUND, "not_found",
                   "sandbox %s was destroyed before its snapshot", cap->sandbox);
  else
    hutch_err_fail(&err, HUTCH_ERR_BUSY, "not_frozen", "sandbox %s: %s", cap->sandbox, why->msg);
  cap->done(NULL, &err, cap->arg);
  capture_free(cap);
}

/* The copy is whole: the snapshot it makes, stored, or NULL and why not
 * (its files then go). */
static json_t *capture_keep(struct capture *cap, struct hutch_err *err) {
  struct server *srv = cap->srv;
  if (cap->r < 0) {
    /* Never a half copy left behind, and a full disk is said so. */
    offload_remove(srv, xstrdup(cap->dir), true, NULL, NULL);
    enum hutch_errkind kind = HUTCH_ERR_SYSTEM;
    const char *code = "sandbox_error";
    if (cap->err.errnum == ENOSPC || cap->err.errnum == EDQUOT) {
      kind = HUTCH_ERR_NO_SPACE;
      code = "no_space";
    } else if (cap->err.kind == HUTCH_ERR_INVALID) {
      kind = HUTCH_ERR_INVALID;
      code = "invalid";
    }
    hutch_err_fail(err, kind, code, "snapshot of sandbox %s: %s", cap->sandbox, cap->err.msg);
    return NULL;
  }

  if (srv->stopping) {
    /* Nobody will use it: a server going away released the sandbox mid-copy. */
    offload_remove(srv, xstrdup(cap->dir), true, NULL, NULL);
    hutch_err_fail(err, HUTCH_ERR_UNAVAILABLE, "overloaded", "the server is stopping");
    return NULL;
  }

  if (!layers_exist(srv, cap->layers)) {
    /* A snapshot it stacks went while it was copied (its sandbox, the last
     * to stack it, was destroyed): on its own it is of no use. */
    offload_remove(srv, xstrdup(cap->dir), true, NULL, NULL);
    hutch_err_fail(err, HUTCH_ERR_CONFLICT, "snapshot_in_use",
                   "a snapshot sandbox %s was made from was deleted during the copy", cap->sandbox);
    return NULL;
  }

  struct store_snapshot sn = {cap->id,          cap->tenant,
                              cap->name,        cap->sandbox,
                              cap->layers,      wall_ms(),
                              cap->stats.bytes, cap->stats.files,
                              cap->ephemeral,   hutch_isolation_name(cap->isolation)};
  struct hutch_err e = {0};
  /* Held before it is listed: the template's layers outlive a removal of
   * the template while the snapshot stacks them. A template removed
   * during the copy, whose sandbox ended too, is gone with its layers. */
  if (layers_hold(srv, cap->layers, cap->id, true) < 0) {
    offload_remove(srv, xstrdup(cap->dir), true, NULL, NULL);
    hutch_err_fail(err, HUTCH_ERR_CONFLICT, "snapshot_in_use",
                   "the template sandbox %s was made from was removed during the copy",
                   cap->sandbox);
    return NULL;
  }
  if (store_snapshot_put(srv->store, &sn, &e) < 0) {
    layers_hold(srv, cap->layers, cap->id, false);
    offload_remove(srv, xstrdup(cap->dir), true, NULL, NULL);
    hutch_err_fail(err, HUTCH_ERR_SYSTEM, "internal", "%s", e.msg);
    return NULL;
  }

  json_t *snap = row_json(&sn);
  json_object_set_new(snap, "took_ms", json_real((double)(now_ns() - cap->t0) / 1e6));
  return snap;
}

static void capture_after(uv_work_t *w, int status) {
  (void)status;
  struct capture *cap = w->data;
  struct server *srv = cap->srv;
  struct hutch_err err = {0};
  close(cap->storage_fd);
  srv->captures--;

  /* The sandbox runs on, unless it was paused meanwhile or another capture
   * still reads it. */
  struct sbx *sb = NULL;
  for (struct sbx *x = srv->sandboxes; x; x = x->next)
    if (!x->dying && strcmp(x->id, cap->sandbox) == 0)
      sb = x;
  if (sb) {
    sb->captures--;
    if (sb->captures == 0 && !sb->paused && hutch_sandbox_freeze(sb->hs, false, &err) < 0)
      fprintf(stderr, "hutch serve: sandbox %s: thaw: %s\n", sb->id, err.msg);
  }

  json_t *snap = capture_keep(cap, &err);
  /* A fork's capture is reported as the fork (forks.c). */
  if (snap && !cap->ephemeral)
    events_emit(srv, "sandbox.snapshotted", cap->tenant, cap->sandbox,
                json_pack("{s:O,s:O?}", "snapshot", json_object_get(snap, "id"), "name",
                          json_object_get(snap, "name")));
  cap->done(snap, snap ? NULL : &err, cap->arg);
  json_decref(snap);
  capture_free(cap);
}

/* What forbids a capture of sb now: -1 and why, else 0. */
static int capture_check(struct server *srv, const struct principal *p, struct sbx *sb,
                         struct hutch_err *err) {
  size_t depth = layers_depth(srv, sb->layers);
  if (depth + 1 > HUTCH_MAX_LAYERS)
    return hutch_err_fail(err, HUTCH_ERR_CONFLICT, "too_many_layers",
                          "sandbox %s stacks %zu layers already: a snapshot of it would pass "
                          "the limit of %d",
                          sb->id, depth, HUTCH_MAX_LAYERS);

  _cleanup_free_ char *top = xasprintf("%s/snapshots", srv->cfg.state_dir);
  if (mkdir(top, 0700) < 0 && errno != EEXIST)
    return hutch_err_fail(err, HUTCH_ERR_SYSTEM, "internal", "%s: %s", top, strerror(errno));

  /* Sandboxes see a layer through an id-mapped mount: a state dir whose
   * filesystem has none could keep snapshots no sandbox can use. */
  if (!srv->layers_checked) {
    srv->layers_usable = hutch_layer_dir_usable(top);
    srv->layers_checked = true;
  }
  if (!srv->layers_usable)
    return hutch_err_fail(err, HUTCH_ERR_CONFLICT, "unsupported",
                          "snapshots need a state dir whose filesystem can be id-mapped (ext4, "
                          "xfs, btrfs; tmpfs from Linux 6.3): %s cannot",
                          top);

  if (srv->captures >= MAX_CAPTURES)
    return hutch_err_fail(err, HUTCH_ERR_QUOTA, "busy",
                          "%d snapshots are being copied: try again in a moment", MAX_CAPTURES);

  /* The copy holds at most what the sandbox's storage does now (it is
   * frozen for it): room for that in the tenant's quota and above the
   * state filesystem's reserve, or no copy at all (diskroom.c). */
  struct hutch_sandbox_usage use;
  struct hutch_err e = {0};
  if (hutch_sandbox_usage(sb->hs, true, &use, &e) < 0)
    return hutch_err_fail(err, HUTCH_ERR_SYSTEM, "internal", "sandbox %s: %s", sb->id, e.msg);
  return diskroom_check(srv, p, use.disk_used, err);
}

int snapshots_capture(struct server *srv, const struct principal *p, struct sbx *sb,
                      const char *name, bool ephemeral, snapshot_done_fn done, void *arg,
                      struct hutch_err *err) {
  if (capture_check(srv, p, sb, err) < 0)
    return -1;
  int fd = hutch_sandbox_storage(sb->hs);
  if (fd < 0)
    return hutch_err_fail(err, HUTCH_ERR_CONFLICT, "unsupported",
                          "sandbox %s: its storage cannot be reached (%s): an agent of an older "
                          "hutch does not hold it",
                          sb->id, strerror(errno));

  /* Frozen for the copy, off the loop (sbx_pause.c): a paused one is
   * already, and a second capture finds it so, or waits for the same
   * freeze. */
  bool freeze = sb->freezing || (!sb->paused && !sb->captures);
  sb->captures++;
  srv->captures++;

  struct capture *cap = xcalloc(1, sizeof *cap);
  cap->work.data = cap;
  cap->srv = srv;
  str_copy(cap->tenant, sizeof cap->tenant, p->tenant);
  memcpy(cap->sandbox, sb->id, sizeof cap->sandbox);
  cap->isolation = sb->hs->isolation;
  memcpy(cap->id, "snap_", 5);
  random_hex(cap->id + 5, 16);
  cap->dir = layers_snapshot_dir(srv, cap->id);
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

  if (freeze)
    sbx_freeze(sb, capture_frozen, cap);
  else
    capture_start(cap);
  return 0;
}

int snapshots_delete(struct server *srv, const struct principal *p, const char *id,
                     offload_done_fn done, void *arg, struct hutch_err *err) {
  json_t *s = snapshots_get(srv, p->tenant, id);
  if (!s)
    return hutch_err_fail(err, HUTCH_ERR_NOT_FOUND, "not_found", "no snapshot %s", id);

  json_t *all = snapshots_list(srv, NULL);
  unsigned snaps, n = users_of(srv, all, id, &snaps);
  json_decref(all);
  if (n || snaps) {
    json_decref(s);
    return hutch_err_fail(err, HUTCH_ERR_CONFLICT, "snapshot_in_use",
                          "snapshot %s is stacked by %u running sandboxes and %u snapshots: "
                          "delete them first",
                          id, n, snaps);
  }

  json_t *layers = json_deep_copy(json_object_get(s, "layers"));
  json_decref(s);
  struct hutch_err e = {0};
  if (remove_snapshot(srv, id, layers, done, arg, &e) < 0) {
    json_decref(layers);
    return hutch_err_fail(err, HUTCH_ERR_SYSTEM, "internal", "snapshot %s: %s", id, e.msg);
  }

  /* The fork snapshot it stacked may have nothing left stacking it. */
  json_array_remove(layers, 0);
  snapshots_release(srv, layers);
  json_decref(layers);
  return 0;
}
