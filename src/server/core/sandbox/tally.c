/* What the server and each tenant hold now (tally.h). */
#include "core/sandbox/tally.h"

#include <stdlib.h>
#include <string.h>

#include "util.h"
#include "core/sandbox/fds.h"
#include "core/sandbox/sbx.h"

#define TALLY_BUCKETS 256

static unsigned bucket(const char *tenant) {
  uint32_t h = 2166136261u; /* FNV-1a */
  for (; *tenant; tenant++)
    h = (h ^ (uint8_t)*tenant) * 16777619u;
  return h & (TALLY_BUCKETS - 1);
}

static struct tally **slot_of(const struct server *srv, const char *tenant) {
  if (!srv->tallies)
    return NULL;
  struct tally **p = &srv->tallies[bucket(tenant)];
  while (*p && strcmp((*p)->tenant, tenant) != 0)
    p = &(*p)->next;
  return p;
}

const struct tally *tally_of(const struct server *srv, const char *tenant) {
  struct tally **p = slot_of(srv, tenant);
  return p ? *p : NULL;
}

struct tally *tally_get(struct server *srv, const char *tenant) {
  if (!srv->tallies)
    srv->tallies = xcalloc(TALLY_BUCKETS, sizeof *srv->tallies);
  struct tally **p = slot_of(srv, tenant);
  if (!*p) {
    *p = xcalloc(1, sizeof **p);
    str_copy((*p)->tenant, sizeof(*p)->tenant, tenant);
  }
  return *p;
}

void tally_put(struct server *srv, struct tally *t) {
  if (t->sandboxes || t->creating || t->builds || t->held || t->tokens || t->jobs ||
      t->disk_reserved || t->disk_capped || t->uploads || json_object_size(t->uncollected))
    return;
  struct tally **p = slot_of(srv, t->tenant);
  *p = t->next;
  json_decref(t->uncollected);
  free(t);
}

struct sbx *tally_sandboxes(const struct server *srv, const char *tenant) {
  const struct tally *t = tally_of(srv, tenant);
  return t ? t->listed : NULL;
}

/* One more (on) or one fewer of t's mine and the server's all, with its
 * memory. */
static void count_one(struct server *srv, struct tally *t, unsigned *mine, unsigned *all,
                      uint64_t memory_mb, bool on) {
  if (on) {
    (*mine)++;
    (*all)++;
    t->memory_mb += memory_mb;
  } else {
    (*mine)--;
    (*all)--;
    t->memory_mb -= memory_mb;
  }
  tally_put(srv, t);
}

void tally_creating(struct server *srv, const char *tenant, uint64_t memory_mb, bool on) {
  struct tally *t = tally_get(srv, tenant);
  count_one(srv, t, &t->creating, &srv->ncreating, memory_mb, on);
}

void tally_building(struct server *srv, const char *tenant, uint64_t memory_mb, bool on) {
  struct tally *t = tally_get(srv, tenant);
  count_one(srv, t, &t->builds, &srv->nbuilds, memory_mb, on);
}

void tally_held(struct server *srv, const char *tenant, bool on) {
  struct tally *t = tally_get(srv, tenant);
  t->held += on ? 1 : -1u;
  tally_put(srv, t);
}

void tally_tokens(struct server *srv, const char *tenant, bool on) {
  struct tally *t = tally_get(srv, tenant);
  t->tokens += on ? 1 : -1u;
  tally_put(srv, t);
}

static void relays_counted(struct relay_set *set, struct tally *t, struct server *srv) {
  if (!set)
    return;
  if (t) {
    set->tally[0] = &t->relays;
    set->tally[1] = &srv->relays;
    t->relays += set->n;
    srv->relays += set->n;
  } else if (set->tally[0]) {
    *set->tally[0] -= set->n;
    *set->tally[1] -= set->n;
    set->tally[0] = set->tally[1] = NULL;
  }
}

void tally_disk_capped(struct server *srv, const char *tenant, int64_t bytes) {
  struct tally *t = tally_get(srv, tenant);
  t->disk_capped += (uint64_t)bytes;
  tally_put(srv, t);
}

void tally_disk(struct server *srv, const char *tenant, int64_t bytes, int uploads) {
  struct tally *t = tally_get(srv, tenant);
  t->disk_reserved += (uint64_t)bytes;
  srv->disk_reserved += (uint64_t)bytes;
  t->uploads += (unsigned)uploads;
  tally_put(srv, t);
}

void tally_uncollected(struct server *srv, const char *tenant, const char *hex, uint64_t bytes) {
  struct tally *t = tally_get(srv, tenant);
  if (!t->uncollected)
    t->uncollected = json_object();
  if (bytes)
    json_object_set_new(t->uncollected, hex, json_integer((json_int_t)bytes));
  else
    json_object_del(t->uncollected, hex);
  tally_put(srv, t);
}

void tally_listed(struct server *srv, struct sbx *sb, bool on) {
  if (on) {
    struct tally *t = sb->tally = tally_get(srv, sb->tenant);
    sb->tenant_prev = NULL;
    sb->tenant_next = t->listed;
    if (t->listed)
      t->listed->tenant_prev = sb;
    t->listed = sb;
    t->sandboxes++;
    t->memory_mb += sb->memory_mb;
    sb->fds = fds_of_sandbox(sb);
    srv->sandbox_fds += sb->fds;
    t->paused += sb->paused;
    srv->npaused += sb->paused;
    srv->ngvisor += sb->hs && sb->hs->isolation == HUTCH_ISOLATION_GVISOR;
    relays_counted(&sb->ports, t, srv);
    relays_counted(sb->egress_conns, t, srv);
    return;
  }

  struct tally *t = sb->tally;
  if (sb->tenant_prev)
    sb->tenant_prev->tenant_next = sb->tenant_next;
  else
    t->listed = sb->tenant_next;
  if (sb->tenant_next)
    sb->tenant_next->tenant_prev = sb->tenant_prev;
  sb->tenant_next = sb->tenant_prev = NULL;

  relays_counted(&sb->ports, NULL, srv);
  relays_counted(sb->egress_conns, NULL, srv);
  srv->sandbox_fds -= sb->fds;
  t->paused -= sb->paused;
  srv->npaused -= sb->paused;
  srv->ngvisor -= sb->hs && sb->hs->isolation == HUTCH_ISOLATION_GVISOR;
  t->sandboxes--;
  t->memory_mb -= sb->memory_mb;
  sb->tally = NULL;
  tally_put(srv, t);
}

void tally_paused(struct sbx *sb, bool paused) {
  if (sb->tally && paused && !sb->paused) {
    sb->tally->paused++;
    sb->srv->npaused++;
  } else if (sb->tally && !paused && sb->paused) {
    sb->tally->paused--;
    sb->srv->npaused--;
  }
  sb->paused = paused;
}

void tally_relays_like(struct relay_set *set, const struct relay_set *like) {
  set->tally[0] = like->tally[0];
  set->tally[1] = like->tally[1];
  for (int i = 0; i < 2; i++)
    if (set->tally[i])
      *set->tally[i] += set->n;
}

void tally_free_all(struct server *srv) {
  if (!srv->tallies)
    return;
  for (unsigned i = 0; i < TALLY_BUCKETS; i++)
    while (srv->tallies[i]) {
      struct tally *t = srv->tallies[i];
      srv->tallies[i] = t->next;
      json_decref(t->uncollected);
      free(t);
    }
  free(srv->tallies);
  srv->tallies = NULL;
}

int tally_check_room(struct server *srv, const struct principal *p, uint64_t memory_mb,
                     unsigned count, struct hutch_err *err) {
  struct tenant_quota q;
  if (store_tenant_get(srv->store, p->tenant, &q, err) < 0)
    return -1;
  uint64_t max_sbx = q.max_sandboxes >= 0 ? (uint64_t)q.max_sandboxes : srv->cfg.tenant_sandboxes;
  uint64_t max_mem = q.max_memory_mb >= 0 ? (uint64_t)q.max_memory_mb : srv->cfg.tenant_memory_mb;

  /* Creates under way and the RUN sandboxes of template builds count as
   * live sandboxes (tally.h). */
  const struct tally *t = tally_of(srv, p->tenant);
  uint64_t n = t ? t->sandboxes + t->creating + t->builds : 0;
  uint64_t mem = t ? t->memory_mb : 0;
  uint64_t all = srv->nsandboxes + srv->ncreating + srv->nbuilds;

  if (n + count > max_sbx)
    return hutch_err_fail(err, HUTCH_ERR_QUOTA, "quota_exceeded",
                          "tenant %s may run at most %llu sandboxes", p->tenant,
                          (unsigned long long)max_sbx);
  if (mem + memory_mb * count > max_mem)
    return hutch_err_fail(err, HUTCH_ERR_QUOTA, "quota_exceeded",
                          "tenant %s may use at most %llu MiB of sandbox memory (%llu in use)",
                          p->tenant, (unsigned long long)max_mem, (unsigned long long)mem);
  if (all + count > srv->cfg.max_sandboxes)
    return hutch_err_fail(err, HUTCH_ERR_UNAVAILABLE, "at_capacity",
                          "the server runs its maximum of %u sandboxes", srv->cfg.max_sandboxes);
  return 0;
}
