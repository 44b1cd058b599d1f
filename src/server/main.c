/* hutch serve: options, start-up (state dir, store, admin key, listening
 * socket), the event loop, and an orderly stop on SIGTERM or SIGINT. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cleanup.h"
#include "serve.h"
#include "store.h"
#include "util.h"

#define EXIT_SERVE 125 /* as hutch run: the server itself failed */

static const char usage[] =
    "usage: hutch serve [OPTIONS]\n\n"
    "  --listen ADDR:PORT        where to listen (default 127.0.0.1:7420; [::1]:PORT for IPv6)\n"
    "  --state-dir DIR           state: database, admin key, audit log, templates\n"
    "                            (default $HUTCH_STATE_DIR, else /var/lib/hutch)\n"
    "  --max-sandboxes N         sandboxes on the whole server (default 1000)\n"
    "  --max-connections N       open HTTP connections (default 1024)\n"
    "  --tenant-sandboxes N      default per-tenant quota of sandboxes (default 100)\n"
    "  --tenant-memory-mb N      default per-tenant quota of sandbox memory (default 65536)\n"
    "  --pool SPEC=N             keep N sandboxes ready for creates that match SPEC: a template,\n"
    "                            then limits (host,memory_mb=256,cpus=0.5); repeatable\n"
    "                            (default host=2; --pool host=0 keeps none)\n"
    "  --routes                  print every route served and exit\n\n"
    "SIGTERM stops the server and leaves its sandboxes running: the next start takes them\n"
    "over. SIGINT (Ctrl-C) stops it and destroys them.\n";

static int parse_listen(const char *s, struct serve_config *cfg) {
  const char *colon = strrchr(s, ':');
  uint64_t port;
  if (!colon || !parse_u64(colon + 1, &port) || port == 0 || port > 65535)
    return -1;
  size_t n = (size_t)(colon - s);
  if (n >= 2 && s[0] == '[' && s[n - 1] == ']')
    cfg->host = strndup(s + 1, n - 2);
  else
    cfg->host = strndup(s, n);
  cfg->port = (int)port;
  return cfg->host ? 0 : -1;
}

static int parse_count(const char *opt, const char *s, uint64_t max, uint64_t *out) {
  if (!parse_u64(s, out) || *out == 0 || *out > max) {
    fprintf(stderr, "hutch serve: %s wants a number from 1 to %llu, not '%s'\n", opt,
            (unsigned long long)max, s);
    return -1;
  }
  return 0;
}

/* 1: exit 0 (help, routes); 0: go on; -1: bad options (said). */
static int parse(int argc, char **argv, struct serve_config *cfg) {
  enum { O_LISTEN = 256, O_STATE, O_MAXSBX, O_MAXCONN, O_TSBX, O_TMEM, O_POOL, O_ROUTES, O_HELP };
  static const struct option opts[] = {
      {"listen", required_argument, NULL, O_LISTEN},
      {"state-dir", required_argument, NULL, O_STATE},
      {"max-sandboxes", required_argument, NULL, O_MAXSBX},
      {"max-connections", required_argument, NULL, O_MAXCONN},
      {"tenant-sandboxes", required_argument, NULL, O_TSBX},
      {"tenant-memory-mb", required_argument, NULL, O_TMEM},
      {"pool", required_argument, NULL, O_POOL},
      {"routes", no_argument, NULL, O_ROUTES},
      {"help", no_argument, NULL, O_HELP},
      {0},
  };
  uint64_t v;
  int o;
  opterr = 0;
  while ((o = getopt_long(argc, argv, "+h", opts, NULL)) != -1) {
    switch (o) {
    case O_LISTEN:
      free(cfg->host);
      cfg->host = NULL;
      if (parse_listen(optarg, cfg) < 0) {
        fprintf(stderr, "hutch serve: --listen wants ADDR:PORT, not '%s'\n", optarg);
        return -1;
      }
      break;
    case O_STATE:
      free(cfg->state_dir);
      cfg->state_dir = xstrdup(optarg);
      break;
    case O_MAXSBX:
      if (parse_count("--max-sandboxes", optarg, 100000, &v) < 0)
        return -1;
      cfg->max_sandboxes = (unsigned)v;
      break;
    case O_MAXCONN:
      if (parse_count("--max-connections", optarg, 100000, &v) < 0)
        return -1;
      cfg->max_conns = (unsigned)v;
      break;
    case O_TSBX:
      if (parse_count("--tenant-sandboxes", optarg, 100000, &v) < 0)
        return -1;
      cfg->tenant_sandboxes = (unsigned)v;
      break;
    case O_TMEM:
      if (parse_count("--tenant-memory-mb", optarg, 1ull << 30, &v) < 0)
        return -1;
      cfg->tenant_memory_mb = v;
      break;
    case O_POOL: {
      size_t n = 0;
      while (cfg->pool_specs && cfg->pool_specs[n])
        n++;
      if (n == 64) {
        fprintf(stderr, "hutch serve: at most 64 --pool options\n");
        return -1;
      }
      cfg->pool_specs = xrealloc(cfg->pool_specs, (n + 2) * sizeof *cfg->pool_specs);
      cfg->pool_specs[n] = xstrdup(optarg);
      cfg->pool_specs[n + 1] = NULL;
      break;
    }
    case O_ROUTES:
      serve_print_routes(stdout);
      return 1;
    case 'h':
    case O_HELP:
      fputs(usage, stdout);
      return 1;
    default:
      fprintf(stderr, "hutch serve: unknown option '%s' (see hutch serve --help)\n",
              argv[optind - 1]);
      return -1;
    }
  }
  if (optind < argc) {
    fprintf(stderr, "hutch serve: unexpected argument '%s'\n", argv[optind]);
    return -1;
  }
  return 0;
}

static int mkdir_p(const char *path, mode_t mode) {
  char buf[PATH_MAX];
  str_copy(buf, sizeof buf, path);
  for (char *p = buf + 1; *p; p++)
    if (*p == '/') {
      *p = '\0';
      if (mkdir(buf, 0755) < 0 && errno != EEXIST)
        return -1;
      *p = '/';
    }
  return mkdir(buf, mode) < 0 && errno != EEXIST ? -1 : 0;
}

static int open_state(struct server *srv, struct hutch_err *err) {
  const char *dir = srv->cfg.state_dir;
  if (dir[0] != '/')
    return hutch_err_invalid(err, "--state-dir %s: need an absolute path", dir);
  if (mkdir_p(dir, 0700) < 0)
    return hutch_err_set(err, errno, "state directory %s", dir);
  _cleanup_free_ char *db = xasprintf("%s/hutch.db", dir);
  _cleanup_free_ char *audit = xasprintf("%s/audit.jsonl", dir);
  if (store_open(db, &srv->store, err) < 0)
    return -1;
  srv->agents_dir = xasprintf("%s/agents", dir);
  /* The sandboxes a server that went away left running are ours now. */
  if (sbx_adopt_all(srv, err) < 0 || keys_bootstrap(srv, err) < 0)
    return -1;
  int fd = open(audit, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0 || !(srv->audit = fdopen(fd, "a"))) {
    if (fd >= 0)
      close(fd);
    return hutch_err_set(err, errno, "audit log %s", audit);
  }
  return 0;
}

static void on_connection(uv_stream_t *l, int status) {
  struct server *srv = l->data;
  if (status < 0 || srv->stopping)
    return;
  http_accept(srv, l);
}

static int start_listening(struct server *srv, struct hutch_err *err) {
  struct sockaddr_storage ss;
  int r = strchr(srv->cfg.host, ':')
              ? uv_ip6_addr(srv->cfg.host, srv->cfg.port, (struct sockaddr_in6 *)&ss)
              : uv_ip4_addr(srv->cfg.host, srv->cfg.port, (struct sockaddr_in *)&ss);
  if (r < 0)
    return hutch_err_invalid(err, "--listen: '%s' is not an IP address", srv->cfg.host);
  uv_tcp_init(srv->loop, &srv->listener);
  srv->listener.data = srv;
  if ((r = uv_tcp_bind(&srv->listener, (struct sockaddr *)&ss, 0)) < 0 ||
      (r = uv_listen((uv_stream_t *)&srv->listener, 511, on_connection)) < 0)
    return hutch_err_set(err, 0, "listening on %s:%d: %s", srv->cfg.host, srv->cfg.port,
                         uv_strerror(r));
  return 0;
}

/* SIGTERM (a service manager's stop or restart): the tenants' sandboxes go
 * on, and the next start takes them over. SIGINT (Ctrl-C at a terminal):
 * they end with the server. Warm pools' sandboxes end either way. */
static void on_signal(uv_signal_t *s, int signum) {
  struct server *srv = s->data;
  if (srv->stopping)
    return;
  srv->stopping = true;
  uv_close((uv_handle_t *)&srv->listener, NULL);
  uv_close((uv_handle_t *)&srv->reaper, NULL);
  pool_destroy_all(srv);
  if (signum == SIGINT) {
    fprintf(stderr, "hutch serve: stopping: destroying %u sandboxes\n", srv->nsandboxes);
    sbx_destroy_all(srv);
  } else {
    fprintf(stderr, "hutch serve: stopping: %u sandboxes go on for the next start\n",
            srv->nsandboxes);
    sbx_release_all(srv);
  }
  http_close_all(srv);
  uv_close((uv_handle_t *)&srv->sigterm, NULL);
  uv_close((uv_handle_t *)&srv->sigint, NULL);
}

static void close_handle(uv_handle_t *h, void *arg) {
  (void)arg;
  if (!uv_is_closing(h))
    uv_close(h, NULL);
}

static int serve(struct server *srv) {
  struct hutch_err err = {0};
  if (open_state(srv, &err) < 0 || start_listening(srv, &err) < 0 ||
      pool_configure(srv, &err) < 0) {
    fprintf(stderr, "hutch serve: %s\n", err.msg);
    return EXIT_SERVE;
  }
  uv_signal_init(srv->loop, &srv->sigterm);
  uv_signal_init(srv->loop, &srv->sigint);
  srv->sigterm.data = srv->sigint.data = srv;
  uv_signal_start(&srv->sigterm, on_signal, SIGTERM);
  uv_signal_start(&srv->sigint, on_signal, SIGINT);
  sbx_reaper_start(srv);
  fprintf(stderr, "hutch serve: listening on http://%s%s%s:%d/ (admin key in %s/admin.key)\n",
          strchr(srv->cfg.host, ':') ? "[" : "", srv->cfg.host,
          strchr(srv->cfg.host, ':') ? "]" : "", srv->cfg.port, srv->cfg.state_dir);
  uv_run(srv->loop, UV_RUN_DEFAULT);
  return 0;
}

int serve_main(int argc, char **argv) {
  signal(SIGPIPE, SIG_IGN);
  struct server *srv = xcalloc(1, sizeof *srv);
  srv->cfg = (struct serve_config){
      .port = SERVE_DEFAULT_PORT,
      .max_conns = 1024,
      .max_sandboxes = 1000,
      .tenant_sandboxes = 100,
      .tenant_memory_mb = 65536,
  };
  srv->cfg.host = xstrdup("127.0.0.1");
  srv->cfg.state_dir = xstrdup(hutch_default_state_dir());
  int r = parse(argc, argv, &srv->cfg);
  if (r == 0 && geteuid() != 0) {
    fprintf(stderr, "hutch serve: must run as root: it creates namespaces, cgroups and "
                    "id-mapped users\n");
    r = -1;
  }
  int code = r < 0 ? EXIT_SERVE : 0;
  if (r == 0) {
    srv->loop = xmalloc(sizeof *srv->loop);
    uv_loop_init(srv->loop);
    code = serve(srv);
    if (code != 0) { /* let libuv close what was opened */
      srv->stopping = true;
      uv_walk(srv->loop, close_handle, NULL);
    }
    uv_run(srv->loop, UV_RUN_DEFAULT);
    uv_loop_close(srv->loop);
    free(srv->loop);
  }
  pool_free(srv);
  for (size_t i = 0; srv->cfg.pool_specs && srv->cfg.pool_specs[i]; i++)
    free(srv->cfg.pool_specs[i]);
  free(srv->cfg.pool_specs);
  store_close(srv->store);
  if (srv->audit)
    fclose(srv->audit);
  free(srv->agents_dir);
  free(srv->cfg.host);
  free(srv->cfg.state_dir);
  free(srv);
  return code;
}

int main(int argc, char **argv) { return serve_main(argc, argv); }
