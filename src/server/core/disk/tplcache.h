/* A tenant's build cache as the server charges and collects it: each
 * entry of the tenant's (images_cache.c) is its layer's bytes plus its
 * files at diskroom_entry_cost, charged once per layer and not at all when one
 * of the tenant's templates holds the layer (the template is charged for
 * it). Entries are collected least recently used first when the tenant
 * needs room, and the layers nothing holds any more then go off the loop;
 * their bytes stay charged to the tenant until they are gone. */
#ifndef HUTCH_CORE_DISK_TPLCACHE_H
#define HUTCH_CORE_DISK_TPLCACHE_H

#include <jansson.h>
#include <stdint.h>

struct server;

/* What the tenant's cache entries cost beyond the layers in held (a set
 * of layer hex, the tenant's templates'), which takes the layers counted;
 * *gone what the layers it let go of cost until they are collected. */
uint64_t tplcache_bytes(struct server *srv, const char *tenant, json_t *held, uint64_t *gone);
/* The layers charged to the tenant (a set of hex, new): its templates',
 * its removed ones kept, its build cache entries'. */
json_t *tplcache_charged(struct server *srv, const char *tenant);
/* What of before is no longer charged to the tenant but still on the disk
 * (a removal under way while a job held the store's collection off) is
 * charged as let go of, until collected. */
void tplcache_let_go(struct server *srv, const char *tenant, json_t *before);
/* Drop the tenant's least recently used entries until want bytes are
 * freed or none is left whose layer its templates do not hold; then
 * collect the store. Returns the bytes freed. */
uint64_t tplcache_collect(struct server *srv, const char *tenant, uint64_t want);
/* Remove, off the loop, the store's layers nothing uses (hutch_images_gc);
 * asked while one runs, it runs once more after. */
void tplcache_gc(struct server *srv);

#endif
