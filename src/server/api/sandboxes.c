/* /v1/sandboxes: create, list, get, delete, and set a sandbox's timeout. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"
#include "core/actions.h"
#include "api/api.h"
#include "api/handlers.h"
#include "core/fds.h"
#include "core/metrics.h"
#include "core/network.h"
#include "core/pool.h"
#include "core/snapshots.h"
#include "core/volumes.h"
#include "http/body.h"
#include "state/store.h"

#define MAX_MAP_ENTRIES 256 /* env and metadata */

struct create_req {
  const char *template;
  double timeout_s;
  uint64_t memory_mb, pids, disk_mb;
  double cpus;
  json_t *env, *metadata, *volumes, *network, *secrets;
  const char *on_timeout;
  int auto_resume; /* -1: not said */
};

static int parse_create(struct http_conn *c, json_t *o, struct create_req *r) {
  static const char *const known[] = {"template", "timeout_s", "memory_mb",  "cpus",
                                      "pids",     "disk_mb",   "env",        "metadata",
                                      "on_timeout", "auto_resume", "volumes",    "network",
                                      "secrets",  NULL};
  r->template = "host";
  r->timeout_s = SERVE_DEFAULT_TIMEOUT_S;
  r->on_timeout = "kill";
  r->volumes = json_object_get(o, "volumes");
  r->network = json_object_get(o, "network");
  r->secrets = json_object_get(o, "secrets");
  json_t *ar = json_object_get(o, "auto_resume");
  r->auto_resume = -1;
  if (ar && !json_is_boolean(ar)) {
    http_error(c, HUTCH_ERR_INVALID, "invalid_argument", "auto_resume must be true or false");
    return -1;
  }
  if (ar)
    r->auto_resume = json_is_true(ar);
  if (body_only(c, o, known) < 0 || body_string(c, o, "template", 63, &r->template) < 0 ||
      body_number(c, o, "timeout_s", 1, SERVE_MAX_TIMEOUT_S, &r->timeout_s) < 0 ||
      body_uint(c, o, "memory_mb", 1, 1ull << 30, &r->memory_mb) < 0 ||
      body_uint(c, o, "pids", 1, HUTCH_MAX_PIDS, &r->pids) < 0 ||
      body_uint(c, o, "disk_mb", 1, 1ull << 30, &r->disk_mb) < 0 ||
      body_number(c, o, "cpus", 0.01, 4096, &r->cpus) < 0 ||
      body_string_map(c, o, "env", MAX_MAP_ENTRIES, &r->env) < 0 ||
      body_string_map(c, o, "metadata", MAX_MAP_ENTRIES, &r->metadata) < 0 ||
      body_string(c, o, "on_timeout", 8, &r->on_timeout) < 0)
    return -1;
  struct hutch_err err = {0};
  if (network_check(r->network, r->secrets, &err) < 0) {
    http_fail(c, &err);
    return -1;
  }
  if (strcmp(r->on_timeout, "kill") != 0 && strcmp(r->on_timeout, "pause") != 0) {
    http_error(c, HUTCH_ERR_INVALID, "invalid_argument", "on_timeout must be \"kill\" or \"pause\"");
    return -1;
  }
  if (r->env) {
    const char *k;
    json_t *v;
    json_object_foreach(r->env, k, v) if (strchr(k, '=')) {
      http_error(c, HUTCH_ERR_INVALID, "invalid_argument", "env: name '%s' contains '='", k);
      return -1;
    }
  }
  return 0;
}

/* A create under way (its sandbox is made off the loop): counted against
 * its tenant's quota and the server's capacity like a live sandbox, so that
 * creates fired at once cannot pass them together. */
struct creating {
  struct creating *next;
  struct server *srv;
  struct http_conn *c; /* NULL once the client has gone */
  struct principal p;
  json_t *body; /* what r's strings point into */
  struct create_req r;
  struct hutch_sandbox_config cfg;
  json_t *snap; /* the snapshot it is made from, or NULL */
  char **paths;
  size_t npaths;
  struct volume_mounts vm;
  uint64_t memory_mb, t0;
  sandboxes_made_fn made;
  void *arg;
};

int sandboxes_check_room(struct http_conn *c, const struct principal *p, uint64_t memory_mb,
                         unsigned count) {
  struct server *srv = c->srv;
  struct hutch_err err = {0};
  struct tenant_quota q;
  if (store_tenant_get(srv->store, p->tenant, &q, &err) < 0) {
    http_error(c, HUTCH_ERR_SYSTEM, "internal", "%s", err.msg);
    return -1;
  }
  uint64_t max_sbx = q.max_sandboxes >= 0 ? (uint64_t)q.max_sandboxes : srv->cfg.tenant_sandboxes;
  uint64_t max_mem = q.max_memory_mb >= 0 ? (uint64_t)q.max_memory_mb : srv->cfg.tenant_memory_mb;
  uint64_t n = 0, mem = 0, all = srv->nsandboxes;
  for (struct sbx *sb = srv->sandboxes; sb; sb = sb->next)
    if (strcmp(sb->tenant, p->tenant) == 0) {
      n++;
      mem += sb->memory_mb;
    }
  for (struct creating *cr = srv->creating; cr; cr = cr->next) {
    all++;
    if (strcmp(cr->p.tenant, p->tenant) == 0) {
      n++;
      mem += cr->memory_mb;
    }
  }
  if (n + count > max_sbx) {
    http_error(c, HUTCH_ERR_QUOTA, "quota_exceeded", "tenant %s may run at most %llu sandboxes", p->tenant,
               (unsigned long long)max_sbx);
    return -1;
  }
  if (mem + memory_mb * count > max_mem) {
    http_error(c, HUTCH_ERR_QUOTA, "quota_exceeded",
               "tenant %s may use at most %llu MiB of sandbox memory (%llu in use)", p->tenant,
               (unsigned long long)max_mem, (unsigned long long)mem);
    return -1;
  }
  if (all + count > srv->cfg.max_sandboxes) {
    http_error(c, HUTCH_ERR_UNAVAILABLE, "at_capacity", "the server runs its maximum of %u sandboxes",
               srv->cfg.max_sandboxes);
    return -1;
  }
  return 0;
}

static bool has_id(json_t *list, const char *key, const char *id) {
  json_t *v;
  size_t i;
  json_array_foreach(list, i, v) {
    const char *s = json_string_value(key ? json_object_get(v, key) : v);
    if (s && strcmp(s, id) == 0)
      return true;
  }
  return false;
}

unsigned sandboxes_creating_users(const struct server *srv, const char *volume,
                                  const char *layer) {
  unsigned n = 0;
  for (const struct creating *cr = srv->creating; cr; cr = cr->next)
    n += (volume && has_id(cr->vm.used, "id", volume)) ||
         (layer && cr->snap && has_id(json_object_get(cr->snap, "layers"), NULL, layer));
  return n;
}

static void creating_free(struct creating *cr) {
  for (struct creating **q = &cr->srv->creating; *q; q = &(*q)->next)
    if (*q == cr) {
      *q = cr->next;
      break;
    }
  volumes_release(&cr->vm);
  snapshots_free_paths(cr->paths, cr->npaths);
  json_decref(cr->snap);
  json_decref(cr->body);
  free(cr);
}

static void creating_abort(void *ctx) {
  struct creating *cr = ctx;
  cr->c = NULL;
}

static const struct http_stream_ops creating_ops = {.abort = creating_abort};

/* The sandbox is the tenant's: its fields from the request, registered
 * and stored. NULL after an error answer (it is destroyed). */
static struct sbx *adopt_made(struct creating *cr, struct sbx *sb) {
  struct http_conn *c = cr->c;
  struct server *srv = cr->srv;
  const struct create_req *r = &cr->r;
  struct hutch_err err = {0};
  str_copy(sb->tenant, sizeof sb->tenant, cr->p.tenant);
  sb->layers = json_incref(json_object_get(cr->snap, "layers"));
  sb->volumes = json_array_size(cr->vm.used) ? json_incref(cr->vm.used) : NULL;
  if (r->metadata)
    json_object_update(sb->metadata, r->metadata);
  if (r->env)
    json_object_update(sb->env, r->env);
  sb->created_ms = wall_ms();
  sb->timeout_ms = (int64_t)(r->timeout_s * 1000);
  sb->expires_ms = sb->created_ms + sb->timeout_ms;
  sb->pause_on_timeout = strcmp(r->on_timeout, "pause") == 0;
  /* Resumed by the next request that needs it, unless asked otherwise. */
  sb->auto_resume = r->auto_resume != 0;
  sbx_register(srv, sb);
  if (network_set(sb, r->network, r->secrets, &err) < 0) { /* checked already: cannot fail */
    sbx_destroy(sb);
    return NULL;
  }
  if (sbx_store(sb, true, &err) < 0) {
    http_error(c, HUTCH_ERR_SYSTEM, "internal", "%s", err.msg);
    sbx_destroy(sb);
    return NULL;
  }
  srv->metrics.creates++;
  metrics_observe(srv->metrics.create_hist, &srv->metrics.create_sum_s,
                  (double)(now_ns() - cr->t0) / 1e9);
  str_copy(c->sandbox, sizeof c->sandbox, sb->id);
  return sb;
}

/* The end of a create, on the loop: a client that left meanwhile gets no
 * sandbox (what was made goes), nor does a stopping server's. */
static void create_made(struct server *srv, struct sbx *sb, const struct hutch_err *err,
                        void *arg) {
  struct creating *cr = arg;
  struct http_conn *c = cr->c;
  if (c)
    http_own(c, NULL, NULL);
  if (sb && !c) {
    sbx_destroy(sb);
    sb = NULL;
  } else if (!sb && c) {
    /* Out of descriptors or processes is the server's load, not a fault
     * (hutch_err_class). */
    struct hutch_err e = *err;
    if (srv->stopping)
      hutch_err_fail(&e, HUTCH_ERR_UNAVAILABLE, "overloaded", "the server is stopping");
    else if (hutch_err_class(&e) == HUTCH_ERR_SYSTEM)
      e.code = "sandbox_error";
    hutch_err_wrap(&e, "creating the sandbox");
    http_fail(c, &e);
  } else if (sb) {
    sb = adopt_made(cr, sb);
  }
  sandboxes_made_fn made = cr->made;
  void *made_arg = cr->arg;
  struct principal p = cr->p;
  creating_free(cr);
  made(c, &p, sb, made_arg);
}

/* The sandbox cr asks for: a warm one if a pool holds one made just so
 * (answered at once), else made off the loop. -1 after an error answer. */
static int create(struct http_conn *c, struct creating *cr) {
  struct server *srv = c->srv;
  struct hutch_err err = {0};
  struct hutch_sandbox_config *cfg = &cr->cfg;
  const struct create_req *r = &cr->r;
  cfg->memory_bytes = r->memory_mb << 20;
  cfg->disk_bytes = r->disk_mb << 20;
  cfg->pids = r->pids;
  cfg->cpu_milli = (uint64_t)(r->cpus * 1000 + 0.5);
  if (hutch_config_check(cfg, &err) < 0) {
    http_error(c, HUTCH_ERR_INVALID, "invalid_argument", "%s", err.msg);
    return -1;
  }
  if (sandboxes_check_room(c, &cr->p, cfg->memory_bytes >> 20, 1) < 0)
    return -1;
  cr->memory_mb = cfg->memory_bytes >> 20;
  cr->c = c;
  cr->t0 = now_ns();
  struct sbx *sb = cr->snap || cfg->nvolumes ? NULL : pool_take(srv, cfg, r->template);
  if (!sb && fds_check_sandbox(srv)) {
    http_error(c, HUTCH_ERR_UNAVAILABLE, "overloaded", "the server holds as many descriptors as it can; try again");
    return -1;
  }
  cr->next = srv->creating;
  srv->creating = cr;
  if (sb) {
    create_made(srv, sb, &err, cr);
    return 0;
  }
  http_own(c, &creating_ops, cr);
  http_watch(c);
  sbx_make(srv, cfg, r->template, create_made, cr);
  return 0;
}

int sandboxes_create(struct http_conn *c, const struct principal *p, json_t *o,
                     sandboxes_made_fn made, void *arg) {
  struct server *srv = c->srv;
  struct creating *cr = xcalloc(1, sizeof *cr);
  cr->srv = srv;
  cr->p = *p;
  cr->body = json_incref(o);
  cr->made = made;
  cr->arg = arg;
  cr->cfg.state_dir = srv->cfg.state_dir;
  if (parse_create(c, o, &cr->r) < 0)
    goto fail;
  /* A template is `host`, or one of the tenant's snapshots: its layers. */
  if (strcmp(cr->r.template, "host") != 0 &&
      !(cr->snap = snapshots_get(srv, p->tenant, cr->r.template))) {
    http_error(c, HUTCH_ERR_NOT_FOUND, "template_not_found",
               "no template '%s' (this server has host, and your snapshots)", cr->r.template);
    goto fail;
  }
  json_t *layers = json_object_get(cr->snap, "layers");
  cr->paths = layers ? snapshots_layer_paths(srv, layers, &cr->npaths) : NULL;
  cr->cfg.layers = (const char *const *)cr->paths;
  cr->cfg.nlayers = cr->npaths;
  struct hutch_err verr = {0};
  if (volumes_prepare(srv, p, cr->r.volumes, &cr->vm, &verr) < 0) {
    http_fail(c, &verr);
    goto fail;
  }
  cr->cfg.volumes = cr->vm.v;
  cr->cfg.nvolumes = cr->vm.n;
  if (create(c, cr) == 0)
    return 0;
fail:
  creating_free(cr);
  return -1;
}

static void answer_created(struct http_conn *c, const struct principal *p, struct sbx *sb,
                           void *arg) {
  (void)p, (void)arg;
  if (c && sb)
    http_json(c, 201, sbx_json(sb));
}

void api_sandboxes_create(struct http_conn *c, const struct principal *p) {
  json_t *o = body_object(c);
  if (o)
    sandboxes_create(c, p, o, answer_created, NULL);
  json_decref(o);
}

/* ?state=running and ?metadata.KEY=VALUE (all must match). */
static bool listed(const struct sbx *sb, const struct http_req *req) {
  bool ok = true;
  for (const char *q = req->query; ok && q && *q;) {
    char *key = NULL, *value = NULL;
    q = http_query_next(q, &key, &value);
    if (key && strcmp(key, "state") == 0)
      ok = value && strcmp(value, sb->paused ? "paused" : "running") == 0;
    else if (key && strncmp(key, "metadata.", 9) == 0) {
      json_t *v = json_object_get(sb->metadata, key + 9);
      ok = v && value && strcmp(json_string_value(v), value) == 0;
    }
    free(key);
    free(value);
  }
  return ok;
}

void api_sandboxes_list(struct http_conn *c, const struct principal *p) {
  json_t *a = json_array();
  for (struct sbx *sb = c->srv->sandboxes; sb; sb = sb->next)
    if (strcmp(sb->tenant, p->tenant) == 0 && listed(sb, &c->req))
      json_array_append_new(a, sbx_json(sb));
  http_json(c, 200, json_pack("{s:o}", "sandboxes", a));
}

void api_sandboxes_get(struct http_conn *c, const struct principal *p) {
  struct sbx *sb = sbx_lookup(c, p);
  if (sb)
    http_json(c, 200, sbx_json(sb));
}

/* Both APIs' delete: the sandbox goes, 204 once its processes have. */
static void deleted(void *arg) {
  struct http_wait *w = arg;
  struct http_conn *c = http_wait_end(w);
  free(w);
  if (c)
    http_respond(c, 204, "application/json", "", 0, NULL);
}

void api_sandboxes_delete(struct http_conn *c, const struct principal *p) {
  struct sbx *sb = sbx_lookup(c, p);
  if (!sb)
    return;
  struct http_wait *w = xcalloc(1, sizeof *w);
  http_wait_begin(w, c);
  sbx_destroy_then(sb, deleted, w);
}


struct sbx *sandboxes_timeout_body(struct http_conn *c, const struct principal *p, double *t) {
  static const char *const known[] = {"timeout_s", NULL};
  struct sbx *sb = sbx_lookup(c, p);
  json_t *o = sb ? body_object(c) : NULL;
  *t = -1;
  bool ok = o && body_only(c, o, known) >= 0 &&
            body_number(c, o, "timeout_s", 1, SERVE_MAX_TIMEOUT_S, t) >= 0;
  json_decref(o);
  return ok ? sb : NULL;
}

/* A new timeout, counted from now (as E2B's setTimeout). */
void api_sandboxes_timeout(struct http_conn *c, const struct principal *p) {
  double t;
  struct sbx *sb = sandboxes_timeout_body(c, p, &t);
  if (!sb)
    return;
  if (t < 0) {
    http_error(c, HUTCH_ERR_INVALID, "invalid_argument", "timeout_s is required");
    return;
  }
  act_set_timeout(sb, t, false);
  http_json(c, 200, sbx_json(sb));
}
