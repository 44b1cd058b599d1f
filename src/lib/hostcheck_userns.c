/* Can this process make a user namespace, and when it cannot, why not.
 *
 * The kernel refuses CLONE_NEWUSER with EPERM in a chroot, with ENOSPC
 * when user.max_user_namespaces (per user namespace) is reached, and with
 * whatever errno a seccomp filter chose. For processes without
 * CAP_SYS_ADMIN, Debian's kernel.unprivileged_userns_clone and AppArmor's
 * kernel.apparmor_restrict_unprivileged_userns may refuse it too. Each
 * cause is told apart by what can be read without /proc, where possible:
 * a chroot often has none. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cleanup.h"
#include "hostcheck.h"
#include "util.h"

#define WHERE_STATX (STATX_BASIC_STATS | STATX_MNT_ID)

/* The errno of unshare(CLONE_NEWUSER) in a child that exits at once, so
 * that this process stays where it is; 0 when it worked, -1 when the
 * child could not be run. */
static int try_userns(void) {
  pid_t pid = fork();
  if (pid < 0)
    return -1;
  if (pid == 0)
    _exit(unshare(CLONE_NEWUSER) == 0 ? 0 : errno & 0xff);
  int st;
  while (waitpid(pid, &st, 0) < 0)
    if (errno != EINTR)
      return -1;
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static long read_sysctl(const char *path) {
  char buf[32];
  struct hutch_err ignored;
  uint64_t v;
  ssize_t n = read_file_at(AT_FDCWD, path, buf, sizeof buf, &ignored);
  if (n <= 0)
    return -1;
  buf[strcspn(buf, "\n")] = '\0';
  return parse_u64(buf, &v) ? (long)v : -1;
}

static bool same_place(const struct statx *a, const struct statx *b) {
  bool mnt = (a->stx_mask & STATX_MNT_ID) && (b->stx_mask & STATX_MNT_ID);
  return a->stx_dev_major == b->stx_dev_major && a->stx_dev_minor == b->stx_dev_minor &&
         a->stx_ino == b->stx_ino && (!mnt || a->stx_mnt_id == b->stx_mnt_id);
}

/* A subdirectory of "/", read with getdents64 on a stack buffer: this runs
 * in a child forked from a process that may have threads (hutch serve),
 * where allocating is not safe. */
static bool find_subdir(char *name, size_t size) {
  _cleanup_close_ int fd = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  char buf[4096] __attribute__((aligned(8)));
  long n;
  while (fd >= 0 && (n = syscall(SYS_getdents64, fd, buf, sizeof buf)) > 0) {
    for (long off = 0; off < n;) {
      struct dirent64 *d = (struct dirent64 *)(buf + off);
      struct stat st;
      off += d->d_reclen;
      if (strcmp(d->d_name, ".") == 0 || strcmp(d->d_name, "..") == 0 || strlen(d->d_name) >= size)
        continue;
      if (d->d_type == DT_DIR ||
          (d->d_type == DT_UNKNOWN && fstatat(fd, d->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
           S_ISDIR(st.st_mode))) {
        str_copy(name, size, d->d_name);
        return true;
      }
    }
  }
  return false;
}

/* The child of in_chroot: 0 not chrooted, 1 chrooted, 2 cannot tell.
 *
 * This is the classic chroot escape, used only to look: chroot into a
 * subdirectory while the working directory stays at the old root, then
 * walk ".." up to where it stops, which is the root of the mount
 * namespace (with what is mounted on it, as the kernel's own test of a
 * chroot follows). Comparing mount, device and inode with "/" tells a
 * chroot even onto a bind mount of "/" (same inode, another mount). It
 * needs CAP_SYS_CHROOT, which only lets a process out of a root it could
 * leave anyway, and it runs in a child that exits having only stat()ed:
 * nothing outside the chroot is opened or changed. */
static void chroot_child(void) {
  struct statx root, here, up;
  char sub[256];
  if (statx(AT_FDCWD, "/", 0, WHERE_STATX, &root) < 0)
    _exit(2);
  if (chdir("/") < 0)
    _exit(2);
  if (!find_subdir(sub, sizeof sub))
    _exit(2);
  if (chroot(sub) < 0)
    _exit(2);

  for (int i = 0; i < 4096; i++) {
    if (statx(AT_FDCWD, ".", 0, WHERE_STATX, &here) < 0)
      _exit(2);
    if (statx(AT_FDCWD, "..", 0, WHERE_STATX, &up) < 0)
      _exit(2);
    if (same_place(&here, &up))
      _exit(same_place(&here, &root) ? 0 : 1);
    if (chdir("..") < 0)
      _exit(2);
  }
  _exit(2);
}

/* 1 when this process's root is not its mount namespace's, 0 when it is,
 * -1 when that cannot be told. */
static int in_chroot(void) {
  pid_t pid = fork();
  if (pid < 0)
    return -1;
  if (pid == 0)
    chroot_child();
  int st;
  while (waitpid(pid, &st, 0) < 0)
    if (errno != EINTR)
      return -1;
  if (!WIFEXITED(st) || WEXITSTATUS(st) > 1)
    return -1;
  return WEXITSTATUS(st);
}

static void refused_limit(struct hutch_check *c) {
  long max = read_sysctl("/proc/sys/user/max_user_namespaces");
  if (max == 0)
    hutch_check_say(c, HUTCH_CHECK_REFUSED,
                    "sysctl -w user.max_user_namespaces=15000 in the user namespace hutch runs "
                    "in: the host's, or the container's",
                    "user namespaces are refused: user.max_user_namespaces is 0");
  else
    hutch_check_say(c, HUTCH_CHECK_REFUSED,
                    "raise user.max_user_namespaces, or end what holds so many",
                    "user namespaces are refused: the limit is reached "
                    "(user.max_user_namespaces = %ld, or 32 levels of nesting)",
                    max);
}

/* Why unshare(CLONE_NEWUSER) failed with e, most certain cause first. */
static void refused(struct hutch_check *c, int e) {
  if (e == ENOSPC) {
    refused_limit(c);
    return;
  }

  if (e == EPERM && in_chroot() == 1) {
    hutch_check_say(c, HUTCH_CHECK_REFUSED,
                    "run hutch in its own mount namespace with pivot_root, or outside the chroot",
                    "user namespaces are refused: this process is in a chroot");
    return;
  }

  if (prctl(PR_GET_SECCOMP, 0, 0, 0, 0) == 2) {
    hutch_check_say(c, HUTCH_CHECK_REFUSED,
                    "allow unshare and clone with CLONE_NEWUSER in the container's seccomp "
                    "profile (docker: --security-opt seccomp=unconfined), or run hutch on "
                    "the host",
                    "user namespaces are refused: a seccomp filter (a container runtime's "
                    "profile?) refuses them: %s",
                    strerror(e));
    return;
  }

  if (geteuid() != 0 && read_sysctl("/proc/sys/kernel/unprivileged_userns_clone") == 0) {
    hutch_check_say(c, HUTCH_CHECK_REFUSED,
                    "run hutch as root, or sysctl -w kernel.unprivileged_userns_clone=1",
                    "user namespaces are refused to users other than root: "
                    "kernel.unprivileged_userns_clone is 0");
    return;
  }

  if (geteuid() != 0 &&
      read_sysctl("/proc/sys/kernel/apparmor_restrict_unprivileged_userns") == 1) {
    hutch_check_say(
        c, HUTCH_CHECK_REFUSED,
        "run hutch as root, or sysctl -w kernel.apparmor_restrict_unprivileged_userns=0",
        "user namespaces are refused to users other than root: AppArmor restricts "
        "them (kernel.apparmor_restrict_unprivileged_userns is 1)");
    return;
  }

  hutch_check_say(c, HUTCH_CHECK_REFUSED,
                  "look for a security module's policy (SELinux, AppArmor, a BPF LSM) or a "
                  "container runtime refusing CLONE_NEWUSER",
                  "user namespaces are refused: unshare(CLONE_NEWUSER): %s (cause not found)",
                  strerror(e));
}

void hutch_check_userns(const char *state_dir, struct hutch_check *c) {
  (void)state_dir;
  int e = try_userns();
  if (e == 0)
    hutch_check_say(c, HUTCH_CHECK_OK, NULL, "user namespaces can be made");
  else if (e < 0)
    hutch_check_say(c, HUTCH_CHECK_MISSING, "see why this process cannot fork",
                    "cannot tell: a child to try unshare(CLONE_NEWUSER) in could not run");
  else if (e == EINVAL)
    hutch_check_say(c, HUTCH_CHECK_MISSING, "use a kernel built with CONFIG_USER_NS (Debian's is)",
                    "the kernel has no user namespaces (unshare(CLONE_NEWUSER): %s)", strerror(e));
  else
    refused(c, e);
}
