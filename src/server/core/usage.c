/* What sandboxes use, over time: every sandbox is sampled every
 * SAMPLE_EVERY_MS (CPU time, memory, disk, processes from its cgroup and
 * its storage), the last SAMPLES_KEPT samples are its metrics, and what it
 * used while running is charged to its tenant (CPU-seconds, memory
 * GB-seconds and sandbox-seconds, in the store). Paused time is not
 * charged. */
#include "core/usage.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util.h"
#include "api/api.h"
#include "api/handlers.h"
#include "core/sbx.h"
#include "state/store.h"

#define SAMPLE_EVERY_MS 2000
#define SAMPLES_KEPT 300 /* ten minutes */

struct sample {
  int64_t ms;
  double cpu_pct;
  uint64_t cpu_ns, memory, cache, disk, disk_total, pids;
};

struct samples {
  struct sample ring[SAMPLES_KEPT];
  unsigned head, n; /* the next slot written; how many are held */
  struct usage_delta charged; /* since the store last heard */
};

/* The CPUs a sandbox may use: its limit, or the host's. */
static double cpus_of(const struct sbx *sb) {
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return sb->cpu_milli ? (double)sb->cpu_milli / 1000 : (double)(n > 0 ? n : 1);
}

static const struct sample *last_of(const struct samples *s) {
  return s->n ? &s->ring[(s->head + SAMPLES_KEPT - 1) % SAMPLES_KEPT] : NULL;
}

/* A reading now, its CPU share measured since prev. */
static int read_now(const struct sbx *sb, const struct sample *prev, struct sample *out) {
  struct hutch_sandbox_usage u;
  struct hutch_err err = {0};
  if (!sb->hs || hutch_sandbox_usage(sb->hs, &u, &err) < 0)
    return -1;
  *out = (struct sample){.ms = wall_ms(), .cpu_ns = u.cg.cpu_ns, .memory = u.cg.memory_bytes,
                         .cache = u.cg.memory_cache, .disk = u.disk_used,
                         .disk_total = u.disk_total, .pids = u.cg.pids};
  if (prev && out->ms > prev->ms && out->cpu_ns >= prev->cpu_ns)
    out->cpu_pct = (double)(out->cpu_ns - prev->cpu_ns) / ((double)(out->ms - prev->ms) * 1e6) /
                   cpus_of(sb) * 100;
  return 0;
}

void usage_sample(struct sbx *sb) {
  if (!sb->samples)
    sb->samples = xcalloc(1, sizeof *sb->samples);
  struct samples *s = sb->samples;
  const struct sample *prev = last_of(s);
  struct sample now;
  if (read_now(sb, prev, &now) < 0)
    return;
  /* Charged: the time since the last sample, if it ran all of it. */
  if (prev && !sb->paused && now.ms > prev->ms) {
    double dt = (double)(now.ms - prev->ms) / 1000;
    s->charged.cpu_s += (double)(now.cpu_ns - prev->cpu_ns) / 1e9;
    s->charged.memory_gb_s += (double)now.memory / (1 << 30) * dt;
    s->charged.sandbox_s += dt;
  }
  s->ring[s->head] = now;
  s->head = (s->head + 1) % SAMPLES_KEPT;
  if (s->n < SAMPLES_KEPT)
    s->n++;
}

static void charge(struct sbx *sb) {
  struct hutch_err err = {0};
  struct samples *s = sb->samples;
  if (!s || (!s->charged.cpu_s && !s->charged.sandbox_s))
    return;
  if (store_usage_add(sb->srv->store, sb->tenant, &s->charged, &err) < 0)
    fprintf(stderr, "hutch serve: %s\n", err.msg);
  memset(&s->charged, 0, sizeof s->charged);
}

void usage_sample_all(struct server *srv) {
  int64_t now = wall_ms();
  for (struct sbx *sb = srv->sandboxes; sb; sb = sb->next) {
    const struct sample *last = sb->samples ? last_of(sb->samples) : NULL;
    if (!last || now - last->ms >= SAMPLE_EVERY_MS - 50) {
      usage_sample(sb);
      charge(sb);
    }
  }
}

void usage_final(struct sbx *sb) {
  usage_sample(sb);
  charge(sb);
}

void usage_free(struct sbx *sb) {
  free(sb->samples);
  sb->samples = NULL;
}

static struct usage_point point_of(const struct sbx *sb, const struct sample *s) {
  return (struct usage_point){
      .ms = s->ms, .cpu_pct = s->cpu_pct, .cpus = (unsigned)(cpus_of(sb) + 0.999),
      .memory_used = s->memory, .memory_cache = s->cache, .memory_limit = sb->memory_mb << 20,
      .disk_used = s->disk, .disk_limit = s->disk_total ? s->disk_total : sb->disk_mb << 20,
      .pids = s->pids};
}

void usage_points(struct sbx *sb, int64_t start_ms, int64_t end_ms,
                  void (*fn)(const struct usage_point *pt, void *arg), void *arg) {
  if (!sb->samples)
    usage_sample(sb);
  const struct samples *s = sb->samples;
  for (unsigned i = 0; i < s->n; i++) {
    const struct sample *x = &s->ring[(s->head + SAMPLES_KEPT - s->n + i) % SAMPLES_KEPT];
    if (x->ms >= start_ms && x->ms <= end_ms) {
      struct usage_point pt = point_of(sb, x);
      fn(&pt, arg);
    }
  }
  /* And now, measured since the last sample (not kept). */
  struct sample now;
  if (read_now(sb, last_of(s), &now) == 0 && now.ms >= start_ms && now.ms <= end_ms) {
    if (sb->paused)
      now.cpu_pct = 0;
    struct usage_point pt = point_of(sb, &now);
    fn(&pt, arg);
  }
}

static json_t *point_json(const struct usage_point *pt) {
  char t[32];
  iso8601(pt->ms, t);
  return json_pack("{s:s,s:f,s:i,s:I,s:I,s:I,s:I,s:I,s:I}", "time", t, "cpu_pct", pt->cpu_pct,
                   "cpus", (int)pt->cpus, "memory_used_bytes", (json_int_t)pt->memory_used,
                   "memory_cache_bytes", (json_int_t)pt->memory_cache, "memory_limit_bytes",
                   (json_int_t)pt->memory_limit, "disk_used_bytes", (json_int_t)pt->disk_used,
                   "disk_limit_bytes", (json_int_t)pt->disk_limit, "pids", (json_int_t)pt->pids);
}

static void append_point(const struct usage_point *pt, void *arg) {
  json_array_append_new(arg, point_json(pt));
}

/* ?start=&end=: seconds since the epoch, as E2B's metrics take them. */
int usage_range(struct http_conn *c, int64_t *start_ms, int64_t *end_ms) {
  const char *names[] = {"start", "end"};
  int64_t *outs[] = {start_ms, end_ms};
  *start_ms = 0;
  *end_ms = INT64_MAX;
  for (int i = 0; i < 2; i++) {
    char *v = http_query(&c->req, names[i]);
    uint64_t n;
    if (v && (!parse_u64(v, &n) || n > 1ull << 40)) {
      http_error(c, HUTCH_ERR_INVALID, "invalid_argument", "%s: seconds since the epoch, not '%.32s'",
                 names[i], v);
      free(v);
      return -1;
    }
    if (v)
      *outs[i] = (int64_t)n * 1000 + (i ? 999 : 0);
    free(v);
  }
  return 0;
}

void api_sandboxes_metrics(struct http_conn *c, const struct principal *p) {
  struct sbx *sb = sbx_lookup(c, p);
  int64_t start, end;
  if (!sb || usage_range(c, &start, &end) < 0)
    return;
  json_t *a = json_array();
  usage_points(sb, start, end, append_point, a);
  size_t n = json_array_size(a);
  json_t *current = n ? json_incref(json_array_get(a, n - 1)) : json_null();
  http_json(c, 200, json_pack("{s:s,s:s,s:o,s:o}", "id", sb->id, "state",
                              sb->paused ? "paused" : "running", "current", current, "samples", a));
}

/* GET /v1/usage[?tenant=]: what a tenant's sandboxes used while running,
 * sandboxes that ended included. Another tenant's only for the admin. */
void api_usage(struct http_conn *c, const struct principal *p) {
  struct hutch_err err = {0};
  char *who = http_query(&c->req, "tenant");
  if (who && !p->admin && strcmp(who, p->tenant) != 0) {
    http_error(c, HUTCH_ERR_FORBIDDEN, "forbidden", "only the admin key may read another tenant's usage");
    free(who);
    return;
  }
  const char *tenant = who ? who : p->tenant;
  struct usage_delta u = {0};
  if (store_usage_get(c->srv->store, tenant, &u, &err) < 0) {
    http_error(c, HUTCH_ERR_SYSTEM, "internal", "%s", err.msg);
    free(who);
    return;
  }
  unsigned running = 0, paused = 0;
  for (struct sbx *sb = c->srv->sandboxes; sb; sb = sb->next) {
    if (strcmp(sb->tenant, tenant) != 0)
      continue;
    sb->paused ? paused++ : running++;
    if (sb->samples) {
      u.cpu_s += sb->samples->charged.cpu_s;
      u.memory_gb_s += sb->samples->charged.memory_gb_s;
      u.sandbox_s += sb->samples->charged.sandbox_s;
    }
  }
  http_json(c, 200,
            json_pack("{s:s,s:f,s:f,s:f,s:i,s:i}", "tenant", tenant, "cpu_seconds", u.cpu_s,
                      "memory_gb_seconds", u.memory_gb_s, "sandbox_seconds", u.sandbox_s,
                      "running", running, "paused", paused));
  free(who);
}
