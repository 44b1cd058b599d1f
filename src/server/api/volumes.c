/* The native API's volumes: /v1/volumes. Parsing and answers only: the
 * volumes themselves are core/volumes.c's. */
#include "api/volumes.h"

#include <stdio.h>
#include <stdlib.h>

#include "util.h"
#include "api/snapshots.h"
#include "core/disk/volumes.h"
#include "core/life/volworker.h"
#include "http/body.h"
#include "http/errors.h"
#include "http/http.h"
#include "state/store.h"

/* A create's request, held while the image is made. */
struct volume_wait {
  struct http_wait w;
  struct server *srv;
  struct principal p;
  volume_render_fn render;
};

static void volume_made(json_t *vol, const struct hutch_err *err, void *arg) {
  struct volume_wait *vw = arg;
  struct http_conn *c = http_wait_end(&vw->w);
  struct hutch_err e = {0};
  if (!c && vol && /* its client went: nobody knows of it */
      volumes_delete(vw->srv, &vw->p, json_string_value(json_object_get(vol, "id")), NULL, NULL,
                     &e) < 0)
    fprintf(stderr, "hutch serve: %s\n", e.msg);
  if (c && vol)
    vw->render(c, vol, &vw->p);
  else if (c)
    http_fail(c, err);
  free(vw);
}

void api_volumes_make(struct http_conn *c, const struct principal *p, const char *name,
                      uint64_t size_mb, volume_render_fn render) {
  struct hutch_err err = {0};
  struct volume_wait *vw = xcalloc(1, sizeof *vw);
  vw->srv = c->srv;
  vw->p = *p;
  vw->render = render;
  http_wait_begin(&vw->w, c);
  if (volumes_create(c->srv, p, name, size_mb, volume_made, vw, &err) < 0) {
    http_wait_end(&vw->w);
    free(vw);
    http_fail(c, &err);
  }
}

static void render(struct http_conn *c, json_t *vol, const struct principal *p) {
  (void)p;
  json_object_del(vol, "tenant");
  http_json(c, 201, json_incref(vol));
}

/* POST /v1/volumes {name, size_mb} */
void api_volumes_create(struct http_conn *c, const struct principal *p) {
  static const char *const known[] = {"name", "size_mb", NULL};
  json_t *o = http_body_object(c);
  const char *name = NULL;
  uint64_t size_mb = 0;
  if (!o)
    return;
  if (http_body_only(c, o, known) < 0)
    goto out;
  if (http_body_string(c, o, "name", 63, &name) < 0)
    goto out;
  if (http_body_uint(c, o, "size_mb", VOLUME_MIN_MB, VOLUME_MAX_MB, &size_mb) < 0)
    goto out;
  api_volumes_make(c, p, name, size_mb, render);
out:
  json_decref(o);
}

void api_volumes_list(struct http_conn *c, const struct principal *p) {
  json_t *a = volumes_list(c->srv, p->tenant), *v;
  size_t i;
  if (!a) {
    http_error(c, HUTCH_ERR_SYSTEM, "internal", "reading volumes failed");
    return;
  }
  json_array_foreach(a, i, v)
    json_object_del(v, "tenant");
  http_json(c, 200, json_pack("{s:o}", "volumes", a));
}

void api_volumes_get(struct http_conn *c, const struct principal *p) {
  json_t *v = volumes_find(c->srv, p->tenant, c->req.params[0]);
  if (!v) {
    http_error(c, HUTCH_ERR_NOT_FOUND, "not_found", "no volume %s", c->req.params[0]);
    return;
  }
  json_object_del(v, "tenant");
  http_json(c, 200, v);
}

struct volume_delete {
  struct server *srv;
  struct principal p;
  char *id;
  struct http_wait *w;
};

static void delete_now(void *arg) {
  struct volume_delete *d = arg;
  struct hutch_err err = {0};
  if (volumes_delete(d->srv, &d->p, d->id, api_answer_204, d->w, &err) < 0) {
    struct http_conn *c = http_wait_end(d->w);
    free(d->w);
    if (c)
      http_fail(c, &err);
  }
  free(d->id);
  free(d);
}

/* DELETE /v1/volumes/{id}: a worker of E2B's content API (volworker.h)
 * goes first; a sandbox of the tenant's that mounts it keeps it (409). */
void api_volumes_delete(struct http_conn *c, const struct principal *p) {
  json_t *vol = volumes_find(c->srv, p->tenant, c->req.params[0]);
  struct volume_delete *d = xcalloc(1, sizeof *d);
  d->srv = c->srv;
  d->p = *p;
  d->id = xstrdup(vol ? json_string_value(json_object_get(vol, "id")) : c->req.params[0]);
  d->w = api_wait(c);
  json_decref(vol);
  if (volworker_end(c->srv, p, d->id, delete_now, d) == 0)
    delete_now(d);
}
