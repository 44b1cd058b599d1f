/* Finding the host's cgroup controllers, and what v1 and v2 share. */
#include "cgroup.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cleanup.h"
#include "util.h"

static const char *const ctl_names[CG_NCTL] = {"memory", "pids", "cpu", "cpuacct", "freezer"};
#define HUTCH_CG_DIR "hutch"

int hutch_cg_fd(const struct hutch_cgroup *cg, enum hutch_cg_ctl c) {
  return cg->ctl[c] < 0 ? -1 : cg->fd[cg->ctl[c]];
}

const char *hutch_cg_ctl_name(enum hutch_cg_ctl c) {
  return ctl_names[c];
}

int hutch_cgroup_dup(const struct hutch_cgroup *src, struct hutch_cgroup *dst,
                     struct hutch_err *err) {
  *dst = *src;
  for (int i = 0; i < src->nfd; i++)
    if ((dst->fd[i] = fcntl(src->fd[i], F_DUPFD_CLOEXEC, 3)) < 0) {
      int e = errno;
      dst->nfd = i;
      hutch_cgroup_close(dst);
      dst->ops = NULL; /* not open: as if never copied */
      return hutch_err_set(err, e, "hutch's cgroup");
    }
  return 0;
}

void hutch_cgroup_close(struct hutch_cgroup *cg) {
  for (int i = 0; i < cg->nfd; i++)
    if (cg->fd[i] >= 0)
      close(cg->fd[i]);
  cg->nfd = 0;
}

/* Whether want is one of the words of list, as separated by any of seps
 * (mount options by commas, cgroup.controllers by spaces): "cpu" is not
 * "cpuset". */
static bool has_word(const char *list, const char *seps, const char *want) {
  size_t n = strlen(want);
  for (const char *p = list; *p;) {
    size_t len = strcspn(p, seps);
    if (len == n && strncmp(p, want, n) == 0)
      return true;
    p += len + (p[len] != '\0');
  }
  return false;
}

/* One line of /proc/self/mountinfo: mount point and, after " - ", the
 * filesystem type and super options. Mount points with spaces are escaped as
 * \040 by the kernel, and cgroup mount points never need them. */
static bool mountinfo_fields(char *line, char **mnt, char **fstype, char **opts) {
  char *save = NULL, *tok = strtok_r(line, " ", &save);
  for (int i = 1; tok && i < 5; i++)
    tok = strtok_r(NULL, " ", &save);
  *mnt = tok;
  while (tok && strcmp(tok, "-") != 0)
    tok = strtok_r(NULL, " ", &save);
  *fstype = tok ? strtok_r(NULL, " ", &save) : NULL;
  if (*fstype)
    strtok_r(NULL, " ", &save); /* source */
  *opts = *fstype ? strtok_r(NULL, " \n", &save) : NULL;
  return *mnt && *fstype && *opts;
}

static int open_hutch_dir(const char *mnt, struct hutch_err *err) {
  _cleanup_close_ int top = open(mnt, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (top < 0)
    return hutch_err_set(err, errno, "open cgroup hierarchy %s", mnt);
  if (mkdirat(top, HUTCH_CG_DIR, 0755) < 0 && errno != EEXIST)
    return hutch_err_set(err, errno, "create cgroup %s/" HUTCH_CG_DIR, mnt);
  int fd = openat(top, HUTCH_CG_DIR, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0)
    return hutch_err_set(err, errno, "open cgroup %s/" HUTCH_CG_DIR, mnt);
  return fd;
}

static int open_root_v2(const char *mnt, struct hutch_cgroup *root, struct hutch_err *err) {
  char have[512];
  _cleanup_close_ int top = open(mnt, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (top < 0 || read_file_at(top, "cgroup.controllers", have, sizeof have, err) < 0)
    return hutch_err_set(err, errno, "read %s/cgroup.controllers", mnt);
  static const char *const needed[] = {"memory", "pids", "cpu"};
  for (size_t i = 0; i < ARRAY_SIZE(needed); i++)
    if (!has_word(have, " \n", needed[i]))
      return hutch_err_set(err, 0, "cgroup v2 at %s lacks the %s controller", mnt, needed[i]);
  /* Enabling a controller that is already on is a no-op; failing here (a
   * nested, non-delegated root) shows up as missing files further down. */
  struct hutch_err ignored;
  write_file_at(top, "cgroup.subtree_control", "+memory +pids +cpu", &ignored);
  int fd = open_hutch_dir(mnt, err);
  if (fd < 0)
    return -1;
  root->ops = &hutch_cgroup_v2_ops;
  root->nfd = 1;
  root->fd[0] = fd;
  return hutch_cgroup_v2_ops.enable_children(root, err);
}

/* v1: each controller's hutch directory. Controllers co-mounted on one
 * hierarchy (cpu,cpuacct) share an fd. */
static int open_root_v1(char *const v1mnt[CG_NCTL], struct hutch_cgroup *root,
                        struct hutch_err *err) {
  root->ops = &hutch_cgroup_v1_ops;
  for (int c = 0; c < CG_NCTL; c++) {
    int same = -1;
    for (int d = 0; d < c; d++)
      if (strcmp(v1mnt[c], v1mnt[d]) == 0)
        same = root->ctl[d];
    if (same >= 0) {
      root->ctl[c] = (int8_t)same;
      continue;
    }

    int fd = open_hutch_dir(v1mnt[c], err);
    if (fd < 0) {
      hutch_cgroup_close(root);
      return -1;
    }
    root->ctl[c] = (int8_t)root->nfd;
    root->fd[root->nfd++] = fd;
  }
  return 0;
}

/* The cgroup hierarchies mounted, read from /proc/self/mountinfo: the
 * first cgroup2 mount (*v2mnt) and each v1 controller's first (v1mnt[c]),
 * malloc'd. */
static int find_mounts(char **v2mnt, char *v1mnt[CG_NCTL], struct hutch_err *err) {
  _cleanup_fclose_ FILE *f = fopen("/proc/self/mountinfo", "re");
  _cleanup_free_ char *line = NULL;
  size_t cap = 0;
  if (!f)
    return hutch_err_set(err, errno, "open /proc/self/mountinfo");

  while (getline(&line, &cap, f) > 0) {
    char *mnt, *fstype, *opts;
    if (!mountinfo_fields(line, &mnt, &fstype, &opts))
      continue;
    if (strcmp(fstype, "cgroup2") == 0 && !*v2mnt)
      *v2mnt = xstrdup(mnt);
    else if (strcmp(fstype, "cgroup") == 0)
      for (int c = 0; c < CG_NCTL; c++)
        if (!v1mnt[c] && has_word(opts, ",", ctl_names[c]))
          v1mnt[c] = xstrdup(mnt);
  }
  return 0;
}

int hutch_cgroup_open_root(struct hutch_cgroup *root, struct hutch_err *err) {
  _cleanup_free_ char *v2mnt = NULL;
  char *v1mnt[CG_NCTL] = {0};
  if (find_mounts(&v2mnt, v1mnt, err) < 0)
    return -1;

  memset(root, 0, sizeof *root);
  int ret = -1;
  bool v1_complete = true;
  for (int c = 0; c < CG_NCTL; c++)
    v1_complete &= v1mnt[c] != NULL;

  if (!v1mnt[CG_MEMORY] && v2mnt) {
    ret = open_root_v2(v2mnt, root, err);
  } else if (v1_complete) {
    ret = open_root_v1(v1mnt, root, err);
  } else {
    for (int c = 0; c < CG_NCTL; c++)
      if (!v1mnt[c]) {
        hutch_err_set(err, 0, "no cgroup v2 hierarchy and no cgroup v1 %s controller mounted",
                      ctl_names[c]);
        break;
      }
  }

  for (int c = 0; c < CG_NCTL; c++)
    free(v1mnt[c]);
  return ret;
}

/* Each sandbox has its own limits, but their sum may exceed the host
 * (a tenant's memory quota defaults to 4 x the host's ceiling, and a
 * thousand sandboxes of 512 pids are more than pid_max): the subtree's own
 * ceiling is what leaves the host its reserve whatever the sandboxes were
 * promised.
 * Written as a value, never raised past what the operator set lower.
 *
 * file := value unless it holds less already ("max" is more): after the
 * first create, one read and no write. The file is read each time, not a
 * value this process remembers: other hutch processes and the operator
 * share the subtree, and a host that lost RAM or pid_max gets its lower
 * ceiling on the next create. One that gained keeps the old ceiling (hutch
 * cannot tell its own older value from the operator's) until it is set
 * back to max. */
static int lower_to(int fd, const char *file, uint64_t value, struct hutch_err *err) {
  char have[32], v[32];
  unsigned long long cur;
  if (fd < 0 || !value)
    return 0;
  if (read_file_at(fd, file, have, sizeof have, err) < 0)
    return -1;
  if (strncmp(have, "max", 3) != 0 && sscanf(have, "%llu", &cur) == 1 && cur <= value)
    return 0;
  snprintf(v, sizeof v, "%llu", (unsigned long long)value);
  return write_file_at(fd, file, v, err);
}

int hutch_cgroup_cap_root(const struct hutch_cgroup *root, uint64_t memory, uint64_t pids,
                          struct hutch_err *err) {
  bool v2 = root->ops == &hutch_cgroup_v2_ops;
  if (lower_to(hutch_cg_fd(root, CG_MEMORY), v2 ? "memory.max" : "memory.limit_in_bytes", memory,
               err) < 0)
    return -1;
  return lower_to(hutch_cg_fd(root, CG_PIDS), "pids.max", pids, err);
}

void hutch_cgroup_spec(const struct hutch_cgroup *cg, char *buf, size_t size) {
  if (cg->ops == &hutch_cgroup_v2_ops) {
    snprintf(buf, size, "2:%d", cg->fd[0]);
    return;
  }
  int n = snprintf(buf, size, "1:");
  for (int c = 0; c < CG_NCTL && n > 0 && (size_t)n < size; c++) {
    int fd = hutch_cg_fd(cg, c);
    n += fd < 0 ? snprintf(buf + n, size - (size_t)n, "%s-", c ? "," : "")
                : snprintf(buf + n, size - (size_t)n, "%s%d", c ? "," : "", fd);
  }
}

/* A v1 spec: "1:" and one fd a controller, separated by commas, "-" for
 * a controller not mounted (memory never is); a repeated fd is one
 * hierarchy's. */
static int from_spec_v1(const char *spec, struct hutch_cgroup *cg, struct hutch_err *err) {
  cg->ops = &hutch_cgroup_v1_ops;
  const char *p = spec + 2;
  for (int c = 0; c < CG_NCTL; c++) {
    char num[16];
    size_t n = strcspn(p, ",");
    uint64_t fd;
    bool last = c == CG_NCTL - 1;
    char sep = last ? '\0' : ',';
    if (n >= sizeof num || p[n] != sep)
      return hutch_err_invalid(err, "bad cgroup spec '%s'", spec);
    snprintf(num, sizeof num, "%.*s", (int)n, p);
    if (strcmp(num, "-") == 0 && c != CG_MEMORY) {
      cg->ctl[c] = -1;
      p += n + !last;
      continue;
    }

    if (!parse_u64(num, &fd) || fd > 1024)
      return hutch_err_invalid(err, "bad cgroup spec '%s'", spec);
    int same = -1;
    for (int i = 0; i < cg->nfd; i++)
      if (cg->fd[i] == (int)fd)
        same = i;
    if (same < 0) {
      same = cg->nfd++;
      cg->fd[same] = (int)fd;
    }
    cg->ctl[c] = (int8_t)same;
    p += n + !last;
  }
  return 0;
}

int hutch_cgroup_from_spec(const char *spec, struct hutch_cgroup *cg, struct hutch_err *err) {
  memset(cg, 0, sizeof *cg);
  if (strcmp(spec, "none") == 0) {
    hutch_cgroup_none(cg);
    return 0;
  }

  if (strncmp(spec, "2:", 2) == 0) {
    uint64_t fd;
    if (!parse_u64(spec + 2, &fd) || fd > 1024)
      return hutch_err_invalid(err, "bad cgroup spec '%s'", spec);
    cg->ops = &hutch_cgroup_v2_ops;
    cg->nfd = 1;
    cg->fd[0] = (int)fd;
    return 0;
  }

  if (strncmp(spec, "1:", 2) != 0)
    return hutch_err_invalid(err, "bad cgroup spec '%s'", spec);
  return from_spec_v1(spec, cg, err);
}

int hutch_cg_read_u64(int dirfd, const char *file, const char *key, uint64_t *out,
                      struct hutch_err *err) {
  char buf[4096];
  if (read_file_at(dirfd, file, buf, sizeof buf, err) < 0)
    return -1;

  char *p = buf;
  if (key) {
    size_t kl = strlen(key);
    char *line = buf;
    for (p = NULL; !p;) {
      if (strncmp(line, key, kl) == 0 && line[kl] == ' ')
        p = line + kl + 1;
      else if (!(line = strchr(line, '\n')) || !*++line)
        return hutch_err_set(err, 0, "%s has no '%s'", file, key);
    }
  }

  if (strncmp(p, "max", 3) == 0) {
    *out = UINT64_MAX;
    return 0;
  }

  char *end;
  errno = 0;
  unsigned long long v = strtoull(p, &end, 10);
  if (errno || end == p)
    return hutch_err_set(err, 0, "%s: not a number", file);
  *out = v;
  return 0;
}

/* SIGKILL every pid listed in dirfd/cgroup.procs. */
int hutch_cg_kill_procs(int dirfd, bool *any, struct hutch_err *err) {
  int fd = openat(dirfd, "cgroup.procs", O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return hutch_err_set(err, errno, "open cgroup.procs");
  _cleanup_fclose_ FILE *f = fdopen(fd, "r");
  if (!f) {
    close(fd);
    return hutch_err_set(err, errno, "fdopen cgroup.procs");
  }
  long pid;
  while (fscanf(f, "%ld", &pid) == 1) {
    *any = true;
    if (pid > 1)
      kill((pid_t)pid, SIGKILL);
  }
  return 0;
}

bool hutch_cg_has_procs(int dirfd) {
  char buf[16];
  struct hutch_err ignored;
  return read_file_at(dirfd, "cgroup.procs", buf, sizeof buf, &ignored) > 0;
}

int hutch_cg_rmdir(int parentfd, const char *name, struct hutch_err *err) {
  /* The last tasks of a killed cgroup may still be on their way out. */
  for (int tries = 0;; tries++) {
    if (unlinkat(parentfd, name, AT_REMOVEDIR) == 0 || errno == ENOENT)
      return 0;
    if (errno != EBUSY || tries >= 2000)
      return hutch_err_set(err, errno, "remove cgroup %s", name);
    usleep(tries < 100 ? 100 : 1000);
  }
}
