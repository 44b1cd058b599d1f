/* The store's templates as a tenant sees them (tplstore.c). */
#ifndef HUTCH_CORE_DISK_TPLSTORE_H
#define HUTCH_CORE_DISK_TPLSTORE_H

#include <jansson.h>
#include <stdint.h>
#include "err.h"
#include "core/base/offload.h"

struct server;
struct principal;

/* The templates p may use (its own and the public ones), sorted by name. */
json_t *tplstore_list(struct server *srv, const struct principal *p);
/* The template ref ("NAME", "NAME:TAG" or an id) p may use, or NULL and
 * not_found. */
json_t *tplstore_get(struct server *srv, const struct principal *p, const char *ref,
                     struct hutch_err *err);
/* Remove owner's template ref (an id) off the loop; done, if given, is
 * told how it went. What it lets go of stays charged to owner until
 * collected (tplcache_let_go). */
void tplstore_remove(struct server *srv, const char *owner, const char *ref, offload_done_fn done,
                     void *arg);
/* Remove p's template ref (an admin's may be a public one): -1 and err
 * (not_found: none of p's), else 0 and done later, once its layers nothing
 * else uses are gone (off the loop). Sandboxes made from it keep its
 * layers (the store's pins) until they end. */
int tplstore_delete(struct server *srv, const struct principal *p, const char *ref,
                    offload_done_fn done, void *arg, struct hutch_err *err);
/* Bytes of the tenant's own templates (their size_bytes: a layer two of
 * them share counts twice), its build cache beyond them (also in *cache,
 * which makes way when the tenant needs room), the layers it let go of
 * until they are collected, and its uploads, for its disk quota
 * (diskroom.c). */
uint64_t tplstore_tenant_bytes(struct server *srv, const char *tenant, uint64_t *cache);
/* The layers the tenant's own templates hold, and its removed ones still
 * kept (a set of hex, new), and in bytes their templates' charge. */
json_t *tplstore_held(struct server *srv, const char *tenant, uint64_t *bytes);
/* Mark the layers template record rec holds in the set held. */
void tplstore_mark_layers(json_t *rec, json_t *held);

/* The builds of p's template name (its own), each with its tags. */
json_t *tplstore_builds(struct server *srv, const struct principal *p, const char *name);
/* Give p's build ref (NAME:TAG or an id) the tags, taking them from the
 * name's other builds; or take tags from every build of p's name. */
int tplstore_tag(struct server *srv, const struct principal *p, const char *ref, json_t *tags,
                 struct hutch_err *err);
int tplstore_untag(struct server *srv, const struct principal *p, const char *name, json_t *tags,
                   struct hutch_err *err);

#endif
