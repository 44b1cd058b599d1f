/* COPY and ADD (build.h): files from the build context, or from an earlier
 * stage, written into a new layer directory under the store's tmp/, then
 * digested and committed. The context is the caller's: the named sources
 * resolve beneath it (openat2 RESOLVE_BENEATH: a link that leads out is
 * refused, never followed) and everything below is walked with O_NOFOLLOW,
 * links copied as links; a link in the context whose target leads out of
 * it fails the build, as Docker refuses such a context. Another stage is
 * read through a read-only overlay of its layers mounted in a child's
 * private mount namespace (build_from.c), so that whiteouts and opaque
 * directories mean what they mean in a sandbox, and its names resolve
 * inside its root (RESOLVE_IN_ROOT). Nothing copied keeps a setuid or
 * setgid bit; owners are 0:0 from the context, the stage's own from a
 * stage, or --chown's. */
#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "build.h"
#include "cleanup.h"
#include "layer.h"
#include "layout.h"
#include "util.h"

static int open_resolved(const struct copier *c, const char *path, struct hutch_err *err) {
  struct open_how how = {
      .flags = O_PATH | O_CLOEXEC,
      .resolve = (c->from_context ? RESOLVE_BENEATH : RESOLVE_IN_ROOT) | RESOLVE_NO_MAGICLINKS,
  };
  int fd = (int)syscall(SYS_openat2, c->src_root, *path ? path : ".", &how, sizeof how);
  if (fd >= 0)
    return fd;
  if (errno == EXDEV)
    return hutch_err_fail(err, HUTCH_ERR_INVALID, "context_escape",
                          "%s: a link leads out of the build context", path);
  if (errno == ENOENT || errno == ENOTDIR)
    return hutch_err_not_found(err, "%s: no such file in the %s", path,
                               c->from_context ? "build context" : "stage");
  return hutch_err_set(err, errno, "%s", path);
}

/* A relative link target's depth from the context's root, starting at the
 * link's own directory: below 0 leaves the context. */
static bool link_escapes(const char *rel, const char *target) {
  if (target[0] == '/')
    return true;
  int depth = 0;
  for (const char *p = rel; (p = strchr(p, '/')); p++)
    depth++;
  for (const char *t = target; *t;) {
    size_t n = strcspn(t, "/");
    if (n == 2 && strncmp(t, "..", 2) == 0)
      depth--;
    else if (n && !(n == 1 && t[0] == '.'))
      depth++;
    if (depth < 0)
      return true;
    t += n + (t[n] == '/');
  }
  return false;
}

/* What a copied file is owned by: --chown's ids, root from the context,
 * else the stage's own; an id no sandbox maps past the range. */
static void owner_of(const struct copier *c, const struct stat *st, uid_t *uid, gid_t *gid) {
  if (c->chown) {
    *uid = c->uid;
    *gid = c->gid;
  } else if (c->from_context) {
    *uid = 0;
    *gid = 0;
  } else {
    *uid = st->st_uid;
    *gid = st->st_gid;
  }
  if (*uid >= HUTCH_ID_RANGE)
    *uid = HUTCH_ID_RANGE;
  if (*gid >= HUTCH_ID_RANGE)
    *gid = HUTCH_ID_RANGE;
}

static int set_attrs(const struct copier *c, int ddir, const char *name, const struct stat *st,
                     struct hutch_err *err) {
  uid_t uid;
  gid_t gid;
  owner_of(c, st, &uid, &gid);
  struct timespec ts[2] = {{st->st_mtime, 0}, {st->st_mtime, 0}};
  mode_t mode = c->chmod >= 0 ? (mode_t)c->chmod : st->st_mode & 01777;

  if (fchownat(ddir, name, uid, gid, AT_SYMLINK_NOFOLLOW) < 0)
    return hutch_err_set(err, errno, "set the owner, mode and time of %s", name);
  if (!S_ISLNK(st->st_mode) && fchmodat(ddir, name, mode, 0) < 0)
    return hutch_err_set(err, errno, "set the owner, mode and time of %s", name);
  if (utimensat(ddir, name, ts, AT_SYMLINK_NOFOLLOW) < 0)
    return hutch_err_set(err, errno, "set the owner, mode and time of %s", name);
  return 0;
}

static int count(struct copier *c, uint64_t bytes, struct hutch_err *err) {
  c->bytes += bytes;
  if (++c->files > c->b->ctx->max_files || c->bytes > c->b->ctx->max_bytes)
    return hutch_err_fail(err, HUTCH_ERR_QUOTA, "too_large",
                          "the files copied pass the template's cap (%llu bytes, %llu files)",
                          (unsigned long long)c->b->ctx->max_bytes,
                          (unsigned long long)c->b->ctx->max_files);
  return 0;
}

/* Make room for name in ddir: whatever an earlier source put there goes,
 * a directory stays (sources merge into it). */
static int make_room(int ddir, const char *name, bool for_dir) {
  struct stat st;
  if (fstatat(ddir, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
    return 0;
  if (S_ISDIR(st.st_mode) && for_dir)
    return 1;
  if (S_ISDIR(st.st_mode)) {
    _cleanup_free_ char *p = xasprintf("/proc/self/fd/%d/%s", ddir, name);
    struct hutch_err e = {0};
    return hutch_layer_remove(p, &e);
  }
  return unlinkat(ddir, name, 0);
}

/* The size seen when the file was counted, no more: a file that grows
 * while it is copied cannot pass the cap. */
static int copy_data(int in, int ddir, const char *name, off_t size, struct hutch_err *err) {
  _cleanup_close_ int out =
      openat(ddir, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (out < 0)
    return hutch_err_set(err, errno, "create %s", name);

  off_t done = 0;
  while (done < size) {
    ssize_t n = copy_file_range(in, NULL, out, NULL, (size_t)(size - done), 0);
    if (n == 0)
      return 0;
    if (n > 0) {
      done += n;
      continue;
    }
    if (errno != EXDEV && errno != EINVAL && errno != ENOSYS && errno != EOPNOTSUPP)
      return hutch_err_set(err, errno, "copy %s", name);
    break;
  }

  /* Across filesystems, or a kernel without copy_file_range for them. */
  static char buf[1 << 16];
  while (done < size) {
    ssize_t n = read(in, buf, size - done < (off_t)sizeof buf ? (size_t)(size - done) : sizeof buf);
    if (n < 0 && errno == EINTR)
      continue;
    if (n == 0)
      break;
    if (n < 0 || write_all(out, buf, (size_t)n) < 0)
      return hutch_err_set(err, errno, "copy %s", name);
    done += n;
  }
  return 0;
}

static int copy_tree(struct copier *c, int sdir, const char *rel, int ddir, int depth,
                     struct hutch_err *err);

/* A stream of the directory at dirfd/path (dirfd itself for "."), or NULL
 * with err set. */
static DIR *dir_stream(int dirfd, const char *path, const char *what, struct hutch_err *err) {
  int fd = openat(dirfd, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  DIR *d = fd < 0 ? NULL : fdopendir(fd);
  if (!d) {
    hutch_err_set(err, errno, "read %s", *what ? what : ".");
    if (fd >= 0)
      close(fd);
  }
  return d;
}

/* A directory of the walk, sdir/name to ddir/name (merged into one there
 * already): made, walked, its attributes last. */
static int copy_dir_entry(struct copier *c, int sdir, const char *name, const char *rel, int ddir,
                          int depth, const struct stat *st, struct hutch_err *err) {
  _cleanup_close_ int s = openat(sdir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (s < 0)
    return hutch_err_set(err, errno, "open %s", rel);
  int room = make_room(ddir, name, true);
  if (room < 0)
    return hutch_err_set(err, errno, "create %s", rel);
  if (room == 0 && mkdirat(ddir, name, 0700) < 0)
    return hutch_err_set(err, errno, "create %s", rel);

  _cleanup_close_ int d = openat(ddir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (d < 0)
    return hutch_err_set(err, errno, "open %s", rel);
  if (count(c, 0, err) < 0)
    return -1;
  if (copy_tree(c, s, rel, d, depth + 1, err) < 0)
    return -1;
  return set_attrs(c, ddir, name, st, err);
}

/* A symbolic link of the walk, copied as the link: one from the context
 * may not lead out of it. */
static int copy_link_entry(struct copier *c, int sdir, const char *name, const char *rel, int ddir,
                           const struct stat *st, struct hutch_err *err) {
  char target[4096];
  ssize_t n = readlinkat(sdir, name, target, sizeof target - 1);
  if (n < 0)
    return hutch_err_set(err, errno, "readlink %s", rel);
  target[n] = '\0';
  if (c->from_context && link_escapes(rel, target))
    return hutch_err_fail(err, HUTCH_ERR_INVALID, "context_escape",
                          "%s -> %s: a link in the build context leads out of it", rel, target);

  if (symlinkat(target, ddir, name) < 0)
    return hutch_err_set(err, errno, "create %s", rel);
  if (count(c, 0, err) < 0)
    return -1;
  return set_attrs(c, ddir, name, st, err);
}

/* One entry of a walked directory: sdir/name to ddir/name. rel is its
 * path from the source's root (for .dockerignore and the link check). */
static int copy_entry(struct copier *c, int sdir, const char *name, const char *rel, int ddir,
                      int depth, struct hutch_err *err) {
  struct stat st;
  if (fstatat(sdir, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
    return hutch_err_set(err, errno, "stat %s", rel);
  /* An excluded directory is still walked when an exception (`!dir/keep`)
   * may bring back something inside it. */
  if (c->from_context && build_ignored(c->b->ignore, rel) &&
      !(S_ISDIR(st.st_mode) && build_ignore_has_exceptions(c->b->ignore)))
    return 0;

  if (S_ISDIR(st.st_mode))
    return copy_dir_entry(c, sdir, name, rel, ddir, depth, &st, err);
  if (!S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode))
    return 0; /* devices, fifos and sockets are no file to copy */
  if (make_room(ddir, name, false) < 0)
    return hutch_err_set(err, errno, "replace %s", rel);
  if (S_ISLNK(st.st_mode))
    return copy_link_entry(c, sdir, name, rel, ddir, &st, err);

  _cleanup_close_ int in = openat(sdir, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (in < 0)
    return hutch_err_set(err, errno, "open %s", rel);
  if (count(c, (uint64_t)st.st_size, err) < 0)
    return -1;
  if (copy_data(in, ddir, name, st.st_size, err) < 0)
    return -1;
  return set_attrs(c, ddir, name, &st, err);
}

static int copy_tree(struct copier *c, int sdir, const char *rel, int ddir, int depth,
                     struct hutch_err *err) {
  if (depth > HUTCH_LAYER_MAX_DEPTH)
    return hutch_err_invalid(err, "%s: deeper than %d directories", rel, HUTCH_LAYER_MAX_DEPTH);
  DIR *d = dir_stream(sdir, ".", rel, err);
  if (!d)
    return -1;
  int r = 0;
  struct dirent *e;
  while (r == 0 && (e = readdir(d))) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
      continue;
    _cleanup_free_ char *sub = *rel ? xasprintf("%s/%s", rel, e->d_name) : xstrdup(e->d_name);
    r = copy_entry(c, sdir, e->d_name, sub, ddir, depth, err);
  }
  closedir(d);
  return r;
}

/* One directory of copy_mkdirs, name in fd, made unless it is there: as
 * root (or --chown's ids, for the last), time 0. */
static int mkdir_part(const struct copier *c, int fd, const char *name, bool last, const char *dest,
                      struct hutch_err *err) {
  if (mkdirat(fd, name, 0755) < 0)
    return 0;
  struct timespec ts[2] = {{0, 0}, {0, 0}};
  uid_t u = last && c->chown ? c->uid : 0;
  gid_t g = last && c->chown ? c->gid : 0;
  if (fchownat(fd, name, u, g, AT_SYMLINK_NOFOLLOW) < 0)
    return hutch_err_set(err, errno, "destination %s", dest);
  if (utimensat(fd, name, ts, 0) < 0)
    return hutch_err_set(err, errno, "destination %s", dest);
  return 0;
}

/* The directory dest (absolute) in the layer, made with its parents (as
 * root, 0755, time 0) where missing; owned by --chown's ids when made. */
static int copy_mkdirs(struct copier *c, const char *dest, struct hutch_err *err) {
  int fd = openat(c->dst_root, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  for (const char *p = dest; fd >= 0 && *p;) {
    while (*p == '/')
      p++;
    size_t n = strcspn(p, "/");
    if (!n)
      break;
    char name[256];
    if (n >= sizeof name || (n <= 2 && strncmp(p, "..", n) == 0)) {
      close(fd);
      return hutch_err_invalid(err, "destination %s: a bad path", dest);
    }
    memcpy(name, p, n), name[n] = '\0';
    p += n;
    bool last = !p[strspn(p, "/")];
    if (mkdir_part(c, fd, name, last, dest, err) < 0) {
      close(fd);
      return -1;
    }

    int next = openat(fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    close(fd);
    if (next < 0 && errno == ENOTDIR)
      return hutch_err_invalid(err, "destination %s: %s is a file", dest, name);
    fd = next;
  }

  if (fd < 0)
    return hutch_err_set(err, errno, "destination %s", dest);
  return fd;
}

/* ADD of a local tar archive (any compression libarchive reads): its
 * entries unpacked under dest, which they may not leave (no absolute
 * names, no "..", no link followed on the way, for a hard link's target
 * too: libarchive's secure options), regular files, directories, symbolic
 * and hard links only, no setuid bits, owned by root or --chown. *was
 * false when in is no archive. */
/* One entry of an ADD archive, written by w: regular files, directories,
 * symbolic and hard links only, their modes without setuid bits (or
 * --chmod's), owned by root or --chown. */
static int add_entry(struct copier *c, struct archive *a, struct archive *w,
                     struct archive_entry *e, struct hutch_err *err) {
  mode_t t = archive_entry_filetype(e);
  bool hardlink = archive_entry_hardlink(e) != NULL; /* its target checked as a name is */
  if (t != AE_IFREG && t != AE_IFDIR && t != AE_IFLNK && !hardlink)
    return 0;
  archive_entry_set_perm(e, c->chmod >= 0 ? (mode_t)c->chmod : archive_entry_perm(e) & 01777);
  archive_entry_set_uid(e, c->chown ? c->uid : 0);
  archive_entry_set_gid(e, c->chown ? c->gid : 0);
  if (count(c, (uint64_t)archive_entry_size(e), err) < 0)
    return -1;
  if (archive_write_header(w, e) < ARCHIVE_WARN)
    return hutch_err_invalid(err, "ADD: %s: %s", archive_entry_pathname(e),
                             archive_error_string(w));

  const void *buf;
  size_t n;
  la_int64_t off;
  int s;
  while ((s = archive_read_data_block(a, &buf, &n, &off)) == ARCHIVE_OK)
    if (archive_write_data_block(w, buf, n, off) < ARCHIVE_WARN)
      break;
  if (s != ARCHIVE_EOF)
    return hutch_err_invalid(err, "ADD: %s: %s", archive_entry_pathname(e),
                             archive_error_string(a));
  if (archive_write_finish_entry(w) < ARCHIVE_WARN)
    return hutch_err_invalid(err, "ADD: %s: %s", archive_entry_pathname(e),
                             archive_error_string(w));
  return 0;
}

/* Every entry of a, from e (read already) on. */
static int add_entries(struct copier *c, struct archive *a, struct archive *w,
                       struct archive_entry *e, struct hutch_err *err) {
  int s;
  do {
    if (add_entry(c, a, w, e, err) < 0)
      return -1;
  } while ((s = archive_read_next_header(a, &e)) == ARCHIVE_OK);
  if (s != ARCHIVE_EOF)
    return hutch_err_invalid(err, "ADD: a damaged archive: %s", archive_error_string(a));
  return 0;
}

static int add_archive(struct copier *c, int in, const char *dest, bool *was,
                       struct hutch_err *err) {
  struct archive *a = archive_read_new();
  archive_read_support_filter_all(a);
  archive_read_support_format_tar(a);
  archive_read_support_format_gnutar(a);
  struct archive_entry *e;
  *was = archive_read_open_fd(a, in, 1 << 16) == ARCHIVE_OK &&
         archive_read_next_header(a, &e) == ARCHIVE_OK;
  if (!*was) {
    archive_read_free(a);
    if (lseek(in, 0, SEEK_SET) < 0)
      return hutch_err_set(err, errno, "ADD: rewind");
    return 0;
  }

  _cleanup_close_ int d = copy_mkdirs(c, dest, err);
  if (d < 0) {
    archive_read_free(a);
    return -1;
  }
  _cleanup_close_ int cwd = open(".", O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (cwd < 0 || fchdir(d) < 0) {
    archive_read_free(a);
    return hutch_err_set(err, errno, "ADD: enter %s", dest);
  }

  struct archive *w = archive_write_disk_new();
  /* Owners as set below (root, or --chown's); no ARCHIVE_EXTRACT_PERM, so
   * no setuid bit comes back. */
  archive_write_disk_set_options(
      w, ARCHIVE_EXTRACT_TIME | ARCHIVE_EXTRACT_OWNER | ARCHIVE_EXTRACT_SECURE_SYMLINKS |
             ARCHIVE_EXTRACT_SECURE_NODOTDOT | ARCHIVE_EXTRACT_SECURE_NOABSOLUTEPATHS);
  mode_t old = umask(022);
  int r = add_entries(c, a, w, e, err);
  umask(old);

  if (fchdir(cwd) < 0 && r == 0)
    r = hutch_err_set(err, errno, "ADD: leave %s", dest);
  archive_write_free(w);
  archive_read_free(a);
  return r;
}

static int copy_file_at(struct copier *c, int in, const char *path, const struct stat *st, int ddir,
                        const char *name, struct hutch_err *err) {
  if (make_room(ddir, name, false) < 0)
    return hutch_err_set(err, errno, "replace %s", name);
  if (count(c, (uint64_t)st->st_size, err) < 0)
    return hutch_err_wrap(err, "%s", path);
  if (copy_data(in, ddir, name, st->st_size, err) < 0)
    return hutch_err_wrap(err, "%s", path);
  return set_attrs(c, ddir, name, st, err);
}

/* A named file source (in, opened) to dest: into it (dest_dir), or as it. */
static int copy_file_source(struct copier *c, int in, const char *path, const struct stat *st,
                            const char *dest, bool dest_dir, struct hutch_err *err) {
  const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
  _cleanup_free_ char *parent = xstrdup(dest);
  const char *name = base;
  if (!dest_dir) {
    char *slash = strrchr(parent, '/');
    name = dest + (slash - parent) + 1;
    slash[1] = '\0';
  }

  _cleanup_close_ int d = copy_mkdirs(c, parent, err);
  if (d < 0)
    return -1;
  return copy_file_at(c, in, path, st, d, name, err);
}

/* One named source, resolved, to dest: a directory's contents into it; a
 * file into it (dest_dir) or as it; under ADD, an archive unpacked in it. */
static int copy_source(struct copier *c, const char *path, const char *dest, bool dest_dir,
                       struct hutch_err *err) {
  if (c->from_context && *path && build_ignored(c->b->ignore, path))
    return hutch_err_not_found(err, "%s: excluded by .dockerignore", path);
  _cleanup_close_ int src = open_resolved(c, path, err);
  if (src < 0)
    return -1;
  struct stat st;
  if (fstat(src, &st) < 0)
    return hutch_err_set(err, errno, "stat %s", path);
  if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode))
    return hutch_err_invalid(err, "%s: not a file or directory", path);

  /* Reopened through the O_PATH fd: the very file resolved, no path walked again. */
  _cleanup_free_ char *proc = xasprintf("/proc/self/fd/%d", src);
  _cleanup_close_ int in =
      open(proc, O_RDONLY | O_NONBLOCK | O_CLOEXEC | (S_ISDIR(st.st_mode) ? O_DIRECTORY : 0));
  if (in < 0)
    return hutch_err_set(err, errno, "open %s", path);

  if (S_ISDIR(st.st_mode)) {
    _cleanup_close_ int d = copy_mkdirs(c, dest, err);
    if (d < 0)
      return -1;
    return copy_tree(c, in, path, d, 0, err);
  }

  if (c->add) {
    bool was = false;
    int r = add_archive(c, in, dest, &was, err);
    if (r < 0 || was)
      return r;
  }
  return copy_file_source(c, in, path, &st, dest, dest_dir, err);
}

/* A source path as given, relative to the source's root: "./" parts and
 * leading '/' dropped, ".." refused where it would leave the root. */
static char *clean_source(const char *s, struct hutch_err *err) {
  char *out = xstrdup("");
  for (const char *p = s; *p;) {
    size_t n = strcspn(p, "/");
    if (n == 2 && strncmp(p, "..", 2) == 0) {
      char *slash = strrchr(out, '/');
      if (!*out) {
        free(out);
        hutch_err_fail(err, HUTCH_ERR_INVALID, "context_escape", "%s: outside the build context",
                       s);
        return NULL;
      }
      *(slash ? slash : out) = '\0';
    } else if (n && !(n == 1 && p[0] == '.')) {
      char *next = *out ? xasprintf("%s/%.*s", out, (int)n, p) : xasprintf("%.*s", (int)n, p);
      free(out);
      out = next;
    }
    p += n + (p[n] == '/');
  }
  return out;
}

/* Whether dir/name, a glob's match at rel, is a link that leads to
 * nothing. */
static bool dangling(const struct copier *c, int dir, const char *name, const char *rel) {
  struct stat st;
  struct hutch_err none = {0};
  if (fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISLNK(st.st_mode))
    return false;
  int fd = open_resolved(c, rel, &none);
  if (fd >= 0)
    close(fd);
  return fd < 0 && none.kind == HUTCH_ERR_NOT_FOUND;
}

/* Such a match is copied as the link, as a link inside a copied directory
 * is (and under the same check that it stays in the context): E2B's
 * builds copy every match of a folder over a folder holding one. */
static int copy_dangling(struct copier *c, int dir, const char *name, const char *rel,
                         const char *dest, struct hutch_err *err) {
  _cleanup_close_ int d = copy_mkdirs(c, dest, err);
  if (d < 0)
    return -1;
  return copy_entry(c, dir, name, rel, d, 0, err);
}

/* A glob in the source's last name: each match, copied as if named (a link
 * that leads nowhere, as the link). */
static int copy_glob(struct copier *c, const char *path, const char *dest, size_t *matched,
                     struct hutch_err *err) {
  const char *slash = strrchr(path, '/');
  _cleanup_free_ char *dir = slash ? xasprintf("%.*s", (int)(slash - path), path) : xstrdup("");
  const char *pat = slash ? slash + 1 : path;
  if (strpbrk(dir, "*?["))
    return hutch_err_invalid(err, "%s: a wildcard is only taken in the last name", path);

  _cleanup_close_ int dfd = open_resolved(c, dir, err);
  if (dfd < 0)
    return -1;
  _cleanup_free_ char *proc = xasprintf("/proc/self/fd/%d", dfd);
  DIR *d = dir_stream(AT_FDCWD, proc, dir, err);
  if (!d)
    return -1;

  int r = 0;
  struct dirent *e;
  while (r == 0 && (e = readdir(d))) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0 || fnmatch(pat, e->d_name, 0))
      continue;
    _cleanup_free_ char *sub = *dir ? xasprintf("%s/%s", dir, e->d_name) : xstrdup(e->d_name);
    if (c->from_context && build_ignored(c->b->ignore, sub))
      continue;
    (*matched)++;
    if (dangling(c, dirfd(d), e->d_name, sub))
      r = copy_dangling(c, dirfd(d), e->d_name, sub, dest, err);
    else
      r = copy_source(c, sub, dest, true, err);
  }
  closedir(d);
  return r;
}

int build_copy_sources(struct copier *c, const struct copy_req *req, struct hutch_err *err) {
  size_t n = json_array_size(req->srcs);
  size_t dl = strlen(req->dest);
  bool dest_dir = n > 1 || req->dest[dl - 1] == '/';
  for (size_t i = 0; i < n; i++)
    dest_dir |= strpbrk(json_string_value(json_array_get(req->srcs, i)), "*?[") != NULL;

  for (size_t i = 0; i < n; i++) {
    const char *raw = json_string_value(json_array_get(req->srcs, i));
    if (req->add && strstr(raw, "://"))
      return hutch_err_fail(err, HUTCH_ERR_UNSUPPORTED, "unsupported",
                            "ADD %s: URLs are not supported (download in a RUN step)", raw);
    _cleanup_free_ char *path = clean_source(raw, err);
    if (!path)
      return -1;
    size_t matched = 0;
    if (strpbrk(path, "*?[")) {
      if (copy_glob(c, path, req->dest, &matched, err) < 0)
        return -1;
      if (!matched)
        return hutch_err_not_found(err, "%s: no file matches", raw);
    } else if (copy_source(c, path, req->dest, dest_dir, err) < 0) {
      return -1;
    }
  }
  return 0;
}

/* Every directory's time to 0 once the layer is full: writing into a
 * directory changes its time, so times set on the way would depend on
 * the order of the copy, and the layer's digest must depend only on what
 * was copied (the same files, the same layer). */
static int zero_dir_times(int dirfd, int depth, struct hutch_err *err) {
  if (depth > HUTCH_LAYER_MAX_DEPTH)
    return hutch_err_invalid(err, "deeper than %d directories", HUTCH_LAYER_MAX_DEPTH);
  DIR *d = dir_stream(dirfd, ".", "the new layer", err);
  if (!d)
    return -1;
  int r = 0;
  struct dirent *e;
  while (r == 0 && (e = readdir(d))) {
    if (e->d_type != DT_DIR || strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
      continue;
    _cleanup_close_ int sub =
        openat(dirfd, e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    struct timespec ts[2] = {{0, 0}, {0, 0}};
    if (sub < 0)
      r = hutch_err_set(err, errno, "open %s", e->d_name);
    else
      r = zero_dir_times(sub, depth + 1, err);
    if (r == 0 && utimensat(dirfd, e->d_name, ts, AT_SYMLINK_NOFOLLOW) < 0)
      r = hutch_err_set(err, errno, "time of %s", e->d_name);
  }
  closedir(d);
  return r;
}

/* The new layer's files, under c->dst_root: req's sources (from the
 * context or from a stage), or with none the directory req->dest alone. */
static int fill_layer(struct copier *c, const struct copy_req *req, const char *tmp,
                      struct hutch_err *err) {
  if (!req->srcs) {
    int d = copy_mkdirs(c, req->dest, err);
    if (d < 0)
      return -1;
    return close(d);
  }
  if (req->from)
    return build_copy_from_stage(c, req, tmp, err);
  return build_copy_sources(c, req, err);
}

/* The layer directory made, filled, and its directories' times zeroed. */
static int stage_layer(struct copier *c, const struct copy_req *req, const char *tmp,
                       const char *layer, struct hutch_err *err) {
  if (mkdir(layer, 0755) < 0)
    return hutch_err_set(err, errno, "create %s", layer);
  c->dst_root = open(layer, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (c->dst_root < 0)
    return hutch_err_set(err, errno, "open %s", layer);
  if (fill_layer(c, req, tmp, err) < 0)
    return -1;
  return zero_dir_times(c->dst_root, 0, err);
}

/* Fill a new layer under tmp/ (req's sources, or with none the directory
 * req->dest alone) and commit it. */
static int make_layer(struct copier *c, const struct copy_req *req, struct step_result *res,
                      struct hutch_err *err) {
  _cleanup_free_ char *tmp = hutch_images_tmpdir(&c->b->ctx->store, err);
  if (!tmp)
    return -1;
  _cleanup_free_ char *layer = xasprintf("%s/layer", tmp);
  int r = stage_layer(c, req, tmp, layer, err);
  if (c->dst_root >= 0)
    close(c->dst_root);

  struct layer_sum sum = {.max_bytes = build_bytes_left(c->b)};
  if (r == 0)
    r = layertar_commit_staged(c->b->ctx, layer, &sum, &res->cached, err);
  if (r == 0) {
    memcpy(res->hex, sum.hex, 65);
    res->bytes = sum.bytes;
  }

  struct hutch_err rerr = {0};
  hutch_layer_remove(tmp, &rerr);
  return r;
}

int build_copy(struct build *b, const struct stage *st, const struct copy_req *req,
               struct step_result *res, struct hutch_err *err) {
  struct copier c = {.b = b,
                     .src_root = b->context_fd,
                     .from_context = !req->from,
                     .add = req->add,
                     .dst_root = -1,
                     .chmod = req->chmod};
  if (req->chown && build_chown(b, st, req->chown, &c.uid, &c.gid, err) < 0)
    return -1;
  c.chown = req->chown != NULL;
  return make_layer(&c, req, res, err);
}

int build_mkdir_layer(struct build *b, const char *path, struct step_result *res,
                      struct hutch_err *err) {
  struct copy_req req = {.dest = path, .chmod = -1};
  struct copier c = {.b = b, .dst_root = -1, .chmod = -1};
  return make_layer(&c, &req, res, err);
}
