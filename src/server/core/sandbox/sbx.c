/* The registry of live sandboxes: a list (for walks) and a table by id (for
 * lookups); finding a sandbox for its tenant; its JSON and its row in the
 * store. */
#include "core/sandbox/sbx.h"

#include <errno.h>
#include <linux/capability.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "cleanup.h"
#include "backend.h"
#include "util.h"
#include "core/sandbox/tally.h"
#include "state/store.h"

/* The registry: a list (for walks) and a table by id (for lookups), so
 * that finding, adding and removing a sandbox cost the same with 5 or 5000. */
static unsigned id_bucket(const char *id, unsigned n) {
  uint32_t h = 2166136261u; /* FNV-1a */
  for (; *id; id++)
    h = (h ^ (uint8_t)*id) * 16777619u;
  return h & (n - 1);
}

static void by_id_grow(struct server *srv) {
  unsigned n = srv->nby_id ? srv->nby_id * 2 : 256;
  struct sbx **t = xcalloc(n, sizeof *t);
  for (unsigned i = 0; i < srv->nby_id; i++)
    for (struct sbx *sb = srv->by_id[i], *next; sb; sb = next) {
      next = sb->id_next;
      unsigned b = id_bucket(sb->id, n);
      sb->id_next = t[b];
      t[b] = sb;
    }
  free(srv->by_id);
  srv->by_id = t;
  srv->nby_id = n;
}

void sbx_register(struct server *srv, struct sbx *sb) {
  if (srv->nsandboxes >= srv->nby_id)
    by_id_grow(srv);

  sb->prev = NULL;
  sb->next = srv->sandboxes;
  if (sb->next)
    sb->next->prev = sb;
  srv->sandboxes = sb;

  unsigned b = id_bucket(sb->id, srv->nby_id);
  sb->id_next = srv->by_id[b];
  srv->by_id[b] = sb;

  sb->listed = true;
  srv->nsandboxes++;
  tally_listed(srv, sb, true);
}

/* Whether it was listed (a sandbox made for a client that left before it
 * was its own never is). */
bool sbx_unregister(struct server *srv, struct sbx *sb) {
  if (!sb->listed)
    return false;
  sb->listed = false;
  tally_listed(srv, sb, false);

  if (sb->prev)
    sb->prev->next = sb->next;
  else
    srv->sandboxes = sb->next;
  if (sb->next)
    sb->next->prev = sb->prev;
  for (struct sbx **p = &srv->by_id[id_bucket(sb->id, srv->nby_id)]; *p; p = &(*p)->id_next)
    if (*p == sb) {
      *p = sb->id_next;
      break;
    }

  srv->nsandboxes--;
  return true;
}

/* Another tenant's sandbox is not found, exactly as one that never was:
 * ids must not be a way to learn about other tenants. */
struct sbx *sbx_find_own(struct server *srv, const struct principal *p, const char *id) {
  struct sbx *sb = sbx_find(srv, id);
  return sb && strcmp(sb->tenant, p->tenant) == 0 ? sb : NULL;
}

struct sbx *sbx_find(struct server *srv, const char *id) {
  if (!srv->nby_id || !id)
    return NULL;
  for (struct sbx *sb = srv->by_id[id_bucket(id, srv->nby_id)]; sb; sb = sb->id_next)
    if (!sb->dying && strcmp(sb->id, id) == 0)
      return sb;
  return NULL;
}

json_t *sbx_json(const struct sbx *sb) {
  char created[32], expires[32];
  iso8601(sb->created_ms, created);
  iso8601(sb->expires_ms, expires);

  /* cpus is null when the sandbox may use every CPU. */
  json_t *j = json_pack(
      "{s:s,s:s,s:s,s:s,s:s,s:I,s:o,s:I,s:I,s:O,s:s,s:b}", "id", sb->id, "state",
      sb->paused ? "paused" : "running", "template", sb->template, "created_at", created,
      "expires_at", expires, "memory_mb", (json_int_t)sb->memory_mb, "cpus",
      sb->cpu_milli ? json_real((double)sb->cpu_milli / 1000) : json_null(), "pids",
      (json_int_t)sb->pids, "disk_mb", (json_int_t)sb->disk_mb, "metadata", sb->metadata,
      "on_timeout", sb->pause_on_timeout ? "pause" : "kill", "auto_resume", sb->auto_resume);
  json_object_set_new(j, "isolation", json_string(hutch_isolation_name(sb->hs->isolation)));
  json_object_set_new(j, "volumes", sb->volumes ? json_deep_copy(sb->volumes) : json_array());
  json_object_set_new(j, "network", json_deep_copy(sb->network));
  json_object_set_new(j, "traffic_token", json_string(sb->traffic_token));
  json_object_set_new(j, "domain", json_string(sb->srv->cfg.domain));
  escapes_json(sb, j);

  /* While paused the timeout's clock stands: no expiry, but what is left
   * of it and when the paused sandbox itself goes. */
  if (sb->paused) {
    char paused[32], deleted[32];
    iso8601(sb->paused_ms, paused);
    iso8601(sb->paused_ms + sb->srv->cfg.paused_retention_ms, deleted);
    json_object_set_new(j, "expires_at", json_null());
    json_object_set_new(j, "paused_at", json_string(paused));
    json_object_set_new(j, "deleted_at", json_string(deleted));
    json_object_set_new(j, "timeout_left_s", json_real((double)sb->left_ms / 1000));
  }

  return j;
}

/* What the store keeps of it beyond its columns: what the next server
 * needs to take it over (sbx_adopt_all). */
static json_t *sbx_spec(const struct sbx *sb) {
  json_t *spec = json_pack(
      "{s:O,s:O,s:I,s:I,s:I,s:I,s:I,s:s,s:I,s:b,s:b,s:b,s:I,s:I,s:s}", "metadata", sb->metadata,
      "env", sb->env, "memory_mb", (json_int_t)sb->memory_mb, "pids", (json_int_t)sb->pids,
      "cpu_milli", (json_int_t)sb->cpu_milli, "disk_mb", (json_int_t)sb->disk_mb, "slot",
      (json_int_t)sb->hs->slot, "token", sb->token, "timeout_ms", (json_int_t)sb->timeout_ms,
      "auto_resume", sb->auto_resume, "pause_on_timeout", sb->pause_on_timeout, "paused",
      sb->paused, "paused_ms", (json_int_t)sb->paused_ms, "left_ms", (json_int_t)sb->left_ms,
      "traffic_token", sb->traffic_token);

  if (spec && sb->layers)
    json_object_set(spec, "layers", sb->layers);
  if (spec && sb->user)
    json_object_set_new(spec, "user", json_string(sb->user));
  if (spec && sb->workdir)
    json_object_set_new(spec, "workdir", json_string(sb->workdir));
  if (spec && sb->volumes)
    json_object_set(spec, "volumes", sb->volumes);
  if (spec && sb->network)
    json_object_set(spec, "network", sb->network);
  if (spec && sb->secrets)
    json_object_set(spec, "secrets", sb->secrets);

  return spec;
}

int sbx_store(struct sbx *sb, bool first, struct hutch_err *err) {
  json_t *spec = sbx_spec(sb);
  if (!spec)
    return hutch_err_set(err, 0, "state store: encoding sandbox %s", sb->id);
  struct store_row row = {.id = sb->id,
                          .tenant = sb->tenant,
                          .template = sb->template,
                          .created_ms = sb->created_ms,
                          .expires_ms = sb->expires_ms,
                          .pid = sb->hs->pid,
                          .spec = spec,
                          .isolation = hutch_isolation_name(sb->hs->isolation)};
  int r = first ? store_sandbox_put(sb->srv->store, &row, err)
                : store_sandbox_respec(sb->srv->store, &row, err);
  json_decref(spec);
  return r;
}

void sbx_set_defaults(struct sbx *sb, const char *user, const char *workdir) {
  free(sb->user);
  free(sb->workdir);
  sb->user = user ? xstrdup(user) : NULL;
  sb->workdir = workdir ? xstrdup(workdir) : NULL;
}
