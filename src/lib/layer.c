/* Capturing a sandbox's writable layer (layer.h). What is read is the
 * sandbox's own, written by a hostile workload: every name is opened
 * relative to its parent's fd and never followed (O_NOFOLLOW, lstat-like
 * fstatat), symlinks are copied as links, sparse files stay sparse (the
 * disk quota counts blocks, and a copy that filled holes could write
 * terabytes to the host's disk), only regular files, directories, links,
 * fifos and overlay whiteouts are copied, and setuid and setgid bits are
 * dropped: the copy lies on the host's disk. */
#include "layer.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "cleanup.h"
#include "layout.h"
#include "slot.h"
#include "spawn.h"
#include "util.h"

/* Files with more than one link, by inode: where the first was copied, so
 * that each further link is a link again. Copied apart, 1 GiB linked 260000
 * times (an inode each, no data) would be 260 TB on the host. */
struct link {
  ino_t ino;
  char *path; /* under the layer's root; NULL: a free slot */
};

struct capture {
  uid_t base;
  struct hutch_layer_stats *stats;
  struct hutch_err *err;
  int root;   /* the layer's root */
  char *path; /* the directory being copied, under root ("" at the top) */
  size_t path_len;
  struct link *links; /* open addressing, a power of two */
  size_t nlinks, links_cap;
  uint64_t max_bytes; /* the storage's size: more is no copy of it */
};

static struct link *link_slot(struct capture *cap, ino_t ino) {
  size_t mask = cap->links_cap - 1, i = (size_t)(ino * 0x9E3779B97F4A7C15ull) & mask;
  while (cap->links[i].path && cap->links[i].ino != ino)
    i = (i + 1) & mask;
  return &cap->links[i];
}

static void link_add(struct capture *cap, ino_t ino, char *path) {
  if (2 * (cap->nlinks + 1) > cap->links_cap) {
    struct link *old = cap->links;
    size_t n = cap->links_cap;
    cap->links_cap = n ? 2 * n : 64;
    cap->links = xcalloc(cap->links_cap, sizeof *cap->links);
    for (size_t i = 0; i < n; i++)
      if (old[i].path)
        *link_slot(cap, old[i].ino) = old[i];
    free(old);
  }
  *link_slot(cap, ino) = (struct link){ino, path};
  cap->nlinks++;
}

/* name's path under the layer's root (malloc'd). */
static char *path_of(const struct capture *cap, const char *name) {
  return cap->path_len ? xasprintf("%s/%s", cap->path, name) : xstrdup(name);
}

/* An id of the sandbox's, from 0; any other as the id no sandbox maps. */
static uid_t shift(uid_t id, uid_t base) {
  return id >= base && id - base < HUTCH_ID_RANGE ? id - base : HUTCH_ID_RANGE;
}

/* The names in a directory, read before anything below it is opened, so
 * that a level of the walk holds two fds and no directory stream. */
static char **names_of(int dirfd, size_t *n, struct hutch_err *err) {
  int dup = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  DIR *d = dup >= 0 ? fdopendir(dup) : NULL;
  if (!d) {
    hutch_err_set(err, errno, "read directory");
    if (dup >= 0)
      close(dup);
    return NULL;
  }
  char **v = NULL;
  size_t cap = 0;
  *n = 0;
  for (struct dirent *e; (e = readdir(d));) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
      continue;
    if (*n + 1 >= cap)
      v = xrealloc(v, (cap = cap ? 2 * cap : 16) * sizeof *v);
    v[(*n)++] = xstrdup(e->d_name);
  }
  closedir(d);
  if (!v)
    v = xcalloc(1, sizeof *v);
  return v;
}

static void free_names(char **v, size_t n) {
  for (size_t i = 0; i < n; i++)
    free(v[i]);
  free(v);
}

/* Overlay's opaque-directory mark, and the user's own attributes. */
static bool xattr_kept(const char *name) {
  return strcmp(name, "trusted.overlay.opaque") == 0 || strncmp(name, "user.", 5) == 0;
}

static int copy_xattrs(int in, int out, const char *what, struct hutch_err *err) {
  ssize_t size = flistxattr(in, NULL, 0);
  if (size <= 0)
    return size == 0 || errno == ENOTSUP ? 0
                                         : hutch_err_set(err, errno, "%s: list attributes", what);
  _cleanup_free_ char *names = xmalloc((size_t)size);
  ssize_t n = flistxattr(in, names, (size_t)size);
  if (n < 0)
    return hutch_err_set(err, errno, "%s: list attributes", what);
  _cleanup_free_ char *value = xmalloc(XATTR_SIZE_MAX);
  for (char *name = names; name < names + n; name += strlen(name) + 1) {
    if (!xattr_kept(name))
      continue;
    ssize_t len = fgetxattr(in, name, value, XATTR_SIZE_MAX);
    if (len < 0)
      return hutch_err_set(err, errno, "%s: attribute %s", what, name);
    if (fsetxattr(out, name, value, (size_t)len, 0) < 0)
      return hutch_err_set(err, errno, "%s: attribute %s", what, name);
  }
  return 0;
}

/* Up to len bytes of in from off, to out at off: the bytes copied, or -1
 * with errno set. */
static ssize_t copy_range(int in, int out, off_t off, size_t len) {
  loff_t from = off, to = off;
  ssize_t n = copy_file_range(in, &from, out, &to, len, 0);
  if (n >= 0 || (errno != EXDEV && errno != EINVAL && errno != EOPNOTSUPP && errno != ENOSYS))
    return n;

  /* Across filesystems: sendfile writes at out's own offset. */
  from = off;
  if (lseek(out, off, SEEK_SET) < 0)
    return -1;
  return sendfile(out, in, &from, len);
}

/* The data of in, extent by extent: holes stay holes. */
static int copy_data(int in, int out, off_t size, struct capture *cap, const char *name) {
  for (off_t pos = 0; pos < size;) {
    off_t data = lseek(in, pos, SEEK_DATA);
    if (data < 0 && errno == ENXIO)
      break; /* only a hole is left */
    if (data < 0)
      return hutch_err_set(cap->err, errno, "%s: find data", name);
    off_t hole = lseek(in, data, SEEK_HOLE);
    if (hole < 0)
      return hutch_err_set(cap->err, errno, "%s: find data", name);

    for (off_t off = data; off < hole;) {
      ssize_t n = copy_range(in, out, off, (size_t)(hole - off));
      if (n <= 0)
        return hutch_err_set(cap->err, n < 0 ? errno : EIO, "%s: copy", name);
      off += n;
      cap->stats->bytes += (uint64_t)n;
      if (cap->stats->bytes > cap->max_bytes)
        return hutch_err_invalid(cap->err, "more data than its storage holds: it changed "
                                           "while being copied");
    }
    pos = hole;
  }

  if (ftruncate(out, size) < 0)
    return hutch_err_set(cap->err, errno, "%s: size", name);
  return 0;
}

static int copy_file(int sdir, int ddir, const char *name, const struct stat *st,
                     struct capture *cap) {
  /* A further link of a file copied already: a link again. */
  struct link *l = st->st_nlink > 1 && cap->links_cap ? link_slot(cap, st->st_ino) : NULL;
  if (l && l->path) {
    if (linkat(cap->root, l->path, ddir, name, 0) < 0)
      return hutch_err_set(cap->err, errno, "%s: link", name);
    return 0;
  }

  /* Non-blocking and checked against what was seen: a file swapped for a
   * fifo meanwhile (only if the sandbox were thawed) cannot hang the copy. */
  struct stat now;
  _cleanup_close_ int in =
      openat(sdir, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (in < 0 || fstat(in, &now) < 0)
    return hutch_err_set(cap->err, errno, "%s", name);
  if (!S_ISREG(now.st_mode) || now.st_ino != st->st_ino || now.st_dev != st->st_dev)
    return hutch_err_invalid(cap->err, "%s changed while being copied", name);

  _cleanup_close_ int out =
      openat(ddir, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (out < 0)
    return hutch_err_set(cap->err, errno, "%s", name);
  if (st->st_nlink > 1)
    link_add(cap, st->st_ino, path_of(cap, name));
  if (copy_data(in, out, st->st_size, cap, name) < 0)
    return -1;
  if (copy_xattrs(in, out, name, cap->err) < 0)
    return -1;

  if (fchown(out, shift(st->st_uid, cap->base), shift(st->st_gid, cap->base)) < 0)
    return hutch_err_set(cap->err, errno, "%s: owner", name);
  if (fchmod(out, st->st_mode & 01777) < 0)
    return hutch_err_set(cap->err, errno, "%s: owner", name);
  return 0;
}

static int copy_dir(int sdir, int ddir, int depth, struct capture *cap);

/* A directory and all below it, its owner and mode last. */
static int copy_subdir(int sdir, int ddir, const char *name, const struct stat *st, int depth,
                       struct capture *cap) {
  if (depth >= HUTCH_LAYER_MAX_DEPTH)
    return hutch_err_invalid(cap->err, "directories nest deeper than %d levels",
                             HUTCH_LAYER_MAX_DEPTH);
  if (mkdirat(ddir, name, 0700) < 0)
    return hutch_err_set(cap->err, errno, "%s", name);
  _cleanup_close_ int in = openat(sdir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  _cleanup_close_ int out = openat(ddir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (in < 0 || out < 0)
    return hutch_err_set(cap->err, errno, "%s", name);

  size_t len = cap->path_len;
  char *here = path_of(cap, name);
  free(cap->path);
  cap->path = here;
  cap->path_len = strlen(here);
  int sub = copy_dir(in, out, depth + 1, cap);
  cap->path_len = len; /* back to the parent's path */
  cap->path[len] = '\0';
  if (sub < 0)
    return -1;

  if (copy_xattrs(in, out, name, cap->err) < 0)
    return -1;
  if (fchown(out, shift(st->st_uid, cap->base), shift(st->st_gid, cap->base)) < 0)
    return hutch_err_set(cap->err, errno, "%s: owner", name);
  if (fchmod(out, st->st_mode & 07777) < 0)
    return hutch_err_set(cap->err, errno, "%s: owner", name);
  return 0;
}

static int copy_link(int sdir, int ddir, const char *name, struct capture *cap) {
  char target[PATH_MAX + 1];
  ssize_t n = readlinkat(sdir, name, target, sizeof target - 1);
  if (n < 0)
    return hutch_err_set(cap->err, errno, "%s", name);
  target[n] = '\0';
  if (symlinkat(target, ddir, name) < 0)
    return hutch_err_set(cap->err, errno, "%s", name);
  return 0;
}

static int copy_entry(int sdir, int ddir, const char *name, int depth, struct capture *cap) {
  struct stat st;
  if (fstatat(sdir, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
    return hutch_err_set(cap->err, errno, "%s", name);

  int r = 0;
  switch (st.st_mode & S_IFMT) {
  case S_IFREG:
    r = copy_file(sdir, ddir, name, &st, cap);
    break;
  case S_IFDIR:
    r = copy_subdir(sdir, ddir, name, &st, depth, cap);
    break;
  case S_IFLNK:
    r = copy_link(sdir, ddir, name, cap);
    break;
  case S_IFCHR:
    /* An overlay whiteout (0:0): what the sandbox deleted stays deleted.
     * No other device can be made in a sandbox; none is copied. */
    if (st.st_rdev != makedev(0, 0))
      return 0;
    if (mknodat(ddir, name, S_IFCHR | 0600, makedev(0, 0)) < 0)
      return hutch_err_set(cap->err, errno, "%s", name);
    break;
  case S_IFIFO:
    if (mkfifoat(ddir, name, st.st_mode & 0777) < 0)
      return hutch_err_set(cap->err, errno, "%s", name);
    break;
  default: /* sockets and devices are not data */
    return 0;
  }
  if (r < 0)
    return -1;

  cap->stats->files++;
  uid_t uid = shift(st.st_uid, cap->base), gid = shift(st.st_gid, cap->base);
  struct timespec times[2] = {st.st_atim, st.st_mtim};
  if (fchownat(ddir, name, uid, gid, AT_SYMLINK_NOFOLLOW) < 0)
    return hutch_err_set(cap->err, errno, "%s: owner", name);
  if (utimensat(ddir, name, times, AT_SYMLINK_NOFOLLOW) < 0)
    return hutch_err_set(cap->err, errno, "%s: owner", name);
  return 0;
}

static int copy_dir(int sdir, int ddir, int depth, struct capture *cap) {
  size_t n;
  char **names = names_of(sdir, &n, cap->err);
  if (!names)
    return -1;
  int r = 0;
  for (size_t i = 0; i < n && r == 0; i++)
    r = copy_entry(sdir, ddir, names[i], depth, cap);
  free_names(names, n);
  return r;
}

/* in's tree copied into the new directory dest, the top directory's own
 * attributes last. */
static int copy_into(int in, const char *dest, struct capture *cap) {
  _cleanup_close_ int root = open(dest, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (root < 0)
    return hutch_err_set(cap->err, errno, "layer %s", dest);
  cap->root = root;
  if (copy_dir(in, root, 0, cap) < 0)
    return -1;
  return copy_xattrs(in, root, "/", cap->err);
}

int hutch_layer_capture(int storage_fd, uid_t uid_base, const char *dest,
                        struct hutch_layer_stats *stats, struct hutch_err *err) {
  struct statfs sfs;
  memset(stats, 0, sizeof *stats);
  _cleanup_close_ int in =
      openat(storage_fd, "upper", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (in < 0)
    return hutch_err_set(err, errno, "the sandbox's writable layer");
  if (fstatfs(storage_fd, &sfs) < 0)
    return hutch_err_set(err, errno, "the sandbox's writable layer");

  if (mkdir(dest, 0755) < 0)
    return hutch_err_set(err, errno, "layer %s", dest);

  struct capture cap = {.base = uid_base,
                        .stats = stats,
                        .err = err,
                        .path = xstrdup(""),
                        .max_bytes = (uint64_t)sfs.f_blocks * (uint64_t)sfs.f_bsize};
  int r = copy_into(in, dest, &cap);
  for (size_t i = 0; i < cap.links_cap; i++)
    free(cap.links[i].path);
  free(cap.links);
  free(cap.path);

  if (r < 0) {
    struct hutch_err ignored = {0};
    hutch_layer_remove(dest, &ignored);
  }
  return r;
}

static int remove_below(int dirfd, int depth, struct hutch_err *err);

/* The directory name in dirfd, with everything in it. */
static int remove_subdir(int dirfd, const char *name, int depth, struct hutch_err *err) {
  int sub = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (sub < 0)
    return hutch_err_set(err, errno, "%s", name);
  int r;
  if (depth > HUTCH_LAYER_MAX_DEPTH)
    r = hutch_err_invalid(err, "%s: too deep", name);
  else
    r = remove_below(sub, depth + 1, err);
  close(sub);
  if (r < 0)
    return -1;

  if (unlinkat(dirfd, name, AT_REMOVEDIR) < 0)
    return hutch_err_set(err, errno, "%s", name);
  return 0;
}

static int remove_entry(int dirfd, const char *name, int depth, struct hutch_err *err) {
  struct stat st;
  if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
    return hutch_err_set(err, errno, "%s", name);
  if (S_ISDIR(st.st_mode))
    return remove_subdir(dirfd, name, depth, err);
  if (unlinkat(dirfd, name, 0) < 0)
    return hutch_err_set(err, errno, "%s", name);
  return 0;
}

static int remove_below(int dirfd, int depth, struct hutch_err *err) {
  size_t n;
  char **names = names_of(dirfd, &n, err);
  if (!names)
    return -1;
  int r = 0;
  for (size_t i = 0; i < n && r == 0; i++)
    r = remove_entry(dirfd, names[i], depth, err);
  free_names(names, n);
  return r;
}

int hutch_layer_remove(const char *dir, struct hutch_err *err) {
  _cleanup_close_ int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return errno == ENOENT ? 0 : hutch_err_set(err, errno, "%s", dir);
  if (remove_below(fd, 0, err) < 0)
    return -1;
  if (rmdir(dir) < 0)
    return hutch_err_set(err, errno, "%s", dir);
  return 0;
}

bool hutch_layer_dir_usable(const char *dir) {
  struct hutch_err err = {0};
  _cleanup_close_ int tree = open_tree(AT_FDCWD, dir, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
  _cleanup_close_ int userns = -1;
  if (tree >= 0)
    userns = hutch_spawn_idmap_userns(0, 0, HUTCH_UID_BASE, 1, &err);
  struct mount_attr a = {.attr_set = MOUNT_ATTR_IDMAP, .userns_fd = (uint64_t)userns};
  return userns >= 0 && mount_setattr(tree, "", AT_EMPTY_PATH, &a, sizeof a) == 0;
}
