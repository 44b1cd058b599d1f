/* E2B's lists, a page at a time (its SDKs' paginators):
 *
 *   GET /sandboxes, /v2/sandboxes   metadata, state, startedAfter, template,
 *                                   order, limit, nextToken
 *   GET /snapshots                  sandboxID, name, limit, nextToken
 *
 * A page holds at most limit items (1–100, 100 by default); when more
 * follow, X-Next-Token names the last one given, and the next page starts
 * after it in the same order (an item gone meanwhile moves nothing). */
#include "e2b/lists.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util.h"
#include "core/life/sbx_create.h"
#include "core/life/snapshots.h"
#include "core/sandbox/sbx.h"
#include "e2b/control.h"
#include "http/body.h"
#include "http/errors.h"
#include "http/http.h"
#include "http/query.h"
#include "http/request.h"
#include "core/sandbox/sbx_list.h"

#define LIST_DEFAULT 100
#define LIST_MAX 100

/* E2B's metadata filter: the SDK sends the pairs as a query string, each
 * key and value escaped, the whole escaped again (decoded once already by
 * http_query_next). All pairs must match. NULL for a malformed one. */
static json_t *metadata_filter(const char *q) {
  char *pairs = http_unescape(q);
  json_t *want = pairs ? json_object() : NULL;
  for (const char *s = pairs; want && s && *s;) {
    char *key = NULL, *value = NULL;
    s = http_query_next(s, &key, &value);
    if (key && value) {
      json_object_set_new(want, key, http_json_text(value));
    } else {
      json_decref(want);
      want = NULL;
    }
    free(key);
    free(value);
  }
  free(pairs);
  return want;
}

bool e2b_parse_time(const char *s, int64_t *ms) {
  struct tm tm = {0};
  const char *r = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);
  if (!r)
    return false;
  int64_t frac = 0;
  if (*r == '.') {
    r++;
    if (!isdigit((unsigned char)*r))
      return false;
    for (int mult = 100; isdigit((unsigned char)*r); r++, mult /= 10)
      frac += (*r - '0') * mult;
  }

  int64_t off = 0;
  int hh, mm, n = 0;
  if (*r == 'Z' || *r == 'z') {
    r++;
  } else if ((*r == '+' || *r == '-') && sscanf(r + 1, "%2d:%2d%n", &hh, &mm, &n) == 2 && n == 5 &&
             hh < 24 && mm < 60) {
    off = (*r == '-' ? -1 : 1) * (int64_t)(hh * 3600 + mm * 60);
    r += 1 + n;
  } else {
    return false;
  }

  *ms = ((int64_t)timegm(&tm) - off) * 1000 + frac;
  return *r == '\0';
}

struct sandbox_query {
  struct sbx_filter f;
  uint64_t limit;
  bool asc, state_given;
  char *template;
  /* nextToken "<created ms>_<id>": the last sandbox of the page before. */
  bool after;
  int64_t after_ms;
  char *after_id;
};

/* One query pair into q; false when it is malformed. */
static bool sandbox_pair(struct sandbox_query *q, const char *key, char *value) {
  if (strcmp(key, "metadata") == 0) {
    json_decref(q->f.metadata);
    return (q->f.metadata = metadata_filter(value)) != NULL;
  }

  if (strcmp(key, "state") == 0) {
    /* "running,paused", or the key once per state */
    if (!q->state_given)
      q->f.running = q->f.paused = false;
    q->state_given = true;
    for (char *st = value, *save = NULL, *tok; (tok = strtok_r(st, ",", &save)); st = NULL) {
      q->f.running |= strcmp(tok, "running") == 0;
      q->f.paused |= strcmp(tok, "paused") == 0;
    }
    return true;
  }

  if (strcmp(key, "startedAfter") == 0)
    return e2b_parse_time(value, &q->f.started_after_ms);
  if (strcmp(key, "limit") == 0)
    return parse_u64(value, &q->limit) && q->limit >= 1 && q->limit <= LIST_MAX;
  if (strcmp(key, "order") == 0) {
    q->asc = strcmp(value, "asc") == 0;
    return q->asc || strcmp(value, "desc") == 0;
  }

  if (strcmp(key, "nextToken") == 0) {
    char *end, *us = strchr(value, '_');
    q->after = true;
    q->after_ms = strtoll(value, &end, 10);
    free(q->after_id);
    q->after_id = us ? xstrdup(us + 1) : NULL;
    return us && end == us && end != value;
  }

  if (strcmp(key, "template") == 0) {
    free(q->template);
    q->template = xstrdup(value);
  }
  return true;
}

/* Where sb stands against the token's sandbox, in sbx_list's order
 * (newer first, ties by id): < 0 before it, > 0 after it. */
static int token_cmp(const struct sandbox_query *q, const struct sbx *sb) {
  if (sb->created_ms != q->after_ms)
    return sb->created_ms > q->after_ms ? -1 : 1;
  return strcmp(sb->id, q->after_id);
}

/* Whether sb belongs on the page: past the token, if any, and of the
 * template asked for (host: the host template's count too). */
static bool on_page(const struct sandbox_query *q, const struct sbx *sb, bool host) {
  const char *t = q->template;
  if (q->after) {
    int r = token_cmp(q, sb);
    if (q->asc ? r >= 0 : r <= 0)
      return false;
  }
  if (t && strcmp(sb->template, t) != 0 && !(host && strcmp(sb->template, "host") == 0))
    return false;
  return true;
}

static void sandboxes_page(struct http_conn *c, const struct principal *p,
                           struct sandbox_query *q) {
  /* A template's sandboxes; E2B's names of its defaults are the host
   * template's too when the store has no template of that name. */
  const char *t = q->template;
  bool host = t && (strcmp(t, "base") == 0 || strncmp(t, "code-interpreter", 16) == 0);

  size_t n;
  struct sbx **all = sbx_list(c->srv, p, &q->f, &n);
  json_t *a = json_array();
  const struct sbx *last = NULL;
  bool more = false;
  for (size_t k = 0; k < n && !more; k++) {
    const struct sbx *sb = all[q->asc ? n - 1 - k : k];
    if (!on_page(q, sb, host))
      continue;
    more = json_array_size(a) == q->limit;
    if (!more) {
      json_array_append_new(a, e2b_listed_json(sb));
      last = sb;
    }
  }

  char extra[96] = "";
  if (more)
    snprintf(extra, sizeof extra, "X-Next-Token: %lld_%s\r\n", (long long)last->created_ms,
             last->id);
  free(all);
  size_t len;
  char *body = http_json_line(a, &len);
  http_respond(c, 200, "application/json", body, len, extra[0] ? extra : NULL);
  free(body);
}

void e2b_sandboxes_list(struct http_conn *c, const struct principal *p) {
  struct sandbox_query q = {.f = {.running = true, .paused = true}, .limit = LIST_DEFAULT};
  bool bad = false;
  for (const char *s = c->req.query; s && *s && !bad;) {
    char *key = NULL, *value = NULL;
    s = http_query_next(s, &key, &value);
    bad = !key || !value || !sandbox_pair(&q, key, value);
    free(key);
    free(value);
  }
  if (bad)
    http_error(c, HUTCH_ERR_INVALID, "invalid_argument",
               "bad query: limit is 1 to %d, order asc or desc, startedAfter an RFC 3339 time, "
               "metadata key=value pairs, nextToken as a page gave it, values URL-encoded",
               LIST_MAX);
  else
    sandboxes_page(c, p, &q);
  json_decref(q.f.metadata);
  free(q.template);
  free(q.after_id);
}

/* Whether a snapshot answers to name: its name or id, the name perhaps
 * after a namespace ("team/name"). */
static bool snapshot_named(json_t *v, const char *name) {
  const char *own = json_string_value(json_object_get(v, "name"));
  const char *slash = strrchr(name, '/');
  return strcmp(json_string_value(json_object_get(v, "id")), name) == 0 ||
         (*own && (strcmp(own, name) == 0 || (slash && strcmp(own, slash + 1) == 0)));
}

/* The snapshots come oldest first (ties by id); the token is the last
 * one's "<created_at>_<id>" (a time has no "_"; an id may). */
static bool snapshot_after(json_t *v, const char *token) {
  const char *us = strchr(token, '_');
  const char *at = json_string_value(json_object_get(v, "created_at"));
  size_t n = us ? (size_t)(us - token) : strlen(token);
  int r = strncmp(at, token, n);
  if (r == 0 && at[n])
    r = 1;
  return r > 0 || (r == 0 && us && strcmp(json_string_value(json_object_get(v, "id")), us + 1) > 0);
}

/* Whether snapshot v is listed: of the sandbox of, by the name, after the
 * token (each when given); never a fork's own. */
static bool snapshot_listed(json_t *v, const char *of, const char *name, const char *after) {
  if (json_is_true(json_object_get(v, "ephemeral")))
    return false;
  if (of && strcmp(of, json_string_value(json_object_get(v, "sandbox"))) != 0)
    return false;
  if (name && !snapshot_named(v, name))
    return false;
  if (after && !snapshot_after(v, after))
    return false;
  return true;
}

/* ?sandboxID= filters by the sandbox a snapshot was taken of, ?name= by
 * its name; forks' own snapshots are not listed. */
void e2b_snapshots_list(struct http_conn *c, const struct principal *p) {
  char *of = http_query(&c->req, "sandboxID"), *name = http_query(&c->req, "name");
  char *lim = http_query(&c->req, "limit"), *after = http_query(&c->req, "nextToken");
  uint64_t limit = LIST_DEFAULT;
  json_t *all = NULL, *out = json_array(), *v;
  if (lim && (!parse_u64(lim, &limit) || limit < 1 || limit > LIST_MAX)) {
    http_error(c, HUTCH_ERR_INVALID, "invalid_argument", "limit is 1 to %d", LIST_MAX);
    goto out;
  }
  all = snapshots_list(c->srv, p->tenant);
  if (!all) {
    http_error(c, HUTCH_ERR_SYSTEM, "internal", "the snapshots could not be read");
    goto out;
  }

  char extra[128] = "";
  size_t i;
  json_array_foreach(all, i, v) {
    if (!snapshot_listed(v, of, name, after))
      continue;
    if (json_array_size(out) == limit) {
      json_t *last = json_array_get(out, limit - 1);
      snprintf(extra, sizeof extra, "X-Next-Token: %s\r\n",
               json_string_value(json_object_get(last, "token")));
      break;
    }
    const char *own = json_string_value(json_object_get(v, "name"));
    json_t *tok = json_sprintf("%s_%s", json_string_value(json_object_get(v, "created_at")),
                               json_string_value(json_object_get(v, "id")));
    json_array_append_new(out, json_pack("{s:O,s:o,s:o}", "snapshotID", json_object_get(v, "id"),
                                         "names", *own ? json_pack("[s]", own) : json_array(),
                                         "token", tok));
  }

  json_array_foreach(out, i, v)
    json_object_del(v, "token");
  size_t len;
  char *body = http_json_line(json_incref(out), &len);
  http_respond(c, 200, "application/json", body, len, extra[0] ? extra : NULL);
  free(body);

out:
  json_decref(all);
  json_decref(out);
  free(of);
  free(name);
  free(lim);
  free(after);
}
