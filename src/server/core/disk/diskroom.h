/* Room on the state filesystem. */
#ifndef HUTCH_CORE_DISK_DISKROOM_H
#define HUTCH_CORE_DISK_DISKROOM_H

#include <stdint.h>

#include "err.h"

struct server;
struct principal;

/* diskroom.c: 0 when bytes more fit the tenant's disk quota and leave the
 * state filesystem its reserve; else -1 with quota_exceeded (quota) or
 * no_space (no space). The tenant's least recently used build cache
 * entries go first when they stand in the way. */
int diskroom_check(struct server *srv, const struct principal *p, uint64_t bytes,
                   struct hutch_err *err);
/* What one entry of a template's layers (a file, a directory, a link)
 * counts against a quota: a block, or the filesystem's size per inode
 * when that is more, so that a quota of a fraction of the disk holds at
 * most that fraction of its inodes too. Entries without data cost the
 * disk inodes and blocks all the same. */
uint64_t diskroom_entry_cost(const struct server *srv);
/* What the tenant's disk quota has left (0 when it is used up), at most
 * what the filesystem has beside its reserve. */
uint64_t diskroom_quota_left(struct server *srv, const struct principal *p);
/* Reserve bytes of the tenant's quota and of the filesystem for a write
 * under way, counted as used until released: 0, or -1 as diskroom_check. */
int diskroom_reserve(struct server *srv, const struct principal *p, uint64_t bytes,
                     struct hutch_err *err);
/* Hold a job's ceiling (bytes, within diskroom_quota_left) of the tenant's
 * quota while it runs, until diskroom_uncap: 0, or -1 as diskroom_check. Unlike a
 * reservation it holds none of the filesystem's room, which the job's
 * child takes only as it writes: one tenant's large ceiling leaves the
 * others their room. */
int diskroom_cap(struct server *srv, const struct principal *p, uint64_t bytes,
                 struct hutch_err *err);
void diskroom_uncap(struct server *srv, const char *tenant, uint64_t bytes);
/* As diskroom_reserve, for bytes that may never be written (a step ahead of
 * an upload): only if they fit as things are, no cache entry collected
 * for them; 0, or -1 and err. */
int diskroom_reserve_ahead(struct server *srv, const struct principal *p, uint64_t bytes,
                           struct hutch_err *err);
void diskroom_release(struct server *srv, const char *tenant, uint64_t bytes);
/* bytes reserved again, unchecked, by the next holder of a reservation
 * (the job an upload's archive goes to), before the first releases it. */
void diskroom_hand_on(struct server *srv, const char *tenant, uint64_t bytes);

#endif
