/* Templates as actions (templates.h): the store read on the loop (small
 * JSON records), removals off it, and imports, pulls and builds as child
 * processes of hutch-template, read through a pipe by the loop.
 *
 * A child is hutch's own program, but what it reads (an archive, a
 * registry, a Dockerfile's RUN output) is hostile: its event lines are
 * parsed as JSON with a cap on each line and on the log, so a child
 * cannot make the server hold more than TEMPLATE_LINE_MAX per job plus
 * TEMPLATE_LOG_MAX events of TEMPLATE_LOG_BYTES, for TEMPLATE_JOBS_KEPT
 * jobs of each tenant. */
#include "core/disk/templates.h"

#include <dirent.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cleanup.h"
#include "layer.h"
#include "util.h"
#include "core/events/events.h"
#include "core/disk/diskroom.h"
#include "core/base/server.h"
#include "core/sandbox/tally.h"
#include "core/disk/tplcache.h"
#include "core/disk/tplcap.h"
#include "core/disk/tplfiles.h"
#include "core/disk/tplqueue.h"
#include "core/disk/tplspec.h"
#include "core/disk/tpltokens.h"
#include "core/disk/tplstore.h"

struct templates *templates_state(struct server *srv) {
  if (!srv->templates)
    srv->templates = xcalloc(1, sizeof *srv->templates);
  return srv->templates;
}

/* hutch-template: the program beside this one, as hutch-agent is. */
static char *template_program(void) {
  char exe[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0)
    return xstrdup("hutch-template");
  exe[n] = '\0';
  char *slash = strrchr(exe, '/');
  if (slash)
    *slash = '\0';
  return xasprintf("%s/hutch-template", exe);
}

/* What a child leaves under tmp/<pid>-* once it is gone (killed: the
 * job cancelled, the server stopping; or a verb that left it for the
 * next sweep) is removed off the loop now, not whenever another process
 * next opens the store. */
struct sweep {
  struct offload o;
  char *tmp;
  int pid;
};

static void sweep_run(struct offload *o) {
  struct sweep *sw = OFFLOAD_JOB(o, struct sweep);
  DIR *d = opendir(sw->tmp);
  struct dirent *e;
  char prefix[24];
  snprintf(prefix, sizeof prefix, "%d-", sw->pid);
  while (d && (e = readdir(d))) {
    if (strncmp(e->d_name, prefix, strlen(prefix)) != 0)
      continue;
    _cleanup_free_ char *path = xasprintf("%s/%s", sw->tmp, e->d_name);
    struct hutch_err ignored = {0};
    hutch_layer_remove(path, &ignored);
  }
  if (d)
    closedir(d);
}

static void sweep_done(struct offload *o) {
  struct sweep *sw = OFFLOAD_JOB(o, struct sweep);
  free(sw->tmp);
  free(sw);
}

static void sweep_child(struct server *srv, int pid) {
  struct sweep *sw = xcalloc(1, sizeof *sw);
  sw->tmp = xasprintf("%s/tmp", srv->images.dir);
  sw->pid = pid;
  offload(srv, OFFLOAD_OTHER, &sw->o, sweep_run, sweep_done);
}

static void job_ended(struct template_job *j);
static int job_spawn(struct template_job *j, struct hutch_err *err);

/* The child's error event says why: its message, kind and code (a code
 * of hutch-template's, kept in the job, which outlives every use of its
 * err). */
static bool code_ok(const char *code) {
  size_t n = code ? strspn(code, "abcdefghijklmnopqrstuvwxyz_") : 0;
  return n > 0 && n < sizeof((struct template_job *)0)->code && !code[n];
}

/* last: the job's end, kept whatever the log holds. */
static void job_event(struct template_job *j, json_t *ev, bool last) {
  const char *name = json_string_value(json_object_get(ev, "event"));
  if (name && strcmp(name, "error") == 0 && !j->err.msg[0]) {
    const char *msg = json_string_value(json_object_get(ev, "message")) ?: "the job failed";
    json_int_t kind = json_integer_value(json_object_get(ev, "kind"));
    const char *code = json_string_value(json_object_get(ev, "code"));
    enum hutch_errkind k = HUTCH_ERR_SYSTEM;
    if (kind > 0 && kind < HUTCH_ERR_KINDS)
      k = (enum hutch_errkind)kind;
    hutch_err_fail(&j->err, k, NULL, "%s", msg);
    if (code_ok(code)) {
      str_copy(j->code, sizeof j->code, code);
      j->err.code = j->code;
    }
  }

  if (j->watch && j->watch->event)
    j->watch->event(j, ev, j->watch_arg);

  size_t bytes = json_dumpb(ev, NULL, 0, JSON_COMPACT);
  bool room =
      json_array_size(j->log) < TEMPLATE_LOG_MAX && j->log_bytes + bytes <= TEMPLATE_LOG_BYTES;
  if (room || last) {
    json_array_append(j->log, ev);
    j->log_bytes += bytes;
  } else {
    j->dropped++;
  }
}

/* A line the child wrote: an event object, else text kept as a log line. */
static void job_line(struct template_job *j, const char *s, size_t n) {
  json_t *ev = json_loadb(s, n, JSON_REJECT_DUPLICATES, NULL);
  if (!json_is_object(ev) || !json_is_string(json_object_get(ev, "event"))) {
    json_decref(ev);
    char *text = utf8_valid(s, n) ? xasprintf("%.*s", (int)n, s) : xstrdup("(not UTF-8)");
    ev = json_pack("{s:s,s:s}", "event", "log", "message", text);
    free(text);
  }
  if (!json_object_get(ev, "time"))
    json_object_set_new(ev, "time", json_integer((json_int_t)time(NULL) * 1000));

  job_event(j, ev, false);
  json_decref(ev);
}

static void out_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf) {
  (void)hint;
  struct template_job *j = h->data;
  buf->base = j->srv->http.rbuf;
  buf->len = sizeof j->srv->http.rbuf;
}

static void child_done(struct template_job *j);

static void out_read(uv_stream_t *st, ssize_t n, const uv_buf_t *buf) {
  struct template_job *j = st->data;
  if (n <= 0) {
    if (n < 0) {
      uv_read_stop(st);
      j->eof = true;
      child_done(j);
    }
    return;
  }

  for (const char *p = buf->base, *end = buf->base + n; p < end;) {
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    size_t take = (size_t)((nl ? nl : end) - p);

    if (!j->overlong && j->nline + take > TEMPLATE_LINE_MAX) {
      j->overlong = true;
      job_line(j, "(an event line too long was dropped)", 36);
    }
    if (!j->overlong) {
      j->line = xrealloc(j->line, j->nline + take + 1);
      memcpy(j->line + j->nline, p, take);
      j->nline += take;
    }

    if (nl) {
      if (!j->overlong && j->nline)
        job_line(j, j->line, j->nline);
      j->nline = 0;
      j->overlong = false;
    }

    p += take + (nl ? 1 : 0);
  }
}

static void handle_closed(uv_handle_t *h) {
  struct template_job *j = h->data;
  if (--j->handles > 0)
    return;

  j->spawned = false;
  struct hutch_err err = {0};
  bool ok = j->exit_status == 0 && j->term_signal == 0 && !j->cancelled && !j->timed_out;
  /* The child's own last word (interrupted) is not the reason here. */
  if (j->cancelled || j->timed_out)
    j->err = (struct hutch_err){0};

  /* The next step runs, or the job ends with why. */
  if (ok && ++j->step < j->nsteps && !j->srv->stopping) {
    if (job_spawn(j, &err) == 0)
      return;
    j->err = err;
  } else if (!ok && !j->err.msg[0]) {
    if (j->cancelled)
      hutch_err_fail(&j->err, HUTCH_ERR_CONFLICT, "cancelled", "the job was cancelled");
    else if (j->timed_out)
      hutch_err_fail(&j->err, HUTCH_ERR_QUOTA, "timeout", "the job ran longer than %llu s",
                     (unsigned long long)(j->srv->cfg.template_timeout_ms / 1000));
    else if (j->srv->stopping)
      hutch_err_fail(&j->err, HUTCH_ERR_UNAVAILABLE, "stopping", "the server is stopping");
    else if (j->term_signal)
      hutch_err_fail(&j->err, HUTCH_ERR_SYSTEM, NULL, "hutch-template died of signal %d",
                     j->term_signal);
    else
      hutch_err_fail(&j->err, j->exit_status == 2 ? HUTCH_ERR_INVALID : HUTCH_ERR_SYSTEM, NULL,
                     "hutch-template %s failed (exit %lld)", j->steps[j->step][0],
                     (long long)j->exit_status);
  } else if (ok && j->srv->stopping && j->step < j->nsteps) {
    hutch_err_fail(&j->err, HUTCH_ERR_UNAVAILABLE, "stopping", "the server is stopping");
  }

  job_ended(j);
}

/* The child ended and its pipe did too: a last line without its newline
 * counts, then the handles close. */
static void child_done(struct template_job *j) {
  if (!j->exited || (!j->eof && !j->drained))
    return;

  if (j->nline && !j->overlong)
    job_line(j, j->line, j->nline);
  j->nline = 0;

  uv_close((uv_handle_t *)&j->proc, handle_closed);
  uv_close((uv_handle_t *)&j->out, handle_closed);
  uv_close((uv_handle_t *)&j->linger, handle_closed);
}

/* A process the child left behind may hold its stdout open: what it
 * wrote by then is read, the rest is not waited for. */
static void linger_due(uv_timer_t *t) {
  struct template_job *j = t->data;
  j->drained = true;
  uv_read_stop((uv_stream_t *)&j->out);
  child_done(j);
}

/* A tenant's job past its time: its child is killed, the job fails. Each
 * step is bounded (a RUN step by --timeout, a pull by its low-speed
 * limit), but a Dockerfile may hold many: without this, a tenant's long
 * jobs would hold their slots (TEMPLATE_JOBS_SERVER), and everyone else's
 * jobs wait in the queue, for as long as they like. */
static void kill_due(uv_timer_t *t) {
  struct template_job *j = t->data;
  uv_process_kill(&j->proc, SIGKILL);
}

/* End the child: SIGTERM first, which a build takes as an interrupt and
 * answers by destroying its RUN step's sandbox (a SIGKILL left the
 * sandbox's cgroups behind); SIGKILL if it has not ended after
 * TEMPLATE_KILL_GRACE_MS. The linger timer waits (proc_exit restarts it). */
static void job_kill(struct template_job *j) {
  uv_process_kill(&j->proc, SIGTERM);
  uv_timer_start(&j->linger, kill_due, TEMPLATE_KILL_GRACE_MS, 0);
}

static void deadline_due(uv_timer_t *t) {
  struct template_job *j = t->data;
  j->timed_out = true;
  job_kill(j);
}

static void proc_exit(uv_process_t *p, int64_t status, int sig) {
  struct template_job *j = p->data;
  j->exit_status = status;
  j->term_signal = sig;
  sweep_child(j->srv, p->pid);
  j->exited = true;
  uv_timer_start(&j->linger, linger_due, TEMPLATE_LINGER_MS, 0);
  child_done(j);
}

/* The environment a job's child gets. The server's is the operator's: a
 * registry credential there (HUTCH_REGISTRY_AUTH) is for the admin key's
 * pulls. A tenant's job names its own registry, which would be sent the
 * credential on its first 401 (as Basic, or to a token realm it names),
 * so a tenant's job gets the environment without it. NULL: the server's
 * own, unchanged (the array is malloc'd, its strings borrowed). */
static char **job_env(const struct template_job *j) {
  extern char **environ;
  if (j->admin)
    return NULL;

  size_t n = 0;
  while (environ[n])
    n++;
  char **env = xcalloc(n + 1, sizeof *env);
  size_t k = 0;
  for (size_t i = 0; i < n; i++)
    if (strncmp(environ[i], "HUTCH_REGISTRY_AUTH=", 20) != 0)
      env[k++] = environ[i];
  return env;
}

static void job_free(struct template_job *j);

/* The handles of a spawn that failed: the job may be freed only after. */
static void spawn_undone(uv_handle_t *h) {
  struct template_job *j = h->data;
  if (--j->handles == 0 && j->orphan)
    job_free(j);
}

static int job_spawn(struct template_job *j, struct hutch_err *err) {
  char **step = j->steps[j->step];
  size_t n = 0;
  while (step[n])
    n++;

  _cleanup_free_ char *prog = template_program();
  char **argv = xcalloc(n + 13, sizeof *argv);
  size_t a = 0;
  argv[a++] = prog;
  argv[a++] = "--state-dir";
  argv[a++] = j->srv->cfg.state_dir;
  argv[a++] = "--owner";
  argv[a++] = j->owner;
  argv[a++] = "--progress";
  argv[a++] = "ndjson";
  /* A tenant's job pulls (or builds FROM) no registry on the host's
   * loopback, which would reach the host's own services. */
  if (!j->admin)
    argv[a++] = "--public-registries";

  /* What the child unpacks stops at the tenant's quota, not after it: an
   * owned job always has its cap (templates_launch), a public one none. */
  char max[24];
  snprintf(max, sizeof max, "%llu", (unsigned long long)j->max_bytes);
  char files[24];
  snprintf(files, sizeof files, "%llu",
           (unsigned long long)(j->max_bytes / diskroom_entry_cost(j->srv)));
  if (*j->owner) {
    argv[a++] = "--max-bytes";
    argv[a++] = max;
    argv[a++] = "--max-files";
    argv[a++] = files;
  }
  for (size_t i = 0; i < n; i++)
    argv[a++] = step[i];

  uv_pipe_init(j->srv->loop, &j->out, 0);
  j->out.data = j;
  uv_stdio_container_t io[3] = {
      {.flags = UV_IGNORE},
      {.flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE, .data.stream = (uv_stream_t *)&j->out},
      {.flags = UV_IGNORE},
  };

  _cleanup_free_ char **env = job_env(j);
  uv_process_options_t o = {
      .exit_cb = proc_exit, .file = prog, .args = argv, .env = env, .stdio = io, .stdio_count = 3};
  j->proc.data = j;
  int r = uv_spawn(j->srv->loop, &j->proc, &o);
  free(argv);
  if (r < 0) {
    /* The pipe was initialised: it closes; the process handle too, as
     * libuv asks even of a failed spawn. */
    j->handles = 2;
    uv_close((uv_handle_t *)&j->out, spawn_undone);
    uv_close((uv_handle_t *)&j->proc, spawn_undone);
    /* The program's path is the host's: the operator reads it here. */
    fprintf(stderr, "hutch serve: run %s: %s\n", prog, uv_strerror(r));
    return hutch_err_fail(err, HUTCH_ERR_SYSTEM, NULL, "run hutch-template: %s", uv_strerror(r));
  }

  uv_timer_init(j->srv->loop, &j->linger);
  j->linger.data = j;
  /* The same timer lingers once the child ended (proc_exit restarts it). */
  if (j->deadline_ns) {
    uint64_t now = now_ns();
    uv_timer_start(&j->linger, deadline_due,
                   j->deadline_ns > now ? (j->deadline_ns - now) / 1000000 : 0, 0);
  }

  j->handles = 3;
  j->spawned = true;
  j->exited = j->eof = j->drained = false;
  j->exit_status = 0;
  j->term_signal = 0;

  uv_read_start((uv_stream_t *)&j->out, out_alloc, out_read);
  return 0;
}

/* A job kept (on) in its tenant's list or forgotten (off). */
static void keep_job(struct server *srv, struct template_job *j, bool on) {
  struct tally *t = tally_get(srv, j->tenant);
  if (on) {
    j->tenant_next = t->jobs;
    t->jobs = j;
  } else {
    struct template_job **pp = &t->jobs;
    while (*pp && *pp != j)
      pp = &(*pp)->tenant_next;
    if (*pp)
      *pp = j->tenant_next;
    j->tenant_next = NULL;
  }
  tally_put(srv, t);
}

struct template_job *templates_jobs_of(const struct server *srv, const char *tenant) {
  const struct tally *t = tally_of(srv, tenant);
  return t ? t->jobs : NULL;
}

/* j off the server's list and its tenant's: no lookup finds it again. */
static void job_unlist(struct server *srv, struct template_job *j) {
  struct templates *t = templates_state(srv);
  if (j->prev)
    j->prev->next = j->next;
  else if (t->jobs == j)
    t->jobs = j->next;
  if (j->next)
    j->next->prev = j->prev;
  j->next = j->prev = NULL;
  keep_job(srv, j, false);
}

/* keep's tenant's ended jobs past TEMPLATE_JOBS_KEPT go, oldest first;
 * never keep, which its caller still holds (nor the job whose end
 * started keep, tplqueue.h), nor a job whose failed spawn's handles are
 * still closing. Only its tenant's go: another tenant's jobs are never
 * pushed out by this one's. Queued jobs are bounded by the queue
 * (TEMPLATE_JOBS_QUEUED). */
static void forget_old(struct server *srv, const struct template_job *keep) {
  struct templates *t = templates_state(srv);
  size_t ended = 0;
  struct template_job *next;
  for (struct template_job *j = templates_jobs_of(srv, keep->tenant); j; j = next) {
    next = j->tenant_next;
    bool live =
        j->state == TJOB_QUEUED || j->state == TJOB_BUILDING || j->handles || j == t->queue.ending;
    if (!live && !j->watch && ++ended > TEMPLATE_JOBS_KEPT && j != keep) {
      job_unlist(srv, j);
      job_free(j);
    }
  }
}

/* What a job leaves past its tenant's disk quota goes: the quota is
 * checked before the job too, but only the finished template's size is
 * known, and the tenant's jobs side by side were each capped at what the
 * quota left when it began. Its least recently used build cache entries
 * go first (diskroom_check collects them), then the template this job made.
 * The layers nothing holds any more (a failed build's, the entries
 * collected) go off the loop. */
static void over_quota(struct template_job *j) {
  struct principal p = {0};
  struct hutch_err ignored = {0};
  str_copy(p.tenant, sizeof p.tenant, j->tenant);

  if (*j->owner) {
    struct hutch_err *why = j->record ? &j->err : &ignored;
    if (diskroom_check(j->srv, &p, 0, why) < 0 && j->record) {
      tplstore_remove(j->srv, j->owner, json_string_value(json_object_get(j->record, "id")), NULL,
                      NULL);
      json_decref(j->record);
      j->record = NULL;
    }
  }

  tplcache_gc(j->srv);
}

/* The code a failed job says: the error's own, else its kind's. */
static const char *err_code(const struct hutch_err *err) {
  if (err->code)
    return err->code;
  return hutch_err_class(err) == HUTCH_ERR_INVALID ? "invalid_argument" : "internal";
}

static void job_ended(struct template_job *j) {
  if (!j->err.msg[0] && !j->cancelled)
    j->record = hutch_images_find(&j->srv->images, j->owner, j->name, &j->err);

  /* The cap's bytes are the template's now, charged as it is kept. */
  diskroom_uncap(j->srv, j->tenant, j->max_bytes);
  j->max_bytes = 0;
  if (j->state == TJOB_BUILDING)
    over_quota(j);

  j->state = j->record ? TJOB_READY : TJOB_ERROR;
  j->ended_ms = (int64_t)time(NULL) * 1000;
  json_t *last;
  if (j->record)
    last = json_pack("{s:s,s:O}", "event", "done", "template", j->record);
  else
    last = json_pack("{s:s,s:s,s:s}", "event", "failed", "code", err_code(&j->err), "message",
                     j->err.msg);
  json_object_set_new(last, "time", json_integer(j->ended_ms));
  job_event(j, last, true);
  json_decref(last);
  events_emit(j->srv, "template.build", j->tenant, NULL,
              json_pack("{s:s,s:s,s:s,s:s,s:s?}", "state", j->record ? "succeeded" : "failed",
                        "name", j->name, "job", j->id, "kind", j->kind, "error",
                        j->record ? NULL : err_code(&j->err)));

  /* What it held goes: its steps, its workdir and its disk. */
  tplspec_steps_free(j);
  if (j->workdir)
    offload_remove(j->srv, j->workdir, true, NULL, NULL);
  j->workdir = NULL;
  diskroom_release(j->srv, j->tenant, j->held);
  j->held = 0;

  const struct template_watch *w = j->watch;
  j->watch = NULL;
  if (w && w->end)
    w->end(j, j->watch_arg);

  forget_old(j->srv, j);
  tplqueue_ended(j);
}

static void job_free(struct template_job *j) {
  tplspec_steps_free(j);
  free(j->workdir);
  json_decref(j->log);
  json_decref(j->record);
  free(j->name);
  json_decref(j->tags);
  free(j->kind);
  free(j->line);
  free(j);
}

struct template_job *templates_prepare(struct server *srv, const struct principal *p,
                                       const char *name, json_t *tags, bool public,
                                       struct hutch_err *err) {
  struct template_spec spec = {.name = name};
  if (!tplspec_ok(&spec, p, err))
    return NULL;
  if (public && !p->admin) {
    hutch_err_fail(err, HUTCH_ERR_FORBIDDEN, "forbidden",
                   "only the admin key publishes public templates");
    return NULL;
  }

  struct templates *t = templates_state(srv);
  struct template_job *j = xcalloc(1, sizeof *j);
  j->srv = srv;
  random_hex(j->id, 16);
  str_copy(j->tenant, sizeof j->tenant, p->tenant);
  j->admin = p->admin;
  str_copy(j->owner, sizeof j->owner, public ? "" : p->tenant);
  j->name = xstrdup(name);
  j->tags = tags ? json_incref(tags) : NULL;
  j->kind = xstrdup("build");
  j->log = json_array();
  j->created_ms = (int64_t)time(NULL) * 1000;

  j->next = t->jobs;
  if (t->jobs)
    t->jobs->prev = j;
  t->jobs = j;
  keep_job(srv, j, true);
  forget_old(srv, j);
  return j;
}

static int begin_check(struct template_job *j, const struct principal *p,
                       const struct template_spec *spec, struct hutch_err *err) {
  struct server *srv = j->srv;
  if (!tplspec_ok(spec, p, err))
    return -1;
  /* A build's RUN steps run in the ns tier (HUTCH_CAN_BUILD). */
  if (strcmp(spec->kind, "build") == 0 && srv->cfg.isolation_min > HUTCH_ISOLATION_NS)
    return hutch_err_fail(err, HUTCH_ERR_FORBIDDEN, "isolation_floor",
                          "template builds run in the ns tier, below this server's %s floor "
                          "(--isolation-min)",
                          hutch_isolation_name(srv->cfg.isolation_min));
  if (srv->stopping)
    return hutch_err_fail(err, HUTCH_ERR_UNAVAILABLE, "stopping", "the server is stopping");
  /* A job writes: a tenant with no byte left is refused (at least one
   * asked), not given a job its cap could not bound (job_cap); unless its
   * running jobs' ceilings hold the room, which their end gives back: it
   * waits in the queue for it (tplcap_waits). */
  if (!*j->owner || tplcap_running(j))
    return 0;
  return diskroom_check(srv, p, 1, err);
}

/* A queued job's turn: its disk cap as its quota is now (a full quota
 * fails it, as it would have been refused), its deadline from now, its
 * child. */
int templates_launch(struct template_job *j, struct hutch_err *err) {
  struct server *srv = j->srv;
  if (*j->owner && tplcap_take(j, err) < 0)
    return -1;
  if (!j->admin)
    j->deadline_ns = now_ns() + srv->cfg.template_timeout_ms * 1000000;
  if (job_spawn(j, err) < 0)
    return -1;
  j->state = TJOB_BUILDING;
  events_emit(srv, "template.build", j->tenant, NULL,
              json_pack("{s:s,s:s,s:s,s:s}", "state", "started", "name", j->name, "job", j->id,
                        "kind", j->kind));
  return 0;
}

int templates_begin(struct template_job *j, const struct principal *p,
                    const struct template_spec *spec, char *workdir, struct hutch_err *err) {
  if (j->state != TJOB_WAITING) {
    /* Started before: this one's workdir is no job's. */
    if (workdir)
      offload_remove(j->srv, workdir, true, NULL, NULL);
    return hutch_err_fail(err, HUTCH_ERR_CONFLICT, "conflict", "build %s has started already",
                          j->id);
  }

  j->workdir = workdir;
  free(j->kind);
  j->kind = xstrdup(spec->kind);
  char why[192] = "";

  /* The job is checked, its steps made, and it is queued or started. */
  int r = begin_check(j, p, spec, err);
  if (r >= 0)
    r = tplspec_steps(j, spec, workdir, err);
  if (r >= 0)
    r = tplqueue_admit(j, p, why, sizeof why, err);
  if (r < 0) {
    templates_fail(j, err);
    return -1;
  }

  if (j->state == TJOB_QUEUED) {
    json_t *ev = json_pack("{s:s,s:s,s:I}", "event", "queued", "message", why, "time",
                           (json_int_t)time(NULL) * 1000);
    job_event(j, ev, false);
    json_decref(ev);
  }
  return 0;
}

struct template_job *templates_start(struct server *srv, const struct principal *p,
                                     const struct template_spec *spec, char *workdir,
                                     struct hutch_err *err) {
  struct template_job *j = templates_prepare(srv, p, spec->name, spec->tags, spec->public, err);
  if (!j) {
    if (workdir)
      offload_remove(srv, workdir, true, NULL, NULL);
    return NULL;
  }

  if (templates_begin(j, p, spec, workdir, err) < 0) {
    /* Never seen by the caller: it goes now, or once the handles of a
     * spawn that failed are closed. */
    job_unlist(srv, j);
    if (j->handles)
      j->orphan = true;
    else
      job_free(j);
    return NULL;
  }
  return j;
}

struct template_job *templates_job(struct server *srv, const struct principal *p, const char *id) {
  for (struct template_job *j = templates_jobs_of(srv, p->tenant); j; j = j->tenant_next)
    if (strcmp(j->id, id) == 0)
      return j;
  return NULL;
}

static const char *const state_names[] = {"waiting", "queued", "building", "ready", "error"};

json_t *templates_job_json(const struct template_job *j, size_t log_from) {
  json_t *log = json_array();
  for (size_t i = log_from; i < json_array_size(j->log); i++)
    json_array_append(log, json_array_get(j->log, i));

  json_t *o =
      json_pack("{s:s,s:s,s:s,s:s,s:I,s:o,s:I}", "id", j->id, "name", j->name, "kind", j->kind,
                "status", state_names[j->state], "created_at", (json_int_t)j->created_ms, "log",
                log, "log_dropped", (json_int_t)j->dropped);

  if (j->ended_ms)
    json_object_set_new(o, "ended_at", json_integer(j->ended_ms));
  if (j->record)
    json_object_set(o, "template", j->record);
  if (j->state == TJOB_ERROR)
    json_object_set_new(o, "error",
                        json_pack("{s:s,s:s}", "code", err_code(&j->err), "message", j->err.msg));
  return o;
}

void templates_watch(struct template_job *j, const struct template_watch *w, void *arg) {
  j->watch = w;
  j->watch_arg = arg;
}

void templates_fail(struct template_job *j, const struct hutch_err *err) {
  if (j->state != TJOB_WAITING && j->state != TJOB_QUEUED)
    return;
  j->err = *err;
  job_ended(j);
}

void templates_cancel(struct template_job *j) {
  if (j->state == TJOB_WAITING || j->state == TJOB_QUEUED) {
    struct hutch_err err = {0};
    hutch_err_fail(&err, HUTCH_ERR_CONFLICT, "cancelled", "the job was cancelled");
    j->cancelled = true;
    templates_fail(j, &err);
  }

  if (j->state != TJOB_BUILDING)
    return;
  j->cancelled = true;
  /* Once reaped, its pid may be another process's (and the linger timer
   * is the pipe's then). */
  if (j->spawned && !j->exited)
    job_kill(j);
}

/* A stopping server fails its queued jobs, and ends its running ones as a
 * cancel does: SIGTERM, for a build to tear down the sandbox of its RUN
 * step (a SIGKILL would leave its cgroups behind), then SIGKILL after
 * TEMPLATE_KILL_GRACE_MS; the loop runs until they are gone. */
void templates_stop(struct server *srv) {
  if (!srv->templates)
    return;
  tplqueue_stop(srv);
  for (struct template_job *j = srv->templates->jobs; j; j = j->next)
    if (j->spawned && !j->exited)
      job_kill(j);
}

void templates_free(struct server *srv) {
  struct templates *t = srv->templates;
  if (!t)
    return;
  while (t->jobs) {
    struct template_job *j = t->jobs;
    t->jobs = j->next;
    job_free(j);
  }
  tpltokens_free(t->tokens);
  tplqueue_free(srv);
  free(t);
  srv->templates = NULL;
}
