/* hutch serve: options, the event loop, and an orderly stop on SIGTERM or
 * SIGINT (server.c opens and frees the rest). */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "hostcheck.h"
#include "hostlimits.h"
#include "spawner.h"
#include "util.h"
#include "api/console.h"
#include "core/disk/templates.h"
#include "routes.h"
#include "core/life/pool.h"
#include "core/life/sbx_teardown.h"
#include "core/hooks/webhooks.h"
#include "core/serve/server_open.h"
#include "mcp/sessions.h"

#define EXIT_SERVE 125    /* as hutch run: the server itself failed */
#define EXIT_STATE_DIR 78 /* the state dir may not be trusted (sysexits' EX_CONFIG) */

static const char usage[] =
    "usage: hutch serve [OPTIONS]\n\n"
    "  --listen ADDR:PORT        where to listen (default 127.0.0.1:7420; [::1]:PORT for IPv6;\n"
    "                            port 0: any free one, printed at start)\n"
    "  --state-dir DIR           state: database, admin key, audit log, templates\n"
    "                            (default $HUTCH_STATE_DIR, else /var/lib/hutch)\n"
    "  --max-sandboxes N         sandboxes on the whole server (default 1000)\n"
    "  --max-connections N       open HTTP connections (default 1024)\n"
    "  --tenant-sandboxes N      default per-tenant quota of sandboxes (default 100)\n"
    "  --tenant-memory-mb N      default per-tenant quota of sandbox memory, the sum of its\n"
    "                            sandboxes' limits (default: 4 x (RAM - max(512 MiB, RAM/8)))\n"
    "  --tenant-disk-mb N        default per-tenant quota of volumes and snapshots together\n"
    "                            (default: a quarter of the state directory's filesystem)\n"
    "  --sandbox-ptys N          terminals each sandbox may hold at once (default 64)\n"
    "  --audit-max-mb N          audit.jsonl is renamed audit.jsonl.1 (the older one goes)\n"
    "                            when it would pass N MiB (default 256)\n"
    "  --pool SPEC=N[:MAX]       keep N sandboxes ready for creates that match SPEC: a template,\n"
    "                            then limits (host,memory_mb=256,cpus=0.5); repeatable\n"
    "                            (default host=2; --pool host=0 keeps none). Demand grows it\n"
    "                            up to MAX (default 4 x N), 30 s without shrinks it back\n"
    "  --create-lanes N          sandboxes made at once (default: one per CPU, at least 2; up\n"
    "                            to 16); more creates wait in order, pool refills behind them\n"
    "  --max-create-wait-ms MS   a create that would wait longer than MS for a lane (judged\n"
    "                            by recent creates' times) is refused at once: 429\n"
    "                            too_many_requests for a tenant holding most of the queue,\n"
    "                            else 503 at_capacity, with Retry-After (default 3000)\n"
    "  --paused-retention SECONDS  how long a paused sandbox is kept (default 86400)\n"
    "  --events-retention SECONDS  how long /v1/events keeps an event (default 3600)\n"
    "  --events-max N            the most events kept at once (default 100000)\n"
    "  --webhook-allow CIDR|HOST[:PORT]\n"
    "                            lift it from the deny floor for webhook targets (repeatable;\n"
    "                            the floor refuses loopback, private, link-local, metadata\n"
    "                            and the host's own addresses; IPv6 in [ ]); a HOST is\n"
    "                            trusted wherever it resolves to\n"
    "  --webhook-timeout-ms MS   one delivery attempt's time (default 10000)\n"
    "  --webhook-backoff-ms MS   the first retry's wait, doubled at each (default 1000)\n"
    "  --relay-idle SECONDS      a connection through a sandbox's proxy or ports that moves\n"
    "                            no byte for this long ends (default 3600)\n"
    "  --ready-timeout SECONDS   how long a create waits for its template's ready command\n"
    "                            (default 60)\n"
    "  --template-timeout SECONDS  how long a tenant's template job (import, pull, build)\n"
    "                            may run before it is killed (default 7200)\n"
    "  --domain NAME             a sandbox's port is also reached as {port}-{id}.NAME, by\n"
    "                            the Host header (default localhost)\n"
    "  --egress-deny CIDR|HOST[:PORT]\n"
    "                            add to the deny floor: what no sandbox's proxy connects to,\n"
    "                            whatever its allow-list says (repeatable). Built in: the\n"
    "                            host's loopback and own addresses, this server, link-local\n"
    "                            and cloud metadata, multicast, broadcast, private ranges\n"
    "  --egress-permit CIDR[:PORT]\n"
    "                            lift what it holds from the floor (repeatable; IPv6 in [ ];\n"
    "                            this server's own address only with its port named)\n"
    "  --egress-allow-private    lift 10/8, 172.16/12, 192.168/16, 100.64/10, fc00::/7\n"
    "  --egress-ca FILE          also trust the CAs in FILE (PEM) for the hosts whose\n"
    "                            secrets go over HTTPS (beside the host's trust store)\n"
    "  --metrics-token-file FILE  /metrics also takes Authorization: Bearer TOKEN, TOKEN being\n"
    "                            the first line of FILE (at least 16 characters); else only\n"
    "                            the admin key reads it\n"
    "  --metrics-public          /metrics needs no key or token at all\n"
    "  --isolation TIER          the tier of a sandbox whose request, template or snapshot\n"
    "                            names none: ns (namespaces, the default) or gvisor (gVisor's\n"
    "                            kernel, runsc; docs/isolation.md). runsc is looked for at\n"
    "                            start: without it the gvisor tier answers unsupported, and\n"
    "                            --isolation gvisor refuses to start\n"
    "  --isolation-min TIER      no sandbox in a weaker tier (ns < gvisor), whatever its\n"
    "                            request, template or snapshot asks (403 isolation_floor);\n"
    "                            raises --isolation to it; template builds, which run in\n"
    "                            ns, are refused under a gvisor floor\n"
    "  --gvisor-platform P       runsc's platform: ptrace (the default) or kvm (/dev/kvm)\n"
    "  --kernels-dir DIR         the code-interpreter kernels shown to sandboxes (default:\n"
    "                            share/kernels beside the build, else /usr/share/hutch/kernels)\n"
    "  --no-ui                   no web console at /ui (docs/console.md)\n"
    "  --ui-dir DIR              the console's files (default: share/hutch/ui beside the\n"
    "                            program, else the source tree's share/ui)\n"
    "  --routes[=TABLE]          print the routes of a table and exit: native (default),\n"
    "                            e2b (E2B's REST API), envd, interpreter (docs/e2b.md)\n\n"
    "SIGTERM stops the server and leaves its sandboxes running: the next start takes them\n"
    "over (gvisor ones cannot be: they end with the server). SIGINT (Ctrl-C) stops it and\n"
    "destroys them. It refuses to start (exit 78) with a state directory that belongs to\n"
    "another user or that others may write.\n";

static int parse_listen(const char *s, struct serve_config *cfg) {
  const char *colon = strrchr(s, ':');
  uint64_t port;
  if (!colon || !parse_u64(colon + 1, &port) || port > 65535) /* 0: any free port */
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

enum {
  O_LISTEN = 256,
  O_STATE,
  O_MAXSBX,
  O_MAXCONN,
  O_TSBX,
  O_TMEM,
  O_POOL,
  O_RETENTION,
  O_KERNELS,
  O_DOMAIN,
  O_IDLE,
  O_ROUTES,
  O_HELP,
  O_PTYS,
  O_TDISK,
  O_METRICS_PUBLIC,
  O_METRICS_TOKEN,
  O_EDENY,
  O_EPERMIT,
  O_EPRIVATE,
  O_AUDIT_MAX,
  O_READY,
  O_TPLTIME,
  O_LANES,
  O_CREATE_WAIT,
  O_ISOLATION,
  O_ISOLATION_MIN,
  O_GVISOR_PLATFORM,
  O_ECA,
  O_EV_RETENTION,
  O_EV_MAX,
  O_WH_ALLOW,
  O_WH_TIMEOUT,
  O_WH_BACKOFF,
  O_NO_UI,
  O_UI_DIR,
};

/* --webhook-allow SPEC: an address or block (the webhooks' floor's
 * permits), else a host name with an optional port, kept as written
 * canonically ("host" or "host:port"). */
static int webhook_allow(struct serve_config *cfg, const char *spec) {
  char why[512], canon[NETPOLICY_HOST_MAX + 1];
  if (netpolicy_floor_add(&cfg->webhook_floor, true, spec, why, sizeof why) == 0)
    return 0;
  const char *colon = strrchr(spec, ':');
  uint64_t port = 0;
  if (colon && (!parse_u64(colon + 1, &port) || port == 0 || port > 65535))
    return -1;
  char *host = colon ? strndup(spec, (size_t)(colon - spec)) : xstrdup(spec);
  bool ok = host && netpolicy_host_ok(host, canon) && !strchr(canon, ':');
  free(host);
  if (!ok)
    return -1;

  size_t n = 0;
  while (cfg->webhook_hosts && cfg->webhook_hosts[n])
    n++;
  if (n == 64)
    return -1;
  cfg->webhook_hosts = xrealloc(cfg->webhook_hosts, (n + 2) * sizeof *cfg->webhook_hosts);
  cfg->webhook_hosts[n] = port ? xasprintf("%s:%llu", canon, (unsigned long long)port)
                               : xstrdup(canon);
  cfg->webhook_hosts[n + 1] = NULL;
  return 0;
}

/* One option o (its argument in optarg) into cfg: 1 to exit 0 (help,
 * routes), 0 to go on, -1 after saying what is wrong. */
static int one_option(int o, char **argv, struct serve_config *cfg) {
  uint64_t v;
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
  case O_TDISK:
    if (parse_count("--tenant-disk-mb", optarg, 1ull << 40, &v) < 0)
      return -1;
    cfg->tenant_disk_mb = v;
    break;
  case O_AUDIT_MAX:
    if (parse_count("--audit-max-mb", optarg, 1ull << 20, &v) < 0)
      return -1;
    cfg->audit_max_mb = v;
    break;
  case O_PTYS:
    if (parse_count("--sandbox-ptys", optarg, HUTCH_MAX_PTYS, &v) < 0)
      return -1;
    cfg->sandbox_ptys = (unsigned)v;
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
  case O_RETENTION:
    if (parse_count("--paused-retention", optarg, 365 * 86400, &v) < 0)
      return -1;
    cfg->paused_retention_ms = (int64_t)v * 1000;
    break;
  case O_EV_RETENTION:
    if (parse_count("--events-retention", optarg, 30 * 86400, &v) < 0)
      return -1;
    cfg->events_retention_s = (int64_t)v;
    break;
  case O_EV_MAX:
    if (parse_count("--events-max", optarg, 1000000, &v) < 0)
      return -1;
    cfg->events_max = (unsigned)v;
    break;
  case O_WH_ALLOW:
    if (webhook_allow(cfg, optarg) < 0) {
      fprintf(stderr,
              "hutch serve: --webhook-allow wants an address, a CIDR block or a host name, with "
              "an optional :PORT (IPv6 in brackets), not '%s'\n",
              optarg);
      return -1;
    }
    break;
  case O_WH_TIMEOUT:
  case O_WH_BACKOFF:
    if (parse_count(o == O_WH_TIMEOUT ? "--webhook-timeout-ms" : "--webhook-backoff-ms", optarg,
                    600000, &v) < 0)
      return -1;
    *(o == O_WH_TIMEOUT ? &cfg->webhook_timeout_ms : &cfg->webhook_backoff_ms) = v;
    break;
  case O_METRICS_PUBLIC:
    cfg->metrics_public = true;
    break;
  case O_METRICS_TOKEN:
    free(cfg->metrics_token_file);
    cfg->metrics_token_file = xstrdup(optarg);
    break;
  case O_ISOLATION:
  case O_ISOLATION_MIN: {
    int i = hutch_config_isolation_parse(optarg);
    if (i < 0) {
      fprintf(stderr, "hutch serve: --%s wants ns or gvisor, not '%s'\n",
              o == O_ISOLATION ? "isolation" : "isolation-min", optarg);
      return -1;
    }
    if (o == O_ISOLATION)
      cfg->isolation = (enum hutch_isolation)i;
    else
      cfg->isolation_min = (enum hutch_isolation)i;
    break;
  }
  case O_GVISOR_PLATFORM:
    if (strcmp(optarg, "ptrace") != 0 && strcmp(optarg, "kvm") != 0) {
      fprintf(stderr, "hutch serve: --gvisor-platform wants ptrace or kvm, not '%s'\n", optarg);
      return -1;
    }
    free(cfg->gvisor_platform);
    cfg->gvisor_platform = xstrdup(optarg);
    break;
  case O_KERNELS:
    free(cfg->kernels_dir);
    cfg->kernels_dir = xstrdup(optarg);
    break;
  case O_IDLE:
    if (parse_count("--relay-idle", optarg, 7 * 86400, &v) < 0)
      return -1;
    cfg->relay_idle_ms = v * 1000;
    break;
  case O_LANES:
    if (parse_count("--create-lanes", optarg, OFFLOAD_CREATE_MAX, &v) < 0)
      return -1;
    cfg->create_lanes = (unsigned)v;
    break;
  case O_CREATE_WAIT:
    if (parse_count("--max-create-wait-ms", optarg, 600000, &v) < 0)
      return -1;
    cfg->max_create_wait_ms = v;
    break;
  case O_READY:
    if (parse_count("--ready-timeout", optarg, 3600, &v) < 0)
      return -1;
    cfg->ready_timeout_ms = v * 1000;
    break;
  case O_TPLTIME:
    if (parse_count("--template-timeout", optarg, 7 * 86400, &v) < 0)
      return -1;
    cfg->template_timeout_ms = v * 1000;
    break;
  case O_DOMAIN: {
    char canon[NETPOLICY_HOST_MAX + 1];
    if (!netpolicy_host_ok(optarg, canon) || strchr(canon, ':')) {
      fprintf(stderr, "hutch serve: --domain wants a DNS name, not '%s'\n", optarg);
      return -1;
    }
    free(cfg->domain);
    cfg->domain = xstrdup(canon);
    break;
  }
  case O_EDENY:
  case O_EPERMIT: {
    char why[512];
    if (netpolicy_floor_add(&cfg->floor, o == O_EPERMIT, optarg, why, sizeof why) < 0) {
      fprintf(stderr, "hutch serve: %s\n", why);
      return -1;
    }
    break;
  }
  case O_EPRIVATE:
    cfg->floor.allow_private = true;
    break;
  case O_ECA:
    free(cfg->egress_ca);
    cfg->egress_ca = xstrdup(optarg);
    break;
  case O_NO_UI:
    cfg->no_ui = true;
    break;
  case O_UI_DIR:
    free(cfg->ui_dir);
    cfg->ui_dir = xstrdup(optarg);
    break;
  case O_ROUTES:
    if (routes_print(stdout, optarg ? optarg : "native") < 0) {
      fprintf(stderr, "hutch serve: no route table '%s' (native, e2b, envd, interpreter)\n",
              optarg);
      return -1;
    }
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
  return 0;
}

/* 1: exit 0 (help, routes); 0: go on; -1: bad options (said). */
static int parse(int argc, char **argv, struct serve_config *cfg) {
  static const struct option opts[] = {
      {"listen", required_argument, NULL, O_LISTEN},
      {"state-dir", required_argument, NULL, O_STATE},
      {"max-sandboxes", required_argument, NULL, O_MAXSBX},
      {"max-connections", required_argument, NULL, O_MAXCONN},
      {"tenant-sandboxes", required_argument, NULL, O_TSBX},
      {"tenant-memory-mb", required_argument, NULL, O_TMEM},
      {"sandbox-ptys", required_argument, NULL, O_PTYS},
      {"tenant-disk-mb", required_argument, NULL, O_TDISK},
      {"audit-max-mb", required_argument, NULL, O_AUDIT_MAX},
      {"pool", required_argument, NULL, O_POOL},
      {"paused-retention", required_argument, NULL, O_RETENTION},
      {"kernels-dir", required_argument, NULL, O_KERNELS},
      {"events-retention", required_argument, NULL, O_EV_RETENTION},
      {"events-max", required_argument, NULL, O_EV_MAX},
      {"webhook-allow", required_argument, NULL, O_WH_ALLOW},
      {"webhook-timeout-ms", required_argument, NULL, O_WH_TIMEOUT},
      {"webhook-backoff-ms", required_argument, NULL, O_WH_BACKOFF},
      {"domain", required_argument, NULL, O_DOMAIN},
      {"relay-idle", required_argument, NULL, O_IDLE},
      {"ready-timeout", required_argument, NULL, O_READY},
      {"create-lanes", required_argument, NULL, O_LANES},
      {"max-create-wait-ms", required_argument, NULL, O_CREATE_WAIT},
      {"template-timeout", required_argument, NULL, O_TPLTIME},
      {"egress-deny", required_argument, NULL, O_EDENY},
      {"egress-permit", required_argument, NULL, O_EPERMIT},
      {"egress-allow-private", no_argument, NULL, O_EPRIVATE},
      {"egress-ca", required_argument, NULL, O_ECA},
      {"routes", optional_argument, NULL, O_ROUTES},
      {"metrics-public", no_argument, NULL, O_METRICS_PUBLIC},
      {"metrics-token-file", required_argument, NULL, O_METRICS_TOKEN},
      {"isolation", required_argument, NULL, O_ISOLATION},
      {"isolation-min", required_argument, NULL, O_ISOLATION_MIN},
      {"gvisor-platform", required_argument, NULL, O_GVISOR_PLATFORM},
      {"no-ui", no_argument, NULL, O_NO_UI},
      {"ui-dir", required_argument, NULL, O_UI_DIR},
      {"help", no_argument, NULL, O_HELP},
      {0},
  };
  int o;
  opterr = 0;
  while ((o = getopt_long(argc, argv, "+h", opts, NULL)) != -1) {
    int r = one_option(o, argv, cfg);
    if (r != 0)
      return r;
  }

  /* The floor lifts the default with it (tiers are ordered ns < gvisor). */
  if (cfg->isolation < cfg->isolation_min)
    cfg->isolation = cfg->isolation_min;
  if (optind < argc) {
    fprintf(stderr, "hutch serve: unexpected argument '%s'\n", argv[optind]);
    return -1;
  }
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
  uv_close((uv_handle_t *)&srv->reaper, NULL);
  pool_destroy_all(srv);
  templates_stop(srv);
  if (signum == SIGINT) {
    fprintf(stderr, "hutch serve: stopping: destroying %u sandboxes\n", srv->nsandboxes);
    sbx_destroy_all(srv);
  } else {
    fprintf(stderr, "hutch serve: stopping: %u sandboxes go on for the next start\n",
            srv->nsandboxes);
    sbx_release_all(srv);
  }
  http_close_all(&srv->http);
  mcp_front_free(srv);
  webhooks_stop(srv);
  uv_close((uv_handle_t *)&srv->sigterm, NULL);
  uv_close((uv_handle_t *)&srv->sigint, NULL);
}

/* Sandboxes' terminals come from one kernel pool (kernel.pty.max −
 * kernel.pty.reserve); each sandbox's devpts holds at most its own share.
 * A share so large that a handful of sandboxes drain the pool for the rest
 * (and the host's own logins) is said once, with what fixes it. A full
 * server of sandboxes each at its share could still drain it: that is the
 * operator's sizing (docs/security.md), not worth a line at every start. */
#define PTY_SHARES_MIN 16

static void warn_ptys(const struct serve_config *cfg) {
  struct hutch_host_ptys hp;
  if (hutch_host_ptys(&hp) < 0)
    return;
  uint64_t shared = hutch_ptys_shared(&hp);
  if ((uint64_t)cfg->sandbox_ptys * PTY_SHARES_MIN > shared)
    fprintf(stderr,
            "hutch serve: warning: --sandbox-ptys %u lets %llu sandboxes take all %llu "
            "terminals the host shares; to fix: lower --sandbox-ptys, or sysctl "
            "kernel.pty.max=%llu\n",
            cfg->sandbox_ptys,
            (unsigned long long)((shared + cfg->sandbox_ptys - 1) / cfg->sandbox_ptys),
            (unsigned long long)shared,
            (unsigned long long)((uint64_t)cfg->sandbox_ptys * PTY_SHARES_MIN + hp.reserve));
}

static int serve(struct server *srv) {
  struct hutch_err err = {0};
  char why[1024];
  if (server_state_dir_check(srv->cfg.state_dir, &err) < 0) {
    fprintf(stderr, "hutch serve: %s\n", err.msg);
    /* A relative directory is a bad option; else the directory is distrusted. */
    return srv->cfg.state_dir[0] != '/' ? EXIT_SERVE : EXIT_STATE_DIR;
  }
  /* A server that starts but can never make a sandbox would only fail
   * each request: the host's refusal is said once, here, instead. */
  if (hutch_host_diagnose(srv->cfg.state_dir, why, sizeof why)) {
    fprintf(stderr, "hutch serve: %s\n", why);
    return EXIT_SERVE;
  }

  if (api_console_open(srv, &err) < 0) {
    fprintf(stderr, "hutch serve: %s\n", err.msg);
    return EXIT_SERVE;
  }

  /* Forked now, while the server is small and has one thread. Without it
   * sandboxes are cloned from the server itself: slower with many. */
  srv->spawner = hutch_spawner_start(&err);
  if (!srv->spawner)
    fprintf(stderr, "hutch serve: %s; sandboxes are cloned from the server\n", err.msg);
  if (server_open(srv, &routes_http, &routes_fronts, &err) < 0) {
    fprintf(stderr, "hutch serve: %s\n", err.msg);
    hutch_spawner_free(srv->spawner);
    return EXIT_SERVE;
  }

  warn_ptys(&srv->cfg);
  if (srv->has_gvisor)
    fprintf(stderr, "hutch serve: gvisor tier: runsc %s, platform %s\n", srv->gvisor.version,
            srv->gvisor.platform);
  else
    fprintf(stderr, "hutch serve: gvisor tier unavailable: %s\n", srv->gvisor_why);

  uv_signal_init(srv->loop, &srv->sigterm);
  uv_signal_init(srv->loop, &srv->sigint);
  srv->sigterm.data = srv->sigint.data = srv;
  uv_signal_start(&srv->sigterm, on_signal, SIGTERM);
  uv_signal_start(&srv->sigint, on_signal, SIGINT);
  fprintf(stderr, "hutch serve: listening on http://%s%s%s:%d/ (admin key in %s/admin.key)\n",
          strchr(srv->cfg.host, ':') ? "[" : "", srv->cfg.host,
          strchr(srv->cfg.host, ':') ? "]" : "", srv->cfg.port, srv->cfg.state_dir);

  uv_run(srv->loop, UV_RUN_DEFAULT);
  api_console_close(srv);
  hutch_spawner_free(srv->spawner);
  srv->spawner = NULL;
  return 0;
}

static int serve_main(int argc, char **argv) {
  signal(SIGPIPE, SIG_IGN);
  /* Connections, agents and snapshot copies (two fds a directory level)
   * all take fds: as many as the hard limit allows. */
  struct rlimit nofile;
  if (getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur < nofile.rlim_max) {
    nofile.rlim_cur = nofile.rlim_max;
    setrlimit(RLIMIT_NOFILE, &nofile);
  }

  struct server *srv = server_new();
  int r = parse(argc, argv, &srv->cfg);
  if (!srv->cfg.create_lanes) { /* one a CPU, from 2 to OFFLOAD_CREATE_MAX */
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    if (cpus < 2)
      srv->cfg.create_lanes = 2;
    else if (cpus > OFFLOAD_CREATE_MAX)
      srv->cfg.create_lanes = OFFLOAD_CREATE_MAX;
    else
      srv->cfg.create_lanes = (unsigned)cpus;
  }
  offload_init(srv, srv->cfg.create_lanes);
  /* libuv's thread pool (snapshot copies, egress lookups, the blocking
   * work of offload.c) is sized once, at its first use: room for all the
   * lookups may take (SERVE_LOOKUPS), the copies and both lanes' jobs. */
  char threads[16];
  snprintf(threads, sizeof threads, "%u",
           SERVE_LOOKUPS + SERVE_COPIES + OFFLOAD_OTHER_MAX + srv->cfg.create_lanes);
  setenv("UV_THREADPOOL_SIZE", threads, 0);

  if (r == 0 && geteuid() != 0) {
    fprintf(stderr, "hutch serve: must run as root: it creates namespaces, cgroups and "
                    "id-mapped users\n");
    r = -1;
  }
  int code = r < 0 ? EXIT_SERVE : 0;
  if (r == 0)
    code = serve(srv);
  server_free(srv);
  return code;
}

int main(int argc, char **argv) {
  return serve_main(argc, argv);
}
