/* E2B's secrets (spec/openapi.yml, /secrets): a tenant's named values,
 * kept sealed in the state store, never answered; a sandbox's network
 * rules name them as ${e2b.secrets.NAME} in a header's value, and the
 * egress proxy adds that header with the value (e2b/network.c resolves it
 * when the rules are set; docs/e2b.md).
 *
 *   GET    /secrets              [Secret], limit and nextToken (X-Next-Token)
 *   POST   /secrets              {name, value, metadata} → 201 Secret
 *   GET    /secrets/{id|name}    Secret
 *   POST   /secrets/{id|name}    {value, metadata} → a new version
 *   DELETE /secrets/{id|name}    204 */
#include "e2b/secrets.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"
#include "core/base/server.h"
#include "http/body.h"
#include "http/errors.h"
#include "http/http.h"
#include "http/request.h"
#include "state/store.h"
#include "state/store_secrets.h"

#define SECRET_NAME_MAX 128
#define SECRET_VALUE_MAX (8u << 10) /* as a header hutch adds (netpolicy.c) */
#define SECRETS_MAX 1000            /* a tenant's */
#define SECRET_META_MAX 32

/* What a lookup found: the one selected (id or canonical name), or all. */
struct found {
  const char *want;
  json_t *list; /* every secret's JSON, in order (want NULL) */
  json_t *one;  /* the selected one's JSON */
  char *value;  /* the selected one's value */
  char id[40];  /* its id */
  int64_t version, created_ms;
  size_t n;
};

static json_t *secret_json(const struct store_secret *s) {
  char created[32], updated[32];
  iso8601(s->created_ms, created);
  iso8601(s->updated_ms, updated);
  json_t *meta = json_loads(s->metadata, 0, NULL);
  return json_pack("{s:s,s:s,s:I,s:o,s:s,s:s}", "secretID", s->id, "name", s->name,
                   "currentVersion", (json_int_t)s->version, "metadata",
                   json_is_object(meta) ? meta : json_object(), "createdAt", created, "updatedAt",
                   updated);
}

static void collect(const struct store_secret *s, void *arg) {
  struct found *f = arg;
  f->n++;
  if (!f->want) {
    json_array_append_new(f->list, secret_json(s));
    return;
  }
  if (f->one || (strcmp(s->id, f->want) != 0 && strcmp(s->name, f->want) != 0))
    return;
  f->one = secret_json(s);
  f->value = s->value ? xstrdup(s->value) : NULL;
  str_copy(f->id, sizeof f->id, s->id);
  f->version = s->version;
  f->created_ms = s->created_ms;
}

static void found_free(struct found *f) {
  json_decref(f->list);
  json_decref(f->one);
  if (f->value) {
    explicit_bzero(f->value, strlen(f->value));
    free(f->value);
  }
}

/* The tenant's secret want (its id, or its name in any case), or all of
 * them (want NULL); -1 after a 500. */
static int lookup(struct http_conn *c, const char *tenant, const char *want, struct found *f) {
  char lower[SECRET_NAME_MAX + 8];
  memset(f, 0, sizeof *f);
  if (want) {
    size_t i = 0;
    for (; want[i] && i < sizeof lower - 1; i++)
      lower[i] = (char)tolower((unsigned char)want[i]);
    lower[i] = '\0';
    f->want = strncmp(want, "sec_", 4) == 0 ? want : lower;
  } else {
    f->list = json_array();
  }
  struct hutch_err err = {0};
  if (store_secret_each(c->srv->store, tenant, collect, f, &err) < 0) {
    found_free(f);
    http_fail(c, &err);
    return -1;
  }
  f->want = NULL;
  return 0;
}

char *e2b_secret_value(struct server *srv, const char *tenant, const char *name) {
  struct found f = {0};
  char lower[SECRET_NAME_MAX + 8];
  size_t i = 0;
  for (; name[i] && i < sizeof lower - 1; i++)
    lower[i] = (char)tolower((unsigned char)name[i]);
  lower[i] = '\0';
  f.want = lower;
  struct hutch_err err = {0};
  char *v = NULL;
  if (store_secret_each(srv->store, tenant, collect, &f, &err) == 0 && f.one) {
    v = f.value;
    f.value = NULL;
  }
  found_free(&f);
  return v;
}

/* A value as the proxy can send it in a header. */
static int check_value(struct http_conn *c, json_t *o, const char **out) {
  json_t *v = json_object_get(o, "value");
  const char *s = json_string_value(v);
  if (!s) {
    http_error(c, HUTCH_ERR_INVALID, "invalid_argument", "value must be a string");
    return -1;
  }
  size_t n = json_string_length(v);
  if (n > SECRET_VALUE_MAX || strlen(s) != n) {
    http_error(c, HUTCH_ERR_INVALID, "invalid_argument", "value must be at most %u bytes",
               SECRET_VALUE_MAX);
    return -1;
  }
  for (const char *p = s; *p; p++)
    if ((unsigned char)*p < 0x20 || *p == 0x7f) {
      http_error(c, HUTCH_ERR_INVALID, "invalid_argument",
                 "value must hold no control characters (it goes into a header)");
      return -1;
    }
  *out = s;
  return 0;
}

/* metadata: absent (NULL text), or at most 32 strings (keys 128 bytes,
 * values 1024, 8 KiB in all); *text malloc'd. */
static int check_metadata(struct http_conn *c, json_t *o, char **text) {
  json_t *m = json_object_get(o, "metadata");
  *text = NULL;
  if (!m || json_is_null(m))
    return 0;
  const char *k;
  json_t *v;
  size_t total = 0;
  bool ok = json_is_object(m) && json_object_size(m) <= SECRET_META_MAX;
  json_object_foreach(m, k, v) {
    ok = ok && json_is_string(v) && strlen(k) <= 128 && json_string_length(v) <= 1024;
    total += strlen(k) + (json_is_string(v) ? json_string_length(v) : 0);
  }
  if (!ok || total > 8192) {
    http_error(c, HUTCH_ERR_INVALID, "invalid_argument",
               "metadata must be at most %d strings (keys of 128 bytes, values of 1024, 8 KiB "
               "in all)",
               SECRET_META_MAX);
    return -1;
  }
  *text = json_dumps(m, JSON_COMPACT);
  return 0;
}

/* name lowercased into lower, when it may name a secret: 1 to
 * SECRET_NAME_MAX of a-z, 0-9, _ and -, not starting with sec_. False
 * after a 400. */
static bool secret_name(struct http_conn *c, const char *name, char lower[SECRET_NAME_MAX + 1]) {
  size_t n = name ? strlen(name) : 0;
  for (size_t i = 0; i < n; i++)
    lower[i] = (char)tolower((unsigned char)name[i]);
  lower[n] = '\0';
  if (!n || strspn(lower, "abcdefghijklmnopqrstuvwxyz0123456789_-") != n ||
      strncmp(lower, "sec_", 4) == 0) {
    http_error(c, HUTCH_ERR_INVALID, "invalid_argument",
               "name must be 1 to %d of a-z, 0-9, _ and -, not starting with sec_",
               SECRET_NAME_MAX);
    return false;
  }
  return true;
}

/* Whether the team may hold one more secret; false after an error answer. */
static bool room_for_one(struct http_conn *c, const char *tenant) {
  struct found f;
  if (lookup(c, tenant, NULL, &f) < 0)
    return false;
  size_t have = f.n;
  found_free(&f);
  if (have >= SECRETS_MAX) {
    http_error(c, HUTCH_ERR_QUOTA, "quota_exceeded", "a team holds at most %d secrets",
               SECRETS_MAX);
    return false;
  }
  return true;
}

void e2b_secrets_create(struct http_conn *c, const struct principal *p) {
  static const char *const known[] = {"name", "value", "metadata", NULL};
  json_t *o = http_body_object(c);
  const char *name = NULL, *value = NULL;
  char *meta = NULL;
  if (!o)
    goto out;
  if (http_body_only(c, o, known) < 0)
    goto out;
  if (http_body_string(c, o, "name", SECRET_NAME_MAX, &name) < 0)
    goto out;
  if (check_value(c, o, &value) < 0)
    goto out;
  if (check_metadata(c, o, &meta) < 0)
    goto out;

  char lower[SECRET_NAME_MAX + 1];
  if (!secret_name(c, name, lower))
    goto out;
  if (!room_for_one(c, p->tenant))
    goto out;

  char id[4 + 32 + 1] = "sec_";
  random_hex(id + 4, 32);
  int64_t now = wall_ms();
  struct store_secret s = {id, p->tenant, lower, 1, meta ? meta : "{}", value, now, now};
  struct hutch_err err = {0};
  int r = store_secret_put(c->srv->store, &s, false, &err);
  if (r == 1)
    http_error(c, HUTCH_ERR_CONFLICT, "exists", "a secret named '%s' exists already", lower);
  else if (r < 0)
    http_fail(c, &err);
  else
    http_json(c, 201, secret_json(&s));

out:
  free(meta);
  json_decref(o);
}

void e2b_secrets_list(struct http_conn *c, const struct principal *p) {
  char *limit_s = http_query(&c->req, "limit"), *token = http_query(&c->req, "nextToken");
  char *end;
  unsigned long limit = limit_s ? strtoul(limit_s, &end, 10) : 100;
  unsigned long start = token ? strtoul(token, &end, 10) : 0;
  bool bad = (limit_s && (!*limit_s || *end || limit < 1 || limit > 1000));
  if (!bad && token)
    bad = !*token || strtoul(token, &end, 10) > SECRETS_MAX || *end;
  free(limit_s);
  free(token);

  if (bad) {
    http_error(c, HUTCH_ERR_INVALID, "invalid_argument",
               "limit must be 1..1000 and nextToken one this API gave");
    return;
  }
  struct found f;
  if (lookup(c, p->tenant, NULL, &f) < 0)
    return;

  json_t *page = json_array();
  for (size_t i = start; i < json_array_size(f.list) && i < start + limit; i++)
    json_array_append(page, json_array_get(f.list, i));
  char extra[64] = "";
  if (start + limit < json_array_size(f.list))
    snprintf(extra, sizeof extra, "X-Next-Token: %lu\r\n", start + limit);
  found_free(&f);

  char *body = json_dumps(page, JSON_COMPACT);
  json_decref(page);
  http_respond(c, 200, "application/json", body, strlen(body), extra[0] ? extra : NULL);
  free(body);
}

void e2b_secrets_get(struct http_conn *c, const struct principal *p) {
  struct found f;
  if (lookup(c, p->tenant, c->req.params[0], &f) < 0)
    return;
  if (!f.one)
    http_error(c, HUTCH_ERR_NOT_FOUND, "not_found", "secret %s not found", c->req.params[0]);
  else
    http_json(c, 200, json_incref(f.one));
  found_free(&f);
}

void e2b_secrets_update(struct http_conn *c, const struct principal *p) {
  static const char *const known[] = {"value", "metadata", NULL};
  json_t *o = http_body_object(c);
  const char *value = NULL;
  char *meta = NULL;
  struct found f = {0};
  if (!o)
    goto out;
  if (http_body_only(c, o, known) < 0)
    goto out;
  if (check_value(c, o, &value) < 0)
    goto out;
  if (check_metadata(c, o, &meta) < 0)
    goto out;
  if (lookup(c, p->tenant, c->req.params[0], &f) < 0)
    goto out;
  if (!f.one) {
    http_error(c, HUTCH_ERR_NOT_FOUND, "not_found", "secret %s not found", c->req.params[0]);
    goto out;
  }

  char *old_meta = meta ? NULL : json_dumps(json_object_get(f.one, "metadata"), JSON_COMPACT);
  struct store_secret s = {f.id,
                           p->tenant,
                           json_string_value(json_object_get(f.one, "name")),
                           f.version + 1,
                           meta ? meta : old_meta,
                           value,
                           f.created_ms,
                           wall_ms()};
  struct hutch_err err = {0};
  if (store_secret_put(c->srv->store, &s, true, &err) < 0)
    http_fail(c, &err);
  else
    http_json(c, 200, secret_json(&s));
  free(old_meta);

out:
  found_free(&f);
  free(meta);
  json_decref(o);
}

void e2b_secrets_delete(struct http_conn *c, const struct principal *p) {
  struct found f;
  if (lookup(c, p->tenant, c->req.params[0], &f) < 0)
    return;
  struct hutch_err err = {0};
  if (!f.one)
    http_error(c, HUTCH_ERR_NOT_FOUND, "not_found", "secret %s not found", c->req.params[0]);
  else if (store_secret_delete(c->srv->store, f.id, &err) < 0)
    http_fail(c, &err);
  else
    http_respond(c, 204, "application/json", "", 0, NULL);
  found_free(&f);
}
