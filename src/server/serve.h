/* hutch serve: the server's state and the parts that share it. Everything
 * lives in one struct server owned by serve_main: there are no globals. */
#ifndef HUTCH_SERVE_H
#define HUTCH_SERVE_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <uv.h>

#include "agentc.h"
#include "http.h"
#include "sandbox.h"

#define SERVE_DEFAULT_PORT 7420
#define SERVE_DEFAULT_TIMEOUT_S 300      /* a sandbox's life when the request names none */
#define SERVE_MAX_TIMEOUT_S (7 * 86400)  /* the longest a sandbox may be asked to live */
#define SERVE_TENANT_LEN 64
#define SERVE_KEY_ID_LEN 16
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
  char **pool_specs; /* --pool arguments, NULL-terminated */
  char *kernels_dir;  /* --kernels-dir; NULL: looked for (server.c) */
};

/* Who a request speaks for. */
struct principal {
  char tenant[SERVE_TENANT_LEN + 1];
  char key_id[SERVE_KEY_ID_LEN + 1];
  bool admin;
};

struct pool;
struct proc;
struct context;

struct sbx {
  struct sbx *next;
  struct server *srv;
  struct pool *pool; /* while it waits in a warm pool; NULL once a tenant's */
  char id[17];
  char tenant[SERVE_TENANT_LEN + 1];
  char template[64];
  struct hutch_sandbox *hs;
  struct agentc ac;
  json_t *metadata; /* object of strings */
  json_t *env;      /* object of strings, given to every exec */
  struct proc *procs; /* background processes, newest first */
  struct context *contexts; /* code contexts (contexts.c) */
  unsigned ncontexts;
  uint64_t memory_mb, pids, cpu_milli, disk_mb;
  int64_t created_ms, expires_ms; /* wall clock, ms since the epoch */
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
  uint64_t create_hist[16], exec_hist[16]; /* latency buckets, see metrics.c */
  double create_sum_s, exec_sum_s;
};

struct server {
  uv_loop_t *loop;
  uv_tcp_t listener;
  uv_signal_t sigterm, sigint;
  uv_timer_t reaper;
  unsigned reaper_ticks;
  struct serve_config cfg;
  struct store *store;
  char *agents_dir; /* STATE_DIR/agents: the agents' sockets */
  char *kernels_dir; /* share/kernels, shown to sandboxes; NULL: none found */
  FILE *audit;
  struct http_conn *conns;
  unsigned nconns;
  struct sbx *sandboxes; /* tenants' sandboxes */
  unsigned nsandboxes;
  struct pool *pools;
  uv_timer_t refill;
  uint64_t refill_due; /* loop time by which a deferred refill runs */
  struct metrics metrics;
  bool stopping;
  char rbuf[64 << 10]; /* every connection reads into this, one at a time */
};

int serve_main(int argc, char **argv);

/* server.c: a server with the defaults; open its state, listening socket
 * and pools (cfg.port 0: any free port, written back); free it all. */
struct server *server_new(void);
int server_open(struct server *srv, struct hutch_err *err);
void server_free(struct server *srv);

/* routes.c: find the route, check the caller's key, call the handler. */
void serve_dispatch(struct server *srv, struct http_conn *c);
/* Whether the route for req takes its body streamed (file uploads). */
bool serve_streams_body(struct server *srv, const struct http_req *req);
/* Called when a response has ended: audit line and metrics. */
void serve_request_done(struct server *srv, struct http_conn *c);
/* `hutch serve --routes`: every route served, one "METHOD PATH" a line. */
void serve_print_routes(FILE *out);

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

/* keys.c: API keys and tenants. */
/* nhex random hex digits and a NUL. */
void serve_random_hex(char *out, size_t nhex);
int keys_bootstrap(struct server *srv, struct hutch_err *err);
/* 1 and *p filled when the request carries a valid key, 0 otherwise. */
int keys_authenticate(struct server *srv, const struct http_req *req, struct principal *p);
void api_keys_create(struct http_conn *c, const struct principal *p);
void api_keys_delete(struct http_conn *c, const struct principal *p);

/* sbx.c: the registry of live sandboxes. A sandbox is made (sbx_new),
 * waits in a pool or goes straight to a tenant (sbx_register), and is
 * destroyed by request, by its timeout, or when its agent is lost. */
struct sbx *sbx_new(struct server *srv, const struct hutch_sandbox_config *cfg,
                    const char *template, struct hutch_err *err);
void sbx_register(struct server *srv, struct sbx *sb);
/* At start: take over the sandboxes the last server left running. */
int sbx_adopt_all(struct server *srv, struct hutch_err *err);
/* The sandbox the route's {id} names, for the caller; NULL after a 404. */
struct sbx *sbx_lookup(struct http_conn *c, const struct principal *p);
void sbx_destroy(struct sbx *sb);
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

/* procs.c: background processes (an exec with "background": true). */
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
/* 0, or -1 when its stdin is closed, -2 when too much waits unread. */
int procs_stdin(struct proc *pr, const void *data, size_t n, bool eof);
bool procs_control(struct proc *pr, json_t *ctl); /* takes ctl; false: ended */
void api_procs_ws(struct http_conn *c, const struct principal *p);

/* contexts.c: code contexts, their kernels, and /code. */
void contexts_free(struct sbx *sb);
void api_contexts_create(struct http_conn *c, const struct principal *p);
void api_contexts_list(struct http_conn *c, const struct principal *p);
void api_contexts_delete(struct http_conn *c, const struct principal *p);
void api_contexts_restart(struct http_conn *c, const struct principal *p);
void api_contexts_interrupt(struct http_conn *c, const struct principal *p);
void api_code(struct http_conn *c, const struct principal *p);

/* api_files.c: /v1/sandboxes/{id}/files… */
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

/* metrics.c */
void metrics_observe(uint64_t hist[16], double *sum, double seconds);
void metrics_error_code(struct metrics *m, const char *code);
void api_metrics(struct http_conn *c, const struct principal *p);

#endif
