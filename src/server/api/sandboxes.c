/* /v1/sandboxes: create, list, get, delete, and set a sandbox's timeout. */
#include "api/sandboxes.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"
#include "core/life/sbx_create.h"
#include "core/life/actions.h"
#include "api/lifecycle.h"
#include "core/life/snapshots.h"
#include "core/disk/volumes.h"
#include "http/body.h"
#include "state/store.h"
#include "core/life/sbx_teardown.h"
#include "core/sandbox/sbx.h"
#include "http/errors.h"
#include "http/http.h"
#include "http/query.h"
#include "core/sandbox/sbx_list.h"

#define MAX_MAP_ENTRIES 256 /* env and metadata */

/* A create body's typed fields into r, and its on_timeout and isolation:
 * 0, or -1 after a 400. */
static int create_fields(struct http_conn *c, json_t *o, struct create_req *r,
                         const char **on_timeout, const char **isolation) {
  static const char *const known[] = {"template",   "timeout_s",   "memory_mb", "cpus",
                                      "pids",       "disk_mb",     "env",       "metadata",
                                      "on_timeout", "auto_resume", "volumes",   "network",
                                      "secrets",    "isolation",   NULL};
  if (http_body_only(c, o, known) < 0)
    return -1;
  if (http_body_string(c, o, "template", SERVE_TEMPLATE_MAX, &r->template) < 0)
    return -1;
  if (http_body_number(c, o, "timeout_s", 1, SERVE_MAX_TIMEOUT_S, &r->timeout_s) < 0)
    return -1;
  if (http_body_uint(c, o, "memory_mb", 1, 1ull << 30, &r->memory_mb) < 0)
    return -1;
  if (http_body_uint(c, o, "pids", 1, HUTCH_MAX_PIDS, &r->pids) < 0)
    return -1;
  if (http_body_uint(c, o, "disk_mb", 1, 1ull << 30, &r->disk_mb) < 0)
    return -1;
  if (http_body_number(c, o, "cpus", 0.01, 4096, &r->cpus) < 0)
    return -1;
  if (http_body_string_map(c, o, "env", MAX_MAP_ENTRIES, &r->env) < 0)
    return -1;
  if (http_body_string_map(c, o, "metadata", MAX_MAP_ENTRIES, &r->metadata) < 0)
    return -1;
  if (http_body_string(c, o, "on_timeout", 8, on_timeout) < 0)
    return -1;
  if (http_body_string(c, o, "isolation", 8, isolation) < 0)
    return -1;
  return 0;
}

/* A native create body as a create request (its JSON borrowed from o);
 * -1 after a 400. */
static int parse_create(struct http_conn *c, json_t *o, struct create_req *r) {
  sbx_create_req_init(r);
  const char *on_timeout = "kill", *isolation = NULL;
  r->volumes = json_object_get(o, "volumes");
  r->network = json_object_get(o, "network");
  r->secrets = json_object_get(o, "secrets");
  json_t *ar = json_object_get(o, "auto_resume");
  if (ar && !json_is_boolean(ar)) {
    http_error(c, HUTCH_ERR_INVALID, "invalid_argument", "auto_resume must be true or false");
    return -1;
  }
  if (ar)
    r->auto_resume = json_is_true(ar);
  if (create_fields(c, o, r, &on_timeout, &isolation) < 0)
    return -1;

  if (isolation) {
    r->isolation = hutch_config_isolation_parse(isolation);
    if (r->isolation < 0) {
      http_error(c, HUTCH_ERR_INVALID, "invalid_argument",
                 "isolation must be \"ns\" or \"gvisor\"");
      return -1;
    }
  }
  if (strcmp(on_timeout, "kill") != 0 && strcmp(on_timeout, "pause") != 0) {
    http_error(c, HUTCH_ERR_INVALID, "invalid_argument",
               "on_timeout must be \"kill\" or \"pause\"");
    return -1;
  }
  r->pause_on_timeout = strcmp(on_timeout, "pause") == 0;
  return 0;
}

/* A create's request, held while the sandbox is made. */
struct creating_wait {
  struct http_wait w;
  sandbox_render_fn render;
};

static bool still_wanted(void *arg) {
  return ((struct creating_wait *)arg)->w.c != NULL;
}

static void created(struct sbx *sb, const struct hutch_err *err, void *arg) {
  struct creating_wait *cw = arg;
  struct http_conn *c = http_wait_end(&cw->w);
  sandbox_render_fn render = cw->render;
  free(cw);
  if (!c) {
    if (sb) /* made all the same (a warm pool's, at once): nobody will use it */
      sbx_destroy(sb);
    return;
  }
  if (!sb) {
    http_fail(c, err);
    return;
  }
  str_copy(c->sandbox, sizeof c->sandbox, sb->id);
  render(c, sb);
}

static const struct create_ops create_ops = {.wanted = still_wanted, .made = created};

void api_sandboxes_make(struct http_conn *c, const struct principal *p, const struct create_req *r,
                        sandbox_render_fn render) {
  struct hutch_err err = {0};
  struct creating_wait *cw = xcalloc(1, sizeof *cw);
  cw->render = render;
  http_wait_begin(&cw->w, c);
  if (sbx_create(c->srv, p, r, &create_ops, cw, &err) < 0) {
    http_wait_end(&cw->w);
    free(cw);
    http_fail(c, &err);
  }
}

static void render_created(struct http_conn *c, struct sbx *sb) {
  http_json(c, 201, sbx_json(sb));
}

void api_sandboxes_create(struct http_conn *c, const struct principal *p) {
  json_t *o = http_body_object(c);
  struct create_req r;
  if (o && parse_create(c, o, &r) == 0)
    api_sandboxes_make(c, p, &r, render_created);
  json_decref(o);
}

/* ?state=running|paused and ?metadata.KEY=VALUE (all must match); a
 * value that does not decode matches nothing. */
void api_sandboxes_list(struct http_conn *c, const struct principal *p) {
  struct sbx_filter f = {.running = true, .paused = true, .metadata = json_object()};
  bool none = false;

  for (const char *q = c->req.query; q && *q;) {
    char *key = NULL, *value = NULL;
    q = http_query_next(q, &key, &value);
    if (key && strcmp(key, "state") == 0) {
      f.running = f.running && value && strcmp(value, "running") == 0;
      f.paused = f.paused && value && strcmp(value, "paused") == 0;
    } else if (key && strncmp(key, "metadata.", 9) == 0) {
      none |= !value;
      if (value)
        json_object_set_new(f.metadata, key + 9, json_string(value));
    }
    free(key);
    free(value);
  }

  size_t n;
  struct sbx **all = sbx_list(c->srv, p, &f, &n);
  json_t *a = json_array();
  for (size_t i = 0; i < n && !none; i++)
    json_array_append_new(a, sbx_json(all[i]));
  free(all);
  json_decref(f.metadata);
  http_json(c, 200, json_pack("{s:o}", "sandboxes", a));
}

void api_sandboxes_get(struct http_conn *c, const struct principal *p) {
  struct sbx *sb = api_sbx_lookup(c, p);
  if (sb)
    http_json(c, 200, sbx_json(sb));
}

/* Both APIs' delete: the sandbox goes, 204 once its processes have. */
static void deleted(void *arg) {
  struct http_wait *w = arg;
  struct http_conn *c = http_wait_end(w);
  free(w);
  if (c)
    http_respond(c, 204, "application/json", "", 0, NULL);
}

void api_sandboxes_delete(struct http_conn *c, const struct principal *p) {
  struct sbx *sb = api_sbx_lookup(c, p);
  if (!sb)
    return;
  struct http_wait *w = xcalloc(1, sizeof *w);
  http_wait_begin(w, c);
  sbx_destroy_then(sb, deleted, w);
}

struct sbx *api_sandboxes_timeout_body(struct http_conn *c, const struct principal *p, double *t) {
  static const char *const known[] = {"timeout_s", NULL};
  struct sbx *sb = api_sbx_lookup(c, p);
  json_t *o = sb ? http_body_object(c) : NULL;
  *t = -1;
  bool ok = false;
  if (o && http_body_only(c, o, known) >= 0)
    ok = http_body_number(c, o, "timeout_s", 1, SERVE_MAX_TIMEOUT_S, t) >= 0;
  json_decref(o);
  return ok ? sb : NULL;
}

/* A new timeout, counted from now (as E2B's setTimeout). */
void api_sandboxes_timeout(struct http_conn *c, const struct principal *p) {
  double t;
  struct sbx *sb = api_sandboxes_timeout_body(c, p, &t);
  if (!sb)
    return;
  if (t < 0) {
    http_error(c, HUTCH_ERR_INVALID, "invalid_argument", "timeout_s is required");
    return;
  }
  actions_set_timeout(sb, t, false);
  http_json(c, 200, sbx_json(sb));
}
