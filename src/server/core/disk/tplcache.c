/* A tenant's build cache, charged and collected (tplcache.h). Read on the
 * loop: a tenant keeps at most HUTCH_IMAGES_CACHE_MAX small entries. */
#include "core/disk/tplcache.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "images.h"
#include "util.h"
#include "core/disk/diskroom.h"
#include "core/base/offload.h"
#include "core/base/server.h"
#include "core/sandbox/tally.h"
#include "core/disk/templates.h"
#include "core/disk/tplstore.h"

/* What an entry costs, once per layer: held takes it as counted. */
static uint64_t charge(const struct hutch_cache_entry *c, json_t *held, uint64_t entry) {
  if (json_object_get(held, c->layer))
    return 0;
  json_object_set_new(held, c->layer, json_true());
  return c->size + c->files * entry;
}

/* What the layers the tenant let go of cost until they are collected:
 * the store removes no layer while any job works in its tmp/, and a
 * tenant keeping one job running would otherwise drop cache entries (no
 * longer charged) faster than their layers go. Those gone are forgotten. */
static uint64_t uncollected_bytes(struct server *srv, const char *tenant, json_t *held) {
  const struct tally *t = tally_of(srv, tenant);
  json_t *gone = t && t->uncollected ? json_deep_copy(t->uncollected) : NULL, *v;
  const char *hex;
  uint64_t bytes = 0;
  json_object_foreach(gone, hex, v) {
    if (!hutch_images_layer_exists(&srv->images, hex))
      tally_uncollected(srv, tenant, hex, 0);
    else if (!json_object_get(held, hex))
      bytes += (uint64_t)json_integer_value(v);
  }
  json_decref(gone);
  return bytes;
}

uint64_t tplcache_bytes(struct server *srv, const char *tenant, json_t *held, uint64_t *gone) {
  size_t n;
  struct hutch_cache_entry *v = hutch_images_cache_list(&srv->images, tenant, &n);
  uint64_t bytes = 0, entry = diskroom_entry_cost(srv);
  for (size_t i = 0; i < n; i++)
    bytes += charge(&v[i], held, entry);
  free(v);
  *gone = uncollected_bytes(srv, tenant, held);
  return bytes;
}

json_t *tplcache_charged(struct server *srv, const char *tenant) {
  uint64_t ignored;
  json_t *held = tplstore_held(srv, tenant, &ignored);
  size_t n;
  struct hutch_cache_entry *v = hutch_images_cache_list(&srv->images, tenant, &n);
  for (size_t i = 0; i < n; i++)
    json_object_set_new(held, v[i].layer, json_true());
  free(v);
  return held;
}

/* The attack: the store removes no layer while any job works in its tmp/,
 * and a template deleted (or removed past the quota) took its layers, and
 * the cache entries that followed it, out of the charge at once: build
 * and delete in a loop beside a long job filled the disk, charged to
 * nobody. What left the charge stays charged until collected. */
void tplcache_let_go(struct server *srv, const char *tenant, json_t *before) {
  json_t *after = tplcache_charged(srv, tenant), *all = hutch_images_list(&srv->images, NULL), *v;
  uint64_t entry = diskroom_entry_cost(srv);
  const char *hex;
  size_t i;
  /* A layer another template still holds (a public FROM's) is not one
   * this removal leaves behind. */
  json_array_foreach(all, i, v) {
    tplstore_mark_layers(v, after);
  }
  json_decref(all);

  json_object_foreach(before, hex, v) {
    if (json_object_get(after, hex) || !hutch_images_layer_exists(&srv->images, hex))
      continue;
    tally_uncollected(srv, tenant, hex,
                      hutch_images_layer_meta(&srv->images, hex, "size") +
                          hutch_images_layer_meta(&srv->images, hex, "files") * entry);
  }
  json_decref(after);
}

uint64_t tplcache_collect(struct server *srv, const char *tenant, uint64_t want) {
  uint64_t ignored, freed = 0, entry = diskroom_entry_cost(srv);
  json_t *held = tplstore_held(srv, tenant, &ignored);
  size_t n;
  struct hutch_cache_entry *v = hutch_images_cache_list(&srv->images, tenant, &n);

  /* The newest use of each layer decides: an entry whose layer another,
   * newer entry also names frees nothing by going alone. */
  for (size_t i = 0; i < n && freed < want; i++) {
    if (json_object_get(held, v[i].layer))
      continue;
    bool shared = false;
    for (size_t k = i + 1; k < n && !shared; k++)
      shared = strcmp(v[k].layer, v[i].layer) == 0;
    hutch_images_cache_drop(&srv->images, tenant, v[i].key);
    if (!shared) {
      uint64_t cost = v[i].size + v[i].files * entry;
      tally_uncollected(srv, tenant, v[i].layer, cost);
      freed += cost;
    }
  }
  free(v);
  json_decref(held);

  if (freed)
    tplcache_gc(srv);
  return freed;
}

struct collect {
  struct offload o;
  struct server *srv;
  struct hutch_images *store;
};

static void collect_run(struct offload *o) {
  struct collect *c = OFFLOAD_JOB(o, struct collect);
  struct hutch_err err = {0};
  if (hutch_images_gc(c->store, &err) < 0)
    fprintf(stderr, "hutch serve: collecting the template store: %s\n", err.msg);
}

static void collect_done(struct offload *o) {
  struct collect *c = OFFLOAD_JOB(o, struct collect);
  struct server *srv = c->srv;
  free(c);
  srv->store_collecting = false;
  if (srv->store_collect_again) {
    srv->store_collect_again = false;
    tplcache_gc(srv);
  }
}

void tplcache_gc(struct server *srv) {
  if (srv->store_collecting) {
    srv->store_collect_again = true;
    return;
  }
  struct collect *c = xcalloc(1, sizeof *c);
  c->srv = srv;
  c->store = &srv->images;
  srv->store_collecting = true;
  offload(srv, OFFLOAD_OTHER, &c->o, collect_run, collect_done);
}
