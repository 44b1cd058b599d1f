/* A layer directory as its canonical tar, and its digest (layertar.h).
 * The tree is the store's own, but made from what a build's RUN step or a
 * hostile archive left: every name is opened relative to its parent,
 * never followed, and only the kinds a layer may hold are written. */
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
#include "layer.h"
#include "util.h"

struct hardlink {
  dev_t dev;
  ino_t ino;
  char *path;
};

struct walk {
  struct archive *a;
  struct layer_sum *sum;
  struct hutch_err *err;
  struct hardlink *links;
  size_t nlinks;
};

static int arch_fail(struct walk *w, const char *what) {
  return hutch_err_set(w->err, 0, "tar %s: %s", what, archive_error_string(w->a));
}

static int cmp_names(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The names in dirfd, sorted; NULL on error. */
static char **sorted_names(int dirfd, size_t *n, struct hutch_err *err) {
  int fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  DIR *d = fd < 0 ? NULL : fdopendir(fd);
  if (!d) {
    if (fd >= 0)
      close(fd);
    hutch_err_set(err, errno, "read directory");
    return NULL;
  }
  char **v = NULL;
  size_t cap = 0;
  *n = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
      continue;
    if (*n == cap)
      v = xrealloc(v, (cap = cap ? 2 * cap : 16) * sizeof *v);
    v[(*n)++] = xstrdup(e->d_name);
  }
  closedir(d);
  if (*n)
    qsort(v, *n, sizeof *v, cmp_names);
  return v ? v : xcalloc(1, sizeof *v);
}

static void free_names(char **v, size_t n) {
  for (size_t i = 0; i < n; i++)
    free(v[i]);
  free(v);
}

static struct archive_entry *entry_of(const char *path, const struct stat *st, mode_t type) {
  struct archive_entry *e = archive_entry_new();
  archive_entry_set_pathname(e, path);
  archive_entry_set_filetype(e, type);
  archive_entry_set_perm(e, st ? st->st_mode & 07777 : 0);
  archive_entry_set_uid(e, st ? st->st_uid : 0);
  archive_entry_set_gid(e, st ? st->st_gid : 0);
  archive_entry_set_mtime(e, st ? st->st_mtime : 0, 0);
  return e;
}

static int put_header(struct walk *w, struct archive_entry *e, const char *path) {
  int r = archive_write_header(w->a, e);
  archive_entry_free(e);
  if (r < ARCHIVE_WARN)
    return arch_fail(w, path);
  w->sum->files++;
  return 0;
}

/* An empty marker file: a whiteout or an opaque directory's. */
static int put_marker(struct walk *w, const char *path) {
  return put_header(w, entry_of(path, NULL, AE_IFREG), path);
}

static int put_file(struct walk *w, int dirfd, const char *name, const char *path,
                    const struct stat *st) {
  if (st->st_nlink > 1) {
    for (size_t i = 0; i < w->nlinks; i++)
      if (w->links[i].dev == st->st_dev && w->links[i].ino == st->st_ino) {
        struct archive_entry *e = entry_of(path, st, AE_IFREG);
        archive_entry_set_hardlink(e, w->links[i].path);
        return put_header(w, e, path);
      }
    w->links = xrealloc(w->links, (w->nlinks + 1) * sizeof *w->links);
    w->links[w->nlinks++] = (struct hardlink){st->st_dev, st->st_ino, xstrdup(path)};
  }
  _cleanup_close_ int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return hutch_err_set(w->err, errno, "open %s", path);
  struct archive_entry *e = entry_of(path, st, AE_IFREG);
  archive_entry_set_size(e, st->st_size);
  if (put_header(w, e, path) < 0)
    return -1;
  static char buf[1 << 16];
  off_t left = st->st_size;
  while (left > 0) {
    ssize_t n = read(fd, buf, left < (off_t)sizeof buf ? (size_t)left : sizeof buf);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) /* the layer is ours and still: a shorter file is an error */
      return hutch_err_set(w->err, n < 0 ? errno : EIO, "read %s", path);
    if (archive_write_data(w->a, buf, (size_t)n) != n)
      return arch_fail(w, path);
    left -= n;
  }
  w->sum->bytes += (uint64_t)st->st_size;
  return 0;
}

static int walk_dir(struct walk *w, int dirfd, const char *prefix, int depth);

static int walk_entry(struct walk *w, int dirfd, const char *name, const char *prefix,
                      int depth) {
  struct stat st;
  if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
    return hutch_err_set(w->err, errno, "stat %s%s", prefix, name);
  _cleanup_free_ char *path = xasprintf("%s%s", prefix, name);
  if (S_ISCHR(st.st_mode) && st.st_rdev == makedev(0, 0)) {
    _cleanup_free_ char *wh = xasprintf("%s.wh.%s", prefix, name);
    return put_marker(w, wh);
  }
  if (S_ISREG(st.st_mode))
    return put_file(w, dirfd, name, path, &st);
  if (S_ISLNK(st.st_mode)) {
    char target[4096];
    ssize_t n = readlinkat(dirfd, name, target, sizeof target - 1);
    if (n < 0)
      return hutch_err_set(w->err, errno, "readlink %s", path);
    target[n] = '\0';
    struct archive_entry *e = entry_of(path, &st, AE_IFLNK);
    archive_entry_set_symlink(e, target);
    return put_header(w, e, path);
  }
  if (S_ISFIFO(st.st_mode))
    return put_header(w, entry_of(path, &st, AE_IFIFO), path);
  if (!S_ISDIR(st.st_mode))
    return 0; /* nothing else belongs in a layer; the unpacker and capture drop it */
  _cleanup_close_ int sub = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (sub < 0)
    return hutch_err_set(w->err, errno, "open %s", path);
  _cleanup_free_ char *dir = xasprintf("%s/", path);
  if (put_header(w, entry_of(dir, &st, AE_IFDIR), dir) < 0)
    return -1;
  char opq[2];
  if (fgetxattr(sub, "trusted.overlay.opaque", opq, 1) == 1 && opq[0] == 'y') {
    _cleanup_free_ char *marker = xasprintf("%s.wh..wh..opq", dir);
    if (put_marker(w, marker) < 0)
      return -1;
  }
  return walk_dir(w, sub, dir, depth + 1);
}

static int walk_dir(struct walk *w, int dirfd, const char *prefix, int depth) {
  if (depth > HUTCH_LAYER_MAX_DEPTH)
    return hutch_err_invalid(w->err, "%s: deeper than %d directories", prefix,
                             HUTCH_LAYER_MAX_DEPTH);
  size_t n;
  char **names = sorted_names(dirfd, &n, w->err);
  if (!names)
    return -1;
  int r = 0;
  for (size_t i = 0; i < n && r == 0; i++)
    r = walk_entry(w, dirfd, names[i], prefix, depth);
  free_names(names, n);
  return r;
}

int layer_tar_write(int dirfd, struct archive *a, struct layer_sum *sum, struct hutch_err *err) {
  struct walk w = {.a = a, .sum = sum, .err = err};
  sum->bytes = sum->files = 0;
  int r = walk_dir(&w, dirfd, "", 0);
  for (size_t i = 0; i < w.nlinks; i++)
    free(w.links[i].path);
  free(w.links);
  return r;
}

static la_ssize_t hash_write(struct archive *a, void *ctx, const void *buf, size_t n) {
  (void)a;
  return EVP_DigestUpdate(ctx, buf, n) == 1 ? (la_ssize_t)n : -1;
}

int layer_tar_digest(int dirfd, struct layer_sum *sum, struct hutch_err *err) {
  EVP_MD_CTX *md = EVP_MD_CTX_new();
  struct archive *a = archive_write_new();
  if (!md || !a || EVP_DigestInit_ex(md, EVP_sha256(), NULL) != 1 ||
      archive_write_set_format_pax_restricted(a) != ARCHIVE_OK ||
      archive_write_open2(a, md, NULL, hash_write, NULL, NULL) != ARCHIVE_OK) {
    hutch_err_set(err, 0, "tar digest: %s", a ? archive_error_string(a) : "out of memory");
    archive_write_free(a);
    EVP_MD_CTX_free(md);
    return -1;
  }
  int r = layer_tar_write(dirfd, a, sum, err);
  if (archive_write_close(a) != ARCHIVE_OK && r == 0)
    r = hutch_err_set(err, 0, "tar digest: %s", archive_error_string(a));
  archive_write_free(a);
  unsigned char d[32];
  unsigned len = 0;
  if (r == 0 && EVP_DigestFinal_ex(md, d, &len) != 1)
    r = hutch_err_set(err, 0, "sha256 failed");
  EVP_MD_CTX_free(md);
  for (unsigned i = 0; r == 0 && i < len; i++)
    snprintf(sum->hex + 2 * i, 3, "%02x", d[i]);
  return r;
}

int layer_commit_staged(struct image_ctx *ctx, const char *staged, struct layer_sum *sum,
                        bool *existed, struct hutch_err *err) {
  _cleanup_close_ int fd = open(staged, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return hutch_err_set(err, errno, "open %s", staged);
  if (layer_tar_digest(fd, sum, err) < 0)
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
