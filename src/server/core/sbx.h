/* A sandbox as the server holds it, and the registry of them. */
#ifndef HUTCH_CORE_SBX_H
#define HUTCH_CORE_SBX_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include "sandbox.h"
#include "core/agentc.h"
#include "core/escapes.h"
#include "core/server.h"
#include "net/netpolicy.h"
#include "net/relay.h"

struct server;
struct sbx;
struct principal;
struct hutch_err;

struct pool;
struct proc;
struct samples;
struct context;
struct watch;
struct egress;
struct tls_ca;
struct tally;

#define SBX_LOG_MAX 256

struct sbx {
  struct sbx *next, *prev; /* srv->sandboxes while listed; next: a pool's ready list */
  struct sbx *id_next;     /* the chain of its bucket in srv->by_id */
  bool listed;
  struct tally *tally; /* its tenant's counts, while listed (tally.h) */
  struct sbx *tenant_next, *tenant_prev; /* its tenant's listed ones (tally.h) */
  unsigned fds;        /* the server's descriptors it holds, counted while listed (fds.c) */
  struct server *srv;
  struct pool *pool; /* while it waits in a warm pool; NULL once a tenant's */
  char id[17];
  char tenant[SERVE_TENANT_LEN + 1];
  char template[SERVE_TEMPLATE_MAX + 1];
  /* The secret of the sandbox's E2B-compatible routes (envd and the code
   * interpreter, e2b_routes): E2B clients send it as X-Access-Token. */
  char token[SERVE_TOKEN_LEN + 1];
  struct hutch_sandbox *hs;
  struct agentc ac;
  json_t *metadata; /* object of strings */
  json_t *env;      /* object of strings, given to every exec */
  struct proc *procs; /* background processes, newest first */
  struct context *contexts; /* code contexts (contexts.c) */
  struct watch *watches; /* E2B's polled watchers (e2b/fs.c) */
  unsigned ncontexts;
  bool contexts_defaulted; /* E2B's default contexts were made (contexts_defaults) */
  json_t *artifacts_seen; /* path -> ctime_ns of the files execs reported (api/exec.c) */
  uint64_t memory_mb, pids, cpu_milli, disk_mb;
  int64_t created_ms, expires_ms; /* wall clock, ms since the epoch */
  /* Pause (lifecycle.c): every process frozen, the timeout's clock
   * stopped with left_ms to go; kept until paused_ms + --paused-retention. */
  bool paused;
  bool auto_resume;      /* a request that needs it running resumes it; else 409 */
  bool pause_on_timeout; /* its timeout pauses it instead (E2B's autoPause) */
  bool agent_pending;    /* paused when taken over: its agent is, on resume */
  unsigned captures;     /* snapshots being copied: frozen until the last is done */
  struct freeze *freezing; /* a freeze under way off the loop (lifecycle.c) */
  int64_t paused_ms, left_ms;
  int64_t timeout_ms; /* the length of its timeout, as last set */
  struct samples *samples; /* its usage over time (usage.c) */
  json_t *layers; /* what it stacks (layers.h): snapshots, a template; NULL: host */
  int pin;        /* its template's pin (images.h), -1: none; closed after teardown */
  /* A template's defaults for every exec that names none: its user and
   * working directory (NULL: hutch's user, the user's home). */
  char *user, *workdir;
  json_t *volumes; /* [{id, path, read_only}] it mounts; NULL: none */
  /* Network (docs/network.md): the policy as clients see it ({mode, allow,
   * public_ports}), the secrets its proxy adds (never shown), both
   * compiled; its egress proxy; connections through its ports. */
  json_t *network, *secrets;
  struct netpolicy policy;
  struct egress *egress;
  struct tls_ca *tls_ca; /* its proxy's CA, once it has secrets (egress_tls.h) */
  bool tls_trusted;      /* ... installed in the sandbox's trust store */
  struct relay_set ports;
  /* What lets a client reach its private ports without an API key. */
  char traffic_token[SERVE_TOKEN_LEN + 1];
  /* Where its file actions stay beneath (a volume's worker: volworker.h);
   * NULL: anywhere its user may go. */
  const char *file_root;
  struct escapes escapes; /* refused syscalls (escapes.c) */
  json_t *log; /* its audit lines, the last SBX_LOG_MAX (audit.c); NULL: none yet */
  bool dying;
};

/* sbx.c: the registry of live sandboxes. A sandbox is made (sbx_new),
 * waits in a pool or goes straight to a tenant (sbx_register), and is
 * destroyed by request, by its timeout, or when its agent is lost. */
/* Made off the loop (offload.c): made is called on the loop with the
 * sandbox, or NULL and why. What cfg points to must live until then. A
 * server stopping meanwhile gets none: what was made is destroyed. */
typedef void (*sbx_made_fn)(struct server *srv, struct sbx *sb, const struct hutch_err *err,
                            void *arg);
/* Set sb's template defaults (sbx.h: user, workdir); NULL: none. */
void sbx_set_defaults(struct sbx *sb, const char *user, const char *workdir);
/* tenant's creates and other tenants' take turns for a lane (offload.c). */
void sbx_make(struct server *srv, const struct hutch_sandbox_config *cfg, const char *template,
              const char *tenant, sbx_made_fn made, void *arg);
/* The same for a pool: in the background, behind every create waiting,
 * built at SBX_AHEAD_NICE below the server's priority (sbx.c). */
#define SBX_AHEAD_NICE 10
void sbx_make_ahead(struct server *srv, const struct hutch_sandbox_config *cfg,
                    const char *template, sbx_made_fn made, void *arg);
/* End hs off the loop; then release the fork snapshot of layers (or NULL). */
void sbx_teardown(struct server *srv, struct hutch_sandbox *hs, json_t *layers);
/* Sandboxes being torn down that stack layer (a snapshot's id): its files
 * are mounted until they are gone, so it is in use as by a live one. */
unsigned sbx_teardown_users(const struct server *srv, const char *layer);
void sbx_register(struct server *srv, struct sbx *sb);
/* Connect to the agent of a sandbox taken over (agent_pending): its
 * HELLO, then the execs it still runs. -1 when it does not answer. */
int sbx_connect_agent(struct sbx *sb);
/* At start: take over the sandboxes the last server left running. */
int sbx_adopt_all(struct server *srv, struct hutch_err *err);
/* The caller's sandbox id, or NULL (another tenant's too). */
struct sbx *sbx_find_own(struct server *srv, const struct principal *p, const char *id);
/* Whoever's sandbox id is (NULL: none live): for the routes a sandbox's
 * own token or a signature authenticates, which check it themselves. */
struct sbx *sbx_find(struct server *srv, const char *id);
/* Out of the registry at once; its processes and cgroups go off the loop
 * (sbx_teardown). sbx_destroy_then calls gone(arg) once they are gone. */
void sbx_destroy(struct sbx *sb);
void sbx_destroy_then(struct sbx *sb, void (*gone)(void *arg), void *arg);
/* agentc on_dead of a sandbox's connection: the sandbox is destroyed. */
void sbx_agent_dead(struct agentc *ac);
void sbx_reaper_start(struct server *srv);
void sbx_destroy_all(struct server *srv);
void sbx_release_all(struct server *srv);
int64_t wall_ms(void);
/* ms since the epoch as "2026-01-02T03:04:05.678Z". */
void iso8601(int64_t ms, char out[32]);
json_t *sbx_json(const struct sbx *sb);
/* Its row in the store: made (first) or written again (its spec and
 * expiry, after a pause, a resume, a new timeout or network). */
int sbx_store(struct sbx *sb, bool first, struct hutch_err *err);

/* lifecycle.c: pause and resume. A freeze runs off the loop; then hears
 * how it went (sb NULL when the sandbox was destroyed meanwhile). */
typedef void (*sbx_frozen_fn)(struct sbx *sb, int r, struct hutch_err *err, void *arg);
void sbx_freeze(struct sbx *sb, sbx_frozen_fn then, void *arg);
/* A sandbox going: its freeze under way, if any, will not touch it. */
void sbx_freeze_forget(struct sbx *sb);
/* Freeze it (unless a snapshot's copy has), then mark it paused. */
typedef void (*sbx_paused_fn)(struct sbx *sb, int r, struct hutch_err *err, void *arg);
void sbx_pause(struct sbx *sb, sbx_paused_fn then, void *arg);
/* timeout_ms < 0: what was left of its timeout when it was paused. */
int sbx_resume(struct sbx *sb, int64_t timeout_ms, struct hutch_err *err);

#endif
