/* hutch template bootstrap (docs/templates.md, "Bootstrapping a Debian
 * base"): a base template made from Debian packages by mmdebstrap, with no
 * outside image. mmdebstrap runs on the host as root (it must: it installs
 * packages into a chroot and runs their maintainer scripts there); what it
 * installs comes from the Debian mirror, verified by apt against the
 * host's Debian keyring. Its tar is unpacked as one layer by the same
 * unpacker as an imported image's (unpack.h), with the same rules and
 * caps, and the template gets a small config: PATH, workdir /, bash. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cleanup.h"
#include "layer.h"
#include "layout.h"
#include "msg.h"
#include "unpack.h"
#include "util.h"

#define BOOTSTRAP_MIRROR "http://deb.debian.org/debian"
#define BOOTSTRAP_TIMEOUT_S 1800

struct bootstrap {
  const char *name, *suite, *include, *mirror, *variant;
  uint64_t timeout_ms;
};

static const char usage[] =
    "usage: hutch template bootstrap NAME [--suite bookworm] [--include PKG,...]\n"
    "         [--mirror URL] [--variant minbase] [--timeout S] [--replace]\n";

/* What mmdebstrap is given is checked here, not left to its parser: each
 * value becomes one argument, and none may read as an option. */
static bool word_ok(const char *s, const char *extra) {
  if (!s[0] || s[0] == '-' || strlen(s) > 128)
    return false;
  for (const char *p = s; *p; p++)
    if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || strchr(extra, *p)))
      return false;
  return true;
}

static int check(const struct bootstrap *o, struct hutch_err *err) {
  static const char *const variants[] = {"extract",     "custom",  "essential", "apt",
                                         "required",    "minbase", "buildd",    "important",
                                         "debootstrap", "standard"};
  bool v = false;
  for (size_t i = 0; i < ARRAY_SIZE(variants); i++)
    v |= strcmp(o->variant, variants[i]) == 0;

  if (!hutch_images_name_ok(o->name))
    return hutch_err_invalid(err, "%s: a template name is 1-128 of a-z 0-9 . _ - (and /)", o->name);
  if (!word_ok(o->suite, "-"))
    return hutch_err_invalid(err, "--suite %s: expected a Debian suite (bookworm, trixie, ...)",
                             o->suite);
  if (!v)
    return hutch_err_invalid(err,
                             "--variant %s: expected one of mmdebstrap's variants "
                             "(minbase, apt, ...)",
                             o->variant);

  if (strncmp(o->mirror, "http://", 7) != 0 && strncmp(o->mirror, "https://", 8) != 0)
    return hutch_err_invalid(err, "--mirror %s: expected an http:// or https:// URL", o->mirror);
  for (const char *p = o->mirror; *p; p++)
    if (*p <= ' ' || *p == 0x7f)
      return hutch_err_invalid(err, "--mirror: no spaces or control characters");

  if (o->include) {
    _cleanup_free_ char *list = xstrdup(o->include);
    for (char *save, *pkg = strtok_r(list, ",", &save); pkg; pkg = strtok_r(NULL, ",", &save))
      if (!word_ok(pkg, ".+-"))
        return hutch_err_invalid(err, "--include: '%s' is not a Debian package name", pkg);
  }
  return 0;
}

static int parse(struct image_ctx *ctx, struct bootstrap *o, int argc, char **argv) {
  static const struct option opts[] = {
      {"suite", required_argument, 0, 's'},   {"include", required_argument, 0, 'i'},
      {"mirror", required_argument, 0, 'm'},  {"variant", required_argument, 0, 'v'},
      {"timeout", required_argument, 0, 't'}, {"help", no_argument, 0, 'h'},
      {"replace", no_argument, 0, 'r'},       {0, 0, 0, 0}};
  int c;
  while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
    switch (c) {
    case 's':
      o->suite = optarg;
      break;
    case 'i':
      o->include = optarg;
      break;
    case 'm':
      o->mirror = optarg;
      break;
    case 'v':
      o->variant = optarg;
      break;
    case 't':
      if (!parse_milli(optarg, &o->timeout_ms) || o->timeout_ms == 0) {
        fprintf(stderr, "hutch template bootstrap: --timeout %s: expected seconds\n", optarg);
        return -1;
      }
      break;
    case 'r':
      ctx->replace = true;
      break;
    case 'h':
      fputs(usage, stdout);
      return 1;
    default:
      fputs(usage, stderr);
      return -1;
    }
  }

  if (optind != argc - 1) {
    fputs(usage, stderr);
    return -1;
  }
  o->name = argv[optind];
  return 0;
}

/* mmdebstrap's output lines as "log" events. */
static void log_lines(struct image_ctx *ctx, char *buf, size_t *have, bool flush) {
  char *start = buf, *nl;
  while ((nl = memchr(start, '\n', *have - (size_t)(start - buf))) ||
         (flush && start < buf + *have)) {
    char *end = nl ? nl : buf + *have;
    _cleanup_free_ char *line = xasprintf("%.*s", (int)(end - start), start);
    image_progress(ctx, json_pack("{s:s,s:o,s:s}", "event", "log", "line", hutch_json_text(line),
                                  "message", line));
    start = nl ? nl + 1 : end;
  }
  *have -= (size_t)(start - buf);
  memmove(buf, start, *have);
}

/* The child: its own process group, to be killed whole, and gone if we
 * are; stdin /dev/null, stdout and stderr out. */
static void __attribute__((noreturn)) exec_mmdebstrap(char **argv, char **envp, int out) {
  setpgid(0, 0);
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  int null = open("/dev/null", O_RDONLY);
  if (null < 0)
    _exit(127);
  const int from[3] = {null, out, out};
  for (int fd = 0; fd < 3; fd++)
    if (dup2(from[fd], fd) < 0)
      _exit(127);
  execvpe("mmdebstrap", argv, envp);
  _exit(127);
}

static pid_t spawn(const struct bootstrap *o, const char *tmp, const char *tar, int out,
                   struct hutch_err *err) {
  _cleanup_free_ char *variant = xasprintf("--variant=%s", o->variant);
  _cleanup_free_ char *include = o->include ? xasprintf("--include=%s", o->include) : NULL;
  _cleanup_free_ char *tmpdir = xasprintf("TMPDIR=%s", tmp);
  const char *argv[9];
  size_t n = 0;
  argv[n++] = "mmdebstrap";
  argv[n++] = variant;
  if (include)
    argv[n++] = include;
  argv[n++] = "--format=tar";
  /* Its device nodes: a layer holds none (the sandbox makes its /dev). */
  argv[n++] = "--skip=output/dev";
  argv[n++] = o->suite;
  argv[n++] = tar;
  argv[n++] = o->mirror;
  argv[n] = NULL;
  char *envp[] = {tmpdir, "PATH=" HUTCH_DEFAULT_PATH, "LC_ALL=C.UTF-8", NULL};

  pid_t pid = fork();
  if (pid < 0) {
    hutch_err_set(err, errno, "fork");
    return -1;
  }
  if (pid == 0)
    exec_mmdebstrap((char **)argv, envp, out);
  return pid;
}

/* poll for input on fd, a second at most and not past deadline: poll's
 * answer, 0 once the deadline is reached. */
static int poll_until(int fd, uint64_t deadline) {
  int64_t left = (int64_t)(deadline - now_ns()) / 1000000;
  if (left <= 0)
    return 0;
  struct pollfd pf = {fd, POLLIN, 0};
  return poll(&pf, 1, left > 1000 ? 1000 : (int)left);
}

/* mmdebstrap's output (fd) as log events until it ends, or until the
 * deadline, when its process group (pid) is killed: whether it was. */
static bool relay_output(struct image_ctx *ctx, int fd, pid_t pid, uint64_t deadline) {
  char buf[8192];
  size_t have = 0;
  bool timed_out = false;
  for (;;) {
    int r = poll_until(fd, deadline);
    if (r == 0 && now_ns() >= deadline) {
      timed_out = true;
      kill(-pid, SIGKILL);
      break;
    }
    if (r <= 0)
      continue;
    ssize_t n = read(fd, buf + have, sizeof buf - 1 - have);
    if (n <= 0)
      break;
    have += (size_t)n;
    log_lines(ctx, buf, &have, have == sizeof buf - 1);
  }
  log_lines(ctx, buf, &have, true);
  return timed_out;
}

/* Run mmdebstrap to tar, its output as progress; within the timeout. */
static int debootstrap(struct image_ctx *ctx, const struct bootstrap *o, const char *tmp,
                       const char *tar, struct hutch_err *err) {
  int p[2];
  if (pipe2(p, O_CLOEXEC) < 0)
    return hutch_err_set(err, errno, "pipe");
  fflush(NULL);
  pid_t pid = spawn(o, tmp, tar, p[1], err);
  close(p[1]);
  if (pid < 0) {
    close(p[0]);
    return -1;
  }

  bool timed_out = relay_output(ctx, p[0], pid, now_ns() + o->timeout_ms * 1000000ull);
  close(p[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
    ;

  if (timed_out)
    return hutch_err_fail(err, HUTCH_ERR_INVALID, "timeout", "mmdebstrap ran longer than %llu s",
                          (unsigned long long)(o->timeout_ms / 1000));
  if (WIFEXITED(status) && WEXITSTATUS(status) == 127)
    return hutch_err_fail(err, HUTCH_ERR_UNSUPPORTED, "mmdebstrap_missing",
                          "mmdebstrap is not installed (apt-get install mmdebstrap)");
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    return hutch_err_fail(err, HUTCH_ERR_INVALID, "bootstrap_failed",
                          "mmdebstrap failed (see its output above): suite %s, mirror %s", o->suite,
                          o->mirror);
  return 0;
}

static int add(struct image_ctx *ctx, const struct bootstrap *o, const char *hex,
               struct hutch_err *err) {
  _cleanup_free_ char *ref = xasprintf("debian:%s %s%s%s", o->suite, o->variant,
                                       o->include ? " +" : "", o->include ? o->include : "");
  json_t *rec =
      json_pack("{s:s,s:s,s:s,s:s,s:[s],s:{s:[s],s:s,s:s,s:[s],s:[ss],s:{s:s}}}", "name", o->name,
                "owner", ctx->owner, "source", "bootstrap", "ref", ref, "layers", hex, "config",
                "env", "PATH=" HUTCH_DEFAULT_PATH, "workdir", "/", "user", "", "cmd", "bash",
                "shell", "/bin/sh", "-c", "labels", "org.opencontainers.image.base.name", ref);
  json_t *stored = hutch_images_add(&ctx->store, rec, ctx->replace, err);
  json_decref(rec);
  return stored ? image_done(ctx, "bootstrapped", stored) : -1;
}

/* The tar at path unpacked as one layer, its hex out. */
static int unpack_tar(struct image_ctx *ctx, const char *path, char hex[65],
                      struct hutch_err *err) {
  _cleanup_close_ int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return hutch_err_set(err, errno, "open %s", path);
  return unpack_layer(ctx, fd, NULL, hex, err);
}

static int bootstrap(struct image_ctx *ctx, const struct bootstrap *o, struct hutch_err *err) {
  if (check(o, err) < 0)
    return -1;
  if (geteuid() != 0)
    return hutch_err_fail(err, HUTCH_ERR_INVALID, "not_root",
                          "must run as root: mmdebstrap installs packages into a chroot");
  if (!ctx->replace && image_name_free(ctx, o->name, err) < 0)
    return -1;

  _cleanup_free_ char *tmp = hutch_images_tmpdir(&ctx->store, err);
  if (!tmp)
    return -1;
  _cleanup_free_ char *tar = xasprintf("%s/rootfs.tar", tmp);
  char hex[65];
  int r = debootstrap(ctx, o, tmp, tar, err);
  if (r == 0)
    r = unpack_tar(ctx, tar, hex, err);
  struct hutch_err rerr = {0};
  hutch_layer_remove(tmp, &rerr);
  if (r < 0)
    return -1;

  return add(ctx, o, hex, err);
}

int cmd_bootstrap(struct image_ctx *ctx, int argc, char **argv) {
  struct bootstrap o = {.suite = "bookworm",
                        .mirror = BOOTSTRAP_MIRROR,
                        .variant = "minbase",
                        .timeout_ms = BOOTSTRAP_TIMEOUT_S * 1000ull};
  int r = parse(ctx, &o, argc, argv);
  if (r != 0)
    return r > 0 ? 0 : EXIT_IMAGE_INPUT;
  struct hutch_err err = {0};
  return bootstrap(ctx, &o, &err) < 0 ? image_fail(ctx, "bootstrap", &err) : 0;
}
