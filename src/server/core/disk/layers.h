/* The layers a sandbox stacks under its writable one (sb->layers, a
 * snapshot's "layers"): snapshot ids, topmost first, then, when it was
 * made from a template of the store (src/lib/images.h), the entry
 * "template:<id>" last, standing for that template's layers. A template
 * removed while a sandbox or snapshot stacks it keeps its layers: a
 * sandbox holds a pin for its life, a snapshot a hold in the store. */
#ifndef HUTCH_CORE_DISK_LAYERS_H
#define HUTCH_CORE_DISK_LAYERS_H

#include <jansson.h>
#include <stddef.h>

#include "err.h"

struct server;

#define LAYERS_TEMPLATE "template:"

/* The template id layers end with, or NULL. */
const char *layers_template(json_t *layers);

/* What a sandbox stacking layers mounts, and the pin of its template. */
struct layer_stack {
  char *rootfs; /* NULL: the host template */
  char **paths; /* topmost first */
  size_t n;
  int pin; /* -1: no template */
};
int layers_stack(struct server *srv, json_t *layers, struct layer_stack *st, struct hutch_err *err);
void layers_stack_free(struct layer_stack *st);

/* How many layers they are, a template's counted one by one. */
size_t layers_depth(struct server *srv, json_t *layers);

/* The tenant's template name (its own, or a public one): its record, or
 * NULL with HUTCH_ERR_NOT_FOUND. */
json_t *layers_find_template(struct server *srv, const char *tenant, const char *name,
                             struct hutch_err *err);

/* A snapshot stored with layers holds their template (or lets go); so
 * does a sandbox left running while no server pins its layers (holder
 * "sbx-ID", from a SIGTERM's release until the next start takes it over).
 * -1 when the template could not be held (said on stderr). */
int layers_hold(struct server *srv, json_t *layers, const char *holder, int hold);

/* Where snapshot id's layer is: STATE/snapshots/<id>. */
char *layers_snapshot_dir(const struct server *srv, const char *id);

#endif
