/* A sandbox's config, defaulted and checked before anything is made
 * (hutch_config_check, declared in sandbox.h): the limits against what the
 * host has, what the tier can do, the rootfs, layers and state directory,
 * and where binds, views and volumes go. Also the state directory's
 * default and the tiers' names, which the front ends share. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend.h"
#include "hostlimits.h"
#include "layer.h"
#include "util.h"

const char *hutch_config_default_state_dir(void) {
  const char *d = getenv("HUTCH_STATE_DIR");
  return d && *d ? d : "/var/lib/hutch";
}

/* The overlay's mount options are a comma-separated list. */
static bool usable_path(const char *p) {
  return strpbrk(p, ",:\\\n") == NULL;
}

static bool has_dotdot(const char *path) {
  for (const char *p = path; (p = strstr(p, "..")); p += 2)
    if ((p == path || p[-1] == '/') && (p[2] == '/' || p[2] == '\0'))
      return true;
  return false;
}

/* What a bind source must be, judged on one stat of it. Callers take that
 * stat on the same fd they then id-map and mount (start_agent, shell.c):
 * a path looked up again could by then lead somewhere else. */
static int check_bind_source(const struct hutch_bind *b, const struct stat *st,
                             struct hutch_err *err) {
  if (!S_ISDIR(st->st_mode) && !S_ISREG(st->st_mode))
    return hutch_err_invalid(err, "bind source %s is not a file or directory", b->src);
  /* Inside, the source's owner is the sandbox user: its owner bits are what
   * the workload gets (root, which hutch runs as, reads anything). */
  mode_t need = S_IRUSR | (S_ISDIR(st->st_mode) ? S_IXUSR : 0);
  if ((st->st_mode & need) != need)
    return hutch_err_invalid(err,
                             "bind source %s is not readable by its owner, whom the sandbox "
                             "user stands for",
                             b->src);
  /* A writable bind is id-mapped: what the sandbox user creates there
   * belongs to the source's owner on the host, setuid and setgid bits
   * included (nosuid holds only inside). Host root owning it would make a
   * workload able to leave setuid-root programs on the host. */
  if (b->rw && (st->st_uid == 0 || st->st_gid == 0))
    return hutch_err_invalid(err,
                             "--bind-rw source %s belongs to root (uid or gid 0): what the "
                             "sandbox writes there would be root's on the host; chown it to an "
                             "unprivileged user, or bind it read-only",
                             b->src);
  return 0;
}

/* Look a bind source up once, for good: the fd is what is checked and
 * id-mapped, and what the mount is cloned from. */
int hutch_config_open_bind(const struct hutch_bind *b, struct stat *st, struct hutch_err *err) {
  int fd = open(b->src, O_PATH | O_CLOEXEC);
  if (fd < 0)
    return errno == ENOENT ? hutch_err_not_found(err, "bind source %s does not exist", b->src)
                           : hutch_err_invalid(err, "bind source %s: %s", b->src, strerror(errno));
  if (fstat(fd, st) < 0) {
    int e = errno;
    close(fd);
    return hutch_err_set(err, e, "bind source %s", b->src);
  }
  if (check_bind_source(b, st, err) < 0) {
    close(fd);
    return -1;
  }
  return fd;
}

/* Where a bind or a volume may go: below /, but not in what hutch mounts. */
static int check_dst(const char *what, const char *dst, struct hutch_err *err) {
  static const char *const reserved[] = {"/proc", "/sys", "/dev"};
  if (dst[0] != '/' || strcmp(dst, "/") == 0 || has_dotdot(dst))
    return hutch_err_invalid(err, "%s destination '%s' must be an absolute path below /", what,
                             dst);
  for (size_t r = 0; r < ARRAY_SIZE(reserved); r++) {
    size_t n = strlen(reserved[r]);
    if (strncmp(dst, reserved[r], n) == 0 && (dst[n] == '/' || dst[n] == '\0'))
      return hutch_err_invalid(err, "%s destination %s is inside %s", what, dst, reserved[r]);
  }
  return 0;
}

/* Early, for a clear error before anything is made; start_agent
 * (shell.c) checks the sources again on the fds it mounts. */
static int check_binds(const struct hutch_sandbox_config *cfg, struct hutch_err *err) {
  for (size_t i = 0; i < cfg->nvolumes; i++)
    if (check_dst("volume", cfg->volumes[i].dst, err) < 0)
      return -1;

  for (size_t i = 0; i < cfg->nviews; i++) {
    const struct hutch_bind *v = &cfg->views[i];
    struct stat st;
    if (check_dst("view", v->dst, err) < 0)
      return -1;
    /* Its staging name, "h-" and the path, must fit (rootfs.c, view_ro). */
    if (strlen(v->dst) > 48)
      return hutch_err_invalid(err, "view destination %s is longer than 48 bytes", v->dst);
    if (v->src[0] != '/' || stat(v->src, &st) < 0 || !S_ISDIR(st.st_mode))
      return hutch_err_invalid(err, "view source %s is not an absolute path to a directory",
                               v->src);
  }

  for (size_t i = 0; i < cfg->nbinds; i++) {
    const struct hutch_bind *b = &cfg->binds[i];
    if (check_dst("bind", b->dst, err) < 0)
      return -1;
    struct stat st;
    int fd = hutch_config_open_bind(b, &st, err);
    if (fd < 0)
      return -1;
    close(fd);
  }
  return 0;
}

/* Every devpts instance but the host's draws on one pool of
 * kernel.pty.max − kernel.pty.reserve terminals: a sandbox may not be
 * promised more than the whole pool. */
static int check_ptys(struct hutch_sandbox_config *cfg, struct hutch_err *err) {
  struct hutch_host_ptys hp;
  if (!cfg->ptys)
    cfg->ptys = HUTCH_DEFAULT_PTYS;
  if (cfg->ptys > HUTCH_MAX_PTYS)
    return hutch_err_invalid(err, "ptys must be between 1 and %d", HUTCH_MAX_PTYS);
  if (hutch_host_ptys(&hp) == 0 && cfg->ptys > hutch_ptys_shared(&hp))
    return hutch_err_invalid(err,
                             "ptys %u exceed the %llu the host lets sandboxes share "
                             "(kernel.pty.max %llu - kernel.pty.reserve %llu)",
                             cfg->ptys, (unsigned long long)hutch_ptys_shared(&hp),
                             (unsigned long long)hp.max, (unsigned long long)hp.reserve);
  return 0;
}

int hutch_config_isolation_parse(const char *name) {
  if (strcmp(name, "ns") == 0)
    return HUTCH_ISOLATION_NS;
  if (strcmp(name, "gvisor") == 0)
    return HUTCH_ISOLATION_GVISOR;
  return -1;
}

/* The limits, defaulted where not given, against what the host has. */
static int check_limits(struct hutch_sandbox_config *cfg, struct hutch_err *err) {
  /* What hutch's whole cgroup subtree may hold (hutch_cgroup_cap_root):
   * a sandbox asking for more could never have it. */
  uint64_t mem = hutch_memory_ceiling(), pids_max = hutch_pids_max();
  if (!cfg->memory_bytes)
    cfg->memory_bytes = HUTCH_DEFAULT_MEMORY < mem ? HUTCH_DEFAULT_MEMORY : mem;
  if (!cfg->disk_bytes)
    cfg->disk_bytes = HUTCH_DEFAULT_DISK;
  if (!cfg->pids)
    cfg->pids = HUTCH_DEFAULT_PIDS;

  if (cfg->memory_bytes < HUTCH_MIN_MEMORY)
    return hutch_err_invalid(err, "memory limit must be at least %llu MiB", HUTCH_MIN_MEMORY >> 20);
  if (cfg->memory_bytes > mem)
    return hutch_err_invalid(err,
                             "memory limit %llu MiB exceeds the host's %llu MiB (its RAM less "
                             "what hutch leaves the host)",
                             (unsigned long long)(cfg->memory_bytes >> 20),
                             (unsigned long long)(mem >> 20));
  /* The disk is a tmpfs: it lives in memory. */
  if (cfg->disk_bytes < HUTCH_MIN_DISK || cfg->disk_bytes > mem)
    return hutch_err_invalid(err, "disk limit must be between 1 MiB and the host's %llu MiB",
                             (unsigned long long)(mem >> 20));
  /* Half the kernel's pid_max at most: one sandbox may not take the pids
   * every other process of the host needs. */
  if (cfg->pids > pids_max)
    return hutch_err_invalid(err,
                             "pids limit must be between 1 and %llu (half the host's "
                             "kernel.pid_max, at most %d)",
                             (unsigned long long)pids_max, HUTCH_MAX_PIDS);
  return check_ptys(cfg, err);
}

/* What the tier can do. */
static int check_tier(const struct hutch_sandbox_config *cfg, struct hutch_err *err) {
  if (cfg->isolation == HUTCH_ISOLATION_GVISOR && !cfg->gvisor)
    return hutch_err_fail(err, HUTCH_ERR_UNSUPPORTED, "gvisor_unavailable",
                          "the gvisor tier is not available here (runsc was not found at start)");
  if (cfg->build && !(hutch_backend_of(cfg->isolation)->can & HUTCH_CAN_BUILD))
    return hutch_err_fail(err, HUTCH_ERR_UNSUPPORTED, "unsupported",
                          "template builds do not run in the %s tier",
                          hutch_isolation_name(cfg->isolation));
  return 0;
}

/* The rootfs, the layers and the state directory: absolute paths that
 * overlay's options can name. */
static int check_paths(const struct hutch_sandbox_config *cfg, struct hutch_err *err) {
  if (cfg->rootfs) {
    struct stat st;
    if (stat(cfg->rootfs, &st) < 0)
      return hutch_err_not_found(err, "rootfs %s: %s", cfg->rootfs, strerror(errno));
    if (!S_ISDIR(st.st_mode))
      return hutch_err_invalid(err, "rootfs %s is not a directory", cfg->rootfs);
    if (cfg->rootfs[0] != '/' || !usable_path(cfg->rootfs))
      return hutch_err_invalid(err, "rootfs %s: need an absolute path without , : or \\",
                               cfg->rootfs);
  }

  if (cfg->nlayers > HUTCH_MAX_LAYERS)
    return hutch_err_invalid(err, "at most %d layers", HUTCH_MAX_LAYERS);
  for (size_t i = 0; i < cfg->nlayers; i++) {
    struct stat st;
    if (cfg->layers[i][0] != '/' || !usable_path(cfg->layers[i]))
      return hutch_err_invalid(err, "layer %s: need an absolute path without , : or \\",
                               cfg->layers[i]);
    if (stat(cfg->layers[i], &st) < 0 || !S_ISDIR(st.st_mode))
      return hutch_err_not_found(err, "layer %s is not a directory", cfg->layers[i]);
  }

  if (!usable_path(cfg->state_dir) || cfg->state_dir[0] != '/')
    return hutch_err_invalid(err, "state directory %s: need an absolute path without , : or \\",
                             cfg->state_dir);
  return 0;
}

int hutch_config_check(struct hutch_sandbox_config *cfg, struct hutch_err *err) {
  if (!cfg->state_dir)
    cfg->state_dir = hutch_config_default_state_dir();
  if (check_limits(cfg, err) < 0)
    return -1;
  if (check_tier(cfg, err) < 0)
    return -1;

  long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
  if (cfg->cpu_milli && (cfg->cpu_milli < 10 || cfg->cpu_milli > (uint64_t)ncpu * 1000))
    return hutch_err_invalid(err, "cpus must be between 0.01 and %ld", ncpu);

  if (check_paths(cfg, err) < 0)
    return -1;
  return check_binds(cfg, err);
}
