/* The root of the `host` template (hostroot.h): the skeleton under
 * STATE/templates, written once and renamed into place, and the lists of
 * host directories that rootfs.c shows in it read-only. */
#include "hostroot.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cleanup.h"
#include "layout.h"
#include "mkdir.h"
#include "util.h"

/* Bump when the skeleton's content changes: a new name is built beside the
 * old one instead of reusing it. */
#define HOST_TEMPLATE "host-2"

const char *const hutch_hostroot_dirs[] = {"usr",   "bin",   "sbin",   "lib",
                                           "lib32", "lib64", "libx32", NULL};
const char *const hutch_hostroot_etc[] = {"etc/alternatives", "etc/ssl", NULL};

static const struct skel_file {
  const char *path, *content;
} skel_files[] = {
    {"etc/passwd", "root:x:0:0:root:/root:/bin/bash\n"
                   "user:x:1000:1000:user:/home/user:/bin/bash\n"
                   "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"},
    {"etc/group", "root:x:0:\ntty:x:5:user\nusers:x:100:user\nuser:x:1000:\nnogroup:x:65534:\n"},
    {"etc/nsswitch.conf", "passwd: files\ngroup: files\nshadow: files\nhosts: files dns\n"
                          "networks: files\nprotocols: files\nservices: files\n"},
    /* Only loopback exists; resolution of other names fails fast. */
    {"etc/resolv.conf", "# hutch: this sandbox has no network but loopback\n"},
    {"etc/hostname", "sandbox\n"},
    {"etc/hosts", "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n"},
    {"etc/shells", "/bin/sh\n/bin/bash\n/usr/bin/bash\n"},
};

static const struct skel_dir {
  const char *path;
  mode_t mode;
} skel_dirs[] = {
    {"etc", 0755},  {"proc", 0555}, {"sys", 0555}, {"dev", 0755}, {"tmp", 01777},
    {"home", 0755}, {"root", 0700}, {"run", 0755}, {"var", 0755}, {"var/tmp", 01777},
    {"mnt", 0755},  {"opt", 0755},  {"srv", 0755}, {"usr", 0755},
};

static const struct skel_link {
  const char *path, *target;
} skel_links[] = {
    {"etc/os-release", "../usr/lib/os-release"},
    {"etc/localtime", "/usr/share/zoneinfo/Etc/UTC"},
    {"etc/mtab", "/proc/self/mounts"},
};

static int skel_write(int dirfd, const char *path, const char *content, struct hutch_err *err) {
  _cleanup_close_ int fd =
      openat(dirfd, path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0 || write_all(fd, content, strlen(content)) < 0)
    return hutch_err_set(err, errno, "template: write %s", path);
  return 0;
}

/* Top-level host directories: a merged-/usr link is copied as a link; a real
 * directory becomes a mount point for a read-only view (rootfs.c). */
static int skel_host_dirs(int dirfd, struct hutch_err *err) {
  for (const char *const *d = hutch_hostroot_dirs; *d; d++) {
    char host[64], target[PATH_MAX];
    struct stat st;
    snprintf(host, sizeof host, "/%s", *d);
    if (strcmp(*d, "usr") == 0 || lstat(host, &st) < 0)
      continue;
    if (S_ISLNK(st.st_mode)) {
      ssize_t n = readlink(host, target, sizeof target - 1);
      if (n < 0)
        return hutch_err_set(err, errno, "template: readlink %s", host);
      target[n] = '\0';
      if (symlinkat(target, dirfd, *d) < 0)
        return hutch_err_set(err, errno, "template: link %s", *d);
    } else if (S_ISDIR(st.st_mode) && mkdirat(dirfd, *d, 0755) < 0) {
      return hutch_err_set(err, errno, "template: mkdir %s", *d);
    }
  }

  for (const char *const *e = hutch_hostroot_etc; *e; e++) {
    char host[64];
    struct stat st;
    snprintf(host, sizeof host, "/%s", *e);
    if (stat(host, &st) < 0)
      continue;
    if (S_ISDIR(st.st_mode) ? mkdirat(dirfd, *e, 0755) < 0 : skel_write(dirfd, *e, "", err) < 0)
      return hutch_err_set(err, errno, "template: mount point %s", *e);
  }
  return 0;
}

static int skel_build(int dirfd, struct hutch_err *err) {
  for (size_t i = 0; i < ARRAY_SIZE(skel_dirs); i++) {
    const struct skel_dir *d = &skel_dirs[i];
    if (mkdirat(dirfd, d->path, d->mode) < 0)
      return hutch_err_set(err, errno, "template: mkdir %s", d->path);
    /* The umask takes bits off mkdirat's mode (/tmp's 01777 its write bits). */
    if (fchmodat(dirfd, d->path, d->mode, 0) < 0)
      return hutch_err_set(err, errno, "template: mkdir %s", d->path);
  }
  for (size_t i = 0; i < ARRAY_SIZE(skel_files); i++)
    if (skel_write(dirfd, skel_files[i].path, skel_files[i].content, err) < 0)
      return -1;
  for (size_t i = 0; i < ARRAY_SIZE(skel_links); i++)
    if (symlinkat(skel_links[i].target, dirfd, skel_links[i].path) < 0)
      return hutch_err_set(err, errno, "template: link %s", skel_links[i].path);
  return skel_host_dirs(dirfd, err);
}

static int remove_entry(const char *path, const struct stat *st, int type, struct FTW *ftw) {
  (void)st, (void)type, (void)ftw;
  remove(path);
  return 0;
}

static void remove_tree(const char *path) {
  nftw(path, remove_entry, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
}

/* The skeleton, written into the directory dir. */
static int skel_build_in(const char *dir, struct hutch_err *err) {
  _cleanup_close_ int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    return hutch_err_set(err, errno, "template: open %s", dir);
  return skel_build(fd, err);
}

char *hutch_hostroot_skeleton(const char *state_dir, struct hutch_err *err) {
  _cleanup_free_ char *dir = xasprintf("%s/templates", state_dir);
  _cleanup_free_ char *path = xasprintf("%s/" HOST_TEMPLATE, dir);
  struct stat st;
  if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
    return steal_pointer(&path);

  if (mkdir_p(dir, 0755, err) < 0) {
    hutch_err_wrap(err, "state directory");
    return NULL;
  }

  /* Build beside, then rename into place: a half-built template is never
   * visible, and of two concurrent builders one wins and one discards. */
  _cleanup_free_ char *tmp = xasprintf("%s/.build-XXXXXX", dir);
  if (!mkdtemp(tmp)) {
    hutch_err_set(err, errno, "template: mkdtemp in %s", dir);
    return NULL;
  }
  chmod(tmp, 0755);
  if (skel_build_in(tmp, err) < 0) {
    remove_tree(tmp);
    return NULL;
  }

  if (rename(tmp, path) < 0) {
    int e = errno;
    remove_tree(tmp);
    if (e != EEXIST && e != ENOTEMPTY) {
      hutch_err_set(err, e, "template: rename to %s", path);
      return NULL;
    }
  }
  return steal_pointer(&path);
}
