/* The store's templates as a tenant sees them (templates.h): listed,
 * found, the builds of a name and their tags, and what they take of the
 * tenant's disk quota (with its build cache and uploads). Small JSON
 * records, read and written on the loop. */
#include "core/disk/tplstore.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "images.h"
#include "util.h"
#include "core/disk/templates.h"
#include "core/disk/diskroom.h"
#include "core/base/offload.h"
#include "core/base/server.h"
#include "core/disk/tplcache.h"
#include "core/disk/tplfiles.h"

json_t *tplstore_list(struct server *srv, const struct principal *p) {
  json_t *all = hutch_images_list(&srv->images, p->tenant);
  return all ? all : json_array();
}

json_t *tplstore_get(struct server *srv, const struct principal *p, const char *ref,
                     struct hutch_err *err) {
  return hutch_images_find(&srv->images, p->tenant, ref, err);
}

json_t *tplstore_builds(struct server *srv, const struct principal *p, const char *name) {
  json_t *all = tplstore_list(srv, p), *out = json_array(), *v;
  size_t i;
  json_array_foreach(all, i, v) {
    if (strcmp(json_string_value(json_object_get(v, "name")) ?: "", name) == 0 &&
        strcmp(json_string_value(json_object_get(v, "owner")) ?: "", p->tenant) == 0)
      json_array_append(out, v);
  }
  json_decref(all);
  return out;
}

/* Tag changes write a record or two and may collect layers: small enough
 * for the loop, as a template's removal by name is not (tplstore_delete). */
int tplstore_tag(struct server *srv, const struct principal *p, const char *ref, json_t *tags,
                 struct hutch_err *err) {
  return hutch_images_tag(&srv->images, p->tenant, ref, tags, err);
}

int tplstore_untag(struct server *srv, const struct principal *p, const char *name, json_t *tags,
                   struct hutch_err *err) {
  return hutch_images_untag(&srv->images, p->tenant, name, tags, err);
}

/* A record's bytes, each entry as well as the data (layers of empty
 * directories or files would otherwise cost nothing and fill the disk's
 * blocks and inodes), with its layers marked in held. */
void tplstore_mark_layers(json_t *rec, json_t *held) {
  json_t *l;
  size_t k;
  json_array_foreach(json_object_get(rec, "layers"), k, l) {
    if (json_is_string(l))
      json_object_set_new(held, json_string_value(l), json_true());
  }
  if (json_is_string(l = json_object_get(rec, "top")))
    json_object_set_new(held, json_string_value(l), json_true());
}

static uint64_t record_held(json_t *v, uint64_t entry, json_t *held) {
  tplstore_mark_layers(v, held);
  return (uint64_t)json_integer_value(json_object_get(v, "size_bytes")) +
         (uint64_t)json_integer_value(json_object_get(v, "files")) * entry;
}

/* The attack: a template deleted while a sandbox or a snapshot holds it
 * is kept (<id>.gone, its layers with it) and was charged to nobody, so
 * import, sandbox, snapshot, delete in a loop filled the disk with the
 * quota never reached. A kept template stays its owner's charge until
 * the store lets it go. */
json_t *tplstore_held(struct server *srv, const char *tenant, uint64_t *bytes) {
  json_t *all = hutch_images_list(&srv->images, tenant), *held = json_object(), *v;
  json_t *kept = hutch_images_kept(&srv->images, tenant);
  uint64_t entry = diskroom_entry_cost(srv);
  size_t i;
  *bytes = 0;
  json_array_foreach(all, i, v) {
    if (strcmp(json_string_value(json_object_get(v, "owner")) ?: "", tenant) == 0)
      *bytes += record_held(v, entry, held);
  }
  json_array_foreach(kept, i, v)
    *bytes += record_held(v, entry, held);
  json_decref(all);
  json_decref(kept);
  return held;
}

uint64_t tplstore_tenant_bytes(struct server *srv, const char *tenant, uint64_t *cache) {
  uint64_t n;
  json_t *held = tplstore_held(srv, tenant, &n);
  /* Its build cache beyond its templates' layers: without it, builds
   * ending in a failing step, or templates built then deleted, would
   * leave every step's layer on the disk, charged to nobody. */
  uint64_t gone;
  *cache = tplcache_bytes(srv, tenant, held, &gone);
  n += *cache + gone;
  json_decref(held);
  /* And what it uploaded: without this, uploads of new content, each
   * within the quota, would take the disk from every other tenant. */
  return n + tplfiles_bytes(srv, tenant);
}

/* A removal off the loop: the store's lock and the layers' trees. */
struct removal {
  struct offload o;
  struct server *srv;
  struct hutch_images *store;
  char *owner, *ref;
  json_t *charged; /* the owner's layers charged before (tplcache_let_go) */
  struct hutch_err err;
  int r;
  offload_done_fn done;
  void *arg;
};

static void removal_run(struct offload *o) {
  struct removal *rm = OFFLOAD_JOB(o, struct removal);
  rm->r = hutch_images_remove(rm->store, rm->owner, rm->ref, &rm->err);
}

static void removal_done(struct offload *o) {
  struct removal *rm = OFFLOAD_JOB(o, struct removal);
  if (*rm->owner)
    tplcache_let_go(rm->srv, rm->owner, rm->charged);
  json_decref(rm->charged);
  if (rm->done)
    rm->done(rm->r < 0 ? &rm->err : NULL, rm->arg);
  else if (rm->r < 0)
    fprintf(stderr, "hutch serve: %s\n", rm->err.msg);
  free(rm->owner);
  free(rm->ref);
  free(rm);
}

void tplstore_remove(struct server *srv, const char *owner, const char *ref, offload_done_fn done,
                     void *arg) {
  struct removal *rm = xcalloc(1, sizeof *rm);
  rm->srv = srv;
  rm->store = &srv->images;
  /* What the removal lets go of stays charged until collected. */
  rm->charged = *owner ? tplcache_charged(srv, owner) : NULL;
  rm->owner = xstrdup(owner);
  rm->ref = xstrdup(ref);
  rm->done = done;
  rm->arg = arg;
  offload(srv, OFFLOAD_OTHER, &rm->o, removal_run, removal_done);
}

int tplstore_delete(struct server *srv, const struct principal *p, const char *ref,
                    offload_done_fn done, void *arg, struct hutch_err *err) {
  /* Found as the caller would use it: its own first, then a public one,
   * which only the admin key may remove. */
  json_t *rec = hutch_images_find(&srv->images, p->tenant, ref, err);
  if (!rec)
    return -1;
  const char *owner = json_string_value(json_object_get(rec, "owner")) ?: "";
  if (strcmp(owner, p->tenant) != 0 && !(p->admin && !*owner)) {
    json_decref(rec);
    return hutch_err_fail(err, HUTCH_ERR_FORBIDDEN, "forbidden",
                          "template %s is public: only the admin key removes it", ref);
  }
  /* By id: the name a ref gave could name another template by the time
   * the removal runs. */
  tplstore_remove(srv, owner, json_string_value(json_object_get(rec, "id")), done, arg);
  json_decref(rec);
  return 0;
}
