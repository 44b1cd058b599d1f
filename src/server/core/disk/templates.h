/* Templates as actions (docs/templates.md, "The API and E2B's Template
 * SDK"): the tenant's templates listed, read and removed through the store
 * (src/lib/images.h), and the long work (an import, a pull, a build) run
 * as jobs: a child `hutch-template --progress ndjson VERB ...` whose
 * NDJSON events the job keeps as its log and hands to whoever watches. */
#ifndef HUTCH_CORE_DISK_TEMPLATES_H
#define HUTCH_CORE_DISK_TEMPLATES_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "err.h"
#include "core/base/offload.h"
#include "core/disk/tplqueue.h"

struct server;
struct principal;

/* Jobs running at once on the server (the machine's cores do the
 * builds), and a tenant's share of them; more wait their turn in the
 * queue (tplqueue.h), up to TEMPLATE_JOBS_QUEUED of each tenant, past
 * which a job is refused 429 quota_exceeded. */
#define TEMPLATE_JOBS_SERVER 4
#define TEMPLATE_JOBS_TENANT 2
#define TEMPLATE_JOBS_QUEUED 8
/* One event line of a child, and the events and bytes a job's log keeps
 * (what a tenant's kept jobs hold of the server's memory: a RUN step may
 * print without end). */
#define TEMPLATE_LINE_MAX (64u << 10)
#define TEMPLATE_LOG_MAX 4096
#define TEMPLATE_LOG_BYTES (2u << 20)
/* How long a child told to end (SIGTERM) has before SIGKILL. */
#define TEMPLATE_KILL_GRACE_MS 5000
/* How long the pipe is read after its child ended. */
#define TEMPLATE_LINGER_MS 2000
/* Ended (or waiting) jobs kept to be polled, per tenant, the oldest
 * forgotten first: per tenant, so that one tenant making jobs in a loop
 * pushes out only its own. */
#define TEMPLATE_JOBS_KEPT 32

/* WAITING: made for E2B's two-step build, not started yet. QUEUED:
 * started, waiting for its turn in a slot (tplqueue.h); no child yet. */
enum template_job_state { TJOB_WAITING, TJOB_QUEUED, TJOB_BUILDING, TJOB_READY, TJOB_ERROR };

struct template_job;
/* Who follows a job: each event as it comes, then its end. */
struct template_watch {
  void (*event)(struct template_job *j, json_t *ev, void *arg);
  void (*end)(struct template_job *j, void *arg);
};

struct template_job {
  /* The server's list of every job (for a stop), and its tenant's own
   * (tally.h), which every lookup of a tenant's job walks. */
  struct template_job *next, *prev, *tenant_next;
  struct server *srv;
  char id[17];
  char tenant[65];
  char owner[65]; /* the template's: the tenant, or "" for a public one */
  bool admin;     /* started with the admin key: may pull from loopback */
  char *name;
  json_t *tags; /* a build's tags (E2B's NAME:TAG, tags), or NULL: latest */
  char *kind;   /* "import", "pull", "build" */
  enum template_job_state state;
  int64_t created_ms, ended_ms;
  json_t *log;          /* the events, each {"event", ...} as the child wrote it */
  size_t dropped;       /* events past TEMPLATE_LOG_MAX or TEMPLATE_LOG_BYTES, not kept */
  size_t log_bytes;     /* what the kept events take as JSON */
  json_t *record;       /* the template, once ready */
  struct hutch_err err; /* why it failed */
  char code[48];        /* the code of the child's error event, which err.code may point to */
  char ***steps;        /* each an argv after the global options, run in order */
  size_t nsteps, step;
  char *workdir;              /* removed when the job ends (a tmpdir of the store) */
  uint64_t max_bytes;         /* an owned job's cap, reserved of its tenant's quota while it runs
                       * (0: a public job's, uncapped) */
  uint64_t run_memory_mb;     /* a build's RUN sandbox, counted while it runs (0: no build) */
  struct template_job *qnext; /* its tenant's queue (tplqueue.c) */
  bool in_queue, slot;        /* queued; holding one of the server's slots */
  uint64_t held; /* of the tenant's disk quota, reserved for its files (an import's archive) */
  uv_process_t proc;
  uv_pipe_t out;
  uv_timer_t linger;
  int handles; /* of proc, out and linger, not yet closed */
  bool spawned, cancelled, timed_out;
  bool orphan;          /* no longer listed: freed once its handles are closed */
  uint64_t deadline_ns; /* a tenant's job is killed past it (0: none) */
  bool exited, eof, drained;
  int64_t exit_status;
  int term_signal;
  char *line;
  size_t nline;
  bool overlong; /* the line being read passed TEMPLATE_LINE_MAX */
  const struct template_watch *watch;
  void *watch_arg;
};

/* The server's (srv->templates, made on first use): the jobs, their
 * queue, the upload tokens. */
struct templates {
  struct template_job *jobs; /* newest first */
  struct tplqueue queue;
  struct tpltokens *tokens; /* tpltokens.c; NULL until the first */
};
struct templates *templates_state(struct server *srv);
/* tenant's jobs, newest first (then j->tenant_next), or NULL: a lookup of
 * a tenant's job walks its own, never every tenant's. */
struct template_job *templates_jobs_of(const struct server *srv, const char *tenant);

/* What a job makes: the template name, public (an admin's, owner "")
 * or the tenant's, and how. workdir is a store tmpdir the job takes (it
 * holds an uploaded archive or context), or NULL. */
struct template_spec {
  const char *name;
  bool public;
  const char *kind;       /* "import", "pull", "build" */
  const char *source;     /* import: the archive; pull: the reference */
  const char *ref;        /* import: what its record says it came from (never a host path) */
  bool insecure;          /* pull: plain http (loopback registries only) */
  const char *dockerfile; /* build: its text */
  char **contexts;        /* build: tars unpacked as the context, NULL-ended; or NULL */
  bool no_cache;
  json_t *tags; /* build: its tags, or NULL: latest */
};
/* Start a job for p: -1 and err (invalid_argument, forbidden for a public
 * one without the admin key, quota_exceeded when the tenant's queue is
 * full, its disk is, or its quotas hold no RUN sandbox for a build,
 * internal), else the job, running or queued (the server's; it lives
 * until forgotten, TEMPLATE_JOBS_KEPT after it ended). workdir is taken
 * either way. */
struct template_job *templates_start(struct server *srv, const struct principal *p,
                                     const struct template_spec *spec, char *workdir,
                                     struct hutch_err *err);
/* The same in two steps (E2B's SDK asks for a build, uploads its files,
 * then starts it): a WAITING job for the name, then its start. A start
 * that fails (-1, err) leaves the job ended in error. */
struct template_job *templates_prepare(struct server *srv, const struct principal *p,
                                       const char *name, json_t *tags, bool public,
                                       struct hutch_err *err);
int templates_begin(struct template_job *j, const struct principal *p,
                    const struct template_spec *spec, char *workdir, struct hutch_err *err);
/* End a job still waiting or queued with err (its start could not be
 * made). */
void templates_fail(struct template_job *j, const struct hutch_err *err);
/* For the queue (tplqueue.c): start j's child (deadline, disk cap): -1
 * and err when it cannot be. */
int templates_launch(struct template_job *j, struct hutch_err *err);
/* p's job id, or NULL. */
struct template_job *templates_job(struct server *srv, const struct principal *p, const char *id);
/* {id, name, status, created_at, ended_at, template?, error?, log: events
 * from log_from on}. */
json_t *templates_job_json(const struct template_job *j, size_t log_from);
/* Follow j (one watcher at a time; NULL stops): events from now on. */
void templates_watch(struct template_job *j, const struct template_watch *w, void *arg);
/* Cancel a job: a running one's child is killed; the job fails
 * "cancelled". */
void templates_cancel(struct template_job *j);
/* At stop: every queued job failed "stopping", every child ended
 * (SIGTERM, then SIGKILL); the jobs are freed after the loop. */
void templates_stop(struct server *srv);
void templates_free(struct server *srv);

#endif
