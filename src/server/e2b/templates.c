/* E2B's template API, as the official SDK's Template.build calls it
 * (docs/e2b.md, docs/templates.md "The API and E2B's Template SDK"):
 *
 *   POST /v3/templates               a build asked for: a waiting job
 *   GET  /templates/{id}/files/{h}   is the COPY tar of hash h here? if
 *                                    not, a one-use upload URL on hutch
 *   PUT  /templates/uploads/{token}  that URL: the tar, kept by hash
 *   POST /v2/templates/{id}/builds/{b}  the steps: a Dockerfile
 *                                    (tplbuild.c) and `hutch-template
 *                                    build` with the tars as its context
 *   GET  /templates/{id}/builds/{b}/status  the job and its log
 *
 * A template's E2B id is its name (what Sandbox.create and every later
 * call name it by); the build id is the job's. */
#include "e2b/templates.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cleanup.h"
#include "util.h"
#include "api/snapshots.h"
#include "api/templates.h"
#include "core/sandbox/fds.h"
#include "core/life/snapshots.h"
#include "core/disk/templates.h"
#include "core/disk/tplfiles.h"
#include "core/disk/tpltokens.h"
#include "e2b/control.h"
#include "e2b/e2b.h"
#include "e2b/tplbuild.h"
#include "http/body.h"
#include "http/errors.h"
#include "http/http.h"
#include "http/request.h"
#include "core/disk/tplstore.h"

/* A name E2B's API may carry in a path: a template name without '/'. */
static bool e2b_name_ok(const char *name) {
  return hutch_images_name_ok(name) && !strchr(name, '/');
}

/* Whether tags is an array of tag names (empty: latest). */
static bool tags_ok(json_t *tags) {
  size_t i;
  json_t *v;
  json_array_foreach(tags, i, v) {
    if (!json_is_string(v) || !hutch_images_tag_ok(json_string_value(v)))
      return false;
  }
  return json_is_array(tags);
}

/* {name | alias, tags, cpuCount, memoryMB, ...}: name may be "name:tag".
 * cpuCount and memoryMB size E2B's build VM; hutch's builds run with
 * the sandbox defaults, and sandboxes take their own at create. */
void e2b_templates_request(struct http_conn *c, const struct principal *p) {
  struct hutch_err err = {0};
  json_t *o = http_body_object(c);
  if (!o)
    return;

  const char *name = json_string_value(json_object_get(o, "name"));
  if (!name)
    name = json_string_value(json_object_get(o, "alias"));
  _cleanup_free_ char *base = xstrdup(name ? name : "");
  char *colon = strchr(base, ':');
  json_t *tags = json_array();
  if (colon) {
    *colon = '\0';
    json_array_append_new(tags, json_string(colon + 1));
  }
  json_t *more = json_object_get(o, "tags"), *v;
  size_t i;
  json_array_foreach(more, i, v)
    json_array_append(tags, v);
  /* E2B's build of NAME (no tag) is NAME:latest, and its tags more. */
  if (!colon)
    json_array_insert_new(tags, 0, json_string("latest"));

  if (!e2b_name_ok(base)) {
    http_error(c, HUTCH_ERR_INVALID, "invalid_argument",
               "template name '%s': 1 to %d of a-z, 0-9, '.', '_' and '-'", base,
               HUTCH_IMAGE_NAME_MAX);
  } else if (!tags_ok(tags) || (more && !json_is_array(more))) {
    http_error(c, HUTCH_ERR_INVALID, "invalid_argument",
               "tags are 1 to %d of A-Z, a-z, 0-9, '.', '_' and '-'", HUTCH_IMAGE_NAME_MAX);
  } else {
    struct template_job *j = templates_prepare(c->srv, p, base, tags, false, &err);
    if (!j)
      http_fail(c, &err);
    else
      http_json(c, 202,
                json_pack("{s:s,s:s,s:b,s:[s],s:[s],s:O}", "templateID", base, "buildID", j->id,
                          "public", 0, "names", base, "aliases", base, "tags", tags));
  }
  json_decref(tags);
  json_decref(o);
}

/* The waiting or finished job of {templateID}/builds/{buildID}, or NULL
 * after a 404. */
static struct template_job *build_of(struct http_conn *c, const struct principal *p) {
  struct template_job *j = templates_job(c->srv, p, c->req.params[1]);
  if (!j || strcmp(j->name, c->req.params[0]) != 0) {
    http_error(c, HUTCH_ERR_NOT_FOUND, "not_found", "no build %s of template %s", c->req.params[1],
               c->req.params[0]);
    return NULL;
  }
  return j;
}

/* 201 {present} or {present: false, url}: the URL names hutch itself, as
 * the client reached it (Host), with a one-use token for the tenant's
 * file: E2B's SDK uploads there without its key. */
void e2b_templates_file(struct http_conn *c, const struct principal *p) {
  const char *hash = c->req.params[1];
  const char *host = http_header(&c->req, "Host");
  if (!hutch_images_hex_ok(hash)) {
    http_error(c, HUTCH_ERR_INVALID, "invalid_argument", "a files hash is 64 hex digits");
    return;
  }
  if (tplfiles_present(c->srv, p->tenant, hash)) {
    http_json(c, 201, json_pack("{s:b}", "present", 1));
    return;
  }
  if (!host || !*host || strpbrk(host, "/ \"\\")) {
    http_error(c, HUTCH_ERR_INVALID, "invalid_argument", "no Host to make an upload URL for");
    return;
  }
  char token[41];
  struct hutch_err err = {0};
  if (tpltokens_issue(c->srv, p->tenant, hash, token, &err) < 0) {
    http_fail(c, &err);
    return;
  }
  _cleanup_free_ char *url = xasprintf("http://%s/templates/uploads/%s", host, token);
  http_json(c, 201, json_pack("{s:b,s:s}", "present", 0, "url", url));
}

static void upload_stored(struct http_conn *c, const struct principal *p, struct tpl_upload *u,
                          char *hash) {
  struct hutch_err err = {0};
  _cleanup_free_ char *path = tplfiles_path(c->srv, p->tenant, hash);
  if (tplfiles_upload_move(u, path, &err) < 0)
    http_fail(c, &err);
  else
    http_respond(c, 200, "application/json", "", 0, NULL);
}

/* PUT /templates/uploads/{token}: the token is the key. The upload is
 * the token's tenant's: its connection, held while the body comes, counts
 * in that tenant's share of the server's connections (fds.c), or a
 * tenant's 256 URLs would be 256 slow uploads held on no one's count
 * (one refused has used its URL up: the client asks for another). */
void e2b_templates_upload(struct http_conn *c, const struct principal *p) {
  (void)p;
  struct principal owner = {0};
  struct hutch_err err = {0};
  char hash[65];
  if (tpltokens_claim(c->srv, c->req.params[0], owner.tenant, hash) < 0) {
    http_error(c, HUTCH_ERR_NOT_FOUND, "not_found", "no such upload (or its URL expired)");
    return;
  }
  str_copy(c->tenant, sizeof c->tenant, owner.tenant);
  if (fds_check(c->srv, owner.tenant, NULL, 1, &err) < 0) {
    http_fail(c, &err);
    return;
  }
  api_templates_receive(c, &owner, upload_stored, xstrdup(hash));
}

/* E2B's base image (the SDK's fromBaseImage(): e2bdev/base from Docker
 * Hub) is the store's template `base` when there is one (docs/e2b.md):
 * builds start from what this host made of it, without Docker Hub. */
static void e2b_base(struct http_conn *c, const struct principal *p, json_t *spec) {
  const char *img = json_string_value(json_object_get(spec, "fromImage"));
  if (!img)
    return;
  /* E2B's own name, untagged or :latest (a pinned tag or digest is that
   * image, pulled). */
  const char *name = strncmp(img, "docker.io/", 10) == 0 ? img + 10 : img;
  if (strcmp(name, "e2bdev/base") != 0 && strcmp(name, "e2bdev/base:latest") != 0)
    return;
  struct hutch_err none = {0};
  json_t *rec = tplstore_get(c->srv, p, "base", &none);
  if (rec) {
    json_object_del(spec, "fromImage");
    json_object_set_new(spec, "fromTemplate", json_string("base"));
  }
  json_decref(rec);
}

/* The user a build's base runs as: a local template's, else root. */
static char *base_user(struct http_conn *c, const struct principal *p, json_t *spec) {
  struct hutch_err err = {0};
  const char *tpl = json_string_value(json_object_get(spec, "fromTemplate"));
  json_t *rec = tpl ? tplstore_get(c->srv, p, tpl, &err) : NULL;
  const char *user = json_string_value(json_object_get(json_object_get(rec, "config"), "user"));
  char *out = xstrdup(user && *user ? user : "root");
  json_decref(rec);
  return out;
}

void e2b_templates_build(struct http_conn *c, const struct principal *p) {
  struct hutch_err err = {0};
  struct template_job *j = build_of(c, p);
  json_t *o = j ? http_body_object(c) : NULL;
  if (!o)
    return;

  e2b_base(c, p, o);
  json_t *hashes = json_array(), *v;
  _cleanup_free_ char *user = base_user(c, p, o);
  _cleanup_free_ char *df = e2b_dockerfile(o, user, hashes, &err);
  size_t n = json_array_size(hashes), i;
  char **tars = xcalloc(n + 1, sizeof *tars);
  char *workdir = NULL;
  json_array_foreach(hashes, i, v) {
    const char *h = json_string_value(v);
    if (df && !tplfiles_present(c->srv, p->tenant, h)) {
      hutch_err_fail(&err, HUTCH_ERR_INVALID, "invalid_argument",
                     "the files of hash %s were not uploaded", h);
      break;
    }
    tars[i] = tplfiles_path(c->srv, p->tenant, h);
  }

  if (df && i == n)
    workdir = hutch_images_scratchdir(&c->srv->images, &err);
  struct template_spec spec = {.name = j->name,
                               .kind = "build",
                               .dockerfile = df,
                               .contexts = tars,
                               .tags = j->tags,
                               .no_cache = json_is_true(json_object_get(o, "force"))};
  if (!workdir) {
    /* The SDK polls the status next: the job ends in this error too. */
    templates_fail(j, &err);
    http_fail(c, &err);
  } else if (templates_begin(j, p, &spec, workdir, &err) < 0) {
    http_fail(c, &err);
  } else {
    http_respond(c, 202, "application/json", "", 0, NULL);
  }

  for (i = 0; i < n; i++)
    free(tars[i]);
  free(tars);
  json_decref(hashes);
  json_decref(o);
}

/* What an event of the job says, as a line for a person: its message, a
 * build's step and output, or the event itself. */
static char *event_text(json_t *ev, const char *name) {
  const char *msg = json_string_value(json_object_get(ev, "message"));
  json_int_t step = json_integer_value(json_object_get(ev, "step"));
  json_int_t steps = json_integer_value(json_object_get(ev, "steps"));
  if (msg)
    return xstrdup(msg);
  if (strcmp(name, "log") == 0)
    return xstrdup(json_string_value(json_object_get(ev, "line")) ?: "");
  if (strcmp(name, "step") == 0)
    return xasprintf("[%lld/%lld] %s", (long long)step, (long long)steps,
                     json_string_value(json_object_get(ev, "instruction")) ?: "");
  if (strcmp(name, "step_done") == 0)
    return xasprintf("[%lld/%lld] %s", (long long)step, (long long)steps,
                     json_is_true(json_object_get(ev, "cached")) ? "cached" : "done");
  if (strcmp(name, "done") == 0)
    return xasprintf("template %s is ready",
                     json_string_value(json_object_get(json_object_get(ev, "template"), "name"))
                         ?: "");
  if (strcmp(name, "built") == 0)
    return xasprintf("built %s", json_string_value(json_object_get(ev, "name")) ?: "");
  return json_dumps(ev, JSON_COMPACT);
}

/* An event of the job's log as E2B's BuildLogEntry. */
static json_t *log_entry(json_t *ev) {
  char ts[32];
  iso8601(json_integer_value(json_object_get(ev, "time")), ts);
  const char *name = json_string_value(json_object_get(ev, "event")) ?: "";
  char *text = event_text(ev, name);
  bool bad = strcmp(name, "error") == 0 || strcmp(name, "failed") == 0;
  json_t *o = json_pack("{s:s,s:s,s:o}", "timestamp", ts, "level", bad ? "error" : "info",
                        "message", http_json_text(text ? text : ""));
  free(text);
  return o;
}

/* E2B's BuildStatus for each state: a queued job is "waiting", which
 * its SDK polls on as it does "building". */
static const char *const statuses[] = {"waiting", "waiting", "building", "ready", "error"};

/* ?logsOffset=N: the log from its Nth event. */
void e2b_templates_status(struct http_conn *c, const struct principal *p) {
  struct template_job *j = build_of(c, p);
  if (!j)
    return;
  uint64_t from = 0;
  _cleanup_free_ char *q = http_query(&c->req, "logsOffset");
  if (q && !parse_u64(q, &from)) {
    http_error(c, HUTCH_ERR_INVALID, "invalid_argument", "logsOffset: a count of entries");
    return;
  }
  json_t *entries = json_array(), *logs = json_array();
  for (size_t i = (size_t)from; i < json_array_size(j->log); i++) {
    json_t *e = log_entry(json_array_get(j->log, i));
    json_array_append(logs, json_object_get(e, "message"));
    json_array_append_new(entries, e);
  }
  json_t *out = json_pack("{s:s,s:s,s:s,s:o,s:o}", "templateID", j->name, "buildID", j->id,
                          "status", statuses[j->state], "logs", logs, "logEntries", entries);
  if (j->state == TJOB_ERROR)
    json_object_set_new(out, "reason", json_pack("{s:s}", "message", j->err.msg));
  http_json(c, 200, out);
}

void e2b_templates_alias(struct http_conn *c, const struct principal *p) {
  struct hutch_err err = {0};
  const char *name = c->req.params[0];
  json_t *rec = tplstore_get(c->srv, p, name, &err);
  /* The SDKs' default names are there whether the store has them or not:
   * a create of one makes a host sandbox (Template.exists("base")). */
  if (!rec && err.kind == HUTCH_ERR_NOT_FOUND && e2b_host_alias(name)) {
    http_json(c, 200, json_pack("{s:s,s:b}", "templateID", name, "public", 1));
    return;
  }
  if (!rec) {
    http_fail(c, &err);
    return;
  }
  const char *owner = json_string_value(json_object_get(rec, "owner"));
  http_json(c, 200,
            json_pack("{s:O,s:b}", "templateID", json_object_get(rec, "name"), "public",
                      !owner || !*owner));
  json_decref(rec);
}

/* E2B's Template, from a record. */
static json_t *e2b_template(json_t *rec) {
  char at[32];
  iso8601(json_integer_value(json_object_get(rec, "created_at")), at);
  const char *owner = json_string_value(json_object_get(rec, "owner"));
  json_t *name = json_object_get(rec, "name");
  return json_pack("{s:O,s:O,s:i,s:i,s:I,s:b,s:[O],s:[O],s:s,s:s,s:n,s:n,s:i,s:i,s:s,s:s}",
                   "templateID", name, "buildID", json_object_get(rec, "id"), "cpuCount", 1,
                   "memoryMB", 1024, "diskSizeMB",
                   json_integer_value(json_object_get(rec, "size_bytes")) >> 20, "public",
                   !owner || !*owner, "aliases", name, "names", name, "createdAt", at, "updatedAt",
                   at, "createdBy", "lastSpawnedAt", "spawnCount", 0, "buildCount", 1,
                   "buildStatus", "ready", "envdVersion", E2B_ENVD_VERSION);
}

void e2b_templates_list(struct http_conn *c, const struct principal *p) {
  json_t *all = tplstore_list(c->srv, p), *out = json_array(), *v;
  size_t i;
  json_array_foreach(all, i, v)
    json_array_append_new(out, e2b_template(v));
  json_decref(all);
  http_json(c, 200, out);
}

/* GET /templates/{id}/tags: every tag of the template's builds. */
void e2b_templates_tags(struct http_conn *c, const struct principal *p) {
  json_t *builds = tplstore_builds(c->srv, p, c->req.params[0]), *b, *v;
  if (json_array_size(builds) == 0) {
    json_decref(builds);
    http_error(c, HUTCH_ERR_NOT_FOUND, "template_not_found", "no template '%s'", c->req.params[0]);
    return;
  }
  json_t *out = json_array();
  size_t i, k;
  json_array_foreach(builds, i, b) {
    char at[32];
    iso8601(json_integer_value(json_object_get(b, "created_at")), at);
    json_array_foreach(json_object_get(b, "tags"), k, v)
      json_array_append_new(out, json_pack("{s:O,s:O,s:s}", "tag", v, "buildID",
                                           json_object_get(b, "id"), "createdAt", at));
  }
  json_decref(builds);
  http_json(c, 200, out);
}

/* POST /templates/tags {target: "NAME:TAG", tags}: the build target
 * names gets the tags (they leave the name's other builds). */
void e2b_templates_tags_assign(struct http_conn *c, const struct principal *p) {
  json_t *o = http_body_object(c);
  if (!o)
    return;
  const char *target = json_string_value(json_object_get(o, "target"));
  json_t *tags = json_object_get(o, "tags");
  struct hutch_err err = {0};
  json_t *rec = NULL;

  if (!target || !tags_ok(tags) || json_array_size(tags) == 0) {
    http_error(c, HUTCH_ERR_INVALID, "invalid_argument",
               "{target: \"NAME:TAG\", tags: [TAG, ...]}, each tag 1 to %d of A-Z, a-z, 0-9, "
               "'.', '_' and '-'",
               HUTCH_IMAGE_NAME_MAX);
  } else if (tplstore_tag(c->srv, p, target, tags, &err) < 0) {
    http_fail(c, &err);
  } else {
    rec = tplstore_get(c->srv, p, target, &err);
    if (!rec)
      http_fail(c, &err);
    else
      http_json(c, 201,
                json_pack("{s:O,s:O}", "buildID", json_object_get(rec, "id"), "tags", tags));
  }
  json_decref(rec);
  json_decref(o);
}

/* DELETE /templates/tags {name, tags}: the tags leave the name's builds
 * (a build left with none goes). */
void e2b_templates_tags_remove(struct http_conn *c, const struct principal *p) {
  json_t *o = http_body_object(c);
  if (!o)
    return;
  const char *name = json_string_value(json_object_get(o, "name"));
  json_t *tags = json_object_get(o, "tags");
  struct hutch_err err = {0};
  if (!name || !tags_ok(tags) || json_array_size(tags) == 0)
    http_error(c, HUTCH_ERR_INVALID, "invalid_argument", "{name, tags: [TAG, ...]}");
  else if (tplstore_untag(c->srv, p, name, tags, &err) < 0)
    http_fail(c, &err);
  else
    http_respond(c, 204, NULL, NULL, 0, NULL);
  json_decref(o);
}

/* DELETE /templates/{id}: a snapshot (the SDK's deleteSnapshot) when the
 * id is one of the tenant's, else a template. */
void e2b_templates_delete(struct http_conn *c, const struct principal *p) {
  struct hutch_err err = {0};
  json_t *snap = snapshots_get(c->srv, p->tenant, c->req.params[0]);
  if (snap) {
    json_decref(snap);
    api_snapshots_drop(c, p, c->req.params[0]);
    return;
  }
  struct http_wait *w = api_wait(c);
  if (tplstore_delete(c->srv, p, c->req.params[0], api_answer_204, w, &err) < 0) {
    http_wait_end(w);
    free(w);
    http_fail(c, &err);
  }
}
