/* E2B's REST API (the control plane its SDKs call at E2B_API_URL), on the
 * native core: a create here is a native create, a kill a native delete.
 *
 *   POST /sandboxes, /v2/sandboxes        create → 201 {sandboxID, envdAccessToken, …}
 *   GET  /sandboxes, /v2/sandboxes        list (metadata, state, limit, nextToken)
 *   GET  /sandboxes/{id}                  detail
 *   DELETE /sandboxes/{id}                204
 *   POST /sandboxes/{id}/timeout          {timeout} seconds from now, 204
 *   POST /sandboxes/{id}/connect          {timeout} extends only; the sandbox again
 *   POST /v2/sandboxes/{id}/connect       the same
 *   POST /sandboxes/{id}/pause            204
 *   POST /sandboxes/{id}/refreshes        {duration}: its end moves later, 204
 *   …and snapshots, forks (docs/e2b.md); network settings in e2b/network.c,
 *   lists in e2b/lists.c, metrics and logs in e2b/observe.c
 *
 * Errors are E2B's {"code": STATUS, "message"}: its SDKs read "code". */
#include "e2b/control.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "util.h"
#include "core/life/actions.h"
#include "core/disk/layers.h"
#include "core/life/sbx_create.h"
#include "api/lifecycle.h"
#include "api/sandboxes.h"
#include "api/snapshots.h"
#include "core/life/snapshots.h"
#include "core/sandbox/sbx.h"
#include "core/tenancy/usage.h"
#include "core/disk/volumes.h"
#include "e2b/e2b.h"
#include "e2b/network.h"
#include "http/body.h"
#include "http/connect.h"
#include "http/errors.h"
#include "http/http.h"
#include "http/request.h"
#include "core/life/sbx_pause.h"

/* E2B's template names that the `host` template stands for, unless the
 * store has a template of that name (docs/templates.md: a
 * code-interpreter template): the SDKs' defaults, and hutch's own name. */
static const char *const host_aliases[] = {"base", "code-interpreter-v1", "code-interpreter",
                                           "host", NULL};

bool e2b_host_alias(const char *name) {
  for (const char *const *a = host_aliases; *a; a++)
    if (strcmp(name, *a) == 0)
      return true;
  return false;
}

/* Where its ports are reached: {port}-{id}.DOMAIN, at the server's port
 * (the SDKs' getHost()). */
static json_t *domain_json(const struct sbx *sb) {
  return json_sprintf("%s:%d", sb->srv->cfg.domain, sb->srv->cfg.port);
}

static json_t *sandbox_json(const struct sbx *sb) {
  return json_pack("{s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:o}", "sandboxID", sb->id, "templateID",
                   sb->template, "alias", sb->template, "clientID", "hutch", "envdVersion",
                   E2B_ENVD_VERSION, "envdAccessToken", sb->token, "trafficAccessToken",
                   sb->traffic_token, "domain", domain_json(sb));
}

/* Its volumes as E2B's volumeMounts [{name, path}]. */
static json_t *volume_mounts(const struct sbx *sb) {
  json_t *out = json_array(), *m;
  size_t i;
  json_array_foreach(sb->volumes, i, m) {
    json_t *vol = volumes_find(sb->srv, sb->tenant, json_string_value(json_object_get(m, "id")));
    json_array_append_new(out,
                          json_pack("{s:O,s:O}", "name",
                                    vol ? json_object_get(vol, "name") : json_object_get(m, "id"),
                                    "path", json_object_get(m, "path")));
    json_decref(vol);
  }
  return out;
}

json_t *e2b_listed_json(const struct sbx *sb) {
  char started[32], ends[32];
  iso8601(sb->created_ms, started);
  /* Paused: it ends when its retention does. */
  iso8601(sb->paused ? sb->paused_ms + sb->srv->cfg.paused_retention_ms : sb->expires_ms, ends);
  long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
  json_int_t cpus = sb->cpu_milli ? (json_int_t)((sb->cpu_milli + 999) / 1000) : ncpu;
  return json_pack("{s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:I,s:I,s:I,s:O,s:s,s:o}", "sandboxID", sb->id,
                   "templateID", sb->template, "alias", sb->template, "clientID", "hutch",
                   "startedAt", started, "endAt", ends, "state", sb->paused ? "paused" : "running",
                   "cpuCount", cpus, "memoryMB", (json_int_t)sb->memory_mb, "diskSizeMB",
                   (json_int_t)sb->disk_mb, "metadata", sb->metadata, "envdVersion",
                   E2B_ENVD_VERSION, "volumeMounts", volume_mounts(sb));
}

/* A field hutch cannot honour yet: 400 when it asks for more than hutch
 * does, rather than a sandbox that quietly differs. */
static int refuse_if(struct http_conn *c, const char *key, bool wanted, const char *why) {
  if (!wanted)
    return 0;
  http_error(c, HUTCH_ERR_UNSUPPORTED, "not_supported", "%s: %s", key, why);
  return -1;
}

static void render_created(struct http_conn *c, struct sbx *sb) {
  http_json(c, 201, sandbox_json(sb));
}

/* What E2B's create body gives before it is a create request. */
struct create_body {
  const char *tmpl;
  uint64_t timeout;
  json_t *metadata, *env;
};

/* The create body's fields into b: 0, or -1 after an error answer. */
static int create_fields(struct http_conn *c, json_t *o, struct create_body *b) {
  static const char *const known[] = {"templateID", "timeout",   "metadata",
                                      "envVars",    "autoPause", "autoPauseMemory",
                                      "autoResume", "secure",    "allow_internet_access",
                                      "network",    "mcp",       "volumeMounts",
                                      "iam",        NULL};
  json_t *vols = json_object_get(o, "volumeMounts");
  if (http_body_only(c, o, known) < 0)
    return -1;
  if (http_body_string(c, o, "templateID", SERVE_TEMPLATE_MAX, &b->tmpl) < 0)
    return -1;
  if (http_body_uint(c, o, "timeout", 1, SERVE_MAX_TIMEOUT_S, &b->timeout) < 0)
    return -1;
  if (http_body_string_map(c, o, "metadata", 256, &b->metadata) < 0)
    return -1;
  if (http_body_string_map(c, o, "envVars", 256, &b->env) < 0)
    return -1;
  /* mcp is the SDK's to act on: it starts E2B's gateway inside the
   * sandbox itself (mcp-gateway, in templates that have it). */
  if (refuse_if(c, "iam", json_object_get(o, "iam") != NULL, "not available in hutch") < 0)
    return -1;
  if (refuse_if(c, "volumeMounts", vols && !json_is_array(vols), "a list of {name, path}") < 0)
    return -1;
  if (!b->tmpl) {
    http_error(c, HUTCH_ERR_INVALID, "invalid_argument", "templateID is required");
    return -1;
  }
  return 0;
}

/* The native template E2B's templateID names. E2B's default names: a
 * template of the store by that name, or for the code interpreter's the
 * store's "code-interpreter" (docs/templates.md), else the host template. */
static const char *native_template(struct http_conn *c, const struct principal *p,
                                   const char *tmpl) {
  bool host = e2b_host_alias(tmpl);
  const char *chosen = tmpl;
  if (host && strcmp(tmpl, "host") != 0) {
    const char *names[] = {tmpl,
                           strncmp(tmpl, "code-interpreter", 16) == 0 ? "code-interpreter" : NULL};
    for (size_t i = 0; host && i < 2 && names[i]; i++) {
      struct hutch_err none = {0};
      json_t *rec = layers_find_template(c->srv, p->tenant, names[i], &none);
      host = !rec;
      chosen = rec ? names[i] : chosen;
      json_decref(rec);
    }
  }
  return host ? "host" : chosen;
}

void e2b_sandboxes_create(struct http_conn *c, const struct principal *p) {
  json_t *o = http_body_object(c);
  if (!o)
    return;
  struct create_body b = {.timeout = SERVE_DEFAULT_TIMEOUT_S};
  json_t *auto_resume = json_object_get(o, "autoResume");
  json_t *vols = json_object_get(o, "volumeMounts");
  if (create_fields(c, o, &b) < 0)
    goto out;
  json_t *enabled =
      json_is_object(auto_resume) ? json_object_get(auto_resume, "enabled") : auto_resume;
  if ((auto_resume && !json_is_boolean(enabled)) ||
      (json_object_get(o, "autoPause") && !json_is_boolean(json_object_get(o, "autoPause")))) {
    http_error(c, HUTCH_ERR_INVALID, "invalid_argument",
               "autoPause is a boolean, autoResume {enabled: boolean}");
    goto out;
  }
  const char *tmpl = native_template(c, p, b.tmpl);

  /* The create of both APIs (a snapshot's id is a native template).
   * autoPauseMemory false asks for a pause that keeps only the files:
   * hutch's pause keeps memory always, which loses nothing. */
  json_t *net = e2b_network_request(c, p, o);
  if (!net)
    goto out;
  struct create_req r;
  sbx_create_req_init(&r);
  /* E2B's API has no tier: metadata hutch.isolation names it (docs/e2b.md),
   * and stays in the metadata as the client gave it. */
  const char *tier = json_string_value(json_object_get(b.metadata, E2B_ISOLATION_KEY));
  if (tier) {
    r.isolation = hutch_config_isolation_parse(tier);
    if (r.isolation < 0) {
      http_error(c, HUTCH_ERR_INVALID, "invalid_argument",
                 "metadata " E2B_ISOLATION_KEY " must be \"ns\" or \"gvisor\"");
      json_decref(net);
      goto out;
    }
  }

  r.template = tmpl;
  r.timeout_s = (double)b.timeout;
  r.pause_on_timeout = json_is_true(json_object_get(o, "autoPause"));
  r.auto_resume = json_is_true(enabled);
  r.metadata = b.metadata;
  r.env = b.env;
  r.network = json_object_get(net, "network");
  r.secrets = json_object_get(net, "secrets");
  /* E2B's volumeMounts [{name, path}] are the native create's volumes. */
  r.volumes = json_array_size(vols) ? vols : NULL;
  api_sandboxes_make(c, p, &r, render_created);
  json_decref(net);

out:
  json_decref(o);
}

void e2b_sandboxes_get(struct http_conn *c, const struct principal *p) {
  struct sbx *sb = api_sbx_lookup(c, p);
  if (!sb)
    return;
  json_t *j = e2b_listed_json(sb);
  json_object_set_new(j, "envdAccessToken", json_string(sb->token));
  json_object_set_new(j, "domain", domain_json(sb));
  json_t *net = e2b_network_json(sb);
  json_object_update(j, net);
  json_decref(net);
  json_object_set_new(j, "lifecycle",
                      json_pack("{s:s,s:b}", "onTimeout", sb->pause_on_timeout ? "pause" : "kill",
                                "autoResume", sb->auto_resume));
  http_json(c, 200, j);
}

/* The sandbox and the body's "timeout" (seconds; 0 when absent) of a
 * request whose body has only the fields known; NULL after an error. */
static struct sbx *timeout_body(struct http_conn *c, const struct principal *p,
                                const char *const *known, uint64_t *t) {
  struct sbx *sb = api_sbx_lookup(c, p);
  json_t *o = sb ? http_body_object(c) : NULL;
  *t = 0;
  bool ok = false;
  if (o && http_body_only(c, o, known) >= 0)
    ok = http_body_uint(c, o, "timeout", 1, SERVE_MAX_TIMEOUT_S, t) >= 0;
  json_decref(o);
  return ok ? sb : NULL;
}

/* {timeout}: the sandbox ends that many seconds from now, sooner or later
 * than it would have (E2B's setTimeout). */
void e2b_sandboxes_timeout(struct http_conn *c, const struct principal *p) {
  static const char *const known[] = {"timeout", NULL};
  uint64_t t;
  struct sbx *sb = timeout_body(c, p, known, &t);
  if (!sb)
    return;
  if (!t) {
    http_error(c, HUTCH_ERR_INVALID, "invalid_argument", "timeout (seconds, from 1) is required");
    return;
  }
  actions_set_timeout(sb, (double)t, false);
  http_respond(c, 204, "application/json", "", 0, NULL);
}

/* Connecting: a paused sandbox is resumed (201) with the timeout given,
 * else the default; a running one (200) gets a timeout that is only ever
 * extended. */
void e2b_sandboxes_connect(struct http_conn *c, const struct principal *p) {
  static const char *const known[] = {"timeout", "memory", NULL};
  uint64_t t;
  struct sbx *sb = timeout_body(c, p, known, &t);
  if (!sb)
    return;
  if (sb->paused) {
    struct hutch_err err = {0};
    if (actions_resume(sb, (double)(t ? t : SERVE_DEFAULT_TIMEOUT_S), &err) < 0)
      http_fail(c, &err);
    else
      http_json(c, 201, sandbox_json(sb));
    return;
  }
  if (t)
    actions_set_timeout(sb, (double)t, true);
  http_json(c, 200, sandbox_json(sb));
}

/* {duration}: seconds (0 to 3600) it lives from now at least, never less
 * than E2B's 15 s; its end only ever moves later (E2B's keep-alive). */
#define REFRESH_MIN_S 15
#define REFRESH_MAX_S 3600
void e2b_sandboxes_refresh(struct http_conn *c, const struct principal *p) {
  static const char *const known[] = {"duration", NULL};
  uint64_t d = REFRESH_MIN_S;
  struct sbx *sb = api_sbx_lookup(c, p);
  json_t *o = sb && c->req.body_len ? http_body_object(c) : NULL;
  /* No body: the least duration. */
  bool ok = sb && !c->req.body_len;
  if (o && http_body_only(c, o, known) >= 0)
    ok = http_body_uint(c, o, "duration", 0, REFRESH_MAX_S, &d) >= 0;
  json_decref(o);
  if (!ok)
    return;
  actions_set_timeout(sb, (double)(d < REFRESH_MIN_S ? REFRESH_MIN_S : d), true);
  http_respond(c, 204, "application/json", "", 0, NULL);
}

static void e2b_answer_pause(struct sbx *sb, int r, struct hutch_err *why, void *arg) {
  struct http_wait *w = arg;
  struct http_conn *c = http_wait_end(w);
  struct hutch_err err = {0};
  free(w);
  if (!c)
    return;
  if (actions_pause_result(sb, r, why, &err) < 0)
    http_fail(c, &err);
  else
    http_respond(c, 204, "application/json", "", 0, NULL);
}

/* {memory}: false would keep only the files; hutch keeps memory too. 409
 * when it is paused already (the SDK's pause() then answers false). */
void e2b_sandboxes_pause(struct http_conn *c, const struct principal *p) {
  static const char *const known[] = {"memory", NULL};
  struct sbx *sb = api_sbx_lookup(c, p);
  json_t *o = sb && c->req.body_len ? http_body_object(c) : NULL;
  if (!sb || (c->req.body_len && (!o || http_body_only(c, o, known) < 0))) {
    json_decref(o);
    return;
  }
  json_decref(o);
  struct hutch_err err = {0};
  if (actions_pause_check(sb, &err) < 0)
    http_fail(c, &err);
  else {
    struct http_wait *w = xcalloc(1, sizeof *w);
    http_wait_begin(w, c);
    sbx_pause(sb, e2b_answer_pause, w);
  }
}

void e2b_cut(struct http_conn *c) {
  http_own(c, NULL, NULL);
  http_abort(c);
}
struct sbx *e2b_sandbox(struct http_conn *c) {
  return sbx_find(c->srv, c->req.params[0]);
}

/* Which of the sandbox's users a name is: "user", "root", or its
 * template's own (sb->user); NULL for any other. */
static const char *known_user(const struct sbx *sb, const char *name, size_t n) {
  if (n == 4 && memcmp(name, "user", 4) == 0)
    return "user";
  if (n == 4 && memcmp(name, "root", 4) == 0)
    return "root";
  if (sb && sb->user && strlen(sb->user) == n && memcmp(name, sb->user, n) == 0)
    return sb->user;
  return NULL;
}

const char *e2b_user(struct http_conn *c, const struct sbx *sb) {
  const char *auth = http_header(&c->req, "Authorization");
  char *q = http_query(&c->req, "username");
  /* envd's default: the template's user (E2B's setUser), else user. */
  const char *user = sb && sb->user ? sb->user : "user";
  bool ok = true;

  if (q) {
    user = known_user(sb, q, strlen(q));
  } else if (auth && strncasecmp(auth, "Basic ", 6) == 0) {
    uint8_t *raw;
    size_t n;
    ok = http_b64_decode(auth + 6, &raw, &n) == 0;
    if (ok) {
      uint8_t *colon = memchr(raw, ':', n);
      user = colon && (size_t)(colon - raw) == n - 1 ? known_user(sb, (char *)raw, n - 1) : NULL;
      free(raw);
    }
  }
  free(q);

  if (!ok || !user) {
    http_error(c, HUTCH_ERR_INVALID, "invalid_argument",
               "the sandbox's users are user, root%s%s (Basic auth \"NAME:\")",
               sb && sb->user ? " and " : "", sb && sb->user ? sb->user : "");
    return NULL;
  }
  return user;
}

/* A user's home (malloc'd). A template's own user's is not known here:
 * /home/NAME, as useradd makes it; a UID's is /. */
static char *home_of(const char *user) {
  if (strcmp(user, "root") == 0)
    return xstrdup("/root");
  if (user[0] >= '0' && user[0] <= '9')
    return xstrdup("/");
  return xasprintf("/home/%s", user);
}

char *e2b_path(const char *path, const char *user) {
  char *home = home_of(user);
  char *r;
  if (path && path[0] == '/')
    r = xstrdup(path);
  else if (!path || !*path)
    r = xstrdup(home);
  else
    r = xasprintf("%s/%s", home, path);
  free(home);
  return r;
}

static void e2b_snapshot_made(struct http_conn *c, json_t *snap) {
  const char *name = json_string_value(json_object_get(snap, "name"));
  http_json(c, 201,
            json_pack("{s:O,s:o}", "snapshotID", json_object_get(snap, "id"), "names",
                      name && *name ? json_pack("[s]", name) : json_array()));
}

/* Snapshots: {name?} -> {snapshotID, names}. */
void e2b_snapshots_create(struct http_conn *c, const struct principal *p) {
  api_snapshots_request(c, p, e2b_snapshot_made);
}

static void e2b_forks_made(struct http_conn *c, json_t *snapshot_id, json_t *made) {
  (void)snapshot_id;
  json_t *out = json_array(), *v;
  size_t i;
  json_array_foreach(made, i, v) {
    struct sbx *f = sbx_find(c->srv, json_string_value(json_object_get(v, "id")));
    if (f)
      json_array_append_new(out, json_pack("{s:o}", "sandbox", sandbox_json(f)));
  }
  http_json(c, 201, out);
}

/* {count, timeout}: [{sandbox: {...}}] per fork. Forks hold the files,
 * not the memory (docs/e2b.md). */
void e2b_sandboxes_fork(struct http_conn *c, const struct principal *p) {
  static const char *const known[] = {"count", "timeout", NULL};
  struct sbx *sb = api_sbx_lookup(c, p);
  json_t *o = sb ? http_body_object(c) : NULL;
  uint64_t count = 1, t = 0;
  if (!o)
    return;
  if (http_body_only(c, o, known) < 0)
    goto out;
  if (http_body_uint(c, o, "count", 0, UINT32_MAX, &count) < 0)
    goto out;
  if (http_body_uint(c, o, "timeout", 1, SERVE_MAX_TIMEOUT_S, &t) < 0)
    goto out;
  api_forks_make(c, p, sb, count, t ? (double)t : -1, e2b_forks_made);
out:
  json_decref(o);
}
