/* Volumes. */
#ifndef HUTCH_CORE_VOLUMES_H
#define HUTCH_CORE_VOLUMES_H

#include <jansson.h>
#include <stdint.h>
#include "sandbox.h"

struct server;
struct http_conn;
struct principal;

/* volumes.c: volumes, ext4 images that outlive sandboxes. */
/* The tenant's volume by id or name, as JSON, or NULL. */
json_t *volumes_find(struct server *srv, const char *tenant, const char *id_or_name);
/* What a create's "volumes" ask for, ready to mount: loop devices held open
 * until volumes_release, after the sandbox is made. */
struct volume_mounts {
  struct hutch_volume *v;
  size_t n;
  int *fds;
  char **devs;
  json_t *used; /* [{id, path, read_only}], for the sandbox */
};
/* mounts: the request's list, or NULL. -1 after an error answer. */
int volumes_prepare(struct http_conn *c, const struct principal *p, json_t *mounts,
                    struct volume_mounts *out);
void volumes_release(struct volume_mounts *m);
/* The bytes of the tenant's volumes being made (not stored yet); NULL:
 * every tenant's (the filesystem may not have taken them all yet). */
uint64_t volumes_pending_bytes(const struct server *srv, const char *tenant);

#endif
