/* The server's life apart from its command line: defaults, opening the
 * state dir and the listening socket, and freeing it all. hutch-serve's
 * main and the request fuzzer (tests/fuzz/) both start a server so. */
#include "core/serve/server_open.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "cleanup.h"
#include "hostlimits.h"
#include "mkdir.h"
#include "util.h"
#include "core/sandbox/audit.h"
#include "core/events/events.h"
#include "core/hooks/webhooks.h"
#include "core/egress/egress_tls.h"
#include "core/sandbox/fds.h"
#include "core/tenancy/keys.h"
#include "core/serve/metrics.h"
#include "core/life/pool.h"
#include "core/life/snapshots.h"
#include "core/life/startup.h"
#include "core/sandbox/tally.h"
#include "core/disk/templates.h"
#include "core/life/volworker.h"
#include "state/seal.h"
#include "state/store.h"
#include "core/life/sbx_adopt.h"
#include "core/life/sbx_reaper.h"
#include "http/accept.h"

struct server *server_new(void) {
  struct server *srv = xcalloc(1, sizeof *srv);
  srv->images = (struct hutch_images){.dirfd = -1, .work_lock = -1};
  srv->cfg = (struct serve_config){
      .port = SERVE_DEFAULT_PORT,
      .max_conns = 1024,
      .max_sandboxes = 1000,
      .tenant_sandboxes = 100,
      .tenant_memory_mb = hutch_tenant_memory_default() >> 20,
      .sandbox_ptys = HUTCH_DEFAULT_PTYS,
      .audit_max_mb = 256,
      .paused_retention_ms = 86400 * 1000,
      .relay_idle_ms = 3600 * 1000,
      .ready_timeout_ms = STARTUP_READY_TIMEOUT_MS,
      .template_timeout_ms = 7200 * 1000,
      .max_create_wait_ms = 3000,
      .events_max = EVENTS_DEFAULT_MAX,
      .events_retention_s = EVENTS_DEFAULT_RETENTION_S,
      .webhook_timeout_ms = WEBHOOK_TIMEOUT_MS,
      .webhook_backoff_ms = WEBHOOK_BACKOFF_MS,
  };

  srv->cfg.host = xstrdup("127.0.0.1");
  srv->cfg.domain = xstrdup("localhost");
  srv->cfg.state_dir = xstrdup(hutch_config_default_state_dir());

  srv->loop = xmalloc(sizeof *srv->loop);
  uv_loop_init(srv->loop);
  srv->netns_fd = -1;
  fds_init(srv);
  offload_init(srv, 2);
  return srv;
}

/* The state dir holds the admin key, the state key and hutch.db: whoever
 * may write the directory may replace any of them (a key of their own, a
 * database whose rows point the server at paths of their choosing), and
 * whoever owns it may make it so at any time. Such a directory is refused,
 * not repaired: the files in it may be someone else's already. */
static int state_dir_trusted(int fd, const char *dir, struct hutch_err *err) {
  struct stat st;
  if (fstat(fd, &st) < 0)
    return hutch_err_set(err, errno, "state directory %s", dir);
  if (st.st_uid != geteuid())
    return hutch_err_invalid(err,
                             "state directory %s belongs to uid %u, not to hutch's uid %u: "
                             "refusing to keep keys there",
                             dir, (unsigned)st.st_uid, (unsigned)geteuid());
  if (st.st_mode & (S_IWGRP | S_IWOTH))
    return hutch_err_invalid(err,
                             "state directory %s is writable by %s (mode %04o): "
                             "refusing to keep keys there",
                             dir, st.st_mode & S_IWOTH ? "everyone" : "its group",
                             (unsigned)(st.st_mode & 07777));
  return 0;
}

int server_state_dir_check(const char *dir, struct hutch_err *err) {
  if (dir[0] != '/')
    return hutch_err_invalid(err, "--state-dir %s: need an absolute path", dir);
  _cleanup_close_ int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    return errno == ENOENT ? 0 : hutch_err_set(err, errno, "state directory %s", dir);
  return state_dir_trusted(fd, dir, err);
}

/* What the state dir holds is root's alone, whatever an older hutch, a
 * restored backup or an operator's mkdir left: the directory 0700 (which
 * alone keeps every other user out), and the secrets' files 0600 besides,
 * should they ever be copied or hard-linked elsewhere. */
static int lock_state_dir(const char *dir, struct hutch_err *err) {
  static const char *const files[] = {"hutch.db",  "hutch.db-wal", "hutch.db-shm",  "admin.key",
                                      "state.key", "audit.jsonl",  "audit.jsonl.1", NULL};
  _cleanup_close_ int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    return hutch_err_set(err, errno, "state directory %s", dir);
  if (state_dir_trusted(fd, dir, err) < 0)
    return -1;
  if (fchmod(fd, 0700) < 0)
    return hutch_err_set(err, errno, "chmod %s", dir);

  for (const char *const *f = files; *f; f++) {
    _cleanup_close_ int file = openat(fd, *f, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (file < 0 && errno != ENOENT)
      return hutch_err_set(err, errno, "%s/%s", dir, *f);
    if (file >= 0 && fchmod(file, 0600) < 0)
      return hutch_err_set(err, errno, "chmod %s/%s", dir, *f);
  }

  /* A new database is made 0600 here, before SQLite opens it: SQLite
   * gives its -wal and -shm files the database's own mode. */
  _cleanup_close_ int db = openat(fd, "hutch.db", O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
  return db < 0 ? hutch_err_set(err, errno, "%s/hutch.db", dir) : 0;
}

static int open_state(struct server *srv, struct hutch_err *err) {
  const char *dir = srv->cfg.state_dir;
  if (dir[0] != '/')
    return hutch_err_invalid(err, "--state-dir %s: need an absolute path", dir);
  if (mkdir_p(dir, 0700, err) < 0)
    return hutch_err_set(err, errno, "state directory %s", dir);
  if (lock_state_dir(dir, err) < 0)
    return -1;

  /* The store, sealed with the state key. */
  _cleanup_free_ char *db = xasprintf("%s/hutch.db", dir);
  unsigned char key[SEAL_KEY_LEN];
  int r = keys_state_key(dir, key, err);
  if (r >= 0)
    r = store_open(db, key, &srv->store, err);
  /* E2B's volume tokens: a key of their own, from the state key. */
  static const char purpose[] = "hutch volume tokens";
  unsigned len = 0;
  if (r == 0 && !HMAC(EVP_sha256(), key, sizeof key, (const unsigned char *)purpose,
                      sizeof purpose - 1, srv->volume_key, &len))
    r = hutch_err_fail(err, HUTCH_ERR_SYSTEM, "internal", "derive the volume token key");
  explicit_bzero(key, sizeof key);
  if (r < 0)
    return -1;

  /* Before adoption, which reports the sandboxes it finds lost. */
  if (events_open(srv, srv->cfg.events_max, srv->cfg.events_retention_s, err) < 0)
    return -1;
  if (webhooks_open(srv, err) < 0)
    return -1;

  srv->agents_dir = xasprintf("%s/agents", dir);
  if (hutch_images_open(&srv->images, dir, err) < 0)
    return -1;

  /* The sandboxes a server that went away left running are ours now. */
  if (sbx_adopt_all(srv, err) < 0)
    return -1;
  if (keys_bootstrap(srv, err) < 0)
    return -1;

  snapshots_gc(srv); /* Forks' snapshots whose forks ended meanwhile go. */
  /* Templates removed while in use whose sandboxes are gone now (their
   * pins are held again by those taken over, above). */
  struct hutch_err gc_err = {0};
  if (hutch_images_gc(&srv->images, &gc_err) < 0)
    fprintf(stderr, "hutch serve: template store: %s\n", gc_err.msg);

  srv->audit = audit_open(dir, srv->cfg.audit_max_mb << 20, err);
  return srv->audit ? 0 : -1;
}

static int start_listening(struct server *srv, struct hutch_err *err) {
  struct sockaddr_storage ss;
  int r;
  if (strchr(srv->cfg.host, ':'))
    r = uv_ip6_addr(srv->cfg.host, srv->cfg.port, (struct sockaddr_in6 *)&ss);
  else
    r = uv_ip4_addr(srv->cfg.host, srv->cfg.port, (struct sockaddr_in *)&ss);
  if (r < 0)
    return hutch_err_invalid(err, "--listen: '%s' is not an IP address", srv->cfg.host);

  if (http_accept_start(&srv->http, (struct sockaddr *)&ss,
                        ss.ss_family == AF_INET6 ? sizeof(struct sockaddr_in6)
                                                 : sizeof(struct sockaddr_in),
                        err) < 0)
    return hutch_err_wrap(err, "%s:%d", srv->cfg.host, srv->cfg.port);

  /* The port the kernel chose, when asked for 0. */
  socklen_t len = sizeof ss;
  if (getsockname(srv->http.listen_fd, (struct sockaddr *)&ss, &len) == 0) {
    srv->cfg.port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                                   : ((struct sockaddr_in *)&ss)->sin_port);
    srv->listen_addr = ss; /* The egress floor keeps sandboxes off it (egress_conn.c). */
  }
  return 0;
}

static bool has_kernel(const char *dir) {
  _cleanup_free_ char *k = xasprintf("%s/kernel.py", dir);
  return dir[0] == '/' && access(k, R_OK) == 0;
}

/* The kernels of code contexts: --kernels-dir, else share/kernels beside
 * the build (build/hutch-serve → share/kernels), else where a package puts
 * them. None found: contexts answer 503, everything else works. */
static int find_kernels(struct server *srv, struct hutch_err *err) {
  if (srv->cfg.kernels_dir) {
    if (!has_kernel(srv->cfg.kernels_dir))
      return hutch_err_invalid(err, "--kernels-dir %s: no kernel.py there (an absolute path?)",
                               srv->cfg.kernels_dir);
    srv->kernels_dir = realpath(srv->cfg.kernels_dir, NULL);
    return srv->kernels_dir ? 0 : hutch_err_set(err, errno, "%s", srv->cfg.kernels_dir);
  }

  char exe[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n > 0) {
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (slash)
      *slash = '\0';
    _cleanup_free_ char *beside = xasprintf("%s/../share/kernels", exe);
    if (has_kernel(beside))
      srv->kernels_dir = realpath(beside, NULL);
  }

  if (!srv->kernels_dir && has_kernel("/usr/share/hutch/kernels"))
    srv->kernels_dir = xstrdup("/usr/share/hutch/kernels");
  return 0;
}

/* The store's checkpoints, off the loop (store.h): looked at every second,
 * run once the WAL holds CHECKPOINT_PAGES (SQLite's own default). Past
 * TRUNCATE_PAGES (16 MiB of 4 KiB pages: 4 times the journal_size_limit
 * a WAL is cut back to when it starts over by itself), the checkpoint
 * empties it, holding the loop's commits off for its last frames; when a
 * reader kept it from that, not again for TRUNCATE_AGAIN_MS (each try
 * holds the commits off up to 20 ms more). */
#define CHECKPOINT_PAGES 1000
#define TRUNCATE_PAGES 4096
#define TRUNCATE_AGAIN_MS 5000

struct checkpoint {
  struct offload o;
  char *path;
  int truncate_pages;
  struct hutch_err err;
  int r;
};

static void checkpoint_run(struct offload *o) {
  struct checkpoint *cp = OFFLOAD_JOB(o, struct checkpoint);
  cp->r = store_checkpoint(cp->path, cp->truncate_pages, &cp->err);
}

static void checkpoint_done(struct offload *o) {
  struct checkpoint *cp = OFFLOAD_JOB(o, struct checkpoint);
  struct server *srv = o->srv;

  if (cp->r < 0)
    fprintf(stderr, "hutch serve: %s\n", cp->err.msg);
  if (cp->r == 1) {
    if (!srv->truncate_after)
      fprintf(stderr, "hutch serve: state store: a reader (or a long write) holds its WAL, "
                      "which is emptied once it is done\n");
    srv->truncate_after = uv_now(srv->loop) + TRUNCATE_AGAIN_MS;
  }

  srv->checkpointing = false;
  free(cp->path);
  free(cp);
}

static void checkpoint_due(uv_timer_t *t) {
  struct server *srv = t->data;
  if (srv->checkpointing || srv->stopping || store_wal_pages(srv->store) < CHECKPOINT_PAGES)
    return;

  struct checkpoint *cp = xcalloc(1, sizeof *cp);
  cp->path = xasprintf("%s/hutch.db", srv->cfg.state_dir);
  cp->truncate_pages = uv_now(srv->loop) >= srv->truncate_after ? TRUNCATE_PAGES : INT_MAX;
  srv->checkpointing = true;
  offload(srv, OFFLOAD_OTHER, &cp->o, checkpoint_run, checkpoint_done);
}

int server_open(struct server *srv, const struct http_handlers *h,
                const struct serve_fronts *fronts, struct hutch_err *err) {
  srv->fronts = fronts;
  http_server_init(&srv->http, srv->loop, srv, h, srv->cfg.max_conns);
  srv->http.private_dir = srv->cfg.state_dir;

  srv->netns_fd = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
  if (srv->netns_fd < 0)
    return hutch_err_set(err, errno, "open /proc/thread-self/ns/net");
  if (hutch_cgroup_open_root(&srv->cg_root, err) < 0)
    return hutch_err_wrap(err, "the hutch cgroup");

  if (server_tiers(srv, err) < 0)
    return -1;
  if (find_kernels(srv, err) < 0)
    return -1;
  if (metrics_open(srv, err) < 0)
    return -1;
  if (egress_tls_init(srv, srv->cfg.egress_ca, err) < 0)
    return -1;
  if (open_state(srv, err) < 0)
    return -1;
  if (start_listening(srv, err) < 0)
    return -1;
  if (pool_configure(srv, err) < 0)
    return -1;

  sbx_reaper_start(srv);
  /* Unreferenced: it never keeps a stopping server's loop running. */
  uv_timer_init(srv->loop, &srv->checkpoint);
  srv->checkpoint.data = srv;
  uv_timer_start(&srv->checkpoint, checkpoint_due, 1000, 1000);
  uv_unref((uv_handle_t *)&srv->checkpoint);
  return 0;
}

static void close_handle(uv_handle_t *h, void *arg) {
  (void)arg;
  if (!uv_is_closing(h))
    uv_close(h, NULL);
}

void server_free(struct server *srv) {
  /* What is still open (after a failed start) closes first. */
  srv->stopping = true;
  webhooks_stop(srv);
  uv_walk(srv->loop, close_handle, NULL);
  uv_run(srv->loop, UV_RUN_DEFAULT);
  uv_loop_close(srv->loop);
  free(srv->loop);

  pool_free(srv);
  templates_free(srv);
  volworker_free_all(srv);
  for (size_t i = 0; srv->cfg.pool_specs && srv->cfg.pool_specs[i]; i++)
    free(srv->cfg.pool_specs[i]);
  free(srv->cfg.pool_specs);

  events_free(srv);
  store_close(srv->store);
  hutch_images_close(&srv->images);
  free(srv->key_cache);
  audit_close(srv->audit);
  free(srv->agents_dir);
  free(srv->kernels_dir);
  if (srv->metrics_token)
    explicit_bzero(srv->metrics_token, strlen(srv->metrics_token));
  free(srv->metrics_token);
  free(srv->cfg.metrics_token_file);

  if (srv->netns_fd >= 0)
    close(srv->netns_fd);
  if (srv->cg_root.ops)
    hutch_cgroup_close(&srv->cg_root);
  http_accept_close(&srv->http);
  free(srv->own_addrs);
  egress_tls_free(srv);
  free(srv->cfg.egress_ca);
  free(srv->by_id);
  tally_free_all(srv);

  netpolicy_floor_free(&srv->cfg.floor);
  netpolicy_floor_free(&srv->cfg.webhook_floor);
  for (size_t i = 0; srv->cfg.webhook_hosts && srv->cfg.webhook_hosts[i]; i++)
    free(srv->cfg.webhook_hosts[i]);
  free(srv->cfg.webhook_hosts);
  free(srv->cfg.kernels_dir);
  free(srv->cfg.ui_dir);
  free(srv->cfg.gvisor_platform);
  free(srv->cfg.host);
  free(srv->cfg.domain);
  free(srv->cfg.state_dir);
  free(srv);
}
