/* The server: its configuration, its state (one struct server owned by
 * main.c: there are no globals), and who a request speaks for. */
#ifndef HUTCH_CORE_BASE_SERVER_H
#define HUTCH_CORE_BASE_SERVER_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/socket.h>
#include <uv.h>
#include "cgroup.h"
#include "err.h"
#include "gvisor.h"
#include "images.h"
#include "sandbox.h"
#include "core/base/offload.h"
#include "http/http.h"
#include "net/netpolicy.h"
#include "state/store.h"

struct server;
struct sbx;
struct principal;
struct hutch_err;

#define SERVE_DEFAULT_PORT 7420
#define SERVE_DEFAULT_TIMEOUT_S 300     /* a sandbox's life when the request names none */
#define SERVE_MAX_TIMEOUT_S (7 * 86400) /* the longest a sandbox may be asked to live */
#define SERVE_TOKEN_LEN 40
/* The longest template a create names: a store's NAME:TAG (images.h). */
#define SERVE_TEMPLATE_MAX (2 * HUTCH_IMAGE_NAME_MAX + 1)
/* Where a sandbox's egress proxy listens, in its own namespace (egress.c). */
#define EGRESS_PORT 3128
/* Name lookups of all egress proxies under way; libuv's thread pool is
 * made larger than that (main.c), so snapshot copies always have threads. */
#define SERVE_LOOKUPS 12
#define SERVE_COPIES 4 /* snapshot copies at once (snapshots.c) */
/* Where every sandbox of the server sees share/kernels, read-only. */
#define SERVE_KERNELS_PATH "/opt/hutch/kernels"

struct store;

struct serve_config {
  char *host;
  int port;
  char *state_dir;
  unsigned max_conns;        /* open HTTP connections */
  unsigned max_sandboxes;    /* on the whole server */
  unsigned tenant_sandboxes; /* per tenant, unless its own quota says otherwise */
  uint64_t tenant_memory_mb;
  unsigned sandbox_ptys;        /* --sandbox-ptys: each sandbox's devpts max= */
  uint64_t tenant_disk_mb;      /* --tenant-disk-mb; 0: a quarter of the state filesystem */
  uint64_t audit_max_mb;        /* --audit-max-mb: the audit log's size before it rotates */
  char **pool_specs;            /* --pool arguments, NULL-terminated */
  unsigned create_lanes;        /* --create-lanes: sandboxes made at once (offload.h) */
  uint64_t max_create_wait_ms;  /* --max-create-wait-ms: admission of creates (sbx_create.c) */
  char *kernels_dir;            /* --kernels-dir; NULL: looked for (server_open.c) */
  char *ui_dir;                 /* --ui-dir; NULL: looked for (api/console.c) */
  bool no_ui;                   /* --no-ui: no console at /ui */
  int64_t paused_retention_ms;  /* --paused-retention: how long a paused sandbox is kept */
  char *domain;                 /* --domain: ports are reached as {port}-{id}.DOMAIN (ports.c) */
  uint64_t relay_idle_ms;       /* --relay-idle: a relayed connection idle this long ends */
  uint64_t ready_timeout_ms;    /* --ready-timeout: a template's ready command (startup.c) */
  uint64_t template_timeout_ms; /* --template-timeout: a tenant's template job (templates.c) */
  /* --egress-deny, --egress-permit, --egress-allow-private: what no
   * sandbox reaches through its proxy (netpolicy.h, egress.c). */
  struct np_floor floor;
  /* --egress-ca: a PEM file of CAs trusted beside the host's store for
   * the hosts the proxy terminates TLS to (egress_tls.h). */
  char *egress_ca;
  /* --isolation: the tier of a sandbox whose request, template and
   * snapshot name none; --gvisor-platform: runsc's (gvisor.h). */
  enum hutch_isolation isolation;
  /* --isolation-min: the operator's floor, which no request, template
   * label or snapshot lowers (server_tier). */
  enum hutch_isolation isolation_min;
  char *gvisor_platform;
  /* --events-retention, --events-max: what the event ring keeps
   * (core/events/events.h); --webhook-allow: what lifts the deny floor
   * for webhook targets, --webhook-timeout-ms and --webhook-backoff-ms:
   * an attempt's time and the first retry's wait (core/hooks/webhooks.h). */
  int64_t events_retention_s;
  unsigned events_max;
  struct np_floor webhook_floor;
  char **webhook_hosts; /* --webhook-allow HOST[:PORT]: "host" or "host:port", NULL-terminated */
  uint64_t webhook_timeout_ms, webhook_backoff_ms;
  bool metrics_public;      /* --metrics-public: /metrics for anyone */
  char *metrics_token_file; /* --metrics-token-file (metrics.c) */
};

/* Keys found in the store, by the hex SHA-256 the store knows them by
 * (keys.c): a direct-mapped table, so a new key takes its slot from any
 * other. */
#define KEY_CACHE_SLOTS 1024
struct key_cache_slot {
  char hash[64 + 1]; /* "" when the slot is empty */
  struct principal p;
};

#define METRICS_CODES 48

struct metrics {
  uint64_t requests, errors_by_status[600];
  struct {
    char code[48]; /* a copy (a template job's code is the job's, which goes): each once */
    uint64_t n;
  } errors_by_code[METRICS_CODES];
  uint64_t creates, destroys, expired, execs;
  uint64_t egress_allowed, egress_denied;  /* connections through egress proxies */
  uint64_t escape_attempts;                /* refused syscalls, every sandbox's (escapes.c) */
  uint64_t create_hist[16], exec_hist[16]; /* latency buckets, see metrics.c */
  double create_sum_s, exec_sum_s;
};

/* What the front ends keep per sandbox (routes.c fills it): the core
 * tells them when a sandbox ends, so that it calls no front end itself. */
struct serve_fronts {
  /* Destroyed or let go: connections through it end (its ports). */
  void (*sandbox_ending)(struct sbx *sb);
  /* Its memory goes: what the front ends hung on it (E2B's watchers). */
  void (*sandbox_freed)(struct sbx *sb);
  /* Relayed connections idle for idle_ms end. */
  void (*sandbox_sweep)(struct sbx *sb, uint64_t idle_ms);
};

struct volworker;
struct mcp_front;
struct console;

struct server {
  uv_loop_t *loop;
  unsigned fd_limit;                   /* RLIMIT_NOFILE (fds.c) */
  struct hutch_spawner *spawner;       /* clones sandboxes (spawner.h); NULL: this process does */
  struct sockaddr_storage listen_addr; /* where it listens (family 0 until it does) */
  uv_signal_t sigterm, sigint;
  uv_timer_t reaper;
  unsigned reaper_ticks;
  bool collecting; /* hutch_shell_gc_host under way, off the loop (sbx_reaper.c) */
  struct serve_config cfg;
  struct store *store;
  struct hutch_images images;       /* the template store, STATE/images */
  struct key_cache_slot *key_cache; /* KEY_CACHE_SLOTS of them; NULL until used */
  char *agents_dir;                 /* STATE_DIR/agents: the agents' sockets */
  char *kernels_dir;                /* share/kernels, shown to sandboxes; NULL: none found */
  char *metrics_token;              /* from --metrics-token-file; NULL: none */
  int netns_fd;                     /* the server's own network namespace (hutch_sandbox_socket) */
  /* The hutch root cgroup, open for the server's life: sandboxes hold no
   * cgroup descriptor of their own (hutch_shell_few_fds). */
  struct hutch_cgroup cg_root;
  /* runsc as probed at start (server_tiers); gvisor_why says why the
   * gvisor tier is unavailable when has_gvisor is false. */
  struct hutch_gvisor gvisor;
  bool has_gvisor;
  char gvisor_why[256];
  unsigned lookups;                   /* egress proxies' name lookups under way (egress_conn.c) */
  struct egress_tls *egress_tls;      /* secrets over HTTPS (egress_tls.h) */
  struct sockaddr_storage *own_addrs; /* the host's addresses, and when they were read */
  size_t nown_addrs;
  uint64_t own_addrs_at;
  struct audit *audit;               /* audit.c */
  struct events *events;             /* the event ring (core/events/events.c) */
  struct webhooks *webhooks;         /* core/hooks/webhooks.c */
  struct http_server http;           /* the transport: listening socket and connections */
  const struct serve_fronts *fronts; /* NULL: none (tests that drive actions alone) */
  struct mcp_front *mcp;             /* MCP's sessions (src/server/mcp/); NULL until used */
  struct console *console;           /* the web console's files (api/console.c); NULL: off */
  struct sbx *sandboxes;             /* tenants' sandboxes */
  unsigned nsandboxes;
  struct sbx **by_id; /* the same by id: nby_id chains (sbx.c) */
  unsigned nby_id;
  /* What is held now (tally.h): each tenant's counts by name, and the
   * server's: creates under way, template builds' RUN sandboxes, listed
   * sandboxes' own descriptors, their relayed connections, the paused
   * ones, those of the gvisor tier. */
  struct tally **tallies;
  unsigned ncreating, nbuilds, sandbox_fds, relays, npaused, ngvisor;
  uint64_t disk_reserved; /* of the state filesystem, for writes under way (diskroom.c) */
  /* The template store's collection of unused layers, off the loop
   * (tplcache.c): running, and asked again meanwhile. */
  bool store_collecting, store_collect_again;
  unsigned trim_mark; /* nsandboxes at the reaper's last look (sbx_reaper.c) */
  struct pool *pools;
  uv_timer_t refill;
  uint64_t refill_due; /* loop time by which a deferred refill runs */
  struct metrics metrics;
  bool layers_checked, layers_usable; /* can the state dir hold snapshots (snapshots.c) */
  unsigned captures;                  /* snapshot copies under way */
  /* Blocking work off the loop (offload.c): running, and waiting in order. */
  struct offload_queue offload[OFFLOAD_LANES];
  uint64_t create_ns;    /* a create's time on its lane, averaged (sbx_make.c); 0: none yet */
  unsigned refilling;    /* pools' sandboxes being made (pool.c) */
  uv_timer_t checkpoint; /* the store's, off the loop (server_open.c) */
  bool checkpointing;
  uint64_t truncate_after; /* uv_now: no WAL truncation before (server_open.c); 0: never put off */
  struct creating *creating; /* sandboxes being made (life/sbx_create.c) */
  /* The volume mounts of those, the same (disk/volumes.c counts their users). */
  struct volume_mounts *creating_mounts;
  struct templates *templates;   /* the template store and jobs (core/templates.c) */
  struct teardown *teardowns;    /* sandboxes being torn down (sbx_teardown.c) */
  struct vol_making *vol_making; /* volumes being made (volumes.c) */
  struct volworker *volworkers;  /* volumes' workers, up or being made (volworker.c) */
  unsigned char volume_key[32];  /* what E2B's volume tokens are a MAC under (volworker.c) */
  bool stopping;
};

/* Probe runsc once (a missing one leaves the gvisor tier unavailable);
 * -1 when the server's default tier is one it cannot offer. */
int server_tiers(struct server *srv, struct hutch_err *err);
/* cfg in tier iso: HUTCH_ERR_UNSUPPORTED "gvisor_unavailable" when this
 * server has no runsc. */
int server_tier(const struct server *srv, enum hutch_isolation iso,
                struct hutch_sandbox_config *cfg, struct hutch_err *err);

#endif
