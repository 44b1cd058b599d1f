/* The native API's templates (docs/templates.md, "The API and E2B's
 * Template SDK"): /v1/templates. Parsing and answers only: the store and
 * the jobs are core/templates.c's, uploads core/tplfiles.c's; E2B's
 * template API goes through the same (templates.h). */
#include "api/templates.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cleanup.h"
#include "images.h"
#include "util.h"
#include "api/snapshots.h"
#include "core/base/server.h"
#include "core/disk/diskroom.h"
#include "core/sandbox/tally.h"
#include "core/disk/templates.h"
#include "core/disk/tplfiles.h"
#include "http/body.h"
#include "core/disk/tplstore.h"
#include "http/errors.h"
#include "http/http.h"
#include "http/query.h"
#include "http/request.h"

/* A record as a tenant sees it: whose it is said as public or not, and
 * where it came from without the host's directories. `hutch template
 * import PATH` and `build CONTEXT` record the path the operator gave
 * (theirs to see in `hutch template ls`), and such a template is public:
 * every tenant would read where the operator keeps images. The name the
 * operator gave the file is shown, the directories above it are not. */
json_t *api_templates_view(json_t *rec) {
  json_t *o = json_deep_copy(rec);
  const char *owner = json_string_value(json_object_get(rec, "owner"));
  json_object_set_new(o, "public", json_boolean(!owner || !*owner));
  json_object_del(o, "owner");
  const char *ref = json_string_value(json_object_get(rec, "ref"));
  if (ref && ref[0] == '/')
    json_object_set_new(o, "ref", json_string(strrchr(ref, '/') + 1));
  return o;
}

void api_templates_list(struct http_conn *c, const struct principal *p) {
  json_t *all = tplstore_list(c->srv, p), *out = json_array(), *v;
  size_t i;
  json_array_foreach(all, i, v)
    json_array_append_new(out, api_templates_view(v));
  json_decref(all);
  http_json(c, 200, json_pack("{s:o}", "templates", out));
}

/* The {name} of the path, percent-decoded: a name with '/' comes as %2F. */
static char *name_param(struct http_conn *c) {
  char *name = http_unescape(c->req.params[0]);
  if (!name || !utf8_valid(name, strlen(name))) {
    free(name);
    http_error(c, HUTCH_ERR_INVALID, "invalid_argument", "the template name is not UTF-8");
    return NULL;
  }
  return name;
}

void api_templates_get(struct http_conn *c, const struct principal *p) {
  struct hutch_err err = {0};
  _cleanup_free_ char *name = name_param(c);
  json_t *rec = name ? tplstore_get(c->srv, p, name, &err) : NULL;
  if (rec)
    http_json(c, 200, api_templates_view(rec));
  else if (name)
    http_fail(c, &err);
  json_decref(rec);
}

void api_templates_delete(struct http_conn *c, const struct principal *p) {
  struct hutch_err err = {0};
  _cleanup_free_ char *name = name_param(c);
  if (!name)
    return;
  struct http_wait *w = api_wait(c);
  if (tplstore_delete(c->srv, p, name, api_answer_204, w, &err) < 0) {
    http_wait_end(w);
    free(w);
    http_fail(c, &err);
  }
}

/* ---- following a job: NDJSON lines, or the job to poll ---- */

/* What a slow reader of a job's events may have queued before events are
 * skipped for it (the job's log keeps them all, to poll). */
#define FOLLOW_QUEUED_MAX (4u << 20)

struct follow {
  struct http_conn *c;
  struct template_job *j;
};

static void follow_send(struct http_conn *c, json_t *ev) {
  size_t n;
  char *line = http_json_line(json_incref(ev), &n);
  http_stream_send(c, line, n);
  free(line);
}

static void follow_event(struct template_job *j, json_t *ev, void *arg) {
  (void)j;
  struct follow *f = arg;
  if (http_queued(f->c) < FOLLOW_QUEUED_MAX)
    follow_send(f->c, ev);
}

static void follow_end(struct template_job *j, void *arg) {
  (void)j;
  struct follow *f = arg;
  http_stream_end(f->c);
  free(f);
}

static const struct template_watch follow_watch = {.event = follow_event, .end = follow_end};

/* The client left: the job goes on, to be polled. */
static void follow_abort(void *ctx) {
  struct follow *f = ctx;
  templates_watch(f->j, NULL, NULL);
  free(f);
}

static const struct http_stream_ops follow_ops = {.abort = follow_abort};

static bool wants_ndjson(struct http_conn *c) {
  const char *accept = http_header(&c->req, "Accept");
  return accept && strcasestr(accept, "application/x-ndjson");
}

/* Prefer: respond-async (RFC 7240): the job at once, to poll. */
static bool wants_async(struct http_conn *c) {
  const char *prefer = http_header(&c->req, "Prefer");
  return prefer && strcasestr(prefer, "respond-async");
}

/* A request that waits for its job's end: the template, or the job's
 * error as the request's dialect writes it. A client that leaves lets the
 * job go on; this goes with the job's end. */
struct await {
  struct http_wait w;
};

static void await_end(struct template_job *j, void *arg) {
  struct await *a = arg;
  struct http_conn *c = http_wait_end(&a->w);
  free(a);
  if (c && j->record)
    http_json(c, 201, api_templates_view(j->record));
  else if (c)
    http_fail(c, &j->err);
}

static const struct template_watch await_watch = {.end = await_end};

/* Whether j has its end still to come: running, or queued for a slot. */
static bool job_live(const struct template_job *j) {
  return j->state == TJOB_QUEUED || j->state == TJOB_BUILDING;
}

void api_templates_answer(struct http_conn *c, struct template_job *j) {
  if (wants_async(c) && !wants_ndjson(c)) {
    _cleanup_free_ char *loc = xasprintf("Location: /v1/templates/jobs/%s\r\n", j->id);
    json_t *o = templates_job_json(j, 0);
    size_t n;
    char *s = http_json_line(o, &n);
    http_respond(c, 202, "application/json", s, n, loc);
    free(s);
    return;
  }

  if (!wants_ndjson(c)) {
    struct await *a = xcalloc(1, sizeof *a);
    http_wait_begin(&a->w, c);
    if (job_live(j))
      templates_watch(j, &await_watch, a);
    else
      await_end(j, a);
    return;
  }

  struct follow *f = xcalloc(1, sizeof *f);
  f->c = c;
  f->j = j;
  http_stream_start(c, 200, "application/x-ndjson", &follow_ops, f);
  json_t *first = json_pack("{s:s,s:s,s:s}", "event", "job", "id", j->id, "name", j->name);
  follow_send(c, first);
  json_decref(first);

  /* Its events so far (queued: why; ended already, as it failed to
   * start: its last), then the rest as they come, or the end. */
  size_t i;
  json_t *ev;
  json_array_foreach(j->log, i, ev)
    follow_send(c, ev);
  if (job_live(j))
    templates_watch(j, &follow_watch, f);
  else
    follow_end(j, f);
}

/* {"name", "from": REF, "insecure"} pulls; {"name", "dockerfile", "context":
 * ID, "no_cache"} builds; "public" (admin key) publishes. */
void api_templates_create(struct http_conn *c, const struct principal *p) {
  static const char *const known[] = {"name",    "from",     "insecure", "dockerfile",
                                      "context", "no_cache", "public",   NULL};
  struct hutch_err err = {0};
  struct template_spec spec = {0};
  json_t *o = http_body_object(c);
  if (!o)
    return;
  const char *ctx_id = NULL;
  char *workdir = NULL, *ctx_path = NULL;
  if (http_body_only(c, o, known) < 0)
    goto out;
  if (http_body_string(c, o, "name", 256, &spec.name) < 0)
    goto out;
  if (http_body_string(c, o, "from", 1024, &spec.source) < 0)
    goto out;
  if (http_body_string(c, o, "dockerfile", HTTP_BODY_MAX, &spec.dockerfile) < 0)
    goto out;
  if (http_body_string(c, o, "context", 64, &ctx_id) < 0)
    goto out;

  spec.insecure = json_is_true(json_object_get(o, "insecure"));
  spec.no_cache = json_is_true(json_object_get(o, "no_cache"));
  spec.public = json_is_true(json_object_get(o, "public"));
  if (!spec.name || !spec.source == !spec.dockerfile || (ctx_id && !spec.dockerfile)) {
    http_error(c, HUTCH_ERR_INVALID, "invalid_argument",
               "a template takes a name and either from (a reference to pull) or dockerfile "
               "(with an optional context)");
    goto out;
  }
  if (ctx_id && (!hutch_images_hex_ok(ctx_id) || !tplfiles_present(c->srv, p->tenant, ctx_id))) {
    http_error(c, HUTCH_ERR_NOT_FOUND, "not_found", "no uploaded context %s", ctx_id);
    goto out;
  }

  spec.kind = spec.source ? "pull" : "build";
  if (spec.dockerfile) {
    workdir = hutch_images_scratchdir(&c->srv->images, &err);
    if (!workdir) {
      http_fail(c, &err);
      goto out;
    }
    if (ctx_id)
      ctx_path = tplfiles_path(c->srv, p->tenant, ctx_id);
  }

  char *contexts[] = {ctx_path, NULL};
  spec.contexts = ctx_path ? contexts : NULL;
  struct template_job *j = templates_start(c->srv, p, &spec, workdir, &err);
  if (j)
    api_templates_answer(c, j);
  else
    http_fail(c, &err);

out:
  free(ctx_path);
  json_decref(o);
}

void api_templates_job(struct http_conn *c, const struct principal *p) {
  struct template_job *j = templates_job(c->srv, p, c->req.params[0]);
  if (!j) {
    http_error(c, HUTCH_ERR_NOT_FOUND, "not_found", "no template job %s", c->req.params[0]);
    return;
  }
  uint64_t from = 0;
  _cleanup_free_ char *q = http_query(&c->req, "log_from");
  if (q && !parse_u64(q, &from)) {
    http_error(c, HUTCH_ERR_INVALID, "invalid_argument", "log_from: a count of events");
    return;
  }
  http_json(c, 200, templates_job_json(j, (size_t)from));
}

void api_templates_job_cancel(struct http_conn *c, const struct principal *p) {
  struct template_job *j = templates_job(c->srv, p, c->req.params[0]);
  if (!j) {
    http_error(c, HUTCH_ERR_NOT_FOUND, "not_found", "no template job %s", c->req.params[0]);
    return;
  }
  templates_cancel(j);
  http_respond(c, 204, "application/json", "", 0, NULL);
}

/* ---- uploads: the body, as it comes, to a file ---- */

/* An upload holds the bytes it may write as a reservation of its tenant's
 * disk quota (diskroom_reserve) from before its first byte to its end: the
 * whole Content-Length up front, refused 429 before a byte is read, or,
 * without a length, as it grows, stopped where the quota is. Uploads side
 * by side thus share one quota, where each capped at the quota left when
 * it began let five parallel uploads of 15 MiB put 76 MiB on the disk of a
 * tenant with 20. Their number is bounded as well, each holding a
 * connection, a file and a piece of memory. */
struct receive {
  struct server *srv;
  struct http_conn *c;
  struct principal p;
  struct tpl_upload *u;
  receive_fn done;
  char *arg;
  uint64_t held; /* reserved of the tenant's quota */
  bool sized;    /* held is the Content-Length: the body can be no more */
};

/* Grown a MiB at a time or by what is held so far, whichever is more, so
 * that a large upload checks its quota a few dozen times, not per piece;
 * what is not asked fits exactly. */
static int receive_grow(struct receive *r, uint64_t need, struct hutch_err *err) {
  if (r->sized || need <= r->held)
    return 0;
  uint64_t more = need - r->held, step = r->held > (1u << 20) ? r->held : (1u << 20);
  struct hutch_err ignored = {0};
  if (more < step && diskroom_reserve_ahead(r->srv, &r->p, step, &ignored) == 0) {
    r->held += step;
    return 0;
  }
  if (diskroom_reserve(r->srv, &r->p, more, err) < 0)
    return -1;
  r->held += more;
  return 0;
}

static void receive_free(struct receive *r) {
  diskroom_release(r->srv, r->p.tenant, r->held);
  tally_disk(r->srv, r->p.tenant, 0, -1);
  free(r->arg);
  free(r);
}

static void receive_abort(void *ctx) {
  struct receive *r = ctx;
  tplfiles_upload_close(r->u);
  receive_free(r);
}

static void receive_resume(void *arg) {
  struct receive *r = arg;
  http_body_resume(r->c);
}

/* The upload ends with err: its file and reservation go, and the client
 * hears why. */
static void receive_fail(struct receive *r, const struct hutch_err *err) {
  struct http_conn *c = r->c;
  receive_abort(r);
  http_own(c, NULL, NULL);
  http_fail(c, err);
}

static void receive_body(void *ctx, const char *data, size_t n) {
  struct receive *r = ctx;
  struct hutch_err err = {0};
  if (receive_grow(r, tplfiles_upload_size(r->u) + n, &err) < 0) {
    receive_fail(r, &err);
    return;
  }
  if (tplfiles_upload_write(r->u, data, n, receive_resume, r, &err) < 0) {
    receive_fail(r, &err);
    return;
  }
  http_body_pause(r->c);
}

/* The bytes stay reserved until done has put the file where it is
 * counted (a context, E2B's files) or given it to a job. */
static void receive_end(void *ctx) {
  struct receive *r = ctx;
  struct http_conn *c = r->c;
  http_own(c, NULL, NULL);
  r->done(c, &r->p, r->u, r->arg);
  tplfiles_upload_close(r->u);
  receive_free(r);
}

static const struct http_stream_ops receive_ops = {
    .abort = receive_abort, .body = receive_body, .body_end = receive_end};

static int receive_admit(struct http_conn *c, const struct principal *p, uint64_t n,
                         struct hutch_err *err) {
  const struct tally *t = tally_of(c->srv, p->tenant);
  if (t && t->uploads >= TEMPLATE_UPLOADS_TENANT)
    return hutch_err_fail(err, HUTCH_ERR_QUOTA, "quota_exceeded",
                          "tenant %s has its maximum of %d uploads under way", p->tenant,
                          TEMPLATE_UPLOADS_TENANT);
  /* The tenant's old uploads make way for this one before its quota
   * refuses it (they count against it). */
  if (tplfiles_make_room(c->srv, p->tenant, diskroom_quota_left(c->srv, p), n, err) < 0)
    return -1;
  return n ? diskroom_reserve(c->srv, p, n, err) : 0;
}

void api_templates_receive(struct http_conn *c, const struct principal *p, receive_fn done,
                           char *arg) {
  struct hutch_err err = {0};
  const char *len = http_header(&c->req, "Content-Length");
  uint64_t n = 0;
  bool sized = len && parse_u64(len, &n);
  if (sized && n > TEMPLATE_UPLOAD_MAX) {
    free(arg);
    http_error(c, HUTCH_ERR_TOO_LARGE, "too_large", "an upload may carry at most %llu MiB",
               (unsigned long long)(TEMPLATE_UPLOAD_MAX >> 20));
    return;
  }
  if (receive_admit(c, p, n, &err) < 0) {
    free(arg);
    http_fail(c, &err);
    return;
  }

  struct tpl_upload *u = tplfiles_upload_open(c->srv, sized ? n : TEMPLATE_UPLOAD_MAX, &err);
  if (!u) {
    diskroom_release(c->srv, p->tenant, n);
    free(arg);
    http_fail(c, &err);
    return;
  }

  struct receive *r = xcalloc(1, sizeof *r);
  r->srv = c->srv;
  r->c = c;
  r->p = *p;
  r->u = u;
  r->done = done;
  r->arg = arg;
  r->held = n;
  r->sized = sized;
  tally_disk(c->srv, p->tenant, 0, 1);
  http_body_start(c, &receive_ops, r);
}

static void imported(struct http_conn *c, const struct principal *p, struct tpl_upload *u,
                     char *name) {
  struct hutch_err err = {0};
  bool public = strncmp(name, "+", 1) == 0;
  /* The record names the upload by its sha256 (what the client can check
   * its archive against), not by its path under the state directory. */
  char ref[80];
  snprintf(ref, sizeof ref, "upload@sha256:%s", tplfiles_upload_digest(u));
  struct template_spec spec = {.name = name + public,
                               .public = public,
                               .kind = "import",
                               .source = tplfiles_upload_path(u),
                               .ref = ref};
  /* An archive cut short by a failed write is imported as nothing (and
   * its size, UINT64_MAX then, is handed on as no reservation). */
  struct template_job *j = NULL;
  if (tplfiles_upload_whole(u, &err) >= 0)
    j = templates_start(c->srv, p, &spec, tplfiles_upload_take_dir(u), &err);
  if (!j) {
    http_fail(c, &err);
    return;
  }
  /* The archive stays in the job's directory until the job ends: so does
   * its reservation. */
  j->held = tplfiles_upload_size(u);
  diskroom_hand_on(c->srv, p->tenant, j->held);
  api_templates_answer(c, j);
}

/* POST /v1/templates/import?name=N[&public=true]: the archive is the body. */
void api_templates_import(struct http_conn *c, const struct principal *p) {
  _cleanup_free_ char *name = http_query(&c->req, "name");
  _cleanup_free_ char *pub = http_query(&c->req, "public");
  bool public = pub && strcmp(pub, "true") == 0;
  if (!name || !hutch_images_name_ok(name)) {
    http_error(c, HUTCH_ERR_INVALID, "invalid_argument",
               "?name=: 1 to %d of a-z, 0-9, '.', '_', '-' and '/'", HUTCH_IMAGE_NAME_MAX);
    return;
  }
  if (public && !p->admin) {
    http_error(c, HUTCH_ERR_FORBIDDEN, "forbidden", "only the admin key publishes templates");
    return;
  }

  /* The body may be 8 GiB, written to disk as it comes: a job the queue
   * would refuse is refused before a byte of it is read, as the disk
   * quota refuses a Content-Length too large for it (api_templates_receive),
   * not after the upload filled the disk and held the connection. The
   * job is admitted again once the body is in. */
  struct hutch_err err = {0};
  if (tplqueue_room(c->srv, p, &err) < 0) {
    http_fail(c, &err);
    return;
  }

  /* The name rides along to the end; a '+' before it says public. */
  api_templates_receive(c, p, imported, xasprintf("%s%s", public ? "+" : "", name));
}

static void context_stored(struct http_conn *c, const struct principal *p, struct tpl_upload *u,
                           char *arg) {
  (void)arg;
  struct hutch_err err = {0};
  const char *id = tplfiles_upload_digest(u);
  _cleanup_free_ char *path = tplfiles_path(c->srv, p->tenant, id);
  if (tplfiles_upload_move(u, path, &err) < 0)
    http_fail(c, &err);
  else
    http_json(c, 201,
              json_pack("{s:s,s:I}", "id", id, "size", (json_int_t)tplfiles_upload_size(u)));
}

/* POST /v1/templates/contexts: a build context (a tar, plain or
 * compressed) as the body; answered with its id (its sha256). */
void api_templates_context(struct http_conn *c, const struct principal *p) {
  api_templates_receive(c, p, context_stored, NULL);
}
