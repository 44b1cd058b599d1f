/* What E2B shows of a sandbox and a team while they run, each only to its
 * owner:
 *
 *   GET /sandboxes/{id}/metrics           its samples (start, end: seconds)
 *   GET /sandboxes/metrics?sandbox_ids=   the latest sample of each named
 *   GET /teams/{teamID}/metrics           the tenant's sandboxes, now
 *   GET /v2/sandboxes/{id}/logs           its log (cursor, limit, direction,
 *                                         level, search)
 *   GET /sandboxes/{id}/logs              the same, E2B's older shape
 *
 * A sandbox's log is its lines of the audit log (audit.c keeps the last
 * SBX_LOG_MAX while it lives): what its owner did to it, and what it did
 * (egress, ports, escapes). */
#include "e2b/observe.h"

#include <stdlib.h>
#include <string.h>

#include "util.h"
#include "core/sandbox/sbx.h"
#include "core/sandbox/tally.h"
#include "core/tenancy/usage.h"
#include "api/lifecycle.h"
#include "api/usage.h"
#include "e2b/lists.h"
#include "http/errors.h"
#include "http/http.h"
#include "http/request.h"

#define IDS_MAX 100       /* sandbox_ids of one metrics request */
#define LOGS_DEFAULT 1000 /* entries of one logs request */
#define SEARCH_MAX 256

static void e2b_point(const struct usage_point *pt, void *arg) {
  char t[32];
  iso8601(pt->ms, t);
  json_array_append_new(
      arg,
      json_pack("{s:s,s:I,s:i,s:f,s:I,s:I,s:I,s:I,s:I}", "timestamp", t, "timestampUnix",
                (json_int_t)(pt->ms / 1000), "cpuCount", (int)pt->cpus, "cpuUsedPct", pt->cpu_pct,
                "memUsed", (json_int_t)pt->memory_used, "memTotal", (json_int_t)pt->memory_limit,
                "memCache", (json_int_t)pt->memory_cache, "diskUsed", (json_int_t)pt->disk_used,
                "diskTotal", (json_int_t)pt->disk_limit));
}

void e2b_sandboxes_metrics(struct http_conn *c, const struct principal *p) {
  struct sbx *sb = api_sbx_lookup(c, p);
  int64_t start, end;
  if (!sb || api_usage_range(c, &start, &end) < 0)
    return;
  json_t *a = json_array();
  usage_points(sb, start, end, e2b_point, a);
  http_json(c, 200, a);
}

/* ?sandbox_ids=a,b: {sandboxes: {id: its latest sample}}; ids that are
 * not the caller's sandboxes are left out, as if they were not there. */
void e2b_sandboxes_metrics_many(struct http_conn *c, const struct principal *p) {
  char *ids = http_query(&c->req, "sandbox_ids");
  json_t *out = json_object();
  size_t n = 0;
  for (char *s = ids, *save = NULL, *id; ids && (id = strtok_r(s, ",", &save)); s = NULL) {
    struct sbx *sb = ++n <= IDS_MAX ? sbx_find_own(c->srv, p, id) : NULL;
    json_t *a = json_array();
    if (sb)
      usage_points(sb, wall_ms(), INT64_MAX, e2b_point, a);
    if (sb && json_array_size(a))
      json_object_set(out, sb->id, json_array_get(a, json_array_size(a) - 1));
    json_decref(a);
  }
  free(ids);
  if (!n || n > IDS_MAX) {
    json_decref(out);
    http_error(c, HUTCH_ERR_INVALID, "invalid_argument",
               "sandbox_ids: 1 to %d sandbox ids, comma-separated", IDS_MAX);
    return;
  }
  http_json(c, 200, json_pack("{s:o}", "sandboxes", out));
}

/* One point, taken now (hutch keeps no history of a team's sandboxes):
 * how many it has, and how many of them were started in the last minute,
 * per second. Only the tenant's own, unless the admin asks. */
void e2b_team_metrics(struct http_conn *c, const struct principal *p) {
  struct hutch_err err = {0};
  struct usage_total u;
  int64_t start, end, now = wall_ms();
  if (api_usage_range(c, &start, &end) < 0)
    return;
  if (usage_of(c->srv, p, c->req.params[0], &u, &err) < 0) {
    http_fail(c, &err);
    return;
  }
  unsigned started = 0;
  for (struct sbx *sb = tally_sandboxes(c->srv, u.tenant); sb; sb = sb->tenant_next)
    started += !sb->pool && sb->created_ms > now - 60000;
  json_t *a = json_array();
  char t[32];
  iso8601(now, t);
  if (start <= now && now <= end)
    json_array_append_new(a, json_pack("{s:s,s:I,s:i,s:f}", "timestamp", t, "timestampUnix",
                                       (json_int_t)(now / 1000), "concurrentSandboxes",
                                       (int)(u.running + u.paused), "sandboxStartRate",
                                       started / 60.0));
  http_json(c, 200, a);
}

/* ---- logs ---- */

enum { DEBUG, INFO, WARN, ERROR };
static const char *const levels[] = {"debug", "info", "warn", "error", NULL};

/* An audit line's level: by the status it ended with, else info. */
static int line_level(json_t *line) {
  json_int_t status = json_integer_value(json_object_get(line, "status"));
  if (status >= 500)
    return ERROR;
  if (status >= 400)
    return WARN;
  return INFO;
}

/* An audit line as E2B's SandboxLogEntry: its action and how it ended as
 * the message, every field as a string. */
static json_t *log_entry(json_t *line) {
  json_t *fields = json_object(), *v;
  const char *key;
  json_object_foreach(line, key, v) {
    if (strcmp(key, "time") == 0 || json_is_null(v))
      continue;
    char *text = NULL;
    if (json_is_real(v))
      text = xasprintf("%.3f", json_real_value(v));
    else if (!json_is_string(v))
      text = json_dumps(v, JSON_ENCODE_ANY);
    json_object_set_new(fields, key, text ? json_string(text) : json_incref(v));
    free(text);
  }
  return fields;
}

struct logs_query {
  int64_t cursor;
  uint64_t limit;
  bool backward;
  int level;
  char *search;
};

static bool logs_query(struct http_conn *c, struct logs_query *q, const char *cursor_name) {
  char *cur = http_query(&c->req, cursor_name), *lim = http_query(&c->req, "limit");
  char *dir = http_query(&c->req, "direction"), *lev = http_query(&c->req, "level");
  uint64_t u = 0;

  bool ok = !cur || parse_u64(cur, &u);
  if (ok && lim)
    ok = parse_u64(lim, &q->limit) && q->limit <= LOGS_DEFAULT;
  if (ok && dir && strcmp(dir, "forward") != 0) {
    q->backward = strcmp(dir, "backward") == 0;
    ok = q->backward;
  }
  if (cur)
    q->cursor = (int64_t)u;
  else
    q->cursor = q->backward ? INT64_MAX : 0;
  for (q->level = 0; lev && levels[q->level] && strcmp(levels[q->level], lev) != 0; q->level++)
    ;
  if (lev && !levels[q->level])
    ok = false;
  if (q->search && strlen(q->search) > SEARCH_MAX)
    ok = false;

  free(cur);
  free(lim);
  free(dir);
  free(lev);
  if (!ok)
    http_error(c, HUTCH_ERR_INVALID, "invalid_argument",
               "bad query: %s and limit (0 to %d) are numbers, direction forward or backward, "
               "level debug, info, warn or error, search at most %d bytes",
               cursor_name, LOGS_DEFAULT, SEARCH_MAX);
  return ok;
}

/* A log entry's message: its action, and its status, error and reason
 * when it has them (malloc'd). */
static char *log_message(json_t *fields) {
  const char *action = json_string_value(json_object_get(fields, "action"));
  const char *status = json_string_value(json_object_get(fields, "status"));
  const char *error = json_string_value(json_object_get(fields, "error"));
  const char *reason = json_string_value(json_object_get(fields, "reason"));
  return xasprintf("%s%s%s%s%s%s%s", action ? action : "event", status ? " " : "",
                   status ? status : "", error ? " " : "", error ? error : "", reason ? ": " : "",
                   reason ? reason : "");
}

/* The sandbox's log entries that pass q, in q's direction. */
static json_t *logs_of(const struct sbx *sb, const struct logs_query *q) {
  json_t *out = json_array();
  size_t n = json_array_size(sb->log);
  for (size_t k = 0; k < n && json_array_size(out) < q->limit; k++) {
    json_t *line = json_array_get(sb->log, q->backward ? n - 1 - k : k);
    const char *t = json_string_value(json_object_get(line, "time"));
    int64_t ms = 0;
    if (!t || !e2b_parse_time(t, &ms))
      continue;
    if (q->backward ? ms > q->cursor : ms < q->cursor)
      continue;
    if (line_level(line) < q->level)
      continue;

    json_t *fields = log_entry(line);
    char *msg = log_message(fields);
    if (!q->search || strstr(msg, q->search))
      json_array_append_new(out,
                            json_pack("{s:s,s:s,s:s,s:o}", "timestamp", t, "level",
                                      levels[line_level(line)], "message", msg, "fields", fields));
    else
      json_decref(fields);
    free(msg);
  }
  return out;
}

void e2b_sandboxes_logs(struct http_conn *c, const struct principal *p) {
  struct logs_query q = {.limit = LOGS_DEFAULT, .search = http_query(&c->req, "search")};
  struct sbx *sb = api_sbx_lookup(c, p);
  if (sb && logs_query(c, &q, "cursor"))
    http_json(c, 200, json_pack("{s:o}", "logs", logs_of(sb, &q)));
  free(q.search);
}

/* An entry as E2B's older SandboxLog line: a JSON object's text, as
 * E2B's own sandboxes' log lines are ({"level", "logger", "message", and
 * the fields}), which its CLI (`e2b sandbox logs`) parses (malloc'd). */
static char *log_line(json_t *entry) {
  json_t *o = json_deep_copy(json_object_get(entry, "fields"));
  json_object_set(o, "level", json_object_get(entry, "level"));
  json_object_set_new(o, "logger", json_string("hutch"));
  json_object_set(o, "message", json_object_get(entry, "message"));
  char *s = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
  json_decref(o);
  return s;
}

/* E2B's older form: ?start (ms), limit; {logs: [{timestamp, line}],
 * logEntries}. */
void e2b_sandboxes_logs_v1(struct http_conn *c, const struct principal *p) {
  struct logs_query q = {.limit = LOGS_DEFAULT};
  struct sbx *sb = api_sbx_lookup(c, p);
  if (!sb || !logs_query(c, &q, "start"))
    return;
  json_t *entries = logs_of(sb, &q), *lines = json_array(), *v;
  size_t i;
  json_array_foreach(entries, i, v) {
    char *line = log_line(v);
    json_array_append_new(lines, json_pack("{s:O,s:s}", "timestamp",
                                           json_object_get(v, "timestamp"), "line", line));
    free(line);
  }
  http_json(c, 200, json_pack("{s:o,s:o}", "logs", lines, "logEntries", entries));
}
