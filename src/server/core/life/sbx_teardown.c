/* The end of a sandbox (sbx_teardown.h): out of the registry at once, its
 * processes and cgroups off the loop, its memory once its agent's
 * connection is closed; and letting every sandbox go at a stop. */
#include "core/life/sbx_teardown.h"

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
#include "core/life/pool.h"
#include "core/run/procs.h"
#include "core/life/snapshots.h"
#include "core/tenancy/usage.h"
#include "state/store.h"
#include "core/egress/egress.h"
#include "core/life/sbx_pause.h"

static void sbx_free_now(struct sbx *sb) {
  procs_free(sb);
  contexts_free(sb);
  if (sb->srv->fronts)
    sb->srv->fronts->sandbox_freed(sb);
  usage_free(sb);
  escapes_free(sb);

  json_decref(sb->layers);
  free(sb->user);
  free(sb->workdir);
  /* A sandbox never made still has its pin (sbx_destroy hands it to its
   * teardown). */
  if (sb->pin >= 0)
    close(sb->pin);
  json_decref(sb->volumes);
  json_decref(sb->metadata);
  json_decref(sb->env);
  json_decref(sb->log);
  json_decref(sb->artifacts_seen);
  network_free(sb);
  free(sb);
}

static void sbx_free(struct agentc *ac) {
  sbx_free_now((struct sbx *)((char *)ac - offsetof(struct sbx, ac)));
}

/* The agent connection failed: the sandbox is of no more use. */
void sbx_agent_dead(struct agentc *ac) {
  struct sbx *sb = (struct sbx *)((char *)ac - offsetof(struct sbx, ac));
  fprintf(stderr, "hutch serve: sandbox %s: agent connection lost; destroying it\n", sb->id);
  if (!sb->pool)
    events_emit(sb->srv, "sandbox.lost", sb->tenant, sb->id,
                json_pack("{s:s}", "reason", "its agent's connection was lost"));
  sb->end_reason = "lost";
  sbx_destroy(sb);
}

/* A sandbox's end off the loop: killing its agent waits for every process
 * of it to die, and removing its cgroups for the kernel to let them go. */
struct teardown {
  struct offload o;
  struct teardown *next;   /* srv->teardowns: its layers are in use until it is done */
  void (*gone)(void *arg); /* told once it is gone, or NULL */
  void *arg;
  struct hutch_sandbox *hs;
  json_t *layers; /* a fork's snapshot is released once its files are unused */
  int pin;        /* its template's, closed once its files are unused */
  char id[17];
  struct hutch_err err;
  int r;
};

static void teardown_run(struct offload *o) {
  struct teardown *t = OFFLOAD_JOB(o, struct teardown);
  t->r = hutch_sandbox_destroy(t->hs, &t->err);
}

static void teardown_done(struct offload *o) {
  struct teardown *t = OFFLOAD_JOB(o, struct teardown);
  if (t->r < 0)
    fprintf(stderr, "hutch serve: sandbox %s: teardown: %s\n", t->id, t->err.msg);

  for (struct teardown **q = &o->srv->teardowns; *q; q = &(*q)->next)
    if (*q == t) {
      *q = t->next;
      break;
    }
  if (t->gone)
    t->gone(t->arg);

  if (t->layers)
    snapshots_release(o->srv, t->layers);
  json_decref(t->layers);
  if (t->pin >= 0)
    close(t->pin);
  free(t);
}

static void teardown(struct server *srv, struct hutch_sandbox *hs, json_t *layers, int pin,
                     void (*gone)(void *arg), void *arg) {
  struct teardown *t = xcalloc(1, sizeof *t);
  t->pin = pin;
  t->hs = hs;
  t->gone = gone;
  t->arg = arg;
  t->layers = json_incref(layers);

  t->next = srv->teardowns;
  srv->teardowns = t;
  memcpy(t->id, hs->id, sizeof t->id);
  offload(srv, OFFLOAD_OTHER, &t->o, teardown_run, teardown_done);
}

unsigned sbx_teardown_users(const struct server *srv, const char *layer) {
  unsigned n = 0;
  for (const struct teardown *t = srv->teardowns; t; t = t->next) {
    size_t i;
    json_t *v;
    json_array_foreach(t->layers, i, v) {
      if (strcmp(json_string_value(v), layer) == 0)
        n++;
    }
  }
  return n;
}

void sbx_teardown(struct server *srv, struct hutch_sandbox *hs, json_t *layers) {
  teardown(srv, hs, layers, -1, NULL, NULL);
}

void sbx_destroy(struct sbx *sb) {
  sbx_destroy_then(sb, NULL, NULL);
}

void sbx_destroy_then(struct sbx *sb, void (*gone)(void *arg), void *arg) {
  struct server *srv = sb->srv;
  if (sb->dying)
    return;
  sb->dying = true;
  sbx_freeze_forget(sb);

  struct hutch_err err = {0};
  if (sb->pool) {
    pool_unlink(sb);
  } else {
    if (sbx_unregister(srv, sb)) {
      srv->metrics.destroys++;
      usage_sample(sb); /* Its last use is counted. */
      events_emit(srv, "sandbox.killed", sb->tenant, sb->id,
                  json_pack("{s:s}", "reason", sb->end_reason ? sb->end_reason : "request"));
      if (store_sandbox_delete(srv->store, sb->id, &err) < 0)
        fprintf(stderr, "hutch serve: %s\n", err.msg);
    }
  }

  escapes_final(sb);
  egress_close(sb);
  if (srv->fronts)
    srv->fronts->sandbox_ending(sb);

  /* Streams hear the end first (their clients get a last line), then the
   * sandbox goes. The fd belongs to the connection, if there is one yet. */
  bool connected = !sb->agent_pending;
  if (connected) {
    sb->hs->conn_fd = -1;
    agentc_close(&sb->ac, sbx_free);
  }

  teardown(srv, sb->hs, sb->pool ? NULL : sb->layers, steal_fd(&sb->pin), gone, arg);
  sb->hs = NULL;
  if (!connected)
    sbx_free_now(sb);
}

void sbx_destroy_all(struct server *srv) {
  while (srv->sandboxes) {
    srv->sandboxes->end_reason = "server_stop";
    sbx_destroy(srv->sandboxes);
  }
}

/* Let go of every sandbox without ending it: its agent, losing us, waits
 * for the next server (sbx_adopt_all). */
void sbx_release_all(struct server *srv) {
  while (srv->sandboxes) {
    struct sbx *sb = srv->sandboxes;
    /* A tier a next server cannot take over (gvisor: its agent has no
     * socket on the host) ends now rather than with its connection, its
     * row and cgroups with it. */
    if (!(hutch_backend_of(sb->hs->isolation)->can & HUTCH_CAN_ADOPT)) {
      fprintf(stderr, "hutch serve: sandbox %s (%s) ends: a next start cannot take it over\n",
              sb->id, hutch_isolation_name(sb->hs->isolation));
      sbx_destroy(sb);
      continue;
    }

    sbx_unregister(srv, sb);
    sb->dying = true;
    sbx_freeze_forget(sb);
    usage_sample(sb);  /* Its last use is counted. */
    escapes_final(sb); /* The next server starts from the agent's counts. */
    egress_close(sb);
    if (srv->fronts)
      srv->fronts->sandbox_ending(sb);

    /* Frozen only for a snapshot's copy, which will not finish: it runs on. */
    struct hutch_err err = {0};
    if (sb->captures && !sb->paused && hutch_sandbox_freeze(sb->hs, false, &err) < 0)
      fprintf(stderr, "hutch serve: sandbox %s: thaw: %s\n", sb->id, err.msg);

    /* Its pin goes with this process: until the next start pins them
     * again, its template's layers are held in the store. */
    _cleanup_free_ char *holder = xasprintf("sbx-%s", sb->id);
    if (!sb->pool)
      layers_hold(srv, sb->layers, holder, true);

    bool connected = !sb->agent_pending;
    if (connected)
      sb->hs->conn_fd = -1; /* The connection is the one to close it. */
    hutch_sandbox_release(sb->hs);
    sb->hs = NULL;
    if (connected)
      agentc_close(&sb->ac, sbx_free);
    else
      sbx_free_now(sb);
  }
}
