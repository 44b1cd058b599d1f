/* Forks (forks.h): a sandbox's files captured once,
 * then every copy's create started at once (each made off the loop), as
 * clients making them side by side would: a copy's agent starts while the
 * next copy is being made. The fork ends when the last create has. */
#include "core/life/forks.h"

#include <stdlib.h>
#include <string.h>

#include "util.h"
#include "core/events/events.h"
#include "core/life/sbx_create.h"
#include "core/sandbox/sbx.h"
#include "core/base/server.h"
#include "core/life/snapshots.h"
#include "core/life/sbx_teardown.h"
#include "core/sandbox/tally.h"

struct fork {
  struct server *srv;
  struct principal p;
  struct create_req r; /* each copy's: sb's limits and life; JSON held */
  char template[22];   /* the snapshot's id */
  char from[17];       /* the sandbox forked */
  json_t *snap_id;
  json_t *ids; /* the copies made so far */
  uint64_t count;
  uint64_t pending; /* creates started and not ended yet */
  bool failed;      /* one of them failed: err says why */
  struct hutch_err err;
  const struct fork_ops *ops;
  void *arg;
};

static void fork_free(struct fork *f) {
  json_decref(f->r.env);
  json_decref(f->r.metadata);
  json_decref(f->r.network);
  json_decref(f->r.secrets);
  json_decref(f->snap_id);
  json_decref(f->ids);
  free(f);
}

/* It ends with err: the copies made so far go, and the snapshot with them
 * (the last user of an ephemeral snapshot releases it). */
static void fork_fail(struct fork *f, const struct hutch_err *err) {
  size_t i;
  json_t *v;
  json_array_foreach(f->ids, i, v) {
    struct sbx *sb = sbx_find_own(f->srv, &f->p, json_string_value(v));
    if (sb)
      sbx_destroy(sb);
  }
  if (f->snap_id) {
    json_t *layers = json_pack("[O]", f->snap_id);
    snapshots_release(f->srv, layers);
    json_decref(layers);
  }
  f->ops->done(NULL, NULL, err, f->arg);
  fork_free(f);
}

/* A create ended (made, or failed: the first failure is what the fork
 * answers); the last one ends the fork. */
static void copy_ended(struct fork *f) {
  if (--f->pending > 0)
    return;
  if (f->failed) {
    fork_fail(f, &f->err);
    return;
  }
  events_emit(f->srv, "sandbox.forked", f->p.tenant, f->from,
              json_pack("{s:O,s:O}", "snapshot", f->snap_id, "sandboxes", f->ids));
  f->ops->done(f->snap_id, f->ids, NULL, f->arg);
  fork_free(f);
}

static bool copy_wanted(void *arg) {
  struct fork *f = arg;
  return !f->failed && f->ops->wanted(f->arg);
}

static void copy_made(struct sbx *sb, const struct hutch_err *err, void *arg) {
  struct fork *f = arg;
  if (sb) {
    json_array_append_new(f->ids, json_string(sb->id));
  } else if (!f->failed) {
    f->failed = true;
    f->err = *err;
  }
  copy_ended(f);
}

static const struct create_ops copy_ops = {.wanted = copy_wanted, .made = copy_made};

static void fork_captured(json_t *snap, const struct hutch_err *err, void *arg) {
  struct fork *f = arg;
  if (!snap) {
    f->ops->done(NULL, NULL, err, f->arg);
    fork_free(f);
    return;
  }

  f->snap_id = json_incref(json_object_get(snap, "id"));
  str_copy(f->template, sizeof f->template, json_string_value(f->snap_id));
  f->r.template = f->template;

  /* Counted as pending while they are started: a create that ends at
   * once (one that fails) cannot end the fork before the others start. */
  f->pending = 1;
  for (uint64_t i = 0; i < f->count && !f->failed; i++) {
    if (!f->ops->wanted(f->arg)) {
      f->failed = true;
      hutch_err_fail(&f->err, HUTCH_ERR_UNAVAILABLE, "overloaded", "the client left");
      break;
    }
    f->pending++;
    struct hutch_err e = {0};
    if (sbx_create(f->srv, &f->p, &f->r, &copy_ops, f, &e) < 0)
      copy_made(NULL, &e, f);
    /* Admission judged the fork at its first copy: the others follow
     * it rather than be refused halfway, which would fail the fork. */
    f->r.admitted = true;
  }

  copy_ended(f);
}

int forks_start(struct server *srv, const struct principal *p, struct sbx *sb, uint64_t count,
                double timeout_s, const struct fork_ops *ops, void *arg, struct hutch_err *err) {
  if (count < 1 || count > SNAPSHOTS_MAX_FORKS)
    return hutch_err_fail(err, HUTCH_ERR_INVALID, "invalid_argument", "count must be from 1 to %d",
                          SNAPSHOTS_MAX_FORKS);
  if (tally_check_room(srv, p, sb->memory_mb, (unsigned)count, err) < 0) {
    if (err->kind == HUTCH_ERR_QUOTA)
      sbx_create_refused(srv, p->tenant, err);
    return -1;
  }

  struct fork *f = xcalloc(1, sizeof *f);
  f->srv = srv;
  f->p = *p;
  f->count = count;
  f->ops = ops;
  f->arg = arg;
  f->ids = json_array();
  str_copy(f->from, sizeof f->from, sb->id);

  /* Each copy is made as the sandbox was. */
  sbx_create_req_init(&f->r);
  f->r.isolation = (int)sb->hs->isolation;
  f->r.memory_mb = sb->memory_mb;
  f->r.disk_mb = sb->disk_mb;
  f->r.pids = sb->pids;
  f->r.cpus = (double)sb->cpu_milli / 1000;
  f->r.env = json_incref(sb->env);
  f->r.metadata = json_incref(sb->metadata);
  f->r.network = json_incref(sb->network);
  f->r.secrets = json_incref(sb->secrets);
  f->r.timeout_s = timeout_s > 0 ? timeout_s : (double)sb->timeout_ms / 1000;
  f->r.pause_on_timeout = sb->pause_on_timeout;
  f->r.auto_resume = sb->auto_resume;

  if (snapshots_capture(srv, p, sb, "", true, fork_captured, f, err) < 0) {
    fork_free(f);
    return -1;
  }
  return 0;
}
