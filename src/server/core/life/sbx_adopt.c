/* Taking sandboxes over after a restart (sbx_adopt.h): each row of the
 * store is adopted, ended or forgotten. */
#include "core/life/sbx_adopt.h"

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
#include "core/events/events.h"
#include "core/run/contexts.h"
#include "core/disk/layers.h"
#include "core/egress/network.h"
#include "core/run/procs.h"
#include "core/life/snapshots.h"
#include "core/tenancy/usage.h"
#include "state/store.h"
#include "core/egress/egress.h"
#include "core/life/sbx_teardown.h"

struct adopt_ctx {
  struct server *srv;
  int64_t now;
  unsigned adopted, ended;
};

static void adopt_jobs(struct agentc *ac, json_t *jobs, void *arg) {
  (void)arg;
  struct sbx *sb = (struct sbx *)((char *)ac - offsetof(struct sbx, ac));
  procs_adopt(sb, jobs);
  ac->on_escapes = escapes_update; /* The HELLO's counts come next. */
}

int sbx_connect_agent(struct sbx *sb) {
  sb->agent_pending = false;
  if (agentc_adopt(&sb->ac, sb->srv->loop, sb->hs->conn_fd, 2000, adopt_jobs, NULL) < 0) {
    /* A connection whose poll handle was never made is not one to close:
     * the sandbox's destroy then leaves the fd to its teardown. */
    if (!sb->ac.poll.data)
      sb->agent_pending = true;
    return -1;
  }
  sb->ac.on_dead = sbx_agent_dead;
  return 0;
}

static int64_t spec_int(json_t *spec, const char *key, int64_t dflt) {
  json_t *v = json_object_get(spec, key);
  return json_is_integer(v) ? (int64_t)json_integer_value(v) : dflt;
}

/* A sandbox of a tier that cannot be taken over (gvisor: its agent had no
 * socket to come back to, and ended with the last server's connection):
 * what may be left of it is killed, its row and holds go. */
static void lost_tier(struct server *srv, const struct store_sandbox *row, int tier,
                      const char *holder, json_t *held) {
  struct hutch_err err = {0};
  json_t *slot = json_object_get(row->spec, "slot");
  struct hutch_sandbox *hs;
  if (json_is_integer(slot) && tier >= 0 &&
      hutch_sandbox_adopt((enum hutch_isolation)tier, row->id, (unsigned)json_integer_value(slot),
                          (pid_t)row->pid, NULL, &hs, &err) == 0) {
    if (hutch_sandbox_destroy(hs, &err) < 0)
      fprintf(stderr, "hutch serve: sandbox %s: %s\n", row->id, err.msg);
  }

  fprintf(stderr, "hutch serve: sandbox %s (%s) was lost with the last server: ended\n", row->id,
          row->isolation);
  events_emit(srv, "sandbox.lost", row->tenant, row->id,
              json_pack("{s:s,s:s?}", "reason", "its tier cannot be taken over", "isolation",
                        row->isolation));
  layers_hold(srv, held, holder, false);
  store_sandbox_delete(srv->store, row->id, &err);
}

/* One row of the store: take it over, or end it if it expired meanwhile,
 * or forget it if its agent is gone (its cgroups are collected later). */
static void adopt_one(const struct store_sandbox *row, void *arg) {
  struct adopt_ctx *ctx = arg;
  struct server *srv = ctx->srv;
  struct hutch_err err = {0};
  json_t *slot = json_object_get(row->spec, "slot");
  struct sbx *sb = xcalloc(1, sizeof *sb);
  sb->pin = -1;
  /* What the stopping server held for it (sbx_release_all) goes once it
   * is pinned again, or at once when it is not taken over. */
  _cleanup_free_ char *holder = xasprintf("sbx-%s", row->id);
  json_t *held = json_object_get(row->spec, "layers");
  int tier = row->isolation ? hutch_config_isolation_parse(row->isolation) : HUTCH_ISOLATION_NS;

  if (tier < 0 || !(hutch_backend_of((enum hutch_isolation)tier)->can & HUTCH_CAN_ADOPT)) {
    lost_tier(srv, row, tier, holder, held);
    free(sb);
    ctx->ended++;
    return;
  }

  if (!json_is_integer(slot) ||
      hutch_sandbox_adopt((enum hutch_isolation)tier, row->id, (unsigned)json_integer_value(slot),
                          (pid_t)row->pid, srv->agents_dir, &sb->hs, &err) < 0) {
    fprintf(stderr, "hutch serve: sandbox %s: not taken over: %s\n", row->id,
            json_is_integer(slot) ? err.msg : "no slot recorded");
    layers_hold(srv, held, holder, false);
    free(sb);
    events_emit(srv, "sandbox.lost", row->tenant, row->id,
                json_pack("{s:s}", "reason", "not taken over at the server's start"));
    store_sandbox_delete(srv->store, row->id, &err);
    ctx->ended++;
    return;
  }
  hutch_shell_few_fds(sb->hs, &srv->cg_root);

  /* What the store kept of it, back in its struct. */
  sb->srv = srv;
  memcpy(sb->id, row->id, sizeof sb->id);
  str_copy(sb->tenant, sizeof sb->tenant, row->tenant);
  str_copy(sb->template, sizeof sb->template, row->template);
  json_t *md = json_object_get(row->spec, "metadata"), *env = json_object_get(row->spec, "env");
  sb->metadata = json_is_object(md) ? json_deep_copy(md) : json_object();
  sb->env = json_is_object(env) ? json_deep_copy(env) : json_object();
  sb->memory_mb = (uint64_t)json_integer_value(json_object_get(row->spec, "memory_mb"));
  sb->pids = (uint64_t)json_integer_value(json_object_get(row->spec, "pids"));
  sb->cpu_milli = (uint64_t)json_integer_value(json_object_get(row->spec, "cpu_milli"));
  sb->disk_mb = (uint64_t)json_integer_value(json_object_get(row->spec, "disk_mb"));
  const char *token = json_string_value(json_object_get(row->spec, "token"));
  if (token && strlen(token) == SERVE_TOKEN_LEN)
    memcpy(sb->token, token, sizeof sb->token);
  else /* It was stored by a server that gave none. */
    random_hex(sb->token, SERVE_TOKEN_LEN);
  sb->created_ms = row->created_ms;
  sb->expires_ms = row->expires_ms;
  sb->timeout_ms = spec_int(row->spec, "timeout_ms", row->expires_ms - row->created_ms);
  sb->auto_resume = json_is_true(json_object_get(row->spec, "auto_resume"));
  sb->pause_on_timeout = json_is_true(json_object_get(row->spec, "pause_on_timeout"));
  sb->paused = json_is_true(json_object_get(row->spec, "paused"));
  sb->paused_ms = spec_int(row->spec, "paused_ms", 0);
  sb->left_ms = spec_int(row->spec, "left_ms", 0);
  json_t *layers = json_object_get(row->spec, "layers");
  sb->layers = json_is_array(layers) ? json_incref(layers) : NULL;
  sbx_set_defaults(sb, json_string_value(json_object_get(row->spec, "user")),
                   json_string_value(json_object_get(row->spec, "workdir")));

  /* Its template's layers are its own again: pinned for its life. */
  const char *tmpl = layers_template(sb->layers);
  json_t *rec = NULL;
  if (tmpl)
    rec = hutch_images_get(&srv->images, tmpl, &err);
  if (rec) {
    sb->pin = hutch_images_pin(&srv->images, rec, &err);
    if (sb->pin < 0)
      fprintf(stderr, "hutch serve: sandbox %s: template %s: %s\n", sb->id, tmpl, err.msg);
  }
  json_decref(rec);
  layers_hold(srv, held, holder, false);

  json_t *volumes = json_object_get(row->spec, "volumes");
  sb->volumes = json_is_array(volumes) ? json_incref(volumes) : NULL;
  const char *traffic = json_string_value(json_object_get(row->spec, "traffic_token"));
  if (traffic && strlen(traffic) == SERVE_TOKEN_LEN)
    memcpy(sb->traffic_token, traffic, sizeof sb->traffic_token);
  else
    random_hex(sb->traffic_token, SERVE_TOKEN_LEN);

  if (network_restore(sb, json_object_get(row->spec, "network"),
                      json_object_get(row->spec, "secrets"), &err) < 0) {
    /* Never more open than it was: no way out at all. */
    fprintf(stderr, "hutch serve: sandbox %s: %s; its network mode is now none\n", sb->id, err.msg);
    network_restore(sb, NULL, NULL, &err);
  }

  sbx_register(srv, sb);
  egress_start(sb);

  /* A paused agent cannot answer: it is taken over when it is resumed,
   * and its retention is the reaper's to watch. */
  if (sb->paused) {
    sb->agent_pending = true;
    ctx->adopted++;
    return;
  }

  /* Running, as the store says: a server that died while copying a
   * snapshot of it left it frozen. */
  if (hutch_sandbox_freeze(sb->hs, false, &err) < 0)
    fprintf(stderr, "hutch serve: sandbox %s: thaw: %s\n", sb->id, err.msg);
  if (sbx_connect_agent(sb) < 0) {
    fprintf(stderr, "hutch serve: sandbox %s: its agent did not answer; destroying it\n", sb->id);
    events_emit(srv, "sandbox.lost", sb->tenant, sb->id,
                json_pack("{s:s}", "reason", "its agent did not answer at the server's start"));
    sb->end_reason = "lost";
    sbx_destroy(sb);
    ctx->ended++;
    return;
  }
  if (sb->expires_ms <= ctx->now) { /* It expired while no server watched. */
    events_emit(srv, "sandbox.timed_out", sb->tenant, sb->id,
                json_pack("{s:s}", "then", "kill"));
    sb->end_reason = "timeout";
    sbx_destroy(sb);
    ctx->ended++;
    return;
  }
  ctx->adopted++;
}

int sbx_adopt_all(struct server *srv, struct hutch_err *err) {
  struct adopt_ctx ctx = {srv, wall_ms(), 0, 0};
  if (store_sandbox_each(srv->store, adopt_one, &ctx, err) < 0)
    return -1;

  if (ctx.adopted || ctx.ended)
    fprintf(stderr, "hutch serve: took over %u sandboxes; %u had ended or expired\n", ctx.adopted,
            ctx.ended);
  return 0;
}
