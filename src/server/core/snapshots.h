/* Snapshots and forks. */
#ifndef HUTCH_CORE_SNAPSHOTS_H
#define HUTCH_CORE_SNAPSHOTS_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include "core/sbx.h"

struct server;
struct sbx;
struct http_conn;
struct principal;

/* snapshots.c: snapshots (a sandbox's files as layers on disk) and forks. */
char *snapshots_dir(const struct server *srv, const char *id);
/* Every snapshot (of tenant; NULL: all), oldest first, as JSON; NULL on a
 * store error (said on stderr). */
json_t *snapshots_list(struct server *srv, const char *tenant);
/* Capture sb's files as a new snapshot of its tenant's, the copy on the
 * thread pool, with the sandbox frozen for it (a paused one stays paused).
 * -1 after an error answer; else done is called on the loop with the
 * request's connection (NULL when the client left) and the snapshot's JSON
 * (NULL when it failed: answered). */
typedef void (*snapshot_done_fn)(struct http_conn *c, const struct principal *p, json_t *snap,
                                 void *arg);
int snapshots_capture(struct http_conn *c, const struct principal *p, struct sbx *sb,
                      const char *name, bool ephemeral, snapshot_done_fn done, void *arg);
/* The tenant's snapshot id as JSON {id, layers, …}, or NULL. */
json_t *snapshots_get(struct server *srv, const char *tenant, const char *id);
/* The directories of layers (ids), for a sandbox config; and their end. */
char **snapshots_layer_paths(const struct server *srv, json_t *layers, size_t *n);
void snapshots_free_paths(char **paths, size_t n);
/* A sandbox that stacked layers is gone: a fork's snapshot goes with its
 * last user. */
void snapshots_release(struct server *srv, json_t *layers);
/* At start: forks' snapshots nothing stacks any more go. */
void snapshots_gc(struct server *srv);
/* Answered: 204 once its files are gone (off the loop), or an error (404,
 * 409 snapshot_in_use); -1 after an error. */
int snapshots_delete(struct http_conn *c, const struct principal *p, const char *id);
/* count sandboxes holding sb's files; answer gets the snapshot's id and
 * the forks' sbx_json. -1 after an error answer. */
typedef void (*fork_answer_fn)(struct http_conn *c, json_t *snapshot_id, json_t *made);
int snapshots_fork(struct http_conn *c, const struct principal *p, struct sbx *sb,
                   uint64_t count, double timeout_s, fork_answer_fn answer);

#endif
