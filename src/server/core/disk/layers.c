/* The layers a sandbox stacks: snapshots' and a template's (layers.h). */
#include "core/disk/layers.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "images.h"
#include "util.h"
#include "core/base/server.h"

char *layers_snapshot_dir(const struct server *srv, const char *id) {
  return xasprintf("%s/snapshots/%s", srv->cfg.state_dir, id);
}

const char *layers_template(json_t *layers) {
  size_t n = json_array_size(layers);
  const char *last = n ? json_string_value(json_array_get(layers, n - 1)) : NULL;
  return last && strncmp(last, LAYERS_TEMPLATE, strlen(LAYERS_TEMPLATE)) == 0
             ? last + strlen(LAYERS_TEMPLATE)
             : NULL;
}

int layers_stack(struct server *srv, json_t *layers, struct layer_stack *st,
                 struct hutch_err *err) {
  *st = (struct layer_stack){.pin = -1};
  const char *tmpl = layers_template(layers);
  size_t nsnap = json_array_size(layers) - (tmpl ? 1 : 0);
  char **tpaths = NULL;
  size_t tn = 0;

  /* A template's layers come last, pinned before anything is mounted: a
   * removal meanwhile keeps them. */
  if (tmpl) {
    json_t *rec = hutch_images_get(&srv->images, tmpl, err);
    int r = -1;
    if (rec)
      r = hutch_images_stack(&srv->images, rec, &st->rootfs, &tpaths, &tn, err);
    if (r == 0) {
      st->pin = hutch_images_pin(&srv->images, rec, err);
      if (st->pin < 0)
        r = -1;
    }
    json_decref(rec);
    if (r < 0) {
      hutch_images_stack_free(st->rootfs, tpaths, tn);
      st->rootfs = NULL;
      return -1;
    }
  }

  st->n = nsnap + tn;
  st->paths = xcalloc(st->n + 1, sizeof *st->paths);
  for (size_t i = 0; i < nsnap; i++)
    st->paths[i] = layers_snapshot_dir(srv, json_string_value(json_array_get(layers, i)));
  for (size_t i = 0; i < tn; i++)
    st->paths[nsnap + i] = tpaths[i];
  free(tpaths);
  return 0;
}

void layers_stack_free(struct layer_stack *st) {
  hutch_images_stack_free(st->rootfs, st->paths, st->n);
  if (st->pin >= 0)
    close(st->pin);
  *st = (struct layer_stack){.pin = -1};
}

size_t layers_depth(struct server *srv, json_t *layers) {
  const char *tmpl = layers_template(layers);
  size_t n = json_array_size(layers);
  if (!tmpl)
    return n;
  struct hutch_err ignored = {0};
  json_t *rec = hutch_images_get(&srv->images, tmpl, &ignored);
  /* Its own layers and hutch's top one, for the entry that names them. */
  n += json_array_size(json_object_get(rec, "layers"));
  json_decref(rec);
  return n;
}

json_t *layers_find_template(struct server *srv, const char *tenant, const char *name,
                             struct hutch_err *err) {
  return hutch_images_find(&srv->images, tenant, name, err);
}

int layers_hold(struct server *srv, json_t *layers, const char *holder, int hold) {
  const char *tmpl = layers_template(layers);
  struct hutch_err err = {0};
  if (!tmpl || hutch_images_hold(&srv->images, tmpl, holder, hold, &err) == 0)
    return 0;
  fprintf(stderr, "hutch serve: %s: template %s: %s\n", holder, tmpl, err.msg);
  return -1;
}
