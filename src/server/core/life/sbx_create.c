/* Making a sandbox for a tenant (sbx_create.h). */
#include "core/life/sbx_create.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"
#include "core/events/events.h"
#include "cleanup.h"
#include "core/sandbox/fds.h"
#include "core/disk/layers.h"
#include "core/egress/network.h"
#include "core/life/pool.h"
#include "core/sandbox/sbx.h"
#include "core/base/server.h"
#include "core/life/snapshots.h"
#include "core/life/startup.h"
#include "core/sandbox/tally.h"
#include "core/disk/volumes.h"
#include "core/base/counters.h"
#include "core/life/sbx_make.h"
#include "core/life/sbx_teardown.h"

void sbx_create_req_init(struct create_req *r) {
  memset(r, 0, sizeof *r);
  r->template = "host";
  r->isolation = -1;
  r->timeout_s = SERVE_DEFAULT_TIMEOUT_S;
  r->auto_resume = true;
}

/* A create under way (its sandbox is made off the loop): counted against
 * its tenant's quota and the server's capacity like a live sandbox, so that
 * creates fired at once cannot pass them together. */
struct creating {
  struct creating *next;
  struct server *srv;
  struct principal p;
  struct create_req r; /* its JSON values held, its template copied */
  char template[SERVE_TEMPLATE_MAX + 1];
  struct hutch_sandbox_config cfg;
  json_t *layers; /* what it stacks (layers.h), or NULL: host */
  json_t *tmpl;   /* the store's template it is made from, or NULL */
  int tier;       /* its snapshot's or template's tier, -1: neither names one */
  struct layer_stack stack;
  struct volume_mounts vm;
  uint64_t memory_mb, t0;
  const struct create_ops *ops;
  void *arg;
};

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

unsigned sbx_create_users(const struct server *srv, const char *layer) {
  unsigned n = 0;
  for (const struct creating *cr = srv->creating; cr; cr = cr->next)
    n += cr->layers && has_id(cr->layers, NULL, layer);
  return n;
}

static int resolve_template(struct creating *cr, struct hutch_err *err);

/* The tier a template asks for (its LABEL hutch.isolation), unless its
 * snapshot named one already. */
static int template_tier(struct creating *cr, struct hutch_err *err) {
  if (cr->tier >= 0 || !cr->tmpl)
    return 0;
  struct hutch_image_config ic;
  hutch_images_config(cr->tmpl, &ic);
  if (!ic.isolation)
    return 0;
  cr->tier = hutch_config_isolation_parse(ic.isolation);
  if (cr->tier < 0)
    return hutch_err_fail(err, HUTCH_ERR_INVALID, "invalid_argument",
                          "template %s: LABEL hutch.isolation is '%s', not ns or gvisor",
                          cr->template, ic.isolation);
  return 0;
}

static void template_config(struct sbx *sb, json_t *tmpl);

static void creating_free(struct creating *cr) {
  for (struct creating **q = &cr->srv->creating; *q; q = &(*q)->next)
    if (*q == cr) {
      *q = cr->next;
      tally_creating(cr->srv, cr->p.tenant, cr->memory_mb, false);
      volumes_creating(cr->srv, &cr->vm, false);
      break;
    }

  volumes_release(&cr->vm);
  layers_stack_free(&cr->stack);
  json_decref(cr->layers);
  json_decref(cr->tmpl);
  json_decref(cr->r.env);
  json_decref(cr->r.metadata);
  json_decref(cr->r.volumes);
  json_decref(cr->r.network);
  json_decref(cr->r.secrets);
  free(cr);
}

/* The sandbox is the tenant's: its fields from the request, registered
 * and stored. NULL and err when it could not be (it is destroyed). */
static struct sbx *adopt_made(struct creating *cr, struct sbx *sb, struct hutch_err *err) {
  struct server *srv = cr->srv;
  const struct create_req *r = &cr->r;

  str_copy(sb->tenant, sizeof sb->tenant, cr->p.tenant);
  str_copy(sb->template, sizeof sb->template, cr->template); /* A pool's has its id. */
  sb->layers = json_incref(cr->layers);
  template_config(sb, cr->tmpl);
  sb->volumes = json_array_size(cr->vm.used) ? json_incref(cr->vm.used) : NULL;
  if (r->metadata)
    json_object_update(sb->metadata, r->metadata);
  if (r->env) /* The request's env goes above the template's. */
    json_object_update(sb->env, r->env);
  sb->created_ms = wall_ms();
  sb->timeout_ms = (int64_t)(r->timeout_s * 1000);
  sb->expires_ms = sb->created_ms + sb->timeout_ms;
  sb->pause_on_timeout = r->pause_on_timeout;
  sb->auto_resume = r->auto_resume;

  sbx_register(srv, sb);
  /* Checked at the start: it cannot fail, but a sandbox without its
   * policy must not run. */
  int rc = network_set(sb, r->network, r->secrets, err);
  if (rc >= 0)
    rc = sbx_store(sb, true, err);
  if (rc < 0) {
    sbx_destroy(sb);
    return NULL;
  }

  json_t *view = sbx_json(sb);
  events_emit(srv, "sandbox.created", sb->tenant, sb->id,
              json_pack("{s:s,s:O?,s:O?,s:I,s:f}", "template", sb->template, "tier",
                        json_object_get(view, "isolation"), "metadata", sb->metadata, "memory_mb",
                        (json_int_t)sb->memory_mb, "timeout_s", (double)sb->timeout_ms / 1000));
  json_decref(view);
  srv->metrics.creates++;
  counters_observe(srv->metrics.create_hist, &srv->metrics.create_sum_s,
                   (double)(now_ns() - cr->t0) / 1e9);
  return sb;
}

/* The end of a create, on the loop: a caller that left meanwhile gets no
 * sandbox (what was made goes), nor does a stopping server's. */
static void create_made(struct server *srv, struct sbx *sb, const struct hutch_err *made_err,
                        void *arg) {
  struct creating *cr = arg;
  struct hutch_err err = {0};
  bool wanted = cr->ops->wanted(cr->arg);

  if (sb && !wanted) {
    /* Its layers are released when its teardown is done, not before. */
    sb->layers = json_incref(cr->layers);
    if (sb->pin < 0)
      sb->pin = steal_fd(&cr->stack.pin);
    sbx_destroy(sb);
    sb = NULL;
    hutch_err_fail(&err, HUTCH_ERR_UNAVAILABLE, "overloaded", "the client left");
  } else if (!sb) {
    /* Out of descriptors or processes is the server's load, not a fault
     * (hutch_err_class). */
    err = *made_err;
    if (srv->stopping)
      hutch_err_fail(&err, HUTCH_ERR_UNAVAILABLE, "overloaded", "the server is stopping");
    else if (hutch_err_class(&err) == HUTCH_ERR_SYSTEM)
      err.code = "sandbox_error";
    hutch_err_wrap(&err, "creating the sandbox");
  } else {
    if (sb->pin < 0)
      sb->pin = steal_fd(&cr->stack.pin);
    sb = adopt_made(cr, sb, &err);
  }

  const struct create_ops *ops = cr->ops;
  void *ops_arg = cr->arg;
  struct principal p = cr->p;
  json_t *tmpl = json_incref(cr->tmpl);
  creating_free(cr);

  /* A template's start command runs, and its ready command passes, before
   * the create ends. */
  if (!sb || !startup_begin(srv, &p, sb, tmpl, ops, ops_arg)) {
    if (sb)
      startup_ready(sb);
    else if (err.kind == HUTCH_ERR_QUOTA)
      sbx_create_refused(srv, p.tenant, &err);
    ops->made(sb, sb ? NULL : &err, ops_arg);
  }
  json_decref(tmpl);
}

/* Admission: a create that would wait longer than --max-create-wait-ms
 * for a lane is refused at once, with Retry-After, rather than let every
 * create of a burst wait (and a client's timeout pass) behind it. The wait
 * is judged from the creates it would wait behind (made now, or waiting
 * with an earlier turn: tenants take turns, offload.c) and what a create
 * has lately taken on its lane (before the first, ADMIT_FIRST_NS): while
 * a lane is free it waits nothing and is always let in. So one tenant's
 * burst fills the wait for itself, not for the others.
 * A tenant holding most of the queue hears 429 too_many_requests (it is
 * the one to slow down), any other 503 at_capacity. */
#define ADMIT_FIRST_NS (20 * 1000 * 1000ull)
static int admit(struct server *srv, const struct principal *p, struct hutch_err *err) {
  const struct tally *t = tally_of(srv, p->tenant);
  unsigned own = t ? t->creating : 0;
  unsigned lanes = srv->offload[OFFLOAD_CREATE].max;
  unsigned ahead = offload_ahead(srv, OFFLOAD_CREATE, p->tenant);
  uint64_t per = srv->create_ns ? srv->create_ns : ADMIT_FIRST_NS;
  uint64_t wait_ms = ahead / lanes * per / 1000000;
  if (wait_ms <= srv->cfg.max_create_wait_ms)
    return 0;

  if (own * 2 > ahead)
    hutch_err_fail(err, HUTCH_ERR_QUOTA, "too_many_requests",
                   "tenant %s has %u creates waiting (about %llu ms): try again later", p->tenant,
                   own, (unsigned long long)wait_ms);
  else
    hutch_err_fail(err, HUTCH_ERR_UNAVAILABLE, "at_capacity",
                   "%u creates are waiting (about %llu ms): try again later", ahead,
                   (unsigned long long)wait_ms);
  /* Retry-After: the wait, in whole seconds rounded up. */
  err->retry_s = (unsigned)((wait_ms + 999) / 1000);
  return -1;
}

/* The sandbox cr asks for: a warm one if a pool holds one made just so
 * (made at once), else made off the loop. */
static int start(struct creating *cr, struct hutch_err *err) {
  struct server *srv = cr->srv;
  struct hutch_sandbox_config *cfg = &cr->cfg;
  const struct create_req *r = &cr->r;

  cfg->memory_bytes = r->memory_mb << 20;
  cfg->disk_bytes = r->disk_mb << 20;
  cfg->pids = r->pids;
  cfg->cpu_milli = (uint64_t)(r->cpus * 1000 + 0.5);
  if (hutch_config_check(cfg, err) < 0) {
    if (err->kind != HUTCH_ERR_UNSUPPORTED) {
      err->kind = HUTCH_ERR_INVALID;
      err->code = "invalid_argument";
    }
    return -1;
  }
  if (tally_check_room(srv, &cr->p, cfg->memory_bytes >> 20, 1, err) < 0)
    return -1;

  cr->memory_mb = cfg->memory_bytes >> 20;
  cr->t0 = now_ns();

  /* A pool holds sandboxes of the host or of a template: one made from
   * a snapshot, or with volumes, is made for this create. */
  const char *tmpl = layers_template(cr->layers);
  bool pooled = !cfg->nvolumes && (!cr->layers || (tmpl && json_array_size(cr->layers) == 1));
  struct sbx *sb = NULL;
  if (pooled)
    sb = pool_take(srv, cfg, tmpl ? tmpl : "host");
  if (!sb && fds_check_sandbox(srv))
    return hutch_err_fail(err, HUTCH_ERR_UNAVAILABLE, "overloaded",
                          "the server holds as many descriptors as it can; try again");
  if (!sb && !r->admitted && admit(srv, &cr->p, err) < 0)
    return -1;

  cr->next = srv->creating;
  srv->creating = cr;
  tally_creating(srv, cr->p.tenant, cr->memory_mb, true);
  volumes_creating(srv, &cr->vm, true);

  if (sb) {
    struct hutch_err none = {0};
    create_made(srv, sb, &none, cr);
    return 0;
  }
  sbx_make(srv, cfg, r->template, cr->p.tenant, create_made, cr);
  return 0;
}

/* A template is `host`, one of the tenant's snapshots, or a template of
 * the store (the tenant's own, or a public one): what it stacks. */
static int resolve_template(struct creating *cr, struct hutch_err *err) {
  struct server *srv = cr->srv;
  if (strcmp(cr->template, "host") == 0)
    return 0;

  json_t *snap = snapshots_get(srv, cr->p.tenant, cr->template);
  if (snap) {
    cr->layers = json_incref(json_object_get(snap, "layers"));
    cr->tier = hutch_config_isolation_parse(json_string_value(json_object_get(snap, "isolation")));
    json_decref(snap);
    /* A snapshot of a template's sandbox runs as the template does. */
    const char *tmpl = layers_template(cr->layers);
    struct hutch_err none = {0};
    cr->tmpl = NULL;
    if (tmpl)
      cr->tmpl = hutch_images_get(&srv->images, tmpl, &none);
  } else {
    struct hutch_err none = {0};
    cr->tmpl = layers_find_template(srv, cr->p.tenant, cr->template, &none);
    if (!cr->tmpl)
      return hutch_err_fail(err, HUTCH_ERR_NOT_FOUND, "template_not_found",
                            "no template '%s' (this server has host, your snapshots, and the "
                            "templates GET /v1/templates lists)",
                            cr->template);
    cr->layers =
        json_pack("[s+]", LAYERS_TEMPLATE, json_string_value(json_object_get(cr->tmpl, "id")));
  }

  if (cr->layers && layers_stack(srv, cr->layers, &cr->stack, err) < 0)
    return hutch_err_wrap(err, "template %s", cr->template);
  return template_tier(cr, err);
}

/* A template's config under the request's: its environment beneath the
 * request's own, its user and working directory as the defaults of every
 * exec. */
static void template_config(struct sbx *sb, json_t *tmpl) {
  if (!tmpl)
    return;
  struct hutch_image_config ic;
  hutch_images_config(tmpl, &ic);

  size_t i;
  json_t *v;
  json_array_foreach(ic.env, i, v) {
    const char *kv = json_string_value(v), *eq = kv ? strchr(kv, '=') : NULL;
    if (!eq || eq == kv)
      continue;
    char *k = xasprintf("%.*s", (int)(eq - kv), kv);
    json_object_set_new(sb->env, k, json_string(eq + 1));
    free(k);
  }

  sbx_set_defaults(sb, ic.user, ic.workdir);
}

void sbx_create_refused(struct server *srv, const char *tenant, const struct hutch_err *err) {
  events_emit(srv, "quota.refused", tenant, NULL,
              json_pack("{s:s,s:s,s:s}", "action", "sandbox.create", "code",
                        err->code ? err->code : "quota", "message", err->msg));
}

int sbx_create(struct server *srv, const struct principal *p, const struct create_req *r,
               const struct create_ops *ops, void *arg, struct hutch_err *err) {
  if (network_check(r->network, r->secrets, err) < 0)
    return -1;
  if (r->env) {
    const char *k;
    json_t *v;
    json_object_foreach(r->env, k, v) {
      if (strchr(k, '='))
        return hutch_err_fail(err, HUTCH_ERR_INVALID, "invalid_argument",
                              "env: name '%s' contains '='", k);
    }
  }

  struct creating *cr = xcalloc(1, sizeof *cr);
  cr->stack.pin = -1;
  cr->tier = -1;
  cr->srv = srv;
  cr->p = *p;
  cr->r = *r;
  str_copy(cr->template, sizeof cr->template, r->template);
  cr->r.template = cr->template;
  json_incref(cr->r.env);
  json_incref(cr->r.metadata);
  json_incref(cr->r.volumes);
  json_incref(cr->r.network);
  json_incref(cr->r.secrets);
  cr->ops = ops;
  cr->arg = arg;
  cr->cfg.state_dir = srv->cfg.state_dir;

  if (resolve_template(cr, err) < 0)
    goto fail;

  /* The tier is the request's, else its snapshot's or template's, else
   * the server's default. */
  int tier = (int)srv->cfg.isolation;
  if (r->isolation >= 0)
    tier = r->isolation;
  else if (cr->tier >= 0)
    tier = cr->tier;
  if (server_tier(srv, (enum hutch_isolation)tier, &cr->cfg, err) < 0)
    goto fail;
  cr->cfg.rootfs = cr->stack.rootfs;
  cr->cfg.layers = (const char *const *)cr->stack.paths;
  cr->cfg.nlayers = cr->stack.n;

  if (volumes_prepare(srv, p, cr->r.volumes, &cr->vm, err) < 0)
    goto fail;
  cr->cfg.volumes = cr->vm.v;
  cr->cfg.nvolumes = cr->vm.n;

  if (start(cr, err) == 0)
    return 0;

fail:
  creating_free(cr);
  if (err->kind == HUTCH_ERR_QUOTA)
    sbx_create_refused(srv, p->tenant, err);
  return -1;
}
