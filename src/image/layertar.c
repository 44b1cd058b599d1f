/* A layer directory as its canonical tar, and its digest (layertar.h):
 * the one writer both export and the builder use. The tree is the store's
 * own, but made from what a build's RUN step or a hostile archive left:
 * every name is opened relative to its parent, never followed, and only
 * the kinds a layer may hold are written. */
#include "layertar.h"

#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "cleanup.h"
#include "digest.h"
#include "layer.h"
#include "util.h"

/* Files with more than one link: the first one's path, by inode. */
struct seen {
  ino_t ino;
  char *path;
};

struct layer_tar {
  struct archive *a;
  struct seen *seen;
  size_t nseen;
  struct layer_sum *sum;
  struct hutch_err *err;
};

static int put(struct layer_tar *t, struct archive_entry *e, const char *path) {
  if (archive_write_header(t->a, e) < ARCHIVE_WARN)
    return hutch_err_set(t->err, EIO, "%.200s: %s", path, archive_error_string(t->a));
  t->sum->files++;
  return 0;
}

/* An empty file entry: a whiteout in OCI's form. */
static int put_marker(struct layer_tar *t, const char *path, const struct stat *st) {
  struct archive_entry *e = archive_entry_new();
  archive_entry_set_pathname(e, path);
  archive_entry_set_filetype(e, AE_IFREG);
  archive_entry_set_perm(e, 0);
  archive_entry_set_size(e, 0);
  archive_entry_set_mtime(e, st->st_mtim.tv_sec, st->st_mtim.tv_nsec);
  int rc = put(t, e, path);
  archive_entry_free(e);
  return rc;
}

static void add_xattrs(struct archive_entry *e, int fd) {
  char names[65536];
  ssize_t n = flistxattr(fd, names, sizeof names);
  _cleanup_free_ char *value = xmalloc(XATTR_SIZE_MAX);
  for (char *name = names; n > 0 && name < names + n; name += strlen(name) + 1) {
    if (strncmp(name, "user.", 5) != 0)
      continue;
    ssize_t len = fgetxattr(fd, name, value, XATTR_SIZE_MAX);
    if (len >= 0)
      archive_entry_xattr_add_entry(e, name, value, (size_t)len);
  }
}

static int put_data(struct layer_tar *t, int fd, const char *path) {
  char buf[65536];
  for (ssize_t n; (n = read(fd, buf, sizeof buf)) != 0;) {
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      return hutch_err_set(t->err, errno, "read %.200s", path);
    if (archive_write_data(t->a, buf, (size_t)n) != n)
      return hutch_err_set(t->err, EIO, "%.200s: %s", path, archive_error_string(t->a));
  }
  return 0;
}

static int tar_dir(struct layer_tar *t, int dirfd, const char *rel, int depth);

/* A regular file: its data, or a link to the first path of its inode. */
static int tar_file(struct layer_tar *t, struct archive_entry *e, int fd, const struct stat *st,
                    const char *path) {
  if (st->st_nlink > 1) {
    for (size_t i = 0; i < t->nseen; i++)
      if (t->seen[i].ino == st->st_ino) {
        archive_entry_set_filetype(e, AE_IFREG);
        archive_entry_set_hardlink(e, t->seen[i].path);
        archive_entry_set_size(e, 0);
        return put(t, e, path);
      }
    t->seen = xrealloc(t->seen, (t->nseen + 1) * sizeof *t->seen);
    t->seen[t->nseen++] = (struct seen){st->st_ino, xstrdup(path)};
  }

  /* Checked before a byte is read: a sparse terabyte made in a RUN step
   * would otherwise be read, hashed and written whole. */
  t->sum->bytes += (uint64_t)st->st_size;
  if (t->sum->max_bytes && t->sum->bytes > t->sum->max_bytes)
    return hutch_err_fail(t->err, HUTCH_ERR_QUOTA, "too_large",
                          "%.200s: the layer's files pass the cap of %llu bytes (a sparse file "
                          "counts whole)",
                          path, (unsigned long long)t->sum->max_bytes);

  archive_entry_set_filetype(e, AE_IFREG);
  archive_entry_set_size(e, st->st_size);
  add_xattrs(e, fd);
  if (put(t, e, path) < 0)
    return -1;
  return put_data(t, fd, path);
}

/* A directory, then (overlay's opaque mark) OCI's opaque whiteout in it,
 * then what it holds. */
static int tar_directory(struct layer_tar *t, struct archive_entry *e, int fd,
                         const struct stat *st, const char *path, int depth) {
  char opaque[2];
  archive_entry_set_filetype(e, AE_IFDIR);
  add_xattrs(e, fd);
  if (put(t, e, path) < 0)
    return -1;
  if (fgetxattr(fd, "trusted.overlay.opaque", opaque, sizeof opaque) == 1 && opaque[0] == 'y') {
    _cleanup_free_ char *wh = xasprintf("%s/.wh..wh..opq", path);
    if (put_marker(t, wh, st) < 0)
      return -1;
  }
  return tar_dir(t, fd, path, depth + 1);
}

/* What entry e (its name, owner, mode and time set) holds, by st's type:
 * a link's target, a fifo, a directory and what is in it, a file's data. */
static int tar_typed(struct layer_tar *t, struct archive_entry *e, int dirfd, const char *name,
                     const struct stat *st, const char *path, int depth) {
  if (S_ISLNK(st->st_mode)) {
    char target[PATH_MAX];
    ssize_t n = readlinkat(dirfd, name, target, sizeof target - 1);
    if (n < 0)
      return hutch_err_set(t->err, errno, "%.200s: not a file a layer holds", path);
    target[n] = '\0';
    archive_entry_set_filetype(e, AE_IFLNK);
    archive_entry_set_symlink(e, target);
    return put(t, e, path);
  }
  if (S_ISFIFO(st->st_mode)) {
    archive_entry_set_filetype(e, AE_IFIFO);
    return put(t, e, path);
  }
  if (!S_ISDIR(st->st_mode) && !S_ISREG(st->st_mode))
    return hutch_err_set(t->err, EINVAL, "%.200s: not a file a layer holds", path);

  int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY);
  if (fd < 0)
    return hutch_err_set(t->err, errno, "%.200s", path);
  int rc;
  if (S_ISDIR(st->st_mode))
    rc = tar_directory(t, e, fd, st, path, depth);
  else
    rc = tar_file(t, e, fd, st, path);
  close(fd);
  return rc;
}

static int tar_entry(struct layer_tar *t, int dirfd, const char *name, const char *path,
                     int depth) {
  struct stat st;
  if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
    return hutch_err_set(t->err, errno, "%.200s", path);
  if (S_ISCHR(st.st_mode) && st.st_rdev == makedev(0, 0)) {
    const char *slash = strrchr(path, '/');
    _cleanup_free_ char *wh =
        xasprintf("%.*s%s.wh.%s", slash ? (int)(slash - path) : 0, path, slash ? "/" : "", name);
    return put_marker(t, wh, &st);
  }

  /* OCI's tar names whiteouts ".wh.NAME": a file of its own named so
   * (a RUN step may make one) would give the same tar, so the same layer
   * name, as a whiteout of NAME, and the store would take one for the
   * other (layers are shared by that name); exported, it would be read
   * back as a whiteout. A layer holds no such file. */
  if (strncmp(name, ".wh.", 4) == 0)
    return hutch_err_fail(t->err, HUTCH_ERR_INVALID, "bad_layer",
                          "%.200s: a file named .wh.* would be read as a whiteout", path);

  struct archive_entry *e = archive_entry_new();
  archive_entry_set_pathname(e, path);
  archive_entry_set_uid(e, st.st_uid);
  archive_entry_set_gid(e, st.st_gid);
  archive_entry_set_perm(e, st.st_mode & 07777);
  archive_entry_set_mtime(e, st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
  int rc = tar_typed(t, e, dirfd, name, &st, path, depth);
  archive_entry_free(e);
  return rc;
}

static int by_name(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* dirfd's names but . and .., sorted (malloc'd, *n of them): 0, or -1
 * with errno set. */
static int sorted_names(int dirfd, char ***names, size_t *n) {
  *names = NULL;
  *n = 0;
  int fd = dup(dirfd);
  DIR *d = fd < 0 ? NULL : fdopendir(fd);
  if (!d) {
    int e = errno;
    if (fd >= 0)
      close(fd);
    errno = e;
    return -1;
  }

  for (struct dirent *de; (de = readdir(d));) {
    if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
      continue;
    *names = xrealloc(*names, (*n + 1) * sizeof **names);
    (*names)[(*n)++] = xstrdup(de->d_name);
  }
  closedir(d);
  if (*n)
    qsort(*names, *n, sizeof **names, by_name);
  return 0;
}

/* dirfd's entries, sorted: the same layer gives the same tar. */
static int tar_dir(struct layer_tar *t, int dirfd, const char *rel, int depth) {
  if (depth > HUTCH_LAYER_MAX_DEPTH)
    return hutch_err_set(t->err, ELOOP, "%.200s: too deep", rel);
  char **names;
  size_t n;
  if (sorted_names(dirfd, &names, &n) < 0)
    return hutch_err_set(t->err, errno, "%.200s", rel);

  int rc = 0;
  for (size_t i = 0; i < n; i++) {
    if (rc == 0) {
      _cleanup_free_ char *path = *rel ? xasprintf("%s/%s", rel, names[i]) : xstrdup(names[i]);
      rc = tar_entry(t, dirfd, names[i], path, depth);
    }
    free(names[i]);
  }
  free(names);
  return rc;
}

int layertar_write(int root, struct archive *a, struct layer_sum *sum, struct hutch_err *err) {
  struct layer_tar t = {.a = a, .sum = sum, .err = err};
  sum->bytes = sum->files = 0;
  int rc = tar_dir(&t, root, "", 0);
  for (size_t i = 0; i < t.nseen; i++)
    free(t.seen[i].path);
  free(t.seen);
  return rc;
}

static la_ssize_t hash_write(struct archive *a, void *ctx, const void *buf, size_t n) {
  (void)a;
  return EVP_DigestUpdate(ctx, buf, n) == 1 ? (la_ssize_t)n : -1;
}

/* a, a pax tar writer into md's sha256: 0, or -1. */
static int open_hash_writer(struct archive *a, EVP_MD_CTX *md) {
  if (EVP_DigestInit_ex(md, EVP_sha256(), NULL) != 1)
    return -1;
  if (archive_write_set_format_pax_restricted(a) != ARCHIVE_OK)
    return -1;
  if (archive_write_open2(a, md, NULL, hash_write, NULL, NULL) != ARCHIVE_OK)
    return -1;
  return 0;
}

int layertar_digest(int dirfd, struct layer_sum *sum, struct hutch_err *err) {
  EVP_MD_CTX *md = EVP_MD_CTX_new();
  struct archive *a = archive_write_new();
  if (!md || !a || open_hash_writer(a, md) < 0) {
    hutch_err_set(err, 0, "tar digest: %s", a ? archive_error_string(a) : "out of memory");
    archive_write_free(a);
    EVP_MD_CTX_free(md);
    return -1;
  }

  int r = layertar_write(dirfd, a, sum, err);
  if (archive_write_close(a) != ARCHIVE_OK && r == 0)
    r = hutch_err_set(err, 0, "tar digest: %s", archive_error_string(a));
  archive_write_free(a);

  unsigned char d[32];
  unsigned len = 0;
  if (r == 0 && EVP_DigestFinal_ex(md, d, &len) != 1)
    r = hutch_err_set(err, 0, "sha256 failed");
  EVP_MD_CTX_free(md);
  if (r == 0)
    digest_hex(d, sum->hex);
  return r;
}

int layertar_commit_staged(struct image_ctx *ctx, const char *staged, struct layer_sum *sum,
                           bool *existed, struct hutch_err *err) {
  _cleanup_close_ int fd = open(staged, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return hutch_err_set(err, errno, "open %s", staged);
  if (layertar_digest(fd, sum, err) < 0)
    return -1;
  *existed = hutch_images_layer_exists(&ctx->store, sum->hex);

  char diff_id[80];
  snprintf(diff_id, sizeof diff_id, "sha256:%s", sum->hex);
  json_t *meta = json_pack("{s:I,s:I,s:s}", "size", (json_int_t)sum->bytes, "files",
                           (json_int_t)sum->files, "diff_id", diff_id);
  int r = hutch_images_layer_commit(&ctx->store, staged, sum->hex, meta, err);
  json_decref(meta);
  return r;
}
