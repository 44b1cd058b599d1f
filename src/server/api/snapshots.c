/* The native API's snapshots and forks: /v1/sandboxes/{id}/snapshots and
 * /fork, /v1/snapshots. Parsing and answers only: the snapshots and forks
 * themselves are core/snapshots.c's and core/forks.c's; E2B's front end
 * makes its snapshots and forks through the same functions (snapshots.h). */
#include "api/snapshots.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"
#include "api/lifecycle.h"
#include "core/life/forks.h"
#include "core/life/snapshots.h"
#include "core/sandbox/sbx.h"
#include "http/body.h"
#include "http/errors.h"
#include "http/http.h"

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

void api_snapshots_take(struct http_conn *c, const struct principal *p, struct sbx *sb,
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

void api_snapshots_request(struct http_conn *c, const struct principal *p,
                           snapshot_render_fn render) {
  static const char *const known[] = {"name", NULL};
  struct sbx *sb = api_sbx_lookup(c, p);
  json_t *o = sb ? http_body_object(c) : NULL;
  const char *name = NULL;
  if (!o)
    return;
  if (http_body_only(c, o, known) < 0)
    goto out;
  if (http_body_string(c, o, "name", 128, &name) < 0)
    goto out;
  api_snapshots_take(c, p, sb, name, render);
out:
  json_decref(o);
}

void api_snapshots_create(struct http_conn *c, const struct principal *p) {
  api_snapshots_request(c, p, render_snapshot);
}

void api_snapshots_list(struct http_conn *c, const struct principal *p) {
  json_t *a = snapshots_list(c->srv, p->tenant), *v;
  size_t i;
  if (!a) {
    http_error(c, HUTCH_ERR_SYSTEM, "internal", "reading snapshots failed");
    return;
  }
  json_array_foreach(a, i, v)
    json_object_del(v, "tenant");
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

void api_snapshots_drop(struct http_conn *c, const struct principal *p, const char *id) {
  struct hutch_err err = {0};
  struct http_wait *w = api_wait(c);
  if (snapshots_delete(c->srv, p, id, api_answer_204, w, &err) < 0) {
    http_wait_end(w);
    free(w);
    http_fail(c, &err);
  }
}

void api_snapshots_delete(struct http_conn *c, const struct principal *p) {
  api_snapshots_drop(c, p, c->req.params[0]);
}

/* A fork's request, held while it is made (core/forks.c). */
struct fork_wait {
  struct http_wait w;
  struct server *srv;
  struct principal p;
  fork_answer_fn answer;
};

static bool fork_wanted(void *arg) {
  return ((struct fork_wait *)arg)->w.c != NULL;
}

static void forked(json_t *snapshot_id, json_t *ids, const struct hutch_err *err, void *arg) {
  struct fork_wait *fw = arg;
  struct http_conn *c = http_wait_end(&fw->w);
  if (c && err) {
    http_fail(c, err);
  } else if (c) {
    json_t *made = json_array(), *v;
    size_t i;
    json_array_foreach(ids, i, v) {
      struct sbx *sb = sbx_find_own(fw->srv, &fw->p, json_string_value(v));
      if (sb)
        json_array_append_new(made, sbx_json(sb));
    }
    fw->answer(c, snapshot_id, made);
    json_decref(made);
  }
  free(fw);
}

static const struct fork_ops fork_ops = {.wanted = fork_wanted, .done = forked};

void api_forks_make(struct http_conn *c, const struct principal *p, struct sbx *sb, uint64_t count,
                    double timeout_s, fork_answer_fn answer) {
  struct hutch_err err = {0};
  struct fork_wait *fw = xcalloc(1, sizeof *fw);
  fw->srv = c->srv;
  fw->p = *p;
  fw->answer = answer;
  http_wait_begin(&fw->w, c);
  if (forks_start(c->srv, p, sb, count, timeout_s, &fork_ops, fw, &err) < 0) {
    http_wait_end(&fw->w);
    free(fw);
    http_fail(c, &err);
  }
}

static void answer_forks(struct http_conn *c, json_t *snapshot_id, json_t *made) {
  http_json(c, 201, json_pack("{s:O,s:O}", "snapshot_id", snapshot_id, "sandboxes", made));
}

/* {count, timeout_s?}: count new sandboxes holding the sandbox's files. */
void api_sandboxes_fork(struct http_conn *c, const struct principal *p) {
  static const char *const known[] = {"count", "timeout_s", NULL};
  struct sbx *sb = api_sbx_lookup(c, p);
  json_t *o = sb ? http_body_object(c) : NULL;
  uint64_t count = 0;
  double t = -1;
  if (!o)
    return;
  if (http_body_only(c, o, known) < 0)
    goto out;
  if (http_body_uint(c, o, "count", 0, UINT32_MAX, &count) < 0)
    goto out;
  if (http_body_number(c, o, "timeout_s", 1, SERVE_MAX_TIMEOUT_S, &t) < 0)
    goto out;
  api_forks_make(c, p, sb, count, t, answer_forks);
out:
  json_decref(o);
}
