/* The registry of live sandboxes: creating one for a request, finding it
 * for its tenant, destroying it, and the reaper that ends those past their
 * timeout. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "serve.h"
#include "store.h"
#include "util.h"

int64_t wall_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Another tenant's sandbox is not found, exactly as one that never was:
 * ids must not be a way to learn about other tenants. */
static struct sbx *sbx_find(struct server *srv, const struct principal *p, const char *id) {
  for (struct sbx *sb = srv->sandboxes; sb; sb = sb->next)
    if (!sb->dying && strcmp(sb->id, id) == 0 && strcmp(sb->tenant, p->tenant) == 0)
      return sb;
  return NULL;
}

struct sbx *sbx_lookup(struct http_conn *c, const struct principal *p) {
  struct sbx *sb = sbx_find(c->srv, p, c->req.params[0]);
  str_copy(c->sandbox, sizeof c->sandbox, c->req.params[0]);
  if (!sb)
    http_error(c, 404, "not_found", "no sandbox %s", c->req.params[0]);
  return sb;
}

void iso8601(int64_t ms, char out[32]) {
  time_t t = (time_t)(ms / 1000);
  struct tm tm;
  gmtime_r(&t, &tm);
  size_t n = strftime(out, 32, "%Y-%m-%dT%H:%M:%S", &tm);
  snprintf(out + n, 32 - n, ".%03dZ", (int)(ms % 1000));
}

json_t *sbx_json(const struct sbx *sb) {
  char created[32], expires[32];
  iso8601(sb->created_ms, created);
  iso8601(sb->expires_ms, expires);
  /* cpus is null when the sandbox may use every CPU. */
  return json_pack("{s:s,s:s,s:s,s:s,s:s,s:I,s:o,s:I,s:I,s:O}", "id", sb->id, "state", "running",
                   "template", sb->template, "created_at", created, "expires_at", expires,
                   "memory_mb", (json_int_t)sb->memory_mb, "cpus",
                   sb->cpu_milli ? json_real((double)sb->cpu_milli / 1000) : json_null(), "pids",
                   (json_int_t)sb->pids, "disk_mb", (json_int_t)sb->disk_mb, "metadata",
                   sb->metadata);
}

static void sbx_free(struct agentc *ac) {
  struct sbx *sb = (struct sbx *)((char *)ac - offsetof(struct sbx, ac));
  procs_free(sb);
  json_decref(sb->metadata);
  json_decref(sb->env);
  free(sb);
}

/* The agent connection failed: the sandbox is of no more use. */
void sbx_agent_dead(struct agentc *ac) {
  struct sbx *sb = (struct sbx *)((char *)ac - offsetof(struct sbx, ac));
  fprintf(stderr, "hutch serve: sandbox %s: agent connection lost; destroying it\n", sb->id);
  sbx_destroy(sb);
}

struct sbx *sbx_new(struct server *srv, const struct hutch_sandbox_config *cfg,
                    const char *template, struct hutch_err *err) {
  struct sbx *sb = xcalloc(1, sizeof *sb);
  if (hutch_sandbox_create(cfg, &sb->hs, err) < 0) {
    free(sb);
    return NULL;
  }
  sb->srv = srv;
  memcpy(sb->id, sb->hs->id, sizeof sb->id);
  str_copy(sb->template, sizeof sb->template, template);
  sb->metadata = json_object();
  sb->env = json_object();
  sb->memory_mb = cfg->memory_bytes >> 20;
  sb->disk_mb = cfg->disk_bytes >> 20;
  sb->pids = cfg->pids;
  sb->cpu_milli = cfg->cpu_milli;
  if (agentc_init(&sb->ac, srv->loop, sb->hs->conn_fd) < 0) {
    struct hutch_err ignored;
    hutch_sandbox_destroy(sb->hs, &ignored);
    json_decref(sb->metadata);
    json_decref(sb->env);
    free(sb);
    hutch_err_set(err, 0, "watching the agent connection failed");
    return NULL;
  }
  sb->ac.on_dead = sbx_agent_dead;
  return sb;
}

void sbx_register(struct server *srv, struct sbx *sb) {
  sb->next = srv->sandboxes;
  srv->sandboxes = sb;
  srv->nsandboxes++;
}

void sbx_destroy(struct sbx *sb) {
  struct server *srv = sb->srv;
  if (sb->dying)
    return;
  sb->dying = true;
  struct hutch_err err = {0};
  if (sb->pool) {
    pool_unlink(sb);
  } else {
    for (struct sbx **p = &srv->sandboxes; *p; p = &(*p)->next)
      if (*p == sb) {
        *p = sb->next;
        break;
      }
    srv->nsandboxes--;
    srv->metrics.destroys++;
    if (store_sandbox_delete(srv->store, sb->id, &err) < 0)
      fprintf(stderr, "hutch serve: %s\n", err.msg);
  }
  /* Streams hear the end first (their clients get a last line), then the
   * sandbox goes. The fd belongs to the connection. */
  sb->hs->conn_fd = -1;
  agentc_close(&sb->ac, sbx_free);
  if (hutch_sandbox_destroy(sb->hs, &err) < 0)
    fprintf(stderr, "hutch serve: sandbox %s: teardown: %s\n", sb->id, err.msg);
  sb->hs = NULL;
}

void sbx_destroy_all(struct server *srv) {
  while (srv->sandboxes)
    sbx_destroy(srv->sandboxes);
}

static void reap(uv_timer_t *t) {
  struct server *srv = t->data;
  int64_t now = wall_ms();
  /* Every few seconds, what killed servers and hutch runs left behind. */
  if (++srv->reaper_ticks % 30 == 1)
    hutch_gc_host();
  struct sbx *next;
  for (struct sbx *sb = srv->sandboxes; sb; sb = next) {
    next = sb->next;
    if (sb->expires_ms <= now) {
      srv->metrics.expired++;
      if (srv->audit) {
        char when[32];
        iso8601(now, when);
        fprintf(srv->audit,
                "{\"time\":\"%s\",\"tenant\":\"%s\",\"action\":\"sandbox.expire\","
                "\"sandbox\":\"%s\",\"status\":200,\"error\":null,\"duration_ms\":0}\n",
                when, sb->tenant, sb->id);
        fflush(srv->audit);
      }
      sbx_destroy(sb);
    }
  }
}

/* Every 100 ms (the first at once): a sandbox outlives its timeout by at most that, plus its
 * teardown. */
void sbx_reaper_start(struct server *srv) {
  uv_timer_init(srv->loop, &srv->reaper);
  srv->reaper.data = srv;
  uv_timer_start(&srv->reaper, reap, 0, 100);
}
