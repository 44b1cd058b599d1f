/* Room on the state filesystem for what tenants keep there: volumes'
 * images (allocated in full), snapshots' copies, templates, their build
 * cache, uploads. Two bounds, checked before anything is written
 * (docs/security.md, "Resources"):
 *
 *  - each tenant's volumes, snapshots, templates, build cache, uploaded
 *    files and the writes it has under way together hold at most its
 *    max_disk_mb (POST /v1/keys), else --tenant-disk-mb (default: a quarter
 *    of the state filesystem's size), so one tenant cannot take the disk
 *    from the others: 429 quota_exceeded;
 *  - the filesystem keeps max(256 MiB, 2 % of its size) free whatever the
 *    quotas add up to, so the database, the audit log and the host's own
 *    files always have room to be written: 507 no_space.
 *
 * A write whose size is known only as it comes (an upload) reserves its
 * bytes before they are written (diskroom_reserve): a write under way counts
 * as used, so that writes side by side, each within what the quota left
 * when it began, cannot pass it together. A write that would cross either
 * bound is refused whole; nothing is left half written. */
#include "core/disk/diskroom.h"

#include <errno.h>
#include <string.h>
#include <sys/statvfs.h>

#include "core/base/server.h"
#include "core/events/events.h"
#include "core/sandbox/tally.h"
#include "core/disk/templates.h"
#include "core/disk/tplcache.h"
#include "core/disk/volumes.h"
#include "state/store.h"
#include "core/disk/tplstore.h"

#define DISK_RESERVE_MIN (256ull << 20)
/* What a file, directory or link costs at least: a block (a directory's,
 * a small file's). */
#define DISK_ENTRY_MIN 4096ull

struct fs_room {
  uint64_t size, avail, reserve;
};

static int fs_room(const struct server *srv, struct fs_room *r) {
  struct statvfs vfs;
  if (statvfs(srv->cfg.state_dir, &vfs) < 0)
    return -1;
  r->size = (uint64_t)vfs.f_blocks * vfs.f_frsize;
  r->avail = (uint64_t)vfs.f_bavail * vfs.f_frsize;
  r->reserve = r->size / 50 > DISK_RESERVE_MIN ? r->size / 50 : DISK_RESERVE_MIN;
  return 0;
}

static void add_volume(const struct store_volume *v, void *arg) {
  *(uint64_t *)arg += v->size_mb << 20;
}

static void add_snapshot(const struct store_snapshot *s, void *arg) {
  *(uint64_t *)arg += s->bytes;
}

/* The tenant's quota and what it uses: volumes, snapshots, templates,
 * build cache (of which *cache, if asked), uploads, writes under way. */
static int tenant_use(struct server *srv, const struct principal *p, const struct fs_room *r,
                      uint64_t *quota, uint64_t *used, uint64_t *cache, struct hutch_err *err) {
  struct hutch_err e = {0};
  struct tenant_quota q;
  *used = 0;
  int rc = store_tenant_get(srv->store, p->tenant, &q, &e);
  if (rc >= 0)
    rc = store_volume_each(srv->store, p->tenant, add_volume, used, &e);
  if (rc >= 0)
    rc = store_snapshot_each(srv->store, p->tenant, add_snapshot, used, &e);
  if (rc < 0)
    return hutch_err_fail(err, HUTCH_ERR_SYSTEM, "internal", "%s", e.msg);

  uint64_t mine = 0;
  *used += volumes_pending_bytes(srv, p->tenant) + tplstore_tenant_bytes(srv, p->tenant, &mine);
  /* Read after: counting what the tenant let go of may end its tally. */
  const struct tally *t = tally_of(srv, p->tenant);
  *used += t ? t->disk_reserved + t->disk_capped : 0;
  if (cache)
    *cache = mine;

  *quota = srv->cfg.tenant_disk_mb ? srv->cfg.tenant_disk_mb << 20 : r->size / 4;
  if (q.max_disk_mb >= 0)
    *quota = (uint64_t)q.max_disk_mb << 20;
  return 0;
}

uint64_t diskroom_entry_cost(const struct server *srv) {
  struct statvfs vfs;
  uint64_t cost = DISK_ENTRY_MIN;
  if (statvfs(srv->cfg.state_dir, &vfs) == 0 && vfs.f_files > 0) {
    uint64_t per_inode = (uint64_t)vfs.f_blocks * vfs.f_frsize / vfs.f_files;
    if (per_inode > cost)
      cost = per_inode;
  }
  return cost;
}

uint64_t diskroom_quota_left(struct server *srv, const struct principal *p) {
  struct hutch_err err = {0};
  struct fs_room r;
  uint64_t quota, used, cache;
  if (fs_room(srv, &r) < 0)
    return 0;
  if (tenant_use(srv, p, &r, &quota, &used, &cache, &err) < 0)
    return 0;

  /* The build cache makes way for what the tenant asks (diskroom_check), so
   * it is room left too; and no more than the filesystem has beside its
   * reserve and the writes under way. */
  used -= cache;
  uint64_t left = used < quota ? quota - used : 0;
  uint64_t making = volumes_pending_bytes(srv, NULL) + srv->disk_reserved + r.reserve;
  uint64_t fs = r.avail > making ? r.avail - making : 0;
  return left < fs ? left : fs;
}

static int room(struct server *srv, const struct principal *p, uint64_t bytes, bool collect,
                struct hutch_err *err) {
  struct fs_room r;
  uint64_t quota, used;
  if (fs_room(srv, &r) < 0)
    return hutch_err_fail(err, HUTCH_ERR_SYSTEM, "internal", "%s: %s", srv->cfg.state_dir,
                          strerror(errno));
  if (tenant_use(srv, p, &r, &quota, &used, NULL, err) < 0)
    return -1;

  /* The tenant's build cache is the one thing here it did not ask to
   * keep: its least recently used entries make way before a refusal. */
  if (used + bytes > quota && collect) {
    uint64_t freed = tplcache_collect(srv, p->tenant, used + bytes - quota);
    used = used > freed ? used - freed : 0;
  }

  if (used + bytes > quota) {
    hutch_err_fail(err, HUTCH_ERR_QUOTA, "quota_exceeded",
                   "tenant %s may keep at most %llu MiB of volumes, snapshots, "
                   "templates, build cache and uploads (%llu in use, %llu more asked)",
                   p->tenant, (unsigned long long)(quota >> 20), (unsigned long long)(used >> 20),
                   (unsigned long long)((bytes + (1 << 20) - 1) >> 20));
    events_emit(srv, "quota.refused", p->tenant, NULL,
                json_pack("{s:s,s:s,s:s}", "action", "disk", "code", err->code, "message",
                          err->msg));
    return -1;
  }

  /* The filesystem keeps its reserve beside the writes under way. */
  uint64_t making = volumes_pending_bytes(srv, NULL) + srv->disk_reserved;
  r.avail = r.avail > making ? r.avail - making : 0;
  if (r.avail < bytes || r.avail - bytes < r.reserve)
    return hutch_err_fail(err, HUTCH_ERR_NO_SPACE, "no_space",
                          "the server's disk has %llu MiB free and keeps %llu MiB of it: no "
                          "room for %llu MiB more",
                          (unsigned long long)(r.avail >> 20),
                          (unsigned long long)(r.reserve >> 20),
                          (unsigned long long)((bytes + (1 << 20) - 1) >> 20));
  return 0;
}

int diskroom_check(struct server *srv, const struct principal *p, uint64_t bytes,
                   struct hutch_err *err) {
  return room(srv, p, bytes, true, err);
}

static int reserve(struct server *srv, const struct principal *p, uint64_t bytes, bool collect,
                   struct hutch_err *err) {
  if (room(srv, p, bytes, collect, err) < 0)
    return -1;
  tally_disk(srv, p->tenant, (int64_t)bytes, 0);
  return 0;
}

int diskroom_reserve(struct server *srv, const struct principal *p, uint64_t bytes,
                     struct hutch_err *err) {
  return reserve(srv, p, bytes, true, err);
}

/* The attack: an upload's step ahead (up to 1 MiB, or a doubling) made
 * room by collecting the tenant's build cache for bytes it may never
 * write, so chunked uploads emptied the cache. Only what is to be written
 * for sure collects. */
int diskroom_reserve_ahead(struct server *srv, const struct principal *p, uint64_t bytes,
                           struct hutch_err *err) {
  return reserve(srv, p, bytes, false, err);
}

int diskroom_cap(struct server *srv, const struct principal *p, uint64_t bytes,
                 struct hutch_err *err) {
  if (room(srv, p, bytes, true, err) < 0)
    return -1;
  tally_disk_capped(srv, p->tenant, (int64_t)bytes);
  return 0;
}

void diskroom_uncap(struct server *srv, const char *tenant, uint64_t bytes) {
  if (bytes)
    tally_disk_capped(srv, tenant, -(int64_t)bytes);
}

void diskroom_hand_on(struct server *srv, const char *tenant, uint64_t bytes) {
  tally_disk(srv, tenant, (int64_t)bytes, 0);
}

void diskroom_release(struct server *srv, const char *tenant, uint64_t bytes) {
  if (bytes)
    tally_disk(srv, tenant, -(int64_t)bytes, 0);
}
