/* hutch serve: the server's state and the parts that share it. Everything
 * lives in one struct server owned by serve_main: there are no globals. */
#ifndef HUTCH_SERVE_H
#define HUTCH_SERVE_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/socket.h>
#include <uv.h>

#include "agentc.h"
#include "audit.h"
#include "escapes.h"
#include "http.h"
#include "netpolicy.h"
#include "offload.h"
#include "relay.h"
#include "sandbox.h"

#define SERVE_DEFAULT_PORT 7420
#define SERVE_DEFAULT_TIMEOUT_S 300      /* a sandbox's life when the request names none */
#define SERVE_MAX_TIMEOUT_S (7 * 86400)  /* the longest a sandbox may be asked to live */
#define SERVE_TENANT_LEN 64
#define SERVE_KEY_ID_LEN 16
#define SERVE_TOKEN_LEN 40
/* Where a sandbox's egress proxy listens, in its own namespace (egress.c). */
#define EGRESS_PORT 3128
/* Name lookups of all egress proxies under way; libuv's thread pool is
 * made larger than that (main.c), so snapshot copies always have threads. */
#define SERVE_LOOKUPS 12
#define SERVE_THREADPOOL "24" /* lookups, 4 snapshot copies, OFFLOAD_MAX jobs */
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
  unsigned sandbox_ptys;      /* --sandbox-ptys: each sandbox's devpts max= */
  uint64_t tenant_disk_mb;    /* --tenant-disk-mb; 0: a quarter of the state filesystem */
  uint64_t audit_max_mb;      /* --audit-max-mb: the audit log's size before it rotates */
  char **pool_specs; /* --pool arguments, NULL-terminated */
  char *kernels_dir;  /* --kernels-dir; NULL: looked for (server.c) */
  int64_t paused_retention_ms; /* --paused-retention: how long a paused sandbox is kept */
  char *domain; /* --domain: ports are reached as {port}-{id}.DOMAIN (ports.c) */
  uint64_t relay_idle_ms; /* --relay-idle: a relayed connection idle this long ends */
  /* --egress-deny, --egress-permit, --egress-allow-private: what no
   * sandbox reaches through its proxy (netpolicy.h, egress.c). */
  struct np_floor floor;
  bool metrics_public;      /* --metrics-public: /metrics for anyone */
  char *metrics_token_file; /* --metrics-token-file (metrics.c) */
};

/* Who a request speaks for. */
struct principal {
  char tenant[SERVE_TENANT_LEN + 1];
  char key_id[SERVE_KEY_ID_LEN + 1];
  bool admin;
};

struct pool;
struct proc;
struct samples;
struct context;
struct watch;
struct egress;

struct sbx {
  struct sbx *next;
  struct server *srv;
  struct pool *pool; /* while it waits in a warm pool; NULL once a tenant's */
  char id[17];
  char tenant[SERVE_TENANT_LEN + 1];
  char template[64];
  /* The secret of the sandbox's E2B-compatible routes (envd and the code
   * interpreter, e2b_routes): E2B clients send it as X-Access-Token. */
  char token[SERVE_TOKEN_LEN + 1];
  struct hutch_sandbox *hs;
  struct agentc ac;
  json_t *metadata; /* object of strings */
  json_t *env;      /* object of strings, given to every exec */
  struct proc *procs; /* background processes, newest first */
  struct context *contexts; /* code contexts (contexts.c) */
  struct watch *watches; /* E2B's polled watchers (e2b_fs.c) */
  unsigned ncontexts;
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
  json_t *layers; /* the snapshot it was made from: its layers' ids; NULL: none */
  json_t *volumes; /* [{id, path, read_only}] it mounts; NULL: none */
  /* Network (docs/network.md): the policy as clients see it ({mode, allow,
   * public_ports}), the secrets its proxy adds (never shown), both
   * compiled; its egress proxy; connections through its ports. */
  json_t *network, *secrets;
  struct netpolicy policy;
  struct egress *egress;
  struct relay_set ports;
  /* What lets a client reach its private ports without an API key. */
  char traffic_token[SERVE_TOKEN_LEN + 1];
  struct escapes escapes; /* refused syscalls (escapes.c) */
  bool dying;
};

#define METRICS_CODES 48

struct metrics {
  uint64_t requests, errors_by_status[600];
  struct {
    const char *code; /* a string literal: each is counted once */
    uint64_t n;
  } errors_by_code[METRICS_CODES];
  uint64_t creates, destroys, expired, execs;
  uint64_t egress_allowed, egress_denied; /* connections through egress proxies */
  uint64_t escape_attempts; /* refused syscalls, every sandbox's (escapes.c) */
  uint64_t create_hist[16], exec_hist[16]; /* latency buckets, see metrics.c */
  double create_sum_s, exec_sum_s;
};

struct server {
  uv_loop_t *loop;
  uv_poll_t listener; /* listen_fd readable (accept.c) */
  uv_timer_t accept_retry;
  int listen_fd, spare_fd; /* spare_fd: for answering 503 when out of descriptors */
  unsigned fd_limit;       /* RLIMIT_NOFILE (fds.c) */
  struct sockaddr_storage listen_addr; /* where it listens (family 0 until it does) */
  uv_signal_t sigterm, sigint;
  uv_timer_t reaper;
  unsigned reaper_ticks;
  bool collecting; /* hutch_gc_host under way, off the loop (sbx.c) */
  struct serve_config cfg;
  struct store *store;
  char *agents_dir; /* STATE_DIR/agents: the agents' sockets */
  char *kernels_dir; /* share/kernels, shown to sandboxes; NULL: none found */
  char *metrics_token; /* from --metrics-token-file; NULL: none */
  int netns_fd; /* the server's own network namespace (hutch_sandbox_socket) */
  unsigned lookups; /* egress proxies' name lookups under way (egress.c) */
  struct sockaddr_storage *own_addrs; /* the host's addresses, and when they were read */
  size_t nown_addrs;
  uint64_t own_addrs_at;
  struct audit *audit; /* audit.c */
  struct http_conn *conns;
  unsigned nconns;
  struct sbx *sandboxes; /* tenants' sandboxes */
  unsigned nsandboxes;
  struct pool *pools;
  uv_timer_t refill;
  uint64_t refill_due; /* loop time by which a deferred refill runs */
  struct metrics metrics;
  bool layers_checked, layers_usable; /* can the state dir hold snapshots (snapshots.c) */
  unsigned captures; /* snapshot copies under way */
  /* Blocking work off the loop (offload.c): running, and waiting in order. */
  struct offload_queue offload[OFFLOAD_LANES];
  uv_timer_t checkpoint; /* the store's, off the loop (server.c) */
  bool checkpointing;
  struct creating *creating; /* sandboxes being made (api_sandboxes.c) */
  struct vol_making *vol_making; /* volumes being made (volumes.c) */
  bool stopping;
  char rbuf[64 << 10]; /* every connection reads into this, one at a time */
};

int serve_main(int argc, char **argv);

/* server.c: a server with the defaults; open its state, listening socket
 * and pools (cfg.port 0: any free port, written back); free it all. */
struct server *server_new(void);
int server_open(struct server *srv, struct hutch_err *err);
/* Whether the state dir, if it exists already, may be trusted with keys:
 * hutch's own and writable by no one else; -1 (why in err) if not. */
int server_state_dir_check(const char *dir, struct hutch_err *err);
void server_free(struct server *srv);

/* accept.c: listen on sa, accepting by hand (a 503 when out of
 * descriptors); stop listening. */
int accept_start(struct server *srv, const struct sockaddr *sa, socklen_t len,
                 struct hutch_err *err);
void accept_stop(struct server *srv);

/* fds.c: descriptor budgets per tenant, per sandbox and for the server.
 * fds_check: 0 when want more fit, else the status to answer (429: the
 * tenant's or sandbox's share; 503: the server's) with why. */
#define FDS_RELAY 6 /* a relayed connection: two sockets, two pipes */
void fds_init(struct server *srv);
unsigned fds_pool(const struct server *srv);
unsigned fds_server_used(const struct server *srv);
int fds_check(const struct server *srv, const char *tenant, const struct sbx *sb, unsigned want,
              char *why, size_t size);
int fds_check_sandbox(const struct server *srv);

/* routes.c: find the route, check the caller's key, call the handler. */
void serve_dispatch(struct server *srv, struct http_conn *c);
/* Whether the route for req takes its body streamed (file uploads). */
bool serve_streams_body(struct server *srv, const struct http_req *req);
/* Called when a response has ended: audit line and metrics. */
void serve_request_done(struct server *srv, struct http_conn *c);
/* Write one audit line (its "time" is added here); takes j's reference. */
void serve_audit(struct server *srv, json_t *j);
/* `hutch serve --routes=TABLE`: the table's routes, one "METHOD PATH" a
 * line; -1 when there is no such table. */
int serve_print_routes(FILE *out, const char *table);

/* How every JSON body and line is written: compact, and numbers with at
 * most 10 significant digits (timings in ms). */
#define SERVE_JSON_FLAGS (JSON_COMPACT | JSON_REAL_PRECISION(10))

/* A JSON string of text that may not be valid UTF-8. */
json_t *serve_json_text(const char *s);

/* body.c: the request body as a JSON object; on failure a 400 has been sent
 * and NULL is returned. */
json_t *body_object(struct http_conn *c);
/* Optional typed fields of a request object. Each returns 0 when absent
 * (leaving *out as it was), 1 when present and right, -1 after sending 400. */
int body_uint(struct http_conn *c, json_t *o, const char *key, uint64_t min, uint64_t max,
              uint64_t *out);
int body_number(struct http_conn *c, json_t *o, const char *key, double min, double max,
                double *out);
int body_string(struct http_conn *c, json_t *o, const char *key, size_t max, const char **out);
int body_string_map(struct http_conn *c, json_t *o, const char *key, size_t max_entries,
                    json_t **out);
/* Fields other than those named: 400. NULL-terminated list. */
int body_only(struct http_conn *c, json_t *o, const char *const *known);
/* The first field of o not named, or NULL. */
const char *body_unknown(json_t *o, const char *const *known);

/* keys.c: API keys and tenants. */
/* nhex random hex digits and a NUL. */
void serve_random_hex(char *out, size_t nhex);
int keys_bootstrap(struct server *srv, struct hutch_err *err);
/* The key that seals the state store's tokens and secrets (SEAL_KEY_LEN
 * bytes, seal.h): STATE_DIR/state.key, made on first start. */
int keys_state_key(const char *state_dir, unsigned char *key, struct hutch_err *err);
/* 1 and *p filled when the request carries a valid key, 0 otherwise. */
int keys_authenticate(struct server *srv, const struct http_req *req, struct principal *p);
/* Whether an Authorization value carries something shaped as a key of
 * this server's (valid or not). */
bool keys_in_authorization(const char *value);
void api_keys_create(struct http_conn *c, const struct principal *p);
void api_keys_delete(struct http_conn *c, const struct principal *p);

/* sbx.c: the registry of live sandboxes. A sandbox is made (sbx_new),
 * waits in a pool or goes straight to a tenant (sbx_register), and is
 * destroyed by request, by its timeout, or when its agent is lost. */
/* Made off the loop (offload.c): made is called on the loop with the
 * sandbox, or NULL and why. What cfg points to must live until then. A
 * server stopping meanwhile gets none: what was made is destroyed. */
typedef void (*sbx_made_fn)(struct server *srv, struct sbx *sb, const struct hutch_err *err,
                            void *arg);
void sbx_make(struct server *srv, const struct hutch_sandbox_config *cfg, const char *template,
              sbx_made_fn made, void *arg);
/* End hs off the loop; then release the fork snapshot of layers (or NULL). */
void sbx_teardown(struct server *srv, struct hutch_sandbox *hs, json_t *layers);
void sbx_register(struct server *srv, struct sbx *sb);
/* Connect to the agent of a sandbox taken over (agent_pending): its
 * HELLO, then the execs it still runs. -1 when it does not answer. */
int sbx_connect_agent(struct sbx *sb);
/* At start: take over the sandboxes the last server left running. */
int sbx_adopt_all(struct server *srv, struct hutch_err *err);
/* The caller's sandbox id, or NULL (another tenant's too). */
struct sbx *sbx_find_own(struct server *srv, const struct principal *p, const char *id);
/* The sandbox the route's {id} names, for the caller; NULL after a 404. */
struct sbx *sbx_lookup(struct http_conn *c, const struct principal *p);
/* The same for a request that needs it running: a paused sandbox is
 * resumed (auto_resume) or NULL after a 409. */
struct sbx *sbx_lookup_live(struct http_conn *c, const struct principal *p);
/* Out of the registry at once; its processes and cgroups go off the loop
 * (sbx_teardown). sbx_destroy_answer answers c 204 once they are gone. */
void sbx_destroy(struct sbx *sb);
void sbx_destroy_answer(struct sbx *sb, struct http_conn *c);
/* agentc on_dead of a sandbox's connection: the sandbox is destroyed. */
void sbx_agent_dead(struct agentc *ac);
void sbx_reaper_start(struct server *srv);
void sbx_destroy_all(struct server *srv);
void sbx_release_all(struct server *srv);
int64_t wall_ms(void);
/* ms since the epoch as "2026-01-02T03:04:05.678Z". */
void iso8601(int64_t ms, char out[32]);
json_t *sbx_json(const struct sbx *sb);

/* api_sandboxes.c and api_exec.c: the handlers of /v1/sandboxes. */
void api_sandboxes_create(struct http_conn *c, const struct principal *p);
void api_sandboxes_list(struct http_conn *c, const struct principal *p);
void api_sandboxes_get(struct http_conn *c, const struct principal *p);
void api_sandboxes_delete(struct http_conn *c, const struct principal *p);
void api_sandboxes_timeout(struct http_conn *c, const struct principal *p);
void api_exec(struct http_conn *c, const struct principal *p);
/* The agent's exec request from a native exec body o, or NULL after a
 * 400; *in: the stdin it gives, if any. */
json_t *exec_request(struct http_conn *c, const struct sbx *sb, json_t *o, const char **in);

/* The core of a create, shared by both APIs: o is a native request body.
 * -1 after an error answer; else made is called on the loop (at once when
 * a warm pool had one) with the sandbox, or NULL after an error answer;
 * c is NULL then when the client left meanwhile (no sandbox is left
 * behind for it). */
typedef void (*sandboxes_made_fn)(struct http_conn *c, const struct principal *p, struct sbx *sb,
                                  void *arg);
int sandboxes_create(struct http_conn *c, const struct principal *p, json_t *o,
                     sandboxes_made_fn made, void *arg);
void sandboxes_set_expiry(struct sbx *sb, int64_t expires_ms);
/* Creates under way that mount volume (an id), or stack layer (a
 * snapshot's id); either may be NULL. A volume or snapshot they use is in
 * use as much as by a live sandbox. */
unsigned sandboxes_creating_users(const struct server *srv, const char *volume,
                                  const char *layer);
/* Room for count more sandboxes of memory_mb each: the tenant's quota and
 * the server's capacity; -1 after a 429 or 503. */
int sandboxes_check_room(struct http_conn *c, const struct principal *p, uint64_t memory_mb,
                         unsigned count);
/* The sandbox and the optional {timeout_s} of its request body (t < 0
 * when absent); NULL after an error answer. */
struct sbx *sandboxes_timeout_body(struct http_conn *c, const struct principal *p, double *t);

/* procs.c: background processes (an exec with "background": true). A
 * process from the agent request req (exec_request); NULL after an error
 * answer. procs_start also answers c with 201 {pid} once it runs. */
struct proc *procs_spawn(struct http_conn *c, struct sbx *sb, json_t *req, const char *in,
                         bool keep_stdin);
int procs_start(struct http_conn *c, struct sbx *sb, json_t *req, const char *in,
                bool keep_stdin);
void procs_free(struct sbx *sb);
/* After a restart: the execs the agent still runs become background
 * processes (output from now on; what was kept went with the old server). */
void procs_adopt(struct sbx *sb, json_t *jobs);
void api_procs_list(struct http_conn *c, const struct principal *p);
void api_procs_output(struct http_conn *c, const struct principal *p);
void api_procs_signal(struct http_conn *c, const struct principal *p);
void api_procs_stdin(struct http_conn *c, const struct principal *p);
void api_procs_kill(struct http_conn *c, const struct principal *p);
/* For other readers and writers of a process (ws.c). A reader gets each
 * output line by line(), then the exit line by end(), which owns u (it is
 * unlinked then); one that goes away first calls procs_unsubscribe. */
struct sub {
  struct sub *next;
  struct proc *pr;
  void (*start)(struct sub *u, int pid); /* optional: it started */
  void (*line)(struct sub *u, const char *line, size_t n);
  void (*end)(struct sub *u, const char *line, size_t n);
  void *ctx;
};
struct proc *procs_find(struct http_conn *c, const struct principal *p); /* NULL after 404 */
struct sub *procs_subscribe(struct proc *pr,
                            void (*line)(struct sub *u, const char *line, size_t n),
                            void (*end)(struct sub *u, const char *line, size_t n), void *ctx);
void procs_unsubscribe(struct sub *u);
const char *procs_kept(const struct proc *pr, size_t *n);
json_t *procs_exit_line(const struct proc *pr); /* NULL while it runs */
/* A sandbox's processes that started, newest first (prev NULL: the first). */
struct proc *procs_next(struct sbx *sb, struct proc *prev);
struct proc *procs_by_pid(struct sbx *sb, int pid); /* NULL: none */
int procs_pid(const struct proc *pr);
json_t *procs_cmd(const struct proc *pr); /* the argv; borrowed */
/* 0, or -1 when its stdin is closed, -2 when too much waits unread. */
int procs_stdin(struct proc *pr, const void *data, size_t n, bool eof);
bool procs_control(struct proc *pr, json_t *ctl); /* takes ctl; false: ended */
void api_procs_ws(struct http_conn *c, const struct principal *p);

/* contexts.c: code contexts, their kernels, and /code. The core, shared
 * by both APIs; each returns NULL (or -1) after an error answer. */
void contexts_free(struct sbx *sb);
struct context *contexts_create(struct http_conn *c, struct sbx *sb, const char *language,
                                const char *cwd, json_t *env);
struct context *contexts_find(struct http_conn *c, struct sbx *sb, const char *id);
/* The default context of a language (made, or made again if it died). */
struct context *contexts_default(struct http_conn *c, struct sbx *sb, const char *language);
struct context *contexts_next(struct sbx *sb, struct context *prev); /* in order made */
json_t *contexts_json(const struct context *cx); /* {id, language, cwd, state, error?} */
void contexts_delete(struct context *cx);
int contexts_restart(struct http_conn *c, struct context *cx);
/* Run a cell: o is a native /code body; the answer streams. */
void contexts_run(struct http_conn *c, struct sbx *sb, json_t *o);
void api_contexts_create(struct http_conn *c, const struct principal *p);
void api_contexts_list(struct http_conn *c, const struct principal *p);
void api_contexts_delete(struct http_conn *c, const struct principal *p);
void api_contexts_restart(struct http_conn *c, const struct principal *p);
void api_contexts_interrupt(struct http_conn *c, const struct principal *p);
void api_contexts_fork(struct http_conn *c, const struct principal *p);
void api_code(struct http_conn *c, const struct principal *p);

/* api_files.c: the agent's file operations for a request, and the
 * /v1/sandboxes/{id}/files… routes on them. An answer hears how the
 * operation ended and answers c. */
struct files_result {
  json_t *done, *err;  /* the agent's done event, or its error */
  const char *out;     /* a listing: the lines the agent sent */
  size_t nout;
  const char *path;    /* the path given to the call */
  void *arg;
};
typedef void (*files_answer_fn)(struct http_conn *c, const struct files_result *r);
/* req: the agent request (taken); path: malloc'd, freed with the call, or
 * NULL. */
void files_call(struct http_conn *c, struct sbx *sb, json_t *req, char *path,
                files_answer_fn answer, void *arg);
/* Stream the file at path (taken) to c. */
void files_read(struct http_conn *c, struct sbx *sb, char *path, const char *user);
/* Write the request body, as it comes, to path (taken). */
void files_write(struct http_conn *c, struct sbx *sb, char *path, const char *user,
                 files_answer_fn answer, void *arg);
/* An agent error as the HTTP answer its code means. */
void files_error(struct http_conn *c, json_t *err);
/* The entries of a listing's lines (a new array). */
json_t *files_entries(const char *out, size_t nout);
/* A usable path, or false after a 400. */
bool files_path_ok(struct http_conn *c, const char *path);
void api_files_write(struct http_conn *c, const struct principal *p);
void api_files_read(struct http_conn *c, const struct principal *p);
void api_files_delete(struct http_conn *c, const struct principal *p);
void api_files_list(struct http_conn *c, const struct principal *p);
void api_files_stat(struct http_conn *c, const struct principal *p);
void api_files_mkdir(struct http_conn *c, const struct principal *p);
void api_files_move(struct http_conn *c, const struct principal *p);
void api_files_watch(struct http_conn *c, const struct principal *p);

/* pool.c: warm pools, per template and limits (--pool SPEC=N). */
int pool_configure(struct server *srv, struct hutch_err *err);
/* A ready sandbox made with exactly cfg and template, or NULL. */
struct sbx *pool_take(struct server *srv, const struct hutch_sandbox_config *cfg,
                      const char *template);
void pool_unlink(struct sbx *sb);
/* A request came: push a pending refill back to a quieter moment. */
void pool_defer(struct server *srv);
/* At stop: the ready sandboxes go; pool_free after the loop has ended. */
void pool_destroy_all(struct server *srv);
void pool_free(struct server *srv);
void pool_metrics(FILE *f, const struct server *srv);

/* The E2B-compatible API (docs/e2b.md): E2B's REST API beside the native
 * one, and, by the E2b-Sandbox-Id and E2b-Sandbox-Port headers, each
 * sandbox's envd and code interpreter. Each handler turns the E2B request
 * into the native core's and its answer back. */
#define E2B_ENVD_PORT "49983"
#define E2B_INTERPRETER_PORT "49999"
/* What envd version hutch answers as: the E2B SDKs switch features by it
 * (docs/e2b.md says which this one gives). */
#define E2B_ENVD_VERSION "0.5.2"

/* e2b_api.c: /sandboxes, /v2/sandboxes */
void e2b_sandboxes_create(struct http_conn *c, const struct principal *p);
void e2b_sandboxes_list(struct http_conn *c, const struct principal *p);
void e2b_sandboxes_get(struct http_conn *c, const struct principal *p);
void e2b_sandboxes_delete(struct http_conn *c, const struct principal *p);
void e2b_sandboxes_timeout(struct http_conn *c, const struct principal *p);
void e2b_sandboxes_pause(struct http_conn *c, const struct principal *p);
void e2b_sandboxes_connect(struct http_conn *c, const struct principal *p);
void e2b_sandboxes_metrics(struct http_conn *c, const struct principal *p);
void e2b_sandboxes_fork(struct http_conn *c, const struct principal *p);
void e2b_snapshots_create(struct http_conn *c, const struct principal *p);
void e2b_snapshots_list(struct http_conn *c, const struct principal *p);
void e2b_templates_delete(struct http_conn *c, const struct principal *p);
/* The sandbox of a data-plane request (routes.c checked it), or NULL once
 * it is gone. */
struct sbx *e2b_sandbox(struct http_conn *c);
/* The user a data-plane request acts as (Authorization: Basic, or the
 * username query): "user" or "root"; NULL after a 400. */
const char *e2b_user(struct http_conn *c);
/* An envd path: absolute as given, else under the user's home (malloc'd). */
char *e2b_path(const char *path, const char *user);

/* e2b_process.c: process.Process */
void e2b_envd_health(struct http_conn *c, const struct principal *p);
void e2b_process_start(struct http_conn *c, const struct principal *p);
void e2b_process_connect(struct http_conn *c, const struct principal *p);
void e2b_process_list(struct http_conn *c, const struct principal *p);
void e2b_process_input(struct http_conn *c, const struct principal *p);
void e2b_process_close_stdin(struct http_conn *c, const struct principal *p);
void e2b_process_signal(struct http_conn *c, const struct principal *p);
void e2b_process_update(struct http_conn *c, const struct principal *p);

/* e2b_fs.c: filesystem.Filesystem, GET and POST /files */
void e2b_fs_stat(struct http_conn *c, const struct principal *p);
void e2b_fs_list(struct http_conn *c, const struct principal *p);
void e2b_fs_mkdir(struct http_conn *c, const struct principal *p);
void e2b_fs_move(struct http_conn *c, const struct principal *p);
void e2b_fs_remove(struct http_conn *c, const struct principal *p);
void e2b_fs_watch(struct http_conn *c, const struct principal *p);
void e2b_fs_watcher_create(struct http_conn *c, const struct principal *p);
void e2b_fs_watcher_events(struct http_conn *c, const struct principal *p);
void e2b_fs_watcher_remove(struct http_conn *c, const struct principal *p);
void e2b_files_read(struct http_conn *c, const struct principal *p);
void e2b_files_write(struct http_conn *c, const struct principal *p);
void e2b_watches_free(struct sbx *sb);

/* e2b_network.c: E2B's network settings. A create's as hutch's {network,
 * secrets} (NULL after a 400); a sandbox's as E2B shows them
 * {allowInternetAccess, network}; PUT /sandboxes/{id}/network. */
json_t *e2b_network_request(struct http_conn *c, json_t *o);
json_t *e2b_network_json(const struct sbx *sb);
void e2b_sandboxes_network(struct http_conn *c, const struct principal *p);

/* e2b_interp.c: the code interpreter */
void e2b_interp_health(struct http_conn *c, const struct principal *p);
void e2b_execute(struct http_conn *c, const struct principal *p);
void e2b_contexts_create(struct http_conn *c, const struct principal *p);
void e2b_contexts_list(struct http_conn *c, const struct principal *p);
void e2b_contexts_delete(struct http_conn *c, const struct principal *p);
void e2b_contexts_restart(struct http_conn *c, const struct principal *p);

/* lifecycle.c: pause and resume. A freeze runs off the loop; then hears
 * how it went: sb NULL when the sandbox was destroyed meanwhile, c the
 * request's connection (NULL without one, or when its client left). */
typedef void (*sbx_frozen_fn)(struct sbx *sb, struct http_conn *c, int r, struct hutch_err *err,
                              void *arg);
void sbx_freeze(struct sbx *sb, struct http_conn *c, sbx_frozen_fn then, void *arg);
/* A sandbox going: its freeze under way, if any, will not touch it. */
void sbx_freeze_forget(struct sbx *sb);
/* Freeze it (unless a snapshot's copy has), then mark it paused. */
typedef void (*sbx_paused_fn)(struct sbx *sb, struct http_conn *c, int r, struct hutch_err *err);
void sbx_pause(struct sbx *sb, struct http_conn *c, sbx_paused_fn then);
/* timeout_ms < 0: what was left of its timeout when it was paused. */
int sbx_resume(struct sbx *sb, int64_t timeout_ms, struct hutch_err *err);
/* A paused sandbox a request needs running: resumed, or false after an
 * answer (409 when it may not be resumed by traffic). */
bool sbx_wake(struct http_conn *c, struct sbx *sb);
void api_sandboxes_pause(struct http_conn *c, const struct principal *p);
void api_sandboxes_resume(struct http_conn *c, const struct principal *p);

/* snapshots.c: snapshots (a sandbox's files as layers on disk) and forks. */
char *snapshots_dir(const struct server *srv, const char *id);
/* Every snapshot (of tenant; NULL: all), oldest first, as JSON; NULL on a
 * store error (said on stderr). */
json_t *snapshots_list(struct server *srv, const char *tenant);
/* Capture sb's files as a new snapshot of its tenant's, the copy on the
 * thread pool, with the sandbox frozen for it (a paused one stays paused).
 * -1 after an error answer; else done is called on the loop with the
 * request's connection (NULL when the client left) and the snapshot's JSON
 * (NULL when it failed: answered). */
typedef void (*snapshot_done_fn)(struct http_conn *c, const struct principal *p, json_t *snap,
                                 void *arg);
int snapshots_capture(struct http_conn *c, const struct principal *p, struct sbx *sb,
                      const char *name, bool ephemeral, snapshot_done_fn done, void *arg);
/* The tenant's snapshot id as JSON {id, layers, …}, or NULL. */
json_t *snapshots_get(struct server *srv, const char *tenant, const char *id);
/* The directories of layers (ids), for a sandbox config; and their end. */
char **snapshots_layer_paths(const struct server *srv, json_t *layers, size_t *n);
void snapshots_free_paths(char **paths, size_t n);
/* A sandbox that stacked layers is gone: a fork's snapshot goes with its
 * last user. */
void snapshots_release(struct server *srv, json_t *layers);
/* At start: forks' snapshots nothing stacks any more go. */
void snapshots_gc(struct server *srv);
/* Answered: 204 once its files are gone (off the loop), or an error (404,
 * 409 snapshot_in_use); -1 after an error. */
int snapshots_delete(struct http_conn *c, const struct principal *p, const char *id);
/* count sandboxes holding sb's files; answer gets the snapshot's id and
 * the forks' sbx_json. -1 after an error answer. */
typedef void (*fork_answer_fn)(struct http_conn *c, json_t *snapshot_id, json_t *made);
int snapshots_fork(struct http_conn *c, const struct principal *p, struct sbx *sb,
                   uint64_t count, double timeout_s, fork_answer_fn answer);
void api_snapshots_create(struct http_conn *c, const struct principal *p);
void api_snapshots_list(struct http_conn *c, const struct principal *p);
void api_snapshots_get(struct http_conn *c, const struct principal *p);
void api_snapshots_delete(struct http_conn *c, const struct principal *p);
void api_sandboxes_fork(struct http_conn *c, const struct principal *p);

/* diskroom.c: 0 when bytes more fit the tenant's disk quota and leave the
 * state filesystem its reserve; else answered (429, 507) and -1. */
int disk_room(struct http_conn *c, const struct principal *p, uint64_t bytes);

/* volumes.c: volumes, ext4 images that outlive sandboxes. */
void api_volumes_create(struct http_conn *c, const struct principal *p);
void api_volumes_list(struct http_conn *c, const struct principal *p);
void api_volumes_get(struct http_conn *c, const struct principal *p);
void api_volumes_delete(struct http_conn *c, const struct principal *p);
/* The tenant's volume by id or name, as JSON, or NULL. */
json_t *volumes_find(struct server *srv, const char *tenant, const char *id_or_name);
/* What a create's "volumes" ask for, ready to mount: loop devices held open
 * until volumes_release, after the sandbox is made. */
struct volume_mounts {
  struct hutch_volume *v;
  size_t n;
  int *fds;
  char **devs;
  json_t *used; /* [{id, path, read_only}], for the sandbox */
};
/* mounts: the request's list, or NULL. -1 after an error answer. */
int volumes_prepare(struct http_conn *c, const struct principal *p, json_t *mounts,
                    struct volume_mounts *out);
void volumes_release(struct volume_mounts *m);
/* The bytes of the tenant's volumes being made (not stored yet); NULL:
 * every tenant's (the filesystem may not have taken them all yet). */
uint64_t volumes_pending_bytes(const struct server *srv, const char *tenant);

/* usage.c: what sandboxes use, sampled (metrics), and what tenants used. */
void usage_sample_all(struct server *srv);
/* Take one sample now (before a pause and a resume, so each is counted
 * to the moment). */
void usage_sample(struct sbx *sb);
/* A sandbox's last use is counted before it goes. */
void usage_final(struct sbx *sb);
void usage_free(struct sbx *sb);
void api_sandboxes_metrics(struct http_conn *c, const struct principal *p);
void api_usage(struct http_conn *c, const struct principal *p);
/* The samples from start to end (ms since the epoch), oldest first, with
 * one taken now at the end, each passed to fn. */
struct usage_point {
  int64_t ms;
  double cpu_pct; /* of the CPUs it may use */
  unsigned cpus;
  uint64_t memory_used, memory_cache, memory_limit, disk_used, disk_limit, pids;
};
void usage_points(struct sbx *sb, int64_t start_ms, int64_t end_ms,
                  void (*fn)(const struct usage_point *pt, void *arg), void *arg);
/* A metrics request's ?start=&end= (seconds since the epoch, as E2B's) in
 * ms; -1 after a 400. */
int usage_range(struct http_conn *c, int64_t *start_ms, int64_t *end_ms);

/* network.c: a sandbox's network policy (netpolicy.h) from a create's
 * "network" and "secrets", set on sb; -1 after a 400. And its route. */
int network_set(struct http_conn *c, struct sbx *sb, json_t *network, json_t *secrets);
/* The same, checking only. */
int network_check(struct http_conn *c, json_t *network, json_t *secrets);
/* The sandbox and the body object of a request that changes its network
 * (fields of known only); NULL after an error answer. */
json_t *network_request(struct http_conn *c, const struct principal *p,
                        const char *const *known, struct sbx **sb);
/* A running sandbox's change: set, connections rechecked, stored; -1
 * after an error answer. */
int network_change(struct http_conn *c, struct sbx *sb, json_t *network, json_t *secrets);
/* After a restart: the policy the store kept; -1 when it is unusable. */
int network_restore(struct sbx *sb, json_t *network, json_t *secrets, struct hutch_err *err);
void network_free(struct sbx *sb);
void api_sandboxes_network(struct http_conn *c, const struct principal *p);

/* egress.c: a sandbox's egress proxy, listening in its namespace; and its
 * end. egress_recheck ends connections its policy no longer allows. */
int egress_open(struct sbx *sb, struct hutch_err *err);
void egress_close(struct sbx *sb);
/* Connections through the sandbox's proxy now. */
unsigned egress_conns(const struct sbx *sb);
void egress_recheck(struct sbx *sb);
/* Connections through its proxy, or its ports, idle for idle_ms end. */
void egress_sweep(struct sbx *sb, uint64_t idle_ms);
void ports_sweep(struct sbx *sb, uint64_t idle_ms);
/* Whether sa is an address of the server's own host. */
bool egress_host_own(struct server *srv, const struct sockaddr *sa);

/* ports.c: a sandbox's ports, reached through the server. */
bool ports_routed_by_host(const struct server *srv, const struct http_req *req);
void ports_forward(struct http_conn *c, const struct principal *p);
void ports_close_all(struct sbx *sb);

/* metrics.c */
void metrics_observe(uint64_t hist[16], double *sum, double seconds);
void metrics_error_code(struct metrics *m, const char *code);
void api_metrics(struct http_conn *c, const struct principal *p);
/* --metrics-token-file read into srv->metrics_token. */
int metrics_open(struct server *srv, struct hutch_err *err);

#endif
