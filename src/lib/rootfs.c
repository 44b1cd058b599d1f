/* The sandbox's root filesystem, step by step (docs/architecture.md, "A sandbox's life"). Every
 * mount happens in the sandbox's own mount namespace, which belongs to the
 * host's user namespace: nothing inside the sandbox, whatever it becomes
 * root of, can unmount, remount or add to any of it. */
#include "rootfs.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <net/if.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "cleanup.h"
#include "gvisor.h"
#include "hostroot.h"
#include "layout.h"
#include "util.h"

#define FDPATH(buf, fd) (snprintf(buf, sizeof buf, "/proc/self/fd/%d", fd), buf)

/* Resolve path inside the new root, refusing any symlink on the way: a
 * template (or a bind destination) must not be able to point a mount at a
 * place of its choosing, inside the root or out of it. Missing directories
 * are created when create is set; the last one as a file if !dir. */
/* What openat2 answered for path (fd, or -1 with errno set), checked to
 * be a directory when dir is set, and not one when it is not. */
static int checked_open(int fd, const char *path, bool dir, struct hutch_err *err) {
  if (fd < 0 && errno == ELOOP)
    return hutch_err_invalid(err, "/%s is or passes through a symlink: refusing to mount there",
                             path);
  if (fd < 0 && errno == EXDEV)
    return hutch_err_invalid(err, "/%s crosses a mount point: refusing to mount there", path);
  if (fd < 0)
    return hutch_err_set(err, errno, "/%s", path);

  struct stat st;
  if (fstat(fd, &st) == 0 && !S_ISDIR(st.st_mode) == dir) {
    close(fd);
    return hutch_err_invalid(err, "/%s is %s a directory", path, dir ? "not" : "");
  }
  return fd;
}

static int open_in_root(int root, const char *path, bool dir, bool create, struct hutch_err *err) {
  struct open_how how = {
      .flags = O_PATH | O_CLOEXEC,
      .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV,
  };
  while (*path == '/')
    path++;
  int fd = (int)syscall(SYS_openat2, root, *path ? path : ".", &how, sizeof how);
  if (fd >= 0 || errno != ENOENT || !create)
    return checked_open(fd, path, dir, err);

  /* Create the last component in its (safely resolved) parent. On the
   * stack: this runs in the sandbox's first process, which may not
   * allocate (spawn.c clones it from a thread of hutch serve). */
  char parent[PATH_MAX];
  if (strlen(path) >= sizeof parent)
    return hutch_err_invalid(err, "a mount point's path is too long");
  strcpy(parent, path);
  char *slash = strrchr(parent, '/');
  const char *name = slash ? slash + 1 : path;
  if (slash)
    *slash = '\0';
  _cleanup_close_ int pfd = open_in_root(root, slash ? parent : "", true, true, err);
  if (pfd < 0)
    return -1;

  char p[64];
  _cleanup_close_ int pdir = open(FDPATH(p, pfd), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (pdir < 0)
    return hutch_err_set(err, errno, "/%s", parent);
  int r = dir ? mkdirat(pdir, name, 0755) : mknodat(pdir, name, S_IFREG | 0644, 0);
  if (r < 0 && errno != EEXIST)
    return hutch_err_set(err, errno, "create mount point /%s", path);

  return open_in_root(root, path, dir, false, err);
}

/* The root of what was just mounted on dir: the one crossing of a mount
 * point open_in_root() refuses, and still no symlink. */
static int open_mounted(int root, const char *dir, struct hutch_err *err) {
  struct open_how how = {
      .flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC,
      .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
  };
  int fd = (int)syscall(SYS_openat2, root, dir, &how, sizeof how);
  if (fd < 0)
    return hutch_err_set(err, errno, "open /%s", dir);
  return fd;
}

static int mount_at(const char *src, int target, const char *type, unsigned long flags,
                    const char *data, struct hutch_err *err) {
  char t[64];
  if (mount(src, FDPATH(t, target), type, flags, data) < 0)
    return hutch_err_set(err, errno, "mount %s", type ? type : src);
  return 0;
}

/* Bind tree (an open_tree() clone) onto target with attributes set before it
 * becomes visible, so it is never reachable writable or with setuid bits.
 * With userns, id-mapped: where the filesystem cannot be (tmpfs before
 * Linux 6.3), a bind (IDMAP_MAY) keeps its own ids, and a layer
 * (MUST), whose ids mean nothing unmapped, fails. */
enum idmap { IDMAP_NONE, IDMAP_MAY, IDMAP_MUST };

static int attach_tree(int tree, int target, uint64_t attrs, int userns, enum idmap idmap,
                       struct hutch_err *err) {
  /* Private, so that no mount made later beside the source (on the host)
   * propagates into the sandbox, whatever the source's propagation. */
  struct mount_attr a = {.attr_set = attrs,
                         .propagation = MS_PRIVATE,
                         .userns_fd = (uint64_t)(idmap != IDMAP_NONE ? userns : 0)};
  if (idmap != IDMAP_NONE)
    a.attr_set |= MOUNT_ATTR_IDMAP;
  if (mount_setattr(tree, "", AT_EMPTY_PATH | AT_RECURSIVE, &a, sizeof a) < 0) {
    if (idmap == IDMAP_MUST && errno == EINVAL)
      return hutch_err_invalid(err, "its filesystem cannot be id-mapped (tmpfs needs Linux 6.3)");
    if (idmap != IDMAP_MAY || errno != EINVAL)
      return hutch_err_set(err, errno, "set mount attributes");
    a.attr_set &= ~(uint64_t)MOUNT_ATTR_IDMAP;
    if (mount_setattr(tree, "", AT_EMPTY_PATH | AT_RECURSIVE, &a, sizeof a) < 0)
      return hutch_err_set(err, errno, "set mount attributes");
  }
  if (move_mount(tree, "", target, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0)
    return hutch_err_set(err, errno, "move mount");
  return 0;
}

/* A directory of exactly mode (mkdirat's passes through the umask): 0, or
 * -1 with errno set. */
static int mkdir_exact(int dirfd, const char *name, mode_t mode) {
  if (mkdirat(dirfd, name, mode) < 0)
    return -1;
  return fchmodat(dirfd, name, mode, 0);
}

static int mkdir_owned(int dirfd, const char *name, mode_t mode, uid_t uid, struct hutch_err *err) {
  if (mkdir_exact(dirfd, name, mode) < 0)
    return hutch_err_set(err, errno, "storage: %s", name);
  if (fchownat(dirfd, name, uid, uid, AT_SYMLINK_NOFOLLOW) < 0)
    return hutch_err_set(err, errno, "storage: %s", name);
  return 0;
}

static int write_owned(int dirfd, const char *name, const char *s, uid_t uid,
                       struct hutch_err *err) {
  _cleanup_close_ int fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0)
    return hutch_err_set(err, errno, "storage: %s", name);
  if (write_all(fd, s, strlen(s)) < 0)
    return hutch_err_set(err, errno, "storage: %s", name);
  if (fchown(fd, uid, uid) < 0)
    return hutch_err_set(err, errno, "storage: %s", name);
  return 0;
}

/* The dynamic linker's cache, copied rather than bound: every dynamic
 * program the host or another sandbox starts opens the host's, and a
 * shared file would let an inotify watch see each of those starts. */
static int copy_ld_cache(int st, uid_t root, struct hutch_err *err) {
  struct stat sb;
  _cleanup_close_ int in = open("/etc/ld.so.cache", O_RDONLY | O_CLOEXEC);
  if (in < 0)
    return errno == ENOENT ? 0 : hutch_err_set(err, errno, "/etc/ld.so.cache");
  _cleanup_close_ int out =
      openat(st, "upper/etc/ld.so.cache", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (out < 0)
    return hutch_err_set(err, errno, "storage: etc/ld.so.cache");
  if (fchown(out, root, root) < 0)
    return hutch_err_set(err, errno, "storage: etc/ld.so.cache");
  if (fstat(in, &sb) < 0)
    return hutch_err_set(err, errno, "storage: etc/ld.so.cache");

  for (off_t done = 0; done < sb.st_size;) {
    ssize_t n = sendfile(out, in, &done, (size_t)(sb.st_size - done));
    if (n <= 0)
      return hutch_err_set(err, n < 0 ? errno : EIO, "copy /etc/ld.so.cache");
  }
  return 0;
}

/* The upper layer starts with what differs per sandbox: ownership by the
 * sandbox's own ids (the shared lower layer belongs to host root and shows as
 * nobody), the user's home, and the hostname. */
static int storage_upper(const struct hutch_rootfs *r, int st, struct hutch_err *err) {
  static const struct {
    const char *name;
    mode_t mode;
    bool user; /* the sandbox user's, not its root's */
  } dirs[] = {{"upper", 0755},      {"upper/etc", 0755},
              {"upper/home", 0755}, {"upper/home/user", 0755, true},
              {"upper/root", 0700}, {"upper/tmp", 01777}};
  uid_t root = r->uid_base, user = r->uid_base + HUTCH_USER_UID;
  char hosts[512];
  snprintf(hosts, sizeof hosts,
           "127.0.0.1\tlocalhost\n127.0.1.1\t%s\n::1\tlocalhost ip6-localhost ip6-loopback\n",
           r->hostname);
  char hostname[80];
  snprintf(hostname, sizeof hostname, "%s\n", r->hostname);

  for (size_t i = 0; i < ARRAY_SIZE(dirs); i++)
    if (mkdir_owned(st, dirs[i].name, dirs[i].mode, dirs[i].user ? user : root, err) < 0)
      return -1;
  if (write_owned(st, "upper/etc/hostname", hostname, root, err) < 0)
    return -1;
  if (write_owned(st, "upper/etc/hosts", hosts, root, err) < 0)
    return -1;
  /* A --rootfs has its own. */
  if (!r->cfg->rootfs && copy_ld_cache(st, root, err) < 0)
    return -1;

  /* Where runsc binds the agent in: its gofer wants the mount point in
   * the root, and the template's /dev is not the sandbox's to write. */
  if (r->cfg->isolation == HUTCH_ISOLATION_GVISOR) {
    if (mkdir_owned(st, "upper/dev", 0755, root, err) < 0)
      return -1;
    if (write_owned(st, "upper/dev/.hutch-agent", "", root, err) < 0)
      return -1;
  }

  if (mkdirat(st, "work", 0700) < 0)
    return hutch_err_set(err, errno, "storage: work dirs");
  if (mkdirat(st, "root", 0755) < 0)
    return hutch_err_set(err, errno, "storage: work dirs");
  if (mkdirat(st, "empty", 0755) < 0)
    return hutch_err_set(err, errno, "storage: work dirs");
  return 0;
}

/* What runsc needs beside the root, in the storage: its binary (bound
 * read-only, as the agent's), its state directory and log (the sandbox
 * root's, in its user namespace) and the bundle's config.json. */
static int gvisor_storage(struct hutch_rootfs *r, int st, struct hutch_err *err) {
  _cleanup_close_ int bin = openat(st, "bin-runsc", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0500);
  _cleanup_close_ int tree =
      open_tree(AT_FDCWD, r->cfg->gvisor->runsc, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
  if (bin < 0 || tree < 0)
    return hutch_err_set(err, errno, "runsc binary %s", r->cfg->gvisor->runsc);
  _cleanup_close_ int target = openat(st, "bin-runsc", O_PATH | O_CLOEXEC);
  if (target < 0)
    return hutch_err_set(err, errno, "runsc binary");
  if (attach_tree(tree, target, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOSUID, -1,
                  IDMAP_NONE, err) < 0)
    return hutch_err_wrap(err, "runsc binary");

  r->runsc_fd = openat(st, "bin-runsc", O_PATH | O_CLOEXEC);
  if (r->runsc_fd < 0)
    return hutch_err_set(err, errno, "open runsc binary");

  /* tmp: where runsc's sandbox process makes the empty root it chroots to. */
  if (mkdir_owned(st, "runsc", 0700, r->uid_base, err) < 0)
    return -1;
  if (mkdirat(st, "tmp", 0755) < 0)
    return hutch_err_set(err, errno, "storage: tmp");
  return hutch_gvisor_bundle(st, r->hostname, r->cfg->memory_bytes, r->cfg->pids, err);
}

/* The storage tmpfs, of the disk quota's size, mounted on the staging
 * directory: r->storage_fd (O_PATH) and the fd returned (to write in). */
static int storage_tmpfs(struct hutch_rootfs *r, struct hutch_err *err) {
  char opts[128];
  uint64_t inodes = r->cfg->disk_bytes / 4096;
  snprintf(opts, sizeof opts, "size=%llu,nr_inodes=%llu,mode=0755",
           (unsigned long long)r->cfg->disk_bytes,
           (unsigned long long)(inodes < 4096 ? 4096 : inodes));
  if (mount("hutch", HUTCH_STAGING_DIR, "tmpfs", MS_NOSUID | MS_NODEV, opts) < 0)
    return hutch_err_set(err, errno, "mount storage tmpfs");

  int st = open(HUTCH_STAGING_DIR, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  r->storage_fd = open(HUTCH_STAGING_DIR, O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (st < 0 || r->storage_fd < 0) {
    hutch_err_set(err, errno, "open storage");
    if (st >= 0)
      close(st);
    return -1;
  }
  return st;
}

/* The agent binary, read-only: its /proc/1/exe can never be opened for
 * writing, whatever the sandbox becomes (runc CVE-2019-5736). */
static int storage_agent(struct hutch_rootfs *r, int st, struct hutch_err *err) {
  _cleanup_close_ int agent = openat(st, "agent", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0500);
  _cleanup_close_ int tree =
      open_tree(AT_FDCWD, r->agent_path, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
  if (agent < 0 || tree < 0)
    return hutch_err_set(err, errno, "agent binary %s", r->agent_path);

  _cleanup_close_ int agent_target = openat(st, "agent", O_PATH | O_CLOEXEC);
  if (attach_tree(tree, agent_target, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOSUID, -1,
                  IDMAP_NONE, err) < 0)
    return hutch_err_wrap(err, "agent binary");

  r->agent_fd = openat(st, "agent", O_PATH | O_CLOEXEC);
  if (r->agent_fd < 0)
    return hutch_err_set(err, errno, "open agent binary");
  return 0;
}

/* Snapshot layers above the template, each id-mapped onto this
 * sandbox's range and read-only, in the storage where nothing else sees
 * them, and the overlay's options naming them in ovl[size] (a page is
 * enough). Every layer is named relative to the storage, the template
 * through a link "t" there: overlay shows its layers' names in the
 * sandbox's /proc/self/mountinfo as they were given, and they would
 * otherwise tell the host's paths (the state directory, the staging
 * directory). */
static int storage_layers(struct hutch_rootfs *r, int st, char *ovl, size_t size,
                          struct hutch_err *err) {
  if (symlinkat(r->template_dir, st, "t") < 0)
    return hutch_err_set(err, errno, "storage: t");

  size_t n = (size_t)snprintf(ovl, size, "lowerdir=");
  for (size_t i = 0; i < r->cfg->nlayers && n < size; i++) {
    char name[24];
    snprintf(name, sizeof name, "l%zu", i);
    if (mkdirat(st, name, 0700) < 0)
      return hutch_err_set(err, errno, "storage: %s", name);
    _cleanup_close_ int target = openat(st, name, O_PATH | O_CLOEXEC);
    if (target < 0)
      return hutch_err_set(err, errno, "layer %s", r->cfg->layers[i]);
    if (attach_tree(r->layer_fds[i], target,
                    MOUNT_ATTR_RDONLY | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOSUID, r->range_userns,
                    IDMAP_MUST, err) < 0)
      return hutch_err_wrap(err, "layer %s", r->cfg->layers[i]);
    n += (size_t)snprintf(ovl + n, size - n, "%s:", name);
  }

  if (n < size)
    n += (size_t)snprintf(ovl + n, size - n, "t,upperdir=upper,workdir=work");
  if (n >= size)
    return hutch_err_invalid(err, "overlay options too long (%zu layers)", r->cfg->nlayers);
  return 0;
}

/* The overlay on the staging directory's root/, its layers named
 * relative to the storage (st). Returns an O_PATH fd of it. */
static int mount_overlay(const struct hutch_rootfs *r, int st, const char *ovl,
                         struct hutch_err *err) {
  if (fchdir(st) < 0)
    return hutch_err_set(err, errno, "enter storage");
  int rc = mount("hutch", HUTCH_STAGING_DIR "/root", "overlay", MS_NOSUID | MS_NODEV, ovl);
  int mount_errno = errno;
  int back = chdir("/");
  if (rc < 0)
    return hutch_err_set(err, mount_errno, "mount overlay on template %s", r->template_dir);
  if (back < 0)
    return hutch_err_set(err, errno, "mount overlay on template %s", r->template_dir);

  int root = open(HUTCH_STAGING_DIR "/root", O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (root < 0)
    return hutch_err_set(err, errno, "open new root");
  return root;
}

/* The sandbox's storage: a tmpfs of the disk quota's size holding the
 * overlay's upper layer, and the overlay (template below) as the new root.
 * Returns an O_PATH fd of the new root. */
static int mount_storage(struct hutch_rootfs *r, struct hutch_err *err) {
  _cleanup_close_ int st = storage_tmpfs(r, err);
  if (st < 0)
    return -1;
  if (storage_upper(r, st, err) < 0)
    return -1;
  if (storage_agent(r, st, err) < 0)
    return -1;
  if (r->cfg->isolation == HUTCH_ISOLATION_GVISOR && gvisor_storage(r, st, err) < 0)
    return -1;

  char ovl[4096];
  if (storage_layers(r, st, ovl, sizeof ovl, err) < 0)
    return -1;
  return mount_overlay(r, st, ovl, err);
}

/* A host directory as a read-only overlay of its own, not a bind: a bind
 * shares the host's inodes, so an inotify watch on it would see every file
 * the host and the other sandboxes open there (which programs run, which
 * libraries load). An overlay has inodes of its own and reports only what
 * happens through it. An overlay without an upper layer needs two lower
 * ones; the second is an empty directory of the sandbox's storage. */
static int view_ro(const char *host, int root, const char *dst, struct hutch_err *err) {
  /* Named, as the root's layers, by a link in the storage (the process is
   * in it): mountinfo shows "lowerdir=h-etc-ssl:empty", no host path. */
  char name[64], opts[128];
  snprintf(name, sizeof name, "h-%s", dst);
  for (char *p = name; *p; p++)
    if (*p == '/')
      *p = '-';
  snprintf(opts, sizeof opts, "lowerdir=%s:empty", name);
  if (symlink(host, name) < 0)
    return hutch_err_set(err, errno, "storage: %s", name);
  _cleanup_close_ int target = open_in_root(root, dst, true, true, err);
  if (target < 0)
    return hutch_err_wrap(err, "%s", host);
  if (mount_at("hutch", target, "overlay", MS_RDONLY | MS_NOSUID | MS_NODEV, opts, err) < 0)
    return hutch_err_wrap(err, "%s", host);
  return 0;
}

/* The caller's views (sandbox.h): read-only overlays like the host
 * template's, at their own destinations. */
static int mount_views(const struct hutch_rootfs *r, int root, struct hutch_err *err) {
  if (r->cfg->nviews == 0)
    return 0;
  if (chdir(HUTCH_STAGING_DIR) < 0)
    return hutch_err_set(err, errno, "enter storage");
  for (size_t i = 0; i < r->cfg->nviews; i++)
    if (view_ro(r->cfg->views[i].src, root, r->cfg->views[i].dst, err) < 0)
      return hutch_err_wrap(err, "view on %s", r->cfg->views[i].dst);
  return chdir("/") < 0 ? hutch_err_set(err, errno, "chdir /") : 0;
}

/* The `host` template: the host's /usr (and top-level directories that are
 * not links into it) and a few /etc entries, read-only, nosuid. */
static int mount_host_template(int root, struct hutch_err *err) {
  const char *const *lists[] = {hutch_hostroot_dirs, hutch_hostroot_etc};
  if (chdir(HUTCH_STAGING_DIR) < 0)
    return hutch_err_set(err, errno, "enter storage");
  for (size_t l = 0; l < ARRAY_SIZE(lists); l++)
    for (const char *const *d = lists[l]; *d; d++) {
      char host[64];
      struct stat st;
      snprintf(host, sizeof host, "/%s", *d);
      if (lstat(host, &st) < 0 || !S_ISDIR(st.st_mode))
        continue;
      if (view_ro(host, root, *d, err) < 0)
        return -1;
    }
  return chdir("/") < 0 ? hutch_err_set(err, errno, "chdir /") : 0;
}

/* /proc of the sandbox's pid namespace, with Docker's masked paths hidden
 * (files under /dev/null, directories under an empty read-only directory) and
 * the kernel-tuning paths read-only. */
/* Beyond Docker's: config.gz and vmcoreinfo tell the host kernel's exact
 * build and the addresses of its symbols (what a kernel exploit needs to
 * aim without a leak of its own). */
static const char *const proc_masked[] = {
    "kcore",      "keys", "latency_stats", "timer_list", "timer_stats", "sched_debug",
    "interrupts", "acpi", "asound",        "scsi",       "config.gz",   NULL};
static const char *const proc_readonly[] = {"bus", "fs", "irq", "sys", "sysrq-trigger", NULL};
static const char *const sys_masked[] = {"firmware", "devices/virtual/powercap",
                                         "kernel/vmcoreinfo", NULL};

/* Files are masked under the sandbox's own /dev/null (mount_dev made it):
 * a bind of the host's would show the host's devtmpfs, and the size of the
 * host's memory, in the sandbox's mountinfo. */
/* A directory is masked by a read-only bind of the storage's empty
 * directory, not a tmpfs of its own: as empty and as unwritable (the
 * overlays' spare lower layer, which nothing writes and the sandbox cannot
 * reach but here), and no superblock more. Each superblock is a
 * memory-aware shrinker, and every memory cgroup on the host pays for each
 * shrinker (kernel shrinker_info), so each one a sandbox mounts costs in
 * proportion to the number of sandboxes. */
static int mask_dir(int fd, const char *name, struct hutch_err *err) {
  _cleanup_close_ int tree =
      open_tree(AT_FDCWD, HUTCH_STAGING_DIR "/empty", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
  if (tree < 0)
    return hutch_err_set(err, errno, "mask %s", name);
  return attach_tree(tree, fd,
                     MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC,
                     -1, IDMAP_NONE, err);
}

static int mask_path(int root, int dirfd, const char *name, struct hutch_err *err) {
  struct stat st;
  _cleanup_close_ int fd = openat(dirfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return 0; /* not on this kernel */
  if (fstat(fd, &st) < 0)
    return hutch_err_set(err, errno, "mask %s", name);
  if (S_ISDIR(st.st_mode))
    return mask_dir(fd, name, err);

  _cleanup_close_ int dev = open_mounted(root, "dev", err);
  if (dev < 0)
    return hutch_err_wrap(err, "mask %s", name);
  _cleanup_close_ int null = openat(dev, "null", O_PATH | O_NOFOLLOW | O_CLOEXEC);
  char p[64];
  if (null < 0)
    return hutch_err_set(err, errno, "mask %s: /dev/null", name);
  return mount_at(FDPATH(p, null), fd, NULL, MS_BIND, NULL, err);
}

static int readonly_path(int dirfd, const char *name, struct hutch_err *err) {
  _cleanup_close_ int fd = openat(dirfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return 0;
  _cleanup_close_ int tree =
      open_tree(fd, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH | AT_RECURSIVE);
  if (tree < 0)
    return hutch_err_set(err, errno, "read-only /proc/%s", name);
  if (attach_tree(tree, fd,
                  MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC, -1,
                  IDMAP_NONE, err) < 0)
    return hutch_err_wrap(err, "read-only /proc/%s", name);
  return 0;
}

static int mount_fresh(int root, const char *dir, const char *type, unsigned long flags,
                       const char *data, const char *const *masked, struct hutch_err *err) {
  _cleanup_close_ int target = open_in_root(root, dir, true, true, err);
  if (target < 0)
    return hutch_err_wrap(err, "/%s", dir);
  if (mount_at(type, target, type, flags, data, err) < 0)
    return hutch_err_wrap(err, "/%s", dir);

  _cleanup_close_ int mnt = open_mounted(root, dir, err);
  if (mnt < 0)
    return -1;
  for (const char *const *m = masked; *m; m++)
    if (mask_path(root, mnt, *m, err) < 0)
      return hutch_err_wrap(err, "/%s", dir);
  if (strcmp(type, "proc") == 0)
    for (const char *const *m = proc_readonly; *m; m++)
      if (readonly_path(mnt, *m, err) < 0)
        return -1;
  return 0;
}

/* A directory of the sandbox's storage, bound on target: a bind, not a
 * tmpfs of its own, because each superblock is a memory-aware shrinker and
 * every memory cgroup on the host pays for every shrinker (kernel
 * shrinker_info), so each superblock a sandbox mounts costs in proportion to
 * the number of sandboxes (mask_path's empty directories, likewise).
 * The directory is host root's, made here before the user namespace, so
 * nothing in the sandbox owns it. Nothing can move a directory out from
 * under the bind (the way out of a bind of a subdirectory): the sandbox
 * reaches the storage only through this bind and the overlay, which renames
 * only within upper/ and work/, and host root does not write there.
 * Everything written below counts against the storage's size and inodes:
 * the disk quota bounds it. clr: attributes the storage's own mount has
 * (nosuid, nodev) that this bind must not. */
static int storage_bind(const char *storage_dir, int target, uint64_t attrs, uint64_t clr,
                        struct hutch_err *err) {
  _cleanup_close_ int st = open(HUTCH_STAGING_DIR, O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (st < 0)
    return hutch_err_set(err, errno, "storage: %s", storage_dir);
  _cleanup_close_ int tree =
      open_tree(st, storage_dir, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_SYMLINK_NOFOLLOW);
  if (tree < 0)
    return hutch_err_set(err, errno, "storage: %s", storage_dir);
  struct mount_attr a = {.attr_clr = clr};
  if (clr && mount_setattr(tree, "", AT_EMPTY_PATH, &a, sizeof a) < 0)
    return hutch_err_set(err, errno, "storage: %s", storage_dir);

  return attach_tree(tree, target, attrs, -1, IDMAP_NONE, err);
}

/* A minimal /dev: the usual character devices, a private devpts instance
 * whose ttys belong to the sandbox's tty group, and /dev/shm. /dev is the
 * storage's "devfs", bound nosuid and noexec but not nodev (its devices
 * must open): nothing in the sandbox can write there (host root's, 0755),
 * and the storage's own mount, the only other way to these nodes, is nodev
 * and out of the sandbox's reach. /dev/shm is the storage's "shm", 1777,
 * bound nosuid, nodev and noexec; what it holds counts against the disk
 * quota (it had a 64 MiB tmpfs of its own). */
/* What mount_dev binds, made in the storage: "devfs" with the devices,
 * the links and the mount points, and "shm". */
static int dev_in_storage(struct hutch_err *err) {
  static const struct {
    const char *name;
    unsigned maj, min;
  } devs[] = {{"null", 1, 3},   {"zero", 1, 5},    {"full", 1, 7},
              {"random", 1, 8}, {"urandom", 1, 9}, {"tty", 5, 0}};
  static const struct {
    const char *name, *target;
  } links[] = {{"fd", "/proc/self/fd"},
               {"stdin", "/proc/self/fd/0"},
               {"stdout", "/proc/self/fd/1"},
               {"stderr", "/proc/self/fd/2"},
               {"ptmx", "pts/ptmx"}};
  _cleanup_close_ int st = open(HUTCH_STAGING_DIR, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (st < 0)
    return hutch_err_set(err, errno, "storage: /dev");
  if (mkdir_exact(st, "devfs", 0755) < 0)
    return hutch_err_set(err, errno, "storage: /dev");
  if (mkdir_exact(st, "shm", 01777) < 0)
    return hutch_err_set(err, errno, "storage: /dev");
  _cleanup_close_ int dev = openat(st, "devfs", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (dev < 0)
    return hutch_err_set(err, errno, "storage: /dev");

  for (size_t i = 0; i < ARRAY_SIZE(devs); i++) {
    if (mknodat(dev, devs[i].name, S_IFCHR | 0666, makedev(devs[i].maj, devs[i].min)) < 0)
      return hutch_err_set(err, errno, "/dev/%s", devs[i].name);
    if (fchmodat(dev, devs[i].name, 0666, 0) < 0)
      return hutch_err_set(err, errno, "/dev/%s", devs[i].name);
  }
  for (size_t i = 0; i < ARRAY_SIZE(links); i++)
    if (symlinkat(links[i].target, dev, links[i].name) < 0)
      return hutch_err_set(err, errno, "/dev/%s", links[i].name);

  if (mkdirat(dev, "pts", 0755) < 0)
    return hutch_err_set(err, errno, "/dev mount points");
  if (mkdirat(dev, "shm", 0755) < 0)
    return hutch_err_set(err, errno, "/dev mount points");
  return 0;
}

static int mount_dev(const struct hutch_rootfs *r, int root, struct hutch_err *err) {
  if (dev_in_storage(err) < 0)
    return -1;

  _cleanup_close_ int target = open_in_root(root, "dev", true, true, err);
  if (target < 0)
    return hutch_err_wrap(err, "/dev");
  if (storage_bind("devfs", target, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC, MOUNT_ATTR_NODEV, err) <
      0)
    return hutch_err_wrap(err, "/dev");

  _cleanup_close_ int mounted = open_mounted(root, "dev", err);
  if (mounted < 0)
    return -1;
  _cleanup_close_ int pts = openat(mounted, "pts", O_PATH | O_CLOEXEC | O_NOFOLLOW);
  _cleanup_close_ int shm = openat(mounted, "shm", O_PATH | O_CLOEXEC | O_NOFOLLOW);
  if (pts < 0 || shm < 0)
    return hutch_err_set(err, errno, "/dev mount points");
  if (storage_bind("shm", shm, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC, 0, err) <
      0)
    return hutch_err_wrap(err, "/dev/shm");

  /* max=: without it one sandbox could take every pty the kernel lets
   * devpts instances share (kernel.pty.max − reserve) and leave the other
   * sandboxes without a terminal. */
  char opts[128];
  snprintf(opts, sizeof opts, "newinstance,ptmxmode=0666,mode=0620,gid=%u,max=%u",
           (unsigned)(r->uid_base + HUTCH_TTY_GID),
           r->cfg->ptys ? r->cfg->ptys : HUTCH_DEFAULT_PTYS);
  if (mount_at("devpts", pts, "devpts", MS_NOSUID | MS_NOEXEC, opts, err) < 0)
    return hutch_err_wrap(err, "/dev");
  return 0;
}

/* The caller's --bind-ro/--bind-rw: the host path, as an idmapped mount where
 * the filesystem allows, so that its owner is the sandbox user inside and
 * what the sandbox writes belongs to that owner on the host. */
static int mount_user_binds(const struct hutch_rootfs *r, int root, struct hutch_err *err) {
  for (size_t i = 0; i < r->cfg->nbinds; i++) {
    const struct hutch_bind *b = &r->cfg->binds[i];
    struct stat st;
    /* The source as hutch opened and checked it, never its path again. */
    int tree = r->bind_fds[2 * i];
    if (fstat(tree, &st) < 0)
      return hutch_err_set(err, errno, "bind source %s", b->src);
    _cleanup_close_ int target = open_in_root(root, b->dst, S_ISDIR(st.st_mode), true, err);
    if (target < 0)
      return hutch_err_wrap(err, "bind destination %s", b->dst);
    uint64_t attrs = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | (b->rw ? 0 : MOUNT_ATTR_RDONLY);
    if (attach_tree(tree, target, attrs, r->bind_fds[2 * i + 1], IDMAP_MAY, err) < 0)
      return hutch_err_wrap(err, "bind %s on %s", b->src, b->dst);
  }
  return 0;
}

/* The volumes: each device's ext4 mounted afresh here (one superblock
 * however many sandboxes mount it), id-mapped, nosuid and nodev. Its
 * filesystem was made by hutch and is only ever written through the
 * kernel's ext4, by sandboxes: never parsed or walked by the host. */
/* The superblock of device's ext4, made in the filesystem context fs: 0,
 * or -1 with errno set. noinit_itable: the inode tables mkfs left to be
 * zeroed later stay as they are (marked unused); zeroing them through a
 * loop device would punch holes in the image, which must stay
 * allocated. */
static int volume_create(int fs, const char *device) {
  if (fsconfig(fs, FSCONFIG_SET_STRING, "source", device, 0) < 0)
    return -1;
  if (fsconfig(fs, FSCONFIG_SET_FLAG, "noinit_itable", NULL, 0) < 0)
    return -1;
  return fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0);
}

static int mount_volumes(const struct hutch_rootfs *r, int root, struct hutch_err *err) {
  for (size_t i = 0; i < r->cfg->nvolumes; i++) {
    const struct hutch_volume *v = &r->cfg->volumes[i];
    _cleanup_close_ int fs = fsopen("ext4", FSOPEN_CLOEXEC);
    if (fs < 0 || volume_create(fs, v->device) < 0)
      return hutch_err_set(err, errno, "volume on %s", v->device);
    _cleanup_close_ int mnt = fsmount(fs, FSMOUNT_CLOEXEC, 0);
    if (mnt < 0)
      return hutch_err_set(err, errno, "volume on %s", v->device);

    _cleanup_close_ int target = open_in_root(root, v->dst, true, true, err);
    if (target < 0)
      return hutch_err_wrap(err, "volume at %s", v->dst);
    uint64_t attrs = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | (v->ro ? MOUNT_ATTR_RDONLY : 0);
    if (attach_tree(mnt, target, attrs, r->range_userns, IDMAP_MUST, err) < 0)
      return hutch_err_wrap(err, "volume at %s", v->dst);
  }
  return 0;
}

/* Enter the new root and drop every reference to the host's: after this, the
 * host's filesystem is not reachable by any path. */
static int pivot(int root, struct hutch_err *err) {
  if (fchdir(root) < 0)
    return hutch_err_set(err, errno, "chdir to new root");
  if (syscall(SYS_pivot_root, ".", ".") < 0)
    return hutch_err_set(err, errno, "pivot_root");
  if (umount2(".", MNT_DETACH) < 0)
    return hutch_err_set(err, errno, "detach old root");
  if (chdir("/") < 0)
    return hutch_err_set(err, errno, "chdir /");
  return 0;
}

static int loopback_up(struct hutch_err *err) {
  _cleanup_close_ int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  struct ifreq ifr = {0};
  strcpy(ifr.ifr_name, "lo");
  if (s < 0 || ioctl(s, SIOCGIFFLAGS, &ifr) < 0)
    return hutch_err_set(err, errno, "loopback");
  ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
  if (ioctl(s, SIOCSIFFLAGS, &ifr) < 0)
    return hutch_err_set(err, errno, "bring up loopback");
  return 0;
}

int hutch_rootfs_prepare(struct hutch_rootfs *r, struct hutch_err *err) {
  /* Nothing done below may propagate back to the host's mounts. */
  if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
    return hutch_err_set(err, errno, "make mounts private");
  r->root_fd = mount_storage(r, err);
  if (r->root_fd < 0)
    return -1;
  if (!r->cfg->rootfs && mount_host_template(r->root_fd, err) < 0)
    return hutch_err_wrap(err, "host template");

  /* gVisor makes its own /dev and /proc; the storage gets runsc's. */
  if (r->cfg->isolation == HUTCH_ISOLATION_NS) {
    if (mount_dev(r, r->root_fd, err) < 0)
      return -1;
    /* hidepid=invisible: a process a workload may not trace (the agent,
     * not dumpable) does not even appear in its /proc, which would
     * otherwise let the sandbox's root list the agent's fds (the /proc
     * files of a non-dumpable process belong to root of its user
     * namespace). */
    if (mount_fresh(r->root_fd, "proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC,
                    "hidepid=invisible", proc_masked, err) < 0)
      return -1;
  }

  if (mount_views(r, r->root_fd, err) < 0)
    return -1;
  if (mount_user_binds(r, r->root_fd, err) < 0)
    return -1;
  return mount_volumes(r, r->root_fd, err);
}

/* runsc's own root: the storage, with a /dev and a /proc of the sandbox's
 * pid namespace. The overlay root stays where runsc finds it: "root". */
static int enter_gvisor(struct hutch_rootfs *r, struct hutch_err *err) {
  _cleanup_close_ int st = open(HUTCH_STAGING_DIR, O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (st < 0)
    return hutch_err_set(err, errno, "open storage");
  /* A whole /proc, nothing over any of it: the kernel lets runsc mount
   * one of its own pid namespace only where one is fully visible. It
   * shows this pid namespace, whose only processes are the sandbox's. */
  _cleanup_close_ int proc = open_in_root(st, "proc", true, true, err);
  if (proc < 0)
    return -1;
  if (mount_dev(r, st, err) < 0)
    return -1;
  if (mount_at("proc", proc, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL, err) < 0)
    return -1;
  return pivot(st, err);
}

int hutch_rootfs_enter(struct hutch_rootfs *r, struct hutch_err *err) {
  if (r->cfg->isolation == HUTCH_ISOLATION_GVISOR) {
    if (enter_gvisor(r, err) < 0)
      return -1;
  } else {
    if (mount_fresh(r->root_fd, "sys", "sysfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL,
                    sys_masked, err) < 0)
      return -1;
    if (pivot(r->root_fd, err) < 0)
      return -1;
  }

  close(r->root_fd);
  r->root_fd = -1;
  if (sethostname(r->hostname, strlen(r->hostname)) < 0)
    return hutch_err_set(err, errno, "sethostname");
  return loopback_up(err);
}
