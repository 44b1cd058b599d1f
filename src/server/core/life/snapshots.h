/* Snapshots and forks. */
#ifndef HUTCH_CORE_LIFE_SNAPSHOTS_H
#define HUTCH_CORE_LIFE_SNAPSHOTS_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include "err.h"
#include "core/base/offload.h"
#include "core/sandbox/sbx.h"

#define SNAPSHOTS_MAX_FORKS 32 /* sandboxes one fork request makes */

struct server;
struct sbx;
struct principal;

/* snapshots.c: snapshots (a sandbox's files as layers on disk) and forks. */
/* Every snapshot (of tenant; NULL: all), oldest first, as JSON; NULL on a
 * store error (said on stderr). */
json_t *snapshots_list(struct server *srv, const char *tenant);
/* How a capture ended: the snapshot's JSON (the caller's for the call
 * only), or NULL and why. */
typedef void (*snapshot_done_fn)(json_t *snap, const struct hutch_err *err, void *arg);
/* Capture sb's files as a new snapshot of p's tenant, the copy on the
 * thread pool, with the sandbox frozen for it (a paused one stays paused).
 * -1 and err when it cannot start (too_many_layers, unsupported, busy,
 * quota_exceeded, no_space, internal); else 0, and done is called once,
 * on the loop: the snapshot is stored before, whoever still waits for it
 * (an ephemeral one nobody wants goes with snapshots_release). */
int snapshots_capture(struct server *srv, const struct principal *p, struct sbx *sb,
                      const char *name, bool ephemeral, snapshot_done_fn done, void *arg,
                      struct hutch_err *err);
/* The tenant's snapshot id as JSON {id, layers, …}, or NULL. */
json_t *snapshots_get(struct server *srv, const char *tenant, const char *id);
/* A sandbox that stacked layers is gone: a fork's snapshot goes with its
 * last user. */
void snapshots_release(struct server *srv, json_t *layers);
/* At start: forks' snapshots nothing stacks any more go. */
void snapshots_gc(struct server *srv);
/* Delete the tenant's snapshot id: -1 and err (not_found, snapshot_in_use,
 * internal); else 0, its row is gone, and done (if given) hears once its
 * files are (off the loop). */
int snapshots_delete(struct server *srv, const struct principal *p, const char *id,
                     offload_done_fn done, void *arg, struct hutch_err *err);

#endif
