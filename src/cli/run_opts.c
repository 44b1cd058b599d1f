/* hutch run's options: every value checked here, with one clear line for
 * what is wrong. Limits are checked against the host by libhutch. */
#include <ctype.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "images.h"
#include "util.h"

enum {
  OPT_MEMORY = 256,
  OPT_PIDS,
  OPT_CPUS,
  OPT_TIMEOUT,
  OPT_CPU_TIME,
  OPT_DISK,
  OPT_OUTPUT_LIMIT,
  OPT_ENV,
  OPT_CWD,
  OPT_BIND_RO,
  OPT_BIND_RW,
  OPT_STDIN,
  OPT_VERDICT,
  OPT_USER,
  OPT_ROOTFS,
  OPT_STATE_DIR,
  OPT_PTYS,
  OPT_TEMPLATE,
  OPT_ISOLATION,
  OPT_GVISOR_PLATFORM,
  OPT_HELP,
};

static const struct option long_opts[] = {
    {"memory", required_argument, 0, OPT_MEMORY},
    {"pids", required_argument, 0, OPT_PIDS},
    {"ptys", required_argument, 0, OPT_PTYS},
    {"cpus", required_argument, 0, OPT_CPUS},
    {"timeout", required_argument, 0, OPT_TIMEOUT},
    {"cpu-time", required_argument, 0, OPT_CPU_TIME},
    {"disk", required_argument, 0, OPT_DISK},
    {"output-limit", required_argument, 0, OPT_OUTPUT_LIMIT},
    {"env", required_argument, 0, OPT_ENV},
    {"cwd", required_argument, 0, OPT_CWD},
    {"bind-ro", required_argument, 0, OPT_BIND_RO},
    {"bind-rw", required_argument, 0, OPT_BIND_RW},
    {"stdin", required_argument, 0, OPT_STDIN},
    {"verdict-json", required_argument, 0, OPT_VERDICT},
    {"user", required_argument, 0, OPT_USER},
    {"rootfs", required_argument, 0, OPT_ROOTFS},
    {"template", required_argument, 0, OPT_TEMPLATE},
    {"state-dir", required_argument, 0, OPT_STATE_DIR},
    {"isolation", required_argument, 0, OPT_ISOLATION},
    {"gvisor-platform", required_argument, 0, OPT_GVISOR_PLATFORM},
    {"interactive", no_argument, 0, 'i'},
    {"tty", no_argument, 0, 't'},
    {"quiet", no_argument, 0, 'q'},
    {"help", no_argument, 0, OPT_HELP},
    {0, 0, 0, 0},
};

static const char usage[] =
    "usage: hutch run [OPTIONS] [--] CMD [ARGS...]\n"
    "Run CMD in a fresh sandbox, stream its output, and destroy the sandbox.\n\n"
    "  --memory MB          memory limit, swap off (default 1024)\n"
    "  --pids N             processes CMD may run at once (default 512)\n"
    "  --ptys N             terminals the sandbox may hold at once (default 64)\n"
    "  --cpus F             CPU limit in CPUs, e.g. 0.5 (default: none)\n"
    "  --timeout SECONDS    wall clock limit (default: none)\n"
    "  --cpu-time SECONDS   CPU time limit, all processes together (default: none)\n"
    "  --disk MB            size of the writable layer (default 1024)\n"
    "  --output-limit BYTES stdout+stderr limit (default: none)\n"
    "  --env K=V            set an environment variable (repeatable)\n"
    "  --cwd DIR            working directory (default: the user's home)\n"
    "  --bind-ro HOST:PATH  show a host file or directory read-only (repeatable)\n"
    "  --bind-rw HOST:PATH  ... writable; the sandbox writes as its owner\n"
    "  --stdin FILE         feed FILE to CMD's stdin ('-': this stdin)\n"
    "  -i, --interactive    same as --stdin -\n"
    "  -t, --tty            give CMD a terminal\n"
    "  --user USER          the sandbox account to run as: user (the default), root,\n"
    "                       a name in the template's /etc/passwd, or UID[:GID]\n"
    "  --template NAME      run in a template of the store (hutch template ls) instead\n"
    "                       of the host's /usr; its command when CMD is not given\n"
    "  --rootfs DIR         use DIR as the template instead of the host's /usr\n"
    "  --isolation TIER     ns (namespaces, the default) or gvisor (gVisor's kernel,\n"
    "                       runsc: docs/isolation.md)\n"
    "  --gvisor-platform P  ptrace (the default) or kvm\n"
    "  --verdict-json FILE  write the verdict there as JSON\n"
    "  -q, --quiet          do not explain hutch-imposed ends on stderr\n"
    "Exit status: CMD's own; 125 hutch failed; 126 cannot execute; 127 not found;\n"
    "128+N killed by signal N; 137 when a limit of hutch's ended it.\n";

static int bad(const char *opt, const char *val, const char *why) {
  fprintf(stderr, "hutch run: %s %s: %s\n", opt, val, why);
  return -1;
}

/* An integer count of units (MB, bytes, pids), never 0, with no overflow. */
static int count(const char *opt, const char *val, uint64_t unit, uint64_t *out) {
  uint64_t v;
  if (!parse_u64(val, &v))
    return bad(opt, val, "not a whole non-negative number");
  if (v == 0)
    return bad(opt, val, "must be greater than 0");
  if (v > UINT64_MAX / unit)
    return bad(opt, val, "too large");
  *out = v * unit;
  return 0;
}

/* Seconds with up to three decimals, as milliseconds; at most a week. */
static int seconds(const char *opt, const char *val, uint64_t *ms) {
  if (!parse_milli(val, ms))
    return bad(opt, val, "not a number of seconds (e.g. 2 or 0.5)");
  if (*ms == 0)
    return bad(opt, val, "must be greater than 0");
  if (*ms > 7ull * 24 * 3600 * 1000)
    return bad(opt, val, "longer than a week");
  return 0;
}

static int add_bind(struct run_opts *o, const char *opt, const char *val, bool rw) {
  const char *colon = strrchr(val, ':');
  if (!colon || colon == val || colon[1] != '/')
    return bad(opt, val, "expected HOST:PATH with an absolute sandbox PATH");
  for (size_t i = 0; i < o->cfg.nbinds; i++)
    if (strcmp(o->binds[i].dst, colon + 1) == 0)
      return bad(opt, val, "a bind to this sandbox path is already given");
  o->binds = xrealloc(o->binds, (o->cfg.nbinds + 1) * sizeof *o->binds);
  struct hutch_bind *b = &o->binds[o->cfg.nbinds++];
  b->src = xasprintf("%.*s", (int)(colon - val), val);
  b->dst = xstrdup(colon + 1);
  b->rw = rw;
  o->cfg.binds = o->binds;
  return 0;
}

static int add_env(struct run_opts *o, const char *val) {
  const char *eq = strchr(val, '=');
  if (!eq || eq == val)
    return bad("--env", val, "expected K=V");
  o->req.env = xrealloc(o->req.env, (o->nenv + 2) * sizeof(char *));
  o->req.env[o->nenv++] = xstrdup(val);
  o->req.env[o->nenv] = NULL;
  return 0;
}

static int one_option(struct run_opts *o, int c, const char *name, const char *v) {
  switch (c) {
  case OPT_MEMORY:
    return count(name, v, 1 << 20, &o->cfg.memory_bytes);
  case OPT_DISK:
    return count(name, v, 1 << 20, &o->cfg.disk_bytes);
  case OPT_PIDS:
    return count(name, v, 1, &o->cfg.pids);

  case OPT_PTYS: {
    uint64_t n;
    if (count(name, v, 1, &n) < 0)
      return -1;
    if (n > HUTCH_MAX_PTYS)
      return bad(name, v, "more than 4096");
    o->cfg.ptys = (unsigned)n;
    return 0;
  }

  case OPT_OUTPUT_LIMIT:
    if (count(name, v, 1, &o->req.output_limit) < 0)
      return -1;
    return o->req.output_limit > (1ull << 40) ? bad(name, v, "more than 1 TiB") : 0;

  case OPT_CPUS:
    if (!parse_milli(v, &o->cfg.cpu_milli) || o->cfg.cpu_milli == 0)
      return bad(name, v, "not a positive number of CPUs (e.g. 1 or 0.5)");
    return 0;

  case OPT_TIMEOUT:
    return seconds(name, v, &o->req.timeout_ms);
  case OPT_CPU_TIME:
    return seconds(name, v, &o->req.cpu_ms);

  case OPT_ENV:
    return add_env(o, v);
  case OPT_CWD:
    if (v[0] != '/')
      return bad(name, v, "must be an absolute path");
    free(o->req.cwd);
    o->req.cwd = xstrdup(v);
    return 0;
  case OPT_BIND_RO:
    return add_bind(o, name, v, false);
  case OPT_BIND_RW:
    return add_bind(o, name, v, true);

  case OPT_STDIN:
    o->stdin_path = v;
    return 0;
  case 'i':
    o->stdin_path = "-";
    return 0;
  case 't':
    o->req.pty = true;
    return 0;
  case 'q':
    o->quiet = true;
    return 0;
  case OPT_VERDICT:
    o->verdict_path = v;
    return 0;

  case OPT_USER:
    if (!hutch_user_ok(v))
      return bad(name, v, "must be user, root, a user name or UID[:GID] below 65536");
    free(o->req.user);
    o->req.user = xstrdup(v);
    return 0;

  case OPT_ROOTFS:
    o->cfg.rootfs = v;
    return 0;
  case OPT_TEMPLATE:
    if (strcmp(v, "host") != 0)
      o->template_name = v;
    return 0;
  case OPT_STATE_DIR:
    o->cfg.state_dir = v;
    return 0;

  case OPT_ISOLATION: {
    int i = hutch_config_isolation_parse(v);
    if (i < 0)
      return bad(name, v, "ns or gvisor");
    o->cfg.isolation = (enum hutch_isolation)i;
    return 0;
  }
  case OPT_GVISOR_PLATFORM:
    if (strcmp(v, "ptrace") != 0 && strcmp(v, "kvm") != 0)
      return bad(name, v, "ptrace or kvm");
    o->gvisor_platform = v;
    return 0;

  default:
    return -1;
  }
}

/* 0: run; 1: help was printed; -1: bad usage (already reported). */
int run_opts_parse(int argc, char **argv, struct run_opts *o) {
  memset(o, 0, sizeof *o);
  o->tmpl_pin = -1;
  o->cfg.die_with_parent = true;
  opterr = 0;
  optind = 1;

  int c, idx;
  while ((c = getopt_long(argc, argv, "+:itq", long_opts, &idx)) != -1) {
    if (c == '?') {
      /* getopt_long says '?' for an unknown short option (optopt names it),
       * an unknown long one, and a value given to a flag ("--tty=1"). */
      if (optopt > 0 && optopt < 128 && isgraph(optopt) && !strchr("itq", optopt))
        fprintf(stderr, "hutch run: unknown option -%c (see hutch run --help)\n", optopt);
      else
        fprintf(stderr,
                "hutch run: %s: unknown option, or one that takes no value (see hutch "
                "run --help)\n",
                argv[optind - 1]);
      return -1;
    }

    if (c == ':') {
      fprintf(stderr, "hutch run: %s needs a value\n", argv[optind - 1]);
      return -1;
    }
    if (c == OPT_HELP) {
      fputs(usage, stdout);
      return 1;
    }

    const char *name = c >= OPT_MEMORY ? argv[optind - 1] : "";
    char flag[64];
    if (c >= OPT_MEMORY) { /* "--memory=5" or "--memory 5": name the option alone */
      snprintf(flag, sizeof flag, "--%s", long_opts[idx].name);
      name = flag;
    }
    if (one_option(o, c, name, optarg) < 0)
      return -1;
  }

  if (o->template_name && o->cfg.rootfs) {
    fprintf(stderr, "hutch run: --template and --rootfs each name the template: give one\n");
    return -1;
  }

  /* A template may bring its command. */
  if (optind >= argc && o->template_name)
    return 0;
  if (optind >= argc) {
    fprintf(stderr, "hutch run: missing command (usage: hutch run [OPTIONS] -- CMD [ARGS...])\n");
    return -1;
  }
  if (argv[optind][0] == '\0') {
    fprintf(stderr, "hutch run: the command is an empty string\n");
    return -1;
  }

  o->req.argv = xcalloc((size_t)(argc - optind) + 1, sizeof(char *));
  for (int i = optind; i < argc; i++)
    o->req.argv[i - optind] = xstrdup(argv[i]);

  if (o->req.pty && o->stdin_path && strcmp(o->stdin_path, "-") != 0) {
    fprintf(stderr, "hutch run: --tty takes its input from this terminal, not --stdin FILE\n");
    return -1;
  }
  return 0;
}

void run_opts_free(struct run_opts *o) {
  for (size_t i = 0; i < o->cfg.nbinds; i++) {
    free(o->binds[i].src);
    free(o->binds[i].dst);
  }
  free(o->binds);
  hutch_exec_req_free(&o->req);
  hutch_images_stack_free(o->tmpl_rootfs, o->tmpl_layers, o->tmpl_nlayers);
  if (o->tmpl_pin >= 0)
    close(o->tmpl_pin);
}
