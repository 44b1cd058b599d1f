/* Warm pools: sandboxes made ahead of demand, per template and limits, so
 * that a create is served in the time it takes to hand one over. A pool is
 * `--pool SPEC=N[:MAX]`: SPEC is a template (host, or a public one of the
 * store), then optional limits as a create
 * request gives them (`host,memory_mb=256,cpus=0.5`) and its tier
 * (`host,isolation=gvisor`; default: the server's --isolation). A create whose
 * template and limits (defaults filled in) equal a pool's takes one of its
 * sandboxes; the pool refills in the background.
 *
 * A pool follows demand between N and MAX (default 4 x N, at most
 * POOL_MAX): each create that finds it empty, or empties it, raises what
 * it keeps ready by one; after POOL_IDLE_MS without either, it halves
 * back towards N and the sandboxes above go.
 *
 * A sandbox is made off the loop (sbx_make_ahead), but it takes CPU a
 * request would want: refills wait behind every create in the lane, are
 * built at a lower priority (sbx_make.c), at most all lanes but one at a time
 * (so a create always finds a lane), and a refill waits for a quiet
 * moment: REFILL_QUIET_MS without a request (a client that just got a
 * sandbox usually sends its first exec at once), but never more than
 * REFILL_MAX_WAIT_MS. */
#include "core/life/pool.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"
#include "core/base/offload.h"
#include "core/base/server.h"
#include "core/disk/layers.h"
#include "core/sandbox/sbx.h"
#include "core/life/sbx_make.h"
#include "core/life/sbx_teardown.h"

#define POOL_MAX 256 /* sandboxes kept ready in one pool */
#define REFILL_RETRY_MS 1000
#define REFILL_QUIET_MS 20
#define REFILL_MAX_WAIT_MS 500
#define POOL_IDLE_MS 30000 /* without demand, a grown pool halves back */

struct pool {
  struct pool *next;
  char *spec;
  char template[64];        /* "host", or the id of a public template of the store */
  struct layer_stack stack; /* that template's layers, pinned while the pool lives */
  struct hutch_sandbox_config cfg;
  unsigned min, max; /* N and MAX of --pool SPEC=N[:MAX] */
  unsigned target;   /* kept ready now, from min to max */
  unsigned nready, making;
  uint64_t taken;     /* creates served from this pool */
  uint64_t demand_at; /* uv_now of the last take or miss */
  struct sbx *ready;
};

static int parse_limit(struct pool *p, const char *key, const char *value, struct hutch_err *err) {
  uint64_t v;
  if (strcmp(key, "isolation") == 0) {
    int i = hutch_config_isolation_parse(value);
    if (i < 0)
      return hutch_err_invalid(err, "--pool %s: isolation wants ns or gvisor, not '%s'", p->spec,
                               value);
    p->cfg.isolation = (enum hutch_isolation)i;
    return 0;
  }
  if (strcmp(key, "cpus") == 0) {
    if (!parse_milli(value, &p->cfg.cpu_milli))
      return hutch_err_invalid(err, "--pool %s: cpus wants a number, not '%s'", p->spec, value);
    return 0;
  }

  if (!parse_u64(value, &v))
    return hutch_err_invalid(err, "--pool %s: %s wants a whole number, not '%s'", p->spec, key,
                             value);
  if (strcmp(key, "memory_mb") == 0 && v < (1ull << 30))
    p->cfg.memory_bytes = v << 20;
  else if (strcmp(key, "disk_mb") == 0 && v < (1ull << 30))
    p->cfg.disk_bytes = v << 20;
  else if (strcmp(key, "pids") == 0)
    p->cfg.pids = v;
  else
    return hutch_err_invalid(
        err, "--pool %s: no limit '%s' (memory_mb, cpus, pids, disk_mb, isolation)", p->spec, key);
  return 0;
}

static struct pool *parse_pool(struct server *srv, const char *arg, struct hutch_err *err) {
  struct pool *p = xcalloc(1, sizeof *p);
  p->stack.pin = -1;
  p->spec = xstrdup(arg);
  p->cfg.state_dir = srv->cfg.state_dir;
  p->cfg.isolation = srv->cfg.isolation;

  /* SPEC=N[:MAX]: its size, and how far it may grow (4 N by default). */
  char *eq = strrchr(p->spec, '='), *colon = eq ? strchr(eq, ':') : NULL;
  uint64_t n, max = 0;
  if (colon)
    *colon = '\0';
  bool ok = eq && parse_u64(eq + 1, &n) && n <= POOL_MAX;
  if (ok && colon)
    ok = parse_u64(colon + 1, &max) && max >= n && max <= POOL_MAX;
  if (!ok) {
    hutch_err_invalid(err, "--pool wants SPEC=N[:MAX] with N <= MAX <= %d, not '%s'", POOL_MAX,
                      arg);
    goto fail;
  }
  *eq = '\0';
  p->min = p->target = (unsigned)n;
  if (colon)
    p->max = (unsigned)max;
  else
    p->max = n * 4 < POOL_MAX ? (unsigned)n * 4 : POOL_MAX;

  /* SPEC is TEMPLATE[,LIMIT=VALUE]... */
  char *save = NULL, *copy = xstrdup(p->spec);
  char *tok = strtok_r(copy, ",", &save);
  str_copy(p->template, sizeof p->template, tok ? tok : "");
  int r = 0;
  while (r == 0 && (tok = strtok_r(NULL, ",", &save))) {
    char *kv = strchr(tok, '=');
    if (!kv) {
      r = hutch_err_invalid(err, "--pool %s: '%s' is not LIMIT=VALUE", p->spec, tok);
    } else {
      *kv = '\0';
      r = parse_limit(p, tok, kv + 1, err);
    }
  }
  free(copy);
  if (r < 0)
    goto fail;

  /* A pool is of the host or of a public template: every tenant may
   * take from it. */
  if (strcmp(p->template, "host") != 0) {
    json_t *rec = layers_find_template(srv, "", p->template, err);
    const char *owner = json_string_value(json_object_get(rec, "owner"));
    if (!rec || (owner && owner[0])) {
      json_decref(rec);
      hutch_err_fail(err, HUTCH_ERR_INVALID, "invalid_argument",
                     "--pool %s: no public template '%s' (hutch template ls)", p->spec,
                     p->template);
      goto fail;
    }

    json_t *layers =
        json_pack("[s+]", LAYERS_TEMPLATE, json_string_value(json_object_get(rec, "id")));
    str_copy(p->template, sizeof p->template, json_string_value(json_object_get(rec, "id")));
    json_decref(rec);
    int r2 = layers_stack(srv, layers, &p->stack, err);
    json_decref(layers);
    if (r2 < 0) {
      hutch_err_wrap(err, "--pool %s", p->spec);
      goto fail;
    }
    p->cfg.rootfs = p->stack.rootfs;
    p->cfg.layers = (const char *const *)p->stack.paths;
    p->cfg.nlayers = p->stack.n;
  }

  r = server_tier(srv, p->cfg.isolation, &p->cfg, err);
  if (r >= 0)
    r = hutch_config_check(&p->cfg, err);
  if (r < 0) {
    hutch_err_wrap(err, "--pool %s", p->spec);
    goto fail;
  }
  return p;

fail:
  layers_stack_free(&p->stack);
  free(p->spec);
  free(p);
  return NULL;
}

static void refill(uv_timer_t *t);

static void schedule(struct server *srv, uint64_t delay_ms) {
  if (srv->stopping || uv_is_active((uv_handle_t *)&srv->refill))
    return;
  srv->refill_due = uv_now(srv->loop) + REFILL_MAX_WAIT_MS;
  uv_timer_start(&srv->refill, refill, delay_ms, 0);
}

void pool_defer(struct server *srv) {
  if (srv->stopping || !uv_is_active((uv_handle_t *)&srv->refill))
    return;
  uint64_t now = uv_now(srv->loop);
  if (now + REFILL_QUIET_MS <= srv->refill_due)
    uv_timer_start(&srv->refill, refill, REFILL_QUIET_MS, 0);
}

static void pool_made(struct server *srv, struct sbx *sb, const struct hutch_err *err, void *arg) {
  struct pool *p = arg;
  p->making--;
  srv->refilling--;

  if (!sb) {
    if (!srv->stopping) {
      fprintf(stderr, "hutch serve: pool %s: %s (retrying)\n", p->spec, err->msg);
      schedule(srv, REFILL_RETRY_MS);
    }
    return;
  }

  sb->pool = p;
  sb->next = p->ready;
  p->ready = sb;
  p->nready++;
  schedule(srv, REFILL_QUIET_MS);
}

/* Make sandboxes (off the loop) for the pools short of their target,
 * counting those being made, all lanes but one at a time. */
static void refill(uv_timer_t *t) {
  struct server *srv = t->data;
  unsigned lanes = srv->offload[OFFLOAD_CREATE].max;
  unsigned cap = lanes > 1 ? lanes - 1 : 1;
  for (struct pool *p = srv->pools; p; p = p->next)
    while (srv->refilling < cap && p->nready + p->making < p->target) {
      p->making++;
      srv->refilling++;
      sbx_make_ahead(srv, &p->cfg, p->template, pool_made, p);
    }
}

/* Demand for p: a take, or a create that found it empty. */
static void demand(struct server *srv, struct pool *p, bool grow) {
  p->demand_at = uv_now(srv->loop);
  if (grow && p->target < p->max)
    p->target++;
  schedule(srv, REFILL_QUIET_MS);
}

void pool_shrink(struct server *srv) {
  uint64_t now = uv_now(srv->loop);
  for (struct pool *p = srv->pools; p; p = p->next) {
    if (p->target <= p->min || now - p->demand_at < POOL_IDLE_MS)
      continue;
    p->target = p->target / 2 > p->min ? p->target / 2 : p->min;
    p->demand_at = now;
    while (p->nready > p->target)
      sbx_destroy(p->ready);
  }
}

int pool_configure(struct server *srv, struct hutch_err *err) {
  const char *dflt[] = {"host=2", NULL};
  char *const *specs = srv->cfg.pool_specs ? srv->cfg.pool_specs : (char *const *)dflt;
  struct pool **tail = &srv->pools;
  for (size_t i = 0; specs[i]; i++) {
    struct pool *p = parse_pool(srv, specs[i], err);
    if (!p)
      return -1;
    *tail = p;
    tail = &p->next;
  }

  uv_timer_init(srv->loop, &srv->refill);
  srv->refill.data = srv;
  schedule(srv, 0);
  return 0;
}

struct sbx *pool_take(struct server *srv, const struct hutch_sandbox_config *cfg,
                      const char *template) {
  struct pool *empty = NULL;
  for (struct pool *p = srv->pools; p; p = p->next) {
    const struct hutch_sandbox_config *pc = &p->cfg;
    if (strcmp(p->template, template) != 0 || pc->memory_bytes != cfg->memory_bytes ||
        pc->disk_bytes != cfg->disk_bytes || pc->pids != cfg->pids ||
        pc->cpu_milli != cfg->cpu_milli || pc->isolation != cfg->isolation)
      continue;
    if (!p->ready) {
      empty = empty ? empty : p;
      continue;
    }

    struct sbx *sb = p->ready;
    pool_unlink(sb);
    p->taken++;
    demand(srv, p, !p->ready);
    return sb;
  }

  if (empty)
    demand(srv, empty, true);
  return NULL;
}

void pool_unlink(struct sbx *sb) {
  struct pool *p = sb->pool;
  for (struct sbx **q = &p->ready; *q; q = &(*q)->next)
    if (*q == sb) {
      *q = sb->next;
      break;
    }
  p->nready--;
  sb->pool = NULL;
  sb->next = NULL;
}

void pool_destroy_all(struct server *srv) {
  uv_close((uv_handle_t *)&srv->refill, NULL);
  for (struct pool *p = srv->pools; p; p = p->next)
    while (p->ready)
      sbx_destroy(p->ready);
}

void pool_free(struct server *srv) {
  while (srv->pools) {
    struct pool *p = srv->pools;
    srv->pools = p->next;
    layers_stack_free(&p->stack);
    free(p->spec);
    free(p);
  }
}

void pool_metrics(FILE *f, const struct server *srv) {
  fprintf(f, "# HELP hutch_pool_ready Sandboxes ready in each warm pool.\n"
             "# TYPE hutch_pool_ready gauge\n");
  for (const struct pool *p = srv->pools; p; p = p->next)
    fprintf(f, "hutch_pool_ready{pool=\"%s\"} %u\n", p->spec, p->nready);
  fprintf(f, "# HELP hutch_pool_target Sandboxes each warm pool keeps ready now (N to MAX).\n"
             "# TYPE hutch_pool_target gauge\n");
  for (const struct pool *p = srv->pools; p; p = p->next)
    fprintf(f, "hutch_pool_target{pool=\"%s\"} %u\n", p->spec, p->target);
  fprintf(f, "# HELP hutch_pool_taken_total Creates served from each warm pool.\n"
             "# TYPE hutch_pool_taken_total counter\n");
  for (const struct pool *p = srv->pools; p; p = p->next)
    fprintf(f, "hutch_pool_taken_total{pool=\"%s\"} %llu\n", p->spec, (unsigned long long)p->taken);
}
