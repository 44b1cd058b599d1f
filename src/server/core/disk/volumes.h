/* Volumes. */
#ifndef HUTCH_CORE_DISK_VOLUMES_H
#define HUTCH_CORE_DISK_VOLUMES_H

#include <jansson.h>
#include <stdint.h>
#include "err.h"
#include "sandbox.h"
#include "core/base/offload.h"

#define VOLUME_MIN_MB 16 /* room for ext4's journal */
#define VOLUME_MAX_MB (1ull << 20)

struct server;
struct principal;

/* volumes.c: volumes, ext4 images that outlive sandboxes. */
/* Every volume of tenant, as JSON; NULL on a store error (said on stderr). */
json_t *volumes_list(struct server *srv, const char *tenant);
/* The tenant's volume by id or name, as JSON, or NULL. */
json_t *volumes_find(struct server *srv, const char *tenant, const char *id_or_name);
/* How a volume's making ended: the volume as JSON (the caller's for the
 * call only), or NULL and why (exists, no space, internal). */
typedef void (*volume_done_fn)(json_t *vol, const struct hutch_err *err, void *arg);
/* Make a volume of size_mb named name for p's tenant, its image off the
 * loop: -1 and err when it cannot start (invalid_argument, exists,
 * quota_exceeded, no_space, internal); else 0 and done is called once,
 * on the loop, with the volume stored. */
int volumes_create(struct server *srv, const struct principal *p, const char *name,
                   uint64_t size_mb, volume_done_fn done, void *arg, struct hutch_err *err);
/* Delete the tenant's volume (id or name): -1 and err (not_found,
 * volume_in_use, internal); else 0, its row is gone, and done (if given)
 * hears once its image is. */
int volumes_delete(struct server *srv, const struct principal *p, const char *id_or_name,
                   offload_done_fn done, void *arg, struct hutch_err *err);
/* What a create's "volumes" ask for, ready to mount: loop devices held open
 * until volumes_release, after the sandbox is made. */
struct volume_mounts {
  struct hutch_volume *v;
  size_t n;
  int *fds;
  char **devs;
  json_t *used; /* [{id, path, read_only}], for the sandbox */
  /* srv->creating_mounts while its create is in srv->creating (sbx_create.c). */
  struct volume_mounts *next_creating;
};
/* m's create listed as under way (on) or not any more (off): a volume it
 * mounts is in use as much as by a live sandbox (volumes_delete). */
void volumes_creating(struct server *srv, struct volume_mounts *m, bool on);
/* mounts: the request's list, or NULL. -1 and err (invalid_argument,
 * volume_not_found, sandbox_error); out is to be released either way. */
int volumes_prepare(struct server *srv, const struct principal *p, json_t *mounts,
                    struct volume_mounts *out, struct hutch_err *err);
void volumes_release(struct volume_mounts *m);
/* The bytes of the tenant's volumes being made (not stored yet); NULL:
 * every tenant's (the filesystem may not have taken them all yet). */
uint64_t volumes_pending_bytes(const struct server *srv, const char *tenant);

#endif
