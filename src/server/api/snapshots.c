/* The native API's snapshots and forks: /v1/sandboxes/{id}/snapshots and
 * /fork, /v1/snapshots. Parsing and answers only: the snapshots
 * themselves are core/snapshots.c's. A fork's sandboxes are made here,
 * one native create after the other, until the create is an action of
 * core's too; E2B's front end makes its snapshots and forks through the
 * same functions (api.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"
#include "api/api.h"
#include "api/handlers.h"
#include "core/snapshots.h"
#include "http/body.h"

struct http_wait *api_wait(struct http_conn *c) {
  struct http_wait *w = xcalloc(1, sizeof *w);
  http_wait_begin(w, c);
  return w;
}

void api_answer_204(const struct hutch_err *err, void *arg) {
  struct http_conn *c = http_wait_end(arg);
  free(arg);
  if (!c && err)
    fprintf(stderr, "hutch serve: %s\n", err->msg);
  else if (c && err)
    http_fail(c, err);
  else if (c)
    http_respond(c, 204, "application/json", "", 0, NULL);
}

/* A capture's request, held until the copy is done. */
struct capture_wait {
  struct http_wait w;
  snapshot_render_fn render;
};

static void captured(json_t *snap, const struct hutch_err *err, void *arg) {
  struct capture_wait *cw = arg;
  struct http_conn *c = http_wait_end(&cw->w);
  snapshot_render_fn render = cw->render;
  free(cw);
  if (c && snap)
    render(c, snap);
  else if (c)
    http_fail(c, err);
}

void snapshots_take(struct http_conn *c, const struct principal *p, struct sbx *sb,
                    const char *name, snapshot_render_fn render) {
  struct hutch_err err = {0};
  struct capture_wait *cw = xcalloc(1, sizeof *cw);
  cw->render = render;
  http_wait_begin(&cw->w, c);
  if (snapshots_capture(c->srv, p, sb, name, false, captured, cw, &err) < 0) {
    http_wait_end(&cw->w);
    free(cw);
    http_fail(c, &err);
  }
}

static void render_snapshot(struct http_conn *c, json_t *snap) {
  http_json(c, 201, json_incref(snap));
}

void api_snapshots_create(struct http_conn *c, const struct principal *p) {
  static const char *const known[] = {"name", NULL};
  struct sbx *sb = sbx_lookup(c, p);
  json_t *o = sb ? body_object(c) : NULL;
  const char *name = NULL;
  if (o && body_only(c, o, known) >= 0 && body_string(c, o, "name", 128, &name) >= 0)
    snapshots_take(c, p, sb, name, render_snapshot);
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

void api_snapshots_get(struct http_conn *c, const struct principal *p) {
  json_t *s = snapshots_get(c->srv, p->tenant, c->req.params[0]);
  if (!s) {
    http_error(c, HUTCH_ERR_NOT_FOUND, "not_found", "no snapshot %s", c->req.params[0]);
    return;
  }
  json_object_del(s, "tenant");
  http_json(c, 200, s);
}

void snapshots_drop(struct http_conn *c, const struct principal *p, const char *id) {
  struct hutch_err err = {0};
  struct http_wait *w = api_wait(c);
  if (snapshots_delete(c->srv, p, id, api_answer_204, w, &err) < 0) {
    http_wait_end(w);
    free(w);
    http_fail(c, &err);
  }
}

void api_snapshots_delete(struct http_conn *c, const struct principal *p) {
  snapshots_drop(c, p, c->req.params[0]);
}

/* A fork under way: its request held while the snapshot is copied, then
 * the copies made one after the other (each off the loop), as one create
 * after another would be. */
struct fork_plan {
  struct http_wait w;
  struct principal p;
  struct server *srv;
  json_t *req; /* each copy's create body */
  json_t *snap_id;
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
static void fork_fail(struct fork_plan *plan) {
  for (size_t j = 0; j < json_array_size(plan->made); j++) {
    struct sbx *sb = sbx_find_own(plan->srv, &plan->p, plan->ids[j]);
    if (sb)
      sbx_destroy(sb);
  }
  json_t *layers = json_pack("[O]", plan->snap_id);
  snapshots_release(plan->srv, layers);
  json_decref(layers);
  fork_plan_free(plan);
}

static void fork_next(struct http_conn *c, struct fork_plan *plan);

static void fork_made(struct http_conn *c, const struct principal *p, struct sbx *sb, void *arg) {
  (void)p;
  struct fork_plan *plan = arg;
  if (!sb) {
    fork_fail(plan);
    return;
  }
  memcpy(plan->ids[json_array_size(plan->made)], sb->id, 17);
  json_array_append_new(plan->made, sbx_json(sb));
  fork_next(c, plan);
}

static void fork_next(struct http_conn *c, struct fork_plan *plan) {
  if (json_array_size(plan->made) == plan->count) {
    plan->answer(c, plan->snap_id, plan->made);
    fork_plan_free(plan);
    return;
  }
  if (sandboxes_create(c, &plan->p, plan->req, fork_made, plan) < 0)
    fork_fail(plan);
}

static void fork_captured(json_t *snap, const struct hutch_err *err, void *arg) {
  struct fork_plan *plan = arg;
  struct http_conn *c = http_wait_end(&plan->w);
  if (!snap) {
    if (c)
      http_fail(c, err);
    fork_plan_free(plan);
    return;
  }
  plan->snap_id = json_incref(json_object_get(snap, "id"));
  if (!c) { /* nobody will use it: the snapshot goes at once */
    fork_fail(plan);
    return;
  }
  json_object_set(plan->req, "template", plan->snap_id);
  plan->made = json_array();
  plan->ids = xcalloc(plan->count, sizeof *plan->ids);
  fork_next(c, plan);
}

void forks_make(struct http_conn *c, const struct principal *p, struct sbx *sb, uint64_t count,
                double timeout_s, fork_answer_fn answer) {
  struct hutch_err err = {0};
  json_t *req = snapshots_fork_request(sb, count, timeout_s, &err);
  if (!req) {
    http_fail(c, &err);
    return;
  }
  if (sandboxes_check_room(c, p, sb->memory_mb, (unsigned)count) < 0) {
    json_decref(req);
    return;
  }
  struct fork_plan *plan = xcalloc(1, sizeof *plan);
  plan->p = *p;
  plan->srv = c->srv;
  plan->req = req;
  plan->count = count;
  plan->answer = answer;
  http_wait_begin(&plan->w, c);
  if (snapshots_capture(c->srv, p, sb, "", true, fork_captured, plan, &err) < 0) {
    http_wait_end(&plan->w);
    fork_plan_free(plan);
    http_fail(c, &err);
  }
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
      body_number(c, o, "timeout_s", 1, SERVE_MAX_TIMEOUT_S, &t) >= 0)
    forks_make(c, p, sb, count, t, answer_forks);
  json_decref(o);
}
