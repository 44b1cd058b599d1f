/* A sandbox as the server holds it, and the registry of them. */
#ifndef HUTCH_CORE_SANDBOX_SBX_H
#define HUTCH_CORE_SANDBOX_SBX_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include "sandbox.h"
#include "core/sandbox/agentc.h"
#include "core/sandbox/escapes.h"
#include "core/base/server.h"
#include "net/netpolicy.h"
#include "net/relay.h"

struct server;
struct sbx;
struct principal;
struct hutch_err;

struct pool;
struct proc;
struct exec;
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
  struct tally *tally;                   /* its tenant's counts, while listed (tally.h) */
  struct sbx *tenant_next, *tenant_prev; /* its tenant's listed ones (tally.h) */
  unsigned fds; /* the server's descriptors it holds, counted while listed (fds.c) */
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
  json_t *metadata;         /* object of strings */
  json_t *env;              /* object of strings, given to every exec */
  struct proc *procs;       /* background processes, newest first */
  struct exec *execs;       /* foreground execs that are running (exec.c) */
  struct context *contexts; /* code contexts (contexts.c) */
  struct watch *watches;    /* E2B's polled watchers (e2b/fs.c) */
  unsigned ncontexts;
  bool contexts_defaulted; /* E2B's default contexts were made (contexts_defaults) */
  json_t *artifacts_seen;  /* path -> ctime_ns of the files execs reported (api/exec.c) */
  uint64_t memory_mb, pids, cpu_milli, disk_mb;
  int64_t created_ms, expires_ms; /* wall clock, ms since the epoch */
  /* Pause (sbx_pause.c): every process frozen, the timeout's clock
   * stopped with left_ms to go; kept until paused_ms + --paused-retention. */
  bool paused;
  bool auto_resume;        /* a request that needs it running resumes it; else 409 */
  bool pause_on_timeout;   /* its timeout pauses it instead (E2B's autoPause) */
  bool agent_pending;      /* paused when taken over: its agent is, on resume */
  unsigned captures;       /* snapshots being copied: frozen until the last is done */
  struct freeze *freezing; /* a freeze under way off the loop (sbx_pause.c) */
  int64_t paused_ms, left_ms;
  int64_t timeout_ms;      /* the length of its timeout, as last set */
  struct samples *samples; /* its usage over time (usage.c) */
  json_t *layers;          /* what it stacks (layers.h): snapshots, a template; NULL: host */
  int pin;                 /* its template's pin (images.h), -1: none; closed after teardown */
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
  /* Its proxy's connections (egress.c), counted as its ports are (fds.c,
   * tally.c); NULL: no proxy. */
  struct relay_set *egress_conns;
  struct tls_ca *tls_ca; /* its proxy's CA, once it has secrets (egress_tls.h) */
  bool tls_trusted;      /* ... installed in the sandbox's trust store */
  struct relay_set ports;
  /* What lets a client reach its private ports without an API key. */
  char traffic_token[SERVE_TOKEN_LEN + 1];
  /* Where its file actions stay beneath (a volume's worker: volworker.h);
   * NULL: anywhere its user may go. */
  const char *file_root;
  struct escapes escapes; /* refused syscalls (escapes.c) */
  json_t *log;            /* its audit lines, the last SBX_LOG_MAX (audit.c); NULL: none yet */
  /* Why it ends, for its sandbox.killed event: a string literal set by
   * whoever destroys it other than a request (NULL: "request"). */
  const char *end_reason;
  bool dying;
};

/* sbx.c: the registry of live sandboxes. A sandbox is made (sbx_make.h),
 * waits in a pool or goes straight to a tenant (sbx_register), and is
 * destroyed by request, by its timeout, or when its agent is lost
 * (sbx_teardown.h). */
void sbx_register(struct server *srv, struct sbx *sb);
/* Out of the registry: false when it was not in it. */
bool sbx_unregister(struct server *srv, struct sbx *sb);
/* The caller's sandbox id, or NULL (another tenant's too). */
struct sbx *sbx_find_own(struct server *srv, const struct principal *p, const char *id);
/* Whoever's sandbox id is (NULL: none live): for the routes a sandbox's
 * own token or a signature authenticates, which check it themselves. */
struct sbx *sbx_find(struct server *srv, const char *id);
/* Set sb's template defaults (sbx.h: user, workdir); NULL: none. */
void sbx_set_defaults(struct sbx *sb, const char *user, const char *workdir);
json_t *sbx_json(const struct sbx *sb);
/* Its row in the store: made (first) or written again (its spec and
 * expiry, after a pause, a resume, a new timeout or network). */
int sbx_store(struct sbx *sb, bool first, struct hutch_err *err);

#endif
