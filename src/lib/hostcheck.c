/* The host checks other than user namespaces (hostcheck_userns.c), and the
 * table that orders them: what hutch needs first, the optional last. */
#include "hostcheck.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/kvm.h>
#include <linux/magic.h>
#include <linux/mount.h>
#include <linux/seccomp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cgroup.h"
#include "cleanup.h"
#include "gvisor.h"
#include "layer.h"
#include "util.h"

void hutch_check_say(struct hutch_check *c, enum hutch_check_status s, const char *remedy,
                     const char *fmt, ...) {
  va_list ap;
  c->status = s;
  va_start(ap, fmt);
  vsnprintf(c->detail, sizeof c->detail, fmt, ap);
  va_end(ap);
  str_copy(c->remedy, sizeof c->remedy, remedy ? remedy : "");
}

static void check_root(const char *state_dir, struct hutch_check *c) {
  (void)state_dir;
  if (geteuid() == 0)
    hutch_check_say(c, HUTCH_CHECK_OK, NULL, "running as root");
  else
    hutch_check_say(c, HUTCH_CHECK_MISSING, "run hutch as root (sudo)",
                    "not root (uid %u): hutch makes namespaces, cgroups and id-mapped users",
                    (unsigned)geteuid());
}

/* The hutch cgroup's own directories must be writable: it makes one child
 * a sandbox there. In a user namespace, root may see them and not own them. */
static bool cgroup_writable(const struct hutch_cgroup *root) {
  for (int i = 0; i < root->nfd; i++)
    if (faccessat(root->fd[i], ".", W_OK, AT_EACCESS) < 0)
      return false;
  return true;
}

/* The controllers root has, as one line of names. */
static void cgroup_controllers(const struct hutch_cgroup *root, char *have, size_t size) {
  struct hutch_err ignored;
  have[0] = '\0';
  if (root->ops == &hutch_cgroup_v2_ops) {
    read_file_at(root->fd[0], "cgroup.controllers", have, size, &ignored);
    have[strcspn(have, "\n")] = '\0';
    if (faccessat(root->fd[0], "cgroup.freeze", F_OK, 0) == 0)
      strncat(have, " freezer(cgroup.freeze)", size - strlen(have) - 1);
    return;
  }
  for (int i = 0; i < CG_NCTL; i++)
    if (hutch_cg_fd(root, i) >= 0)
      snprintf(have + strlen(have), size - strlen(have), "%s%s", i ? " " : "",
               hutch_cg_ctl_name(i));
}

/* "v2", or "v1" and whether a cgroup2 hierarchy is mounted beside it. */
static const char *cgroup_version(const struct hutch_cgroup *root) {
  struct statfs sf;
  if (root->ops == &hutch_cgroup_v2_ops)
    return "v2";
  if (statfs("/sys/fs/cgroup/unified", &sf) == 0 && sf.f_type == CGROUP2_SUPER_MAGIC)
    return "v1 (hybrid, cgroup2 at unified too)";
  return "v1";
}

static void check_cgroups(const char *state_dir, struct hutch_check *c) {
  (void)state_dir;
  struct hutch_cgroup root;
  struct hutch_err err = {0};
  static const char remedy[] = "mount cgroup2 with memory, pids and cpu (systemd does), or "
                               "cgroup v1 hierarchies for memory, pids, cpu, cpuacct and freezer";
  if (access("/proc/self/mountinfo", R_OK) < 0) {
    hutch_check_say(c, HUTCH_CHECK_MISSING, "mount -t proc proc /proc",
                    "no /proc/self/mountinfo to find the cgroup hierarchies in: %s",
                    strerror(errno));
    return;
  }

  if (hutch_cgroup_open_root(&root, &err) < 0) {
    hutch_check_say(c, HUTCH_CHECK_MISSING, remedy, "%s", err.msg);
    return;
  }

  bool writable = cgroup_writable(&root);
  char have[256];
  cgroup_controllers(&root, have, sizeof have);
  const char *version = cgroup_version(&root);
  hutch_cgroup_close(&root);

  if (!writable)
    hutch_check_say(c, HUTCH_CHECK_REFUSED,
                    "run hutch as the host's root, or delegate a cgroup subtree to it",
                    "cgroup %s, but its hutch cgroup is not writable by this process", version);
  else
    hutch_check_say(c, HUTCH_CHECK_OK, NULL, "cgroup %s: %s, all hutch needs", version, have);
}

static void check_seccomp(const char *state_dir, struct hutch_check *c) {
  (void)state_dir;
  static const unsigned actions[] = {SECCOMP_RET_ERRNO, SECCOMP_RET_KILL_PROCESS};
  for (size_t i = 0; i < ARRAY_SIZE(actions); i++) {
    unsigned a = actions[i];
    if (syscall(SYS_seccomp, SECCOMP_GET_ACTION_AVAIL, 0, &a) < 0) {
      hutch_check_say(c, HUTCH_CHECK_MISSING,
                      "use a kernel with CONFIG_SECCOMP_FILTER (4.14 or later; Debian's has it)",
                      "seccomp filters with the actions hutch uses: %s", strerror(errno));
      return;
    }
  }
  int mode = prctl(PR_GET_SECCOMP, 0, 0, 0, 0);
  hutch_check_say(c, HUTCH_CHECK_OK, NULL, "seccomp filters available%s",
                  mode == 2 ? "; this process already runs under one (hutch stacks its own)" : "");
}

/* Whether the kernel has a filesystem type: fsopen loads its module as a
 * mount would, and mounts nothing; /proc/filesystems where fsopen is not
 * allowed (it needs CAP_SYS_ADMIN over the mount namespace). */
static bool has_fs(const char *type) {
  int fd = (int)syscall(SYS_fsopen, type, FSOPEN_CLOEXEC);
  if (fd >= 0) {
    close(fd);
    return true;
  }
  if (errno == ENODEV)
    return false;
  char line[128];
  _cleanup_fclose_ FILE *f = fopen("/proc/filesystems", "re");
  while (f && fgets(line, sizeof line, f)) {
    char *name = strrchr(line, '\t');
    name = name ? name + 1 : line;
    name[strcspn(name, "\n")] = '\0';
    if (strcmp(name, type) == 0)
      return true;
  }
  return false;
}

static void check_fs(struct hutch_check *c, const char *type, const char *use, const char *remedy) {
  if (has_fs(type))
    hutch_check_say(c, HUTCH_CHECK_OK, NULL, "%s available", type);
  else
    hutch_check_say(c, HUTCH_CHECK_MISSING, remedy, "no %s (%s)", type, use);
}

static void check_overlay(const char *state_dir, struct hutch_check *c) {
  (void)state_dir;
  check_fs(c, "overlay", "a sandbox's root is an overlay on its template", "modprobe overlay");
}

static void check_devpts(const char *state_dir, struct hutch_check *c) {
  (void)state_dir;
  check_fs(c, "devpts", "each sandbox has its own terminals",
           "use a kernel with CONFIG_UNIX98_PTYS");
}

/* state_dir, or the nearest parent of it that exists. */
static void existing_dir(const char *state_dir, char *dir, size_t size) {
  struct stat st;
  str_copy(dir, size, state_dir[0] == '/' ? state_dir : "/");
  while (stat(dir, &st) < 0 && strcmp(dir, "/") != 0) {
    char *slash = strrchr(dir, '/');
    slash[slash == dir] = '\0';
  }
}

static void check_idmap(const char *state_dir, struct hutch_check *c) {
  char dir[PATH_MAX];
  existing_dir(state_dir, dir, sizeof dir);
  if (hutch_layer_dir_usable(dir))
    hutch_check_say(c, HUTCH_CHECK_OK, NULL, "the filesystem of %s can be id-mapped", dir);
  else
    hutch_check_say(c, HUTCH_CHECK_WARN,
                    "put the state dir (--state-dir, HUTCH_STATE_DIR) on ext4, xfs or btrfs "
                    "(tmpfs from Linux 6.3)",
                    "an id-mapped mount of %s failed: no snapshots", dir);
}

static void check_kvm(const char *state_dir, struct hutch_check *c) {
  (void)state_dir;
  static const char remedy[] = "enable hardware virtualization (nested, on a VM) and load "
                               "kvm_intel or kvm_amd";
  _cleanup_close_ int fd = open("/dev/kvm", O_RDWR | O_CLOEXEC);
  if (fd < 0) {
    hutch_check_say(c, HUTCH_CHECK_MISSING, remedy, "/dev/kvm: %s", strerror(errno));
    return;
  }
  int version = ioctl(fd, KVM_GET_API_VERSION, 0);
  if (version != KVM_API_VERSION) {
    hutch_check_say(c, HUTCH_CHECK_MISSING, remedy, "/dev/kvm: API version %d, not %d", version,
                    KVM_API_VERSION);
    return;
  }
  _cleanup_close_ int vm = ioctl(fd, KVM_CREATE_VM, 0);
  if (vm < 0)
    hutch_check_say(c, HUTCH_CHECK_MISSING, remedy, "/dev/kvm: KVM_CREATE_VM: %s", strerror(errno));
  else
    hutch_check_say(c, HUTCH_CHECK_OK, NULL,
                    "/dev/kvm present, can create a VM (not proven to boot a guest)");
}

/* The tier's own probe (gvisor.c): what hutch serve and hutch run find. */
static void check_runsc(const char *state_dir, struct hutch_check *c) {
  (void)state_dir;
  struct hutch_gvisor g;
  struct hutch_err err = {0};
  if (hutch_gvisor_probe(&g, NULL, &err) < 0) {
    hutch_check_say(c, HUTCH_CHECK_MISSING, "apt-get install runsc (a Debian package)", "%s",
                    err.msg);
    return;
  }
  hutch_check_say(c, HUTCH_CHECK_OK, NULL, "%s: runsc %s (the gvisor tier, platform %s)", g.runsc,
                  g.version, g.platform);
}

static const struct {
  const char *name;
  bool optional;
  void (*run)(const char *state_dir, struct hutch_check *c);
} checks[] = {
    {"root", false, check_root},         {"userns", false, hutch_check_userns},
    {"cgroups", false, check_cgroups},   {"seccomp", false, check_seccomp},
    {"overlayfs", false, check_overlay}, {"devpts", false, check_devpts},
    {"idmap", true, check_idmap},        {"kvm", true, check_kvm},
    {"runsc", true, check_runsc},
};

_Static_assert(ARRAY_SIZE(checks) <= HUTCH_CHECK_MAX, "HUTCH_CHECK_MAX is too small");

static void run_check(size_t i, const char *state_dir, struct hutch_check *c) {
  memset(c, 0, sizeof *c);
  c->name = checks[i].name;
  c->optional = checks[i].optional;
  checks[i].run(state_dir, c);
}

size_t hutch_host_check_all(const char *state_dir, struct hutch_check *out) {
  for (size_t i = 0; i < ARRAY_SIZE(checks); i++)
    run_check(i, state_dir, &out[i]);
  return ARRAY_SIZE(checks);
}

bool hutch_check_fails(const struct hutch_check *c) {
  return !c->optional && (c->status == HUTCH_CHECK_MISSING || c->status == HUTCH_CHECK_REFUSED);
}

const char *hutch_check_status_name(enum hutch_check_status s) {
  static const char *const names[] = {"ok", "missing", "refused", "warn"};
  return (unsigned)s < ARRAY_SIZE(names) ? names[s] : "?";
}

bool hutch_host_diagnose(const char *state_dir, char *line, size_t size) {
  struct hutch_check c;
  for (size_t i = 0; i < ARRAY_SIZE(checks); i++) {
    if (checks[i].optional)
      continue;
    run_check(i, state_dir, &c);
    if (hutch_check_fails(&c)) {
      snprintf(line, size, "cannot make a sandbox: %s; to fix: %s; see hutch doctor", c.detail,
               c.remedy);
      return true;
    }
  }
  return false;
}
