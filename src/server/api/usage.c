/* What sandboxes and tenants use (core/usage.c), as the native API shows it:
 *
 *   GET /v1/sandboxes/{id}/metrics[?start=&end=] → {id, state, current, samples}
 *   GET /v1/sandboxes/metrics                    → {sandboxes: {id: newest sample}}
 *   GET /v1/usage[?tenant=]                      → a tenant's use; another's
 *                                                  for the admin only */
#include "api/usage.h"

#include <stdlib.h>
#include <string.h>

#include "util.h"
#include "api/lifecycle.h"
#include "core/sandbox/sbx.h"
#include "core/sandbox/sbx_list.h"
#include "core/tenancy/usage.h"
#include "http/errors.h"
#include "http/http.h"
#include "http/request.h"

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
int api_usage_range(struct http_conn *c, int64_t *start_ms, int64_t *end_ms) {
  const char *names[] = {"start", "end"};
  int64_t *outs[] = {start_ms, end_ms};
  *start_ms = 0;
  *end_ms = INT64_MAX;
  for (int i = 0; i < 2; i++) {
    char *v = http_query(&c->req, names[i]);
    uint64_t n;
    if (v && (!parse_u64(v, &n) || n > 1ull << 40)) {
      http_error(c, HUTCH_ERR_INVALID, "invalid_argument",
                 "%s: seconds since the epoch, not '%.32s'", names[i], v);
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
  struct sbx *sb = api_sbx_lookup(c, p);
  int64_t start, end;
  if (!sb || api_usage_range(c, &start, &end) < 0)
    return;
  json_t *a = json_array();
  usage_points(sb, start, end, append_point, a);
  size_t n = json_array_size(a);
  json_t *current = n ? json_incref(json_array_get(a, n - 1)) : json_null();
  http_json(c, 200,
            json_pack("{s:s,s:s,s:o,s:o}", "id", sb->id, "state", sb->paused ? "paused" : "running",
                      "current", current, "samples", a));
}

/* GET /v1/sandboxes/metrics: the newest kept sample (one every 2 s) of
 * each of the caller's running sandboxes in one answer, for a list that
 * shows them all (the console). Nothing is measured for it: hundreds of
 * sandboxes cost their JSON, not hundreds of cgroup reads. */
void api_sandboxes_metrics_all(struct http_conn *c, const struct principal *p) {
  struct sbx_filter f = {.running = true};
  size_t n;
  struct sbx **all = sbx_list(c->srv, p, &f, &n);
  json_t *out = json_object();
  for (size_t i = 0; i < n; i++) {
    struct usage_point pt;
    if (usage_last(all[i], &pt))
      json_object_set_new(out, all[i]->id, point_json(&pt));
  }
  free(all);
  http_json(c, 200, json_pack("{s:o}", "sandboxes", out));
}

/* GET /v1/usage[?tenant=]: what a tenant's sandboxes used while running,
 * sandboxes that ended included. Another tenant's only for the admin. */
void api_usage(struct http_conn *c, const struct principal *p) {
  struct hutch_err err = {0};
  struct usage_total u;
  char *who = http_query(&c->req, "tenant");
  if (usage_of(c->srv, p, who, &u, &err) < 0)
    http_fail(c, &err);
  else
    http_json(c, 200,
              json_pack("{s:s,s:f,s:f,s:f,s:i,s:i}", "tenant", u.tenant, "cpu_seconds",
                        u.used.cpu_s, "memory_gb_seconds", u.used.memory_gb_s, "sandbox_seconds",
                        u.used.sandbox_s, "running", u.running, "paused", u.paused));
  free(who);
}
