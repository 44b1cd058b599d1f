/* One layer blob unpacked into the store (unpack.h).
 *
 * The blob is read once: a libarchive reader in "raw" format undoes the
 * compression (gzip, zstd or none, found by the bytes) while the blob's
 * bytes are hashed (its digest, as the manifest names it), and a second,
 * tar, reader takes the uncompressed bytes through a callback that hashes
 * them (the diff_id) and counts them against the template's cap, so a
 * decompression bomb stops at the cap, not at the disk's end.
 *
 * The tar is hostile. Every entry is written relative to a directory fd
 * reached part by part with O_NOFOLLOW | O_DIRECTORY, so a symlink the
 * archive made is never followed; symlinks are stored as links, hard links
 * only to what this layer wrote before, ".." refused, devices refused
 * (OCI whiteouts are .wh. files; they become overlay's 0:0 char devices
 * here), setuid and setgid bits dropped, ids above 65535 stored as 65536
 * (an id no sandbox maps), and of the xattrs only user.* kept: trusted.*
 * would be overlay's own metadata, security.capability file capabilities. */
#include "unpack.h"

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <openssl/evp.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "cleanup.h"
#include "digest.h"
#include "layer.h"
#include "layout.h"
#include "util.h"

#define WHITEOUT ".wh."
#define OPAQUE ".wh..wh..opq"

bool unpack_digest_hex(const char *digest, char hex[65]) {
  if (!digest || strncmp(digest, "sha256:", 7) != 0 || strlen(digest) != 7 + 64)
    return false;
  for (const char *p = digest + 7; *p; p++)
    if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
      return false;
  memcpy(hex, digest + 7, 65);
  return true;
}

int unpack_clean_path(const char *name, char *out, size_t size, struct hutch_err *err) {
  size_t len = 0;
  int depth = 0;
  for (const char *p = name; *p;) {
    while (*p == '/')
      p++;
    const char *end = strchrnul(p, '/');
    size_t n = (size_t)(end - p);
    if (n == 2 && p[0] == '.' && p[1] == '.')
      return hutch_err_fail(err, HUTCH_ERR_INVALID, "bad_layer", "entry '%.200s' has a '..' part",
                            name);
    if (n && !(n == 1 && p[0] == '.')) {
      if (len + n + 2 > size || ++depth > HUTCH_LAYER_MAX_DEPTH)
        return hutch_err_fail(err, HUTCH_ERR_INVALID, "bad_layer",
                              "entry '%.200s' is too long or too deep", name);
      if (len)
        out[len++] = '/';
      memcpy(out + len, p, n);
      len += n;
    }
    p = end;
  }
  out[len] = '\0';
  return 0;
}

/* The directory part of path in fd, made first when it is missing and
 * create is set, opened without following a link: its fd. fd is closed
 * whatever happens. */
static int next_part(int fd, const char *part, bool create, const char *path,
                     struct hutch_err *err) {
  int next = openat(fd, part, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (next < 0 && errno == ENOENT && create) {
    if (mkdirat(fd, part, 0755) < 0 && errno != EEXIST) {
      close(fd);
      return hutch_err_set(err, errno, "'%.200s': make directory", path);
    }
    next = openat(fd, part, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  }

  int e = errno;
  close(fd);
  if (next < 0 && (e == ELOOP || e == ENOTDIR))
    return hutch_err_fail(err, HUTCH_ERR_INVALID, "bad_layer",
                          "'%.200s' goes through a symlink or a non-directory", path);
  if (next < 0 && e == ENOENT)
    return hutch_err_fail(err, HUTCH_ERR_INVALID, "bad_layer", "'%.200s' is not there", path);
  if (next < 0)
    return hutch_err_set(err, e, "'%.200s'", path);
  return next;
}

int unpack_open_parent(int root, const char *path, bool create, const char **leaf,
                       struct hutch_err *err) {
  int fd = dup(root);
  if (fd < 0)
    return hutch_err_set(err, errno, "dup");

  const char *p = path;
  for (const char *slash; (slash = strchr(p, '/')); p = slash + 1) {
    char part[NAME_MAX + 1];
    size_t n = (size_t)(slash - p);
    if (n > NAME_MAX) {
      close(fd);
      return hutch_err_fail(err, HUTCH_ERR_INVALID, "bad_layer", "'%.200s': a name is too long",
                            path);
    }
    memcpy(part, p, n);
    part[n] = '\0';
    fd = next_part(fd, part, create, path, err);
    if (fd < 0)
      return -1;
  }

  if (strlen(p) > NAME_MAX) {
    close(fd);
    return hutch_err_fail(err, HUTCH_ERR_INVALID, "bad_layer", "'%.200s': a name is too long",
                          path);
  }
  *leaf = p;
  return fd;
}

/* A directory's mode, owner and times, set once its contents are in
 * (writing them would change its mtime, and a read-only mode would stop
 * the writing). */
struct dir_meta {
  char *path;
  mode_t mode;
  uid_t uid;
  gid_t gid;
  struct timespec mtime;
};

struct unpack {
  struct image_ctx *ctx;
  struct hutch_err *err;
  int root;
  struct unpack_budget *used;
  uint64_t data_bytes, files;
  struct dir_meta *dirs;
  size_t ndirs, dirs_cap;
  /* The blob as read from fd, and the tar as the raw reader gives it. */
  int fd, read_errno;
  EVP_MD_CTX *blob_md, *tar_md;
  struct archive *outer;
  uint64_t tar_bytes, tar_cap;
  bool over;
  unsigned char blob_buf[65536], tar_buf[65536];
};

static la_ssize_t blob_read(struct archive *a, void *p, const void **buf) {
  struct unpack *u = p;
  ssize_t n;
  do
    n = read(u->fd, u->blob_buf, sizeof u->blob_buf);
  while (n < 0 && errno == EINTR);
  if (n < 0) {
    u->read_errno = errno;
    archive_set_error(a, errno, "read");
    return -1;
  }
  EVP_DigestUpdate(u->blob_md, u->blob_buf, (size_t)n);
  *buf = u->blob_buf;
  return n;
}

static la_ssize_t tar_read(struct archive *a, void *p, const void **buf) {
  struct unpack *u = p;
  la_ssize_t n = archive_read_data(u->outer, u->tar_buf, sizeof u->tar_buf);
  if (n < 0) {
    archive_set_error(a, EIO, "%s", archive_error_string(u->outer));
    return -1;
  }
  u->tar_bytes += (uint64_t)n;
  /* The bomb's stop: counted before anything of it is written. */
  if (u->tar_bytes > u->tar_cap) {
    u->over = true;
    archive_set_error(a, EIO, "too large");
    return -1;
  }
  EVP_DigestUpdate(u->tar_md, u->tar_buf, (size_t)n);
  *buf = u->tar_buf;
  return n;
}

static int too_large(struct unpack *u) {
  return hutch_err_fail(u->err, HUTCH_ERR_TOO_LARGE, "too_large",
                        "the image unpacks to more than %llu bytes or %llu files "
                        "(--max-bytes, --max-files)",
                        (unsigned long long)u->ctx->max_bytes,
                        (unsigned long long)u->ctx->max_files);
}

/* An id of the image's, or the one no sandbox maps. */
static uid_t id_of(la_int64_t id) {
  return id >= 0 && id < HUTCH_ID_RANGE ? (uid_t)id : HUTCH_ID_RANGE;
}

static struct timespec mtime_of(struct archive_entry *e) {
  return (struct timespec){archive_entry_mtime(e), archive_entry_mtime_nsec(e)};
}

/* Make room for a new entry at dir/leaf: a later entry of the same name
 * replaces an earlier one; a directory stays when the new one is one. */
static int clear_leaf(struct unpack *u, int dir, const char *leaf, bool new_is_dir,
                      const char *path) {
  struct stat st;
  if (fstatat(dir, leaf, &st, AT_SYMLINK_NOFOLLOW) < 0)
    return errno == ENOENT ? 0 : hutch_err_set(u->err, errno, "%.200s", path);
  if (S_ISDIR(st.st_mode)) {
    if (new_is_dir)
      return 1;
    if (unlinkat(dir, leaf, AT_REMOVEDIR) < 0)
      return hutch_err_fail(u->err, HUTCH_ERR_INVALID, "bad_layer",
                            "'%.200s' replaces a directory that is not empty", path);
    return 0;
  }
  if (unlinkat(dir, leaf, 0) < 0)
    return hutch_err_set(u->err, errno, "%.200s", path);
  return 0;
}

static int set_xattrs(struct unpack *u, int fd, struct archive_entry *e, const char *path) {
  const char *name;
  const void *value;
  size_t size;
  archive_entry_xattr_reset(e);
  while (archive_entry_xattr_next(e, &name, &value, &size) == ARCHIVE_OK) {
    if (strncmp(name, "user.", 5) != 0)
      continue;
    if (fsetxattr(fd, name, value, size, 0) < 0)
      return hutch_err_fail(
          u->err, errno == ENOTSUP || errno == EOPNOTSUPP ? HUTCH_ERR_SYSTEM : HUTCH_ERR_INVALID,
          "bad_layer", "'%.200s': attribute %.100s: %s", path, name, strerror(errno));
  }
  return 0;
}

static int archive_fail(struct unpack *u, struct archive *a, const char *what) {
  if (u->over)
    return too_large(u);
  if (u->read_errno)
    return hutch_err_set(u->err, u->read_errno, "read the layer");
  return hutch_err_fail(u->err, HUTCH_ERR_INVALID, "bad_layer", "%s: %s", what,
                        archive_error_string(a) ? archive_error_string(a) : "unreadable");
}

static int write_data(struct unpack *u, struct archive *tar, int fd, const char *path) {
  const void *buf;
  size_t size;
  la_int64_t off;
  int r;
  /* By blocks at their offsets: a sparse entry's holes stay holes. */
  while ((r = archive_read_data_block(tar, &buf, &size, &off)) == ARCHIVE_OK) {
    if (off < 0 || (uint64_t)off + size > u->ctx->max_bytes)
      return too_large(u);
    for (size_t done = 0; done < size;) {
      ssize_t n = pwrite(fd, (const char *)buf + done, size - done, off + (off_t)done);
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0)
        return hutch_err_set(u->err, n < 0 ? errno : EIO, "%.200s: write", path);
      done += (size_t)n;
    }
    u->data_bytes += size;
  }
  return r == ARCHIVE_EOF ? 0 : archive_fail(u, tar, path);
}

/* fd's owner, mode and times: 0, or -1 with errno set. The owner first:
 * chown would clear the mode's special bits. */
static int set_meta(int fd, uid_t uid, gid_t gid, mode_t mode, struct timespec mtime) {
  struct timespec t[2] = {mtime, mtime};
  if (fchown(fd, uid, gid) < 0)
    return -1;
  if (fchmod(fd, mode) < 0)
    return -1;
  return futimens(fd, t);
}

static int add_file(struct unpack *u, struct archive *tar, struct archive_entry *e, int dir,
                    const char *leaf, const char *path) {
  la_int64_t size = archive_entry_size(e);
  if (size < 0 || (uint64_t)size > u->ctx->max_bytes)
    return too_large(u);
  _cleanup_close_ int fd =
      openat(dir, leaf, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0)
    return hutch_err_set(u->err, errno, "%.200s", path);

  if (write_data(u, tar, fd, path) < 0)
    return -1;
  if (ftruncate(fd, size) < 0)
    return hutch_err_set(u->err, errno, "%.200s: size", path);
  if (set_xattrs(u, fd, e, path) < 0)
    return -1;
  /* The special bits are dropped anyway: a setuid file on the host's disk
   * is the host's. */
  if (set_meta(fd, id_of(archive_entry_uid(e)), id_of(archive_entry_gid(e)),
               archive_entry_perm(e) & 01777, mtime_of(e)) < 0)
    return hutch_err_set(u->err, errno, "%.200s: owner", path);
  return 0;
}

static int add_dir(struct unpack *u, struct archive_entry *e, int dir, const char *leaf,
                   const char *path) {
  if (*path) {
    int r = clear_leaf(u, dir, leaf, true, path);
    if (r < 0)
      return -1;
    if (r == 0 && mkdirat(dir, leaf, 0700) < 0)
      return hutch_err_set(u->err, errno, "%.200s", path);
  }
  _cleanup_close_ int fd =
      *path ? openat(dir, leaf, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) : dup(u->root);
  if (fd < 0)
    return hutch_err_set(u->err, errno, "%.200s", path);
  if (set_xattrs(u, fd, e, path) < 0)
    return -1;

  if (u->ndirs == u->dirs_cap) {
    u->dirs_cap = u->dirs_cap ? 2 * u->dirs_cap : 64;
    u->dirs = xrealloc(u->dirs, u->dirs_cap * sizeof *u->dirs);
  }
  u->dirs[u->ndirs++] =
      (struct dir_meta){xstrdup(path), archive_entry_perm(e) & 01777, id_of(archive_entry_uid(e)),
                        id_of(archive_entry_gid(e)), mtime_of(e)};
  return 0;
}

static int set_dirs(struct unpack *u) {
  for (size_t i = 0; i < u->ndirs; i++) {
    struct dir_meta *d = &u->dirs[i];
    const char *leaf = ".";
    _cleanup_close_ int parent =
        *d->path ? unpack_open_parent(u->root, d->path, false, &leaf, u->err) : dup(u->root);
    /* A later entry may have removed or replaced what held it. */
    if (parent < 0 && u->err->kind == HUTCH_ERR_INVALID) {
      *u->err = (struct hutch_err){0};
      continue;
    }
    if (parent < 0)
      return -1;
    _cleanup_close_ int fd = openat(parent, leaf, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 && (errno == ENOTDIR || errno == ELOOP || errno == ENOENT))
      continue;
    if (fd < 0 || set_meta(fd, d->uid, d->gid, d->mode, d->mtime) < 0)
      return hutch_err_set(u->err, errno, "%.200s: owner", d->path);
  }
  return 0;
}

/* OCI's whiteouts as overlay's: ".wh.NAME" hides NAME of the layers
 * below (a 0:0 char device), ".wh..wh..opq" all of its directory's. */
static int add_whiteout(struct unpack *u, int dir, const char *leaf, const char *path) {
  if (strcmp(leaf, OPAQUE) == 0) {
    if (fsetxattr(dir, "trusted.overlay.opaque", "y", 1, 0) < 0)
      return hutch_err_set(u->err, errno, "%.200s: mark opaque", path);
    return 0;
  }
  const char *name = leaf + strlen(WHITEOUT);
  if (strncmp(leaf, WHITEOUT WHITEOUT, 8) == 0)
    return 0; /* aufs's own metadata (.wh..wh.plnk and the like): nothing to hide */
  if (!*name || strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
    return hutch_err_fail(u->err, HUTCH_ERR_INVALID, "bad_layer",
                          "whiteout '%.200s' would hide the root or a parent", path);
  if (clear_leaf(u, dir, name, false, path) < 0)
    return -1;
  if (mknodat(dir, name, S_IFCHR | 0, makedev(0, 0)) < 0)
    return hutch_err_set(u->err, errno, "%.200s: whiteout", path);
  return 0;
}

/* A hard link, only to what this layer holds already: the target is
 * walked like any entry, from the layer's root, following nothing. */
static int add_hardlink(struct unpack *u, int dir, const char *leaf, const char *path,
                        const char *hardlink) {
  char target[PATH_MAX];
  const char *tleaf;
  if (unpack_clean_path(hardlink, target, sizeof target, u->err) < 0)
    return -1;
  if (!*target)
    return hutch_err_fail(u->err, HUTCH_ERR_INVALID, "bad_layer", "hard link '%.200s' to the root",
                          path);

  _cleanup_close_ int tdir = unpack_open_parent(u->root, target, false, &tleaf, u->err);
  if (tdir < 0)
    return hutch_err_wrap(u->err, "hard link '%.200s'", path);
  struct stat st;
  if (fstatat(tdir, tleaf, &st, AT_SYMLINK_NOFOLLOW) < 0 || S_ISDIR(st.st_mode))
    return hutch_err_fail(u->err, HUTCH_ERR_INVALID, "bad_layer",
                          "hard link '%.200s' to '%.200s', which the layer does not hold "
                          "before it",
                          path, target);
  if (linkat(tdir, tleaf, dir, leaf, 0) < 0)
    return hutch_err_set(u->err, errno, "%.200s: link", path);
  return 0;
}

static int add_link(struct unpack *u, struct archive_entry *e, int dir, const char *leaf,
                    const char *path, const char *hardlink) {
  struct timespec t[2] = {mtime_of(e), mtime_of(e)};
  if (hardlink)
    return add_hardlink(u, dir, leaf, path, hardlink);

  const char *to = archive_entry_symlink(e);
  if (!to || !*to)
    return hutch_err_fail(u->err, HUTCH_ERR_INVALID, "bad_layer", "symlink '%.200s' has no target",
                          path);
  if (symlinkat(to, dir, leaf) < 0)
    return hutch_err_set(u->err, errno, "%.200s: symlink", path);
  if (fchownat(dir, leaf, id_of(archive_entry_uid(e)), id_of(archive_entry_gid(e)),
               AT_SYMLINK_NOFOLLOW) < 0)
    return hutch_err_set(u->err, errno, "%.200s: owner", path);
  if (utimensat(dir, leaf, t, AT_SYMLINK_NOFOLLOW) < 0)
    return hutch_err_set(u->err, errno, "%.200s: owner", path);
  return 0;
}

static int add_fifo(struct unpack *u, struct archive_entry *e, int dir, const char *leaf,
                    const char *path) {
  struct timespec t[2] = {mtime_of(e), mtime_of(e)};
  if (mknodat(dir, leaf, S_IFIFO | 0600, 0) < 0)
    return hutch_err_set(u->err, errno, "%.200s: fifo", path);
  if (fchownat(dir, leaf, id_of(archive_entry_uid(e)), id_of(archive_entry_gid(e)),
               AT_SYMLINK_NOFOLLOW) < 0)
    return hutch_err_set(u->err, errno, "%.200s: fifo", path);
  if (fchmodat(dir, leaf, archive_entry_perm(e) & 01777, 0) < 0)
    return hutch_err_set(u->err, errno, "%.200s: fifo", path);
  if (utimensat(dir, leaf, t, AT_SYMLINK_NOFOLLOW) < 0)
    return hutch_err_set(u->err, errno, "%.200s: fifo", path);
  return 0;
}

static int add_entry(struct unpack *u, struct archive *tar, struct archive_entry *e) {
  const char *name = archive_entry_pathname(e);
  if (!name)
    return hutch_err_fail(u->err, HUTCH_ERR_INVALID, "bad_layer", "an entry without a name");
  if (++u->files + u->used->files > u->ctx->max_files)
    return too_large(u);
  char path[PATH_MAX];
  if (unpack_clean_path(name, path, sizeof path, u->err) < 0)
    return -1;

  mode_t type = archive_entry_filetype(e);
  const char *hardlink = archive_entry_hardlink(e);
  if (!*path) {
    if (type == AE_IFDIR && !hardlink)
      return add_dir(u, e, u->root, ".", "");
    return hutch_err_fail(u->err, HUTCH_ERR_INVALID, "bad_layer",
                          "entry '%.200s' stands for the root but is no directory", name);
  }

  const char *leaf;
  _cleanup_close_ int dir = unpack_open_parent(u->root, path, true, &leaf, u->err);
  if (dir < 0)
    return -1;
  if (strncmp(leaf, WHITEOUT, strlen(WHITEOUT)) == 0)
    return add_whiteout(u, dir, leaf, path);
  if (!hardlink && type == AE_IFDIR)
    return add_dir(u, e, dir, leaf, path);
  if (!hardlink && type != AE_IFREG && type != AE_IFLNK && type != AE_IFIFO)
    return hutch_err_fail(u->err, HUTCH_ERR_INVALID, "bad_layer",
                          "'%.200s' is a device node or socket, which layers may not hold", path);

  if (clear_leaf(u, dir, leaf, false, path) < 0)
    return -1;
  if (hardlink || type == AE_IFLNK)
    return add_link(u, e, dir, leaf, path, hardlink);
  if (type == AE_IFIFO)
    return add_fifo(u, e, dir, leaf, path);
  return add_file(u, tar, e, dir, leaf, path);
}

/* Every entry of the tar. */
static int add_entries(struct unpack *u, struct archive *tar) {
  if (archive_read_open(tar, u, NULL, tar_read, NULL) != ARCHIVE_OK)
    return archive_fail(u, tar, "the layer is not a tar");
  for (;;) {
    struct archive_entry *e;
    int r = archive_read_next_header(tar, &e);
    if (r == ARCHIVE_EOF)
      return 0;
    if (r < ARCHIVE_WARN)
      return archive_fail(u, tar, "the layer's tar");
    if (add_entry(u, tar, e) < 0)
      return -1;
  }
}

/* The rest of the uncompressed stream after the tar (its padding) and of
 * the blob, counted and hashed, so that both digests cover every byte. */
static int drain(struct unpack *u) {
  for (la_ssize_t n; (n = archive_read_data(u->outer, u->tar_buf, sizeof u->tar_buf)) != 0;) {
    if (n < 0)
      return archive_fail(u, u->outer, "the layer");
    if ((u->tar_bytes += (uint64_t)n) > u->tar_cap) {
      u->over = true;
      return too_large(u);
    }
    EVP_DigestUpdate(u->tar_md, u->tar_buf, (size_t)n);
  }

  for (ssize_t n; (n = read(u->fd, u->blob_buf, sizeof u->blob_buf)) != 0;) {
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      return hutch_err_set(u->err, errno, "read the layer");
    EVP_DigestUpdate(u->blob_md, u->blob_buf, (size_t)n);
  }
  return 0;
}

/* Every entry of the tar, then the rest of both streams, then the
 * directories' modes and times. */
static int unpack_stream(struct unpack *u) {
  struct archive *tar = archive_read_new();
  archive_read_support_format_tar(tar);
  int rc = add_entries(u, tar);
  if (rc == 0)
    rc = drain(u);
  if (rc == 0)
    rc = set_dirs(u);
  archive_read_free(tar);
  return rc;
}

static int unpack_into(struct unpack *u) {
  u->outer = archive_read_new();
  archive_read_support_filter_all(u->outer);
  archive_read_support_format_raw(u->outer);
  struct archive_entry *e;
  int rc = -1;
  if (archive_read_open(u->outer, u, NULL, blob_read, NULL) != ARCHIVE_OK)
    archive_fail(u, u->outer, "the layer's compression");
  else if (archive_read_next_header(u->outer, &e) != ARCHIVE_OK)
    archive_fail(u, u->outer, "the layer's compression");
  else
    rc = unpack_stream(u);
  archive_read_free(u->outer);
  return rc;
}

static int commit(struct unpack *u, const char *staged, const char *expect_digest,
                  char hex_out[65]) {
  char blob_hex[65], want[65];
  digest_sha256_final_hex(u->blob_md, blob_hex);
  digest_sha256_final_hex(u->tar_md, hex_out);
  if (expect_digest && (!unpack_digest_hex(expect_digest, want) || strcmp(want, blob_hex) != 0))
    return hutch_err_fail(u->err, HUTCH_ERR_INVALID, "digest_mismatch",
                          "the layer does not match its digest %.80s (it is sha256:%s)",
                          expect_digest, blob_hex);

  json_t *meta = json_pack("{s:I,s:I,s:s+}", "size", (json_int_t)u->data_bytes, "files",
                           (json_int_t)u->files, "diff_id", "sha256:", hex_out);
  int rc = hutch_images_layer_commit(&u->ctx->store, staged, hex_out, meta, u->err);
  json_decref(meta);
  return rc;
}

/* A new sha256 context begun: whether it is. */
static bool sha256_begin(EVP_MD_CTX *md) {
  return md && EVP_DigestInit_ex(md, EVP_sha256(), NULL);
}

/* Both digests begun, and the staged layer directory made and opened
 * (u->root). */
static int unpack_begin(struct unpack *u, const char *staged, struct hutch_err *err) {
  u->blob_md = EVP_MD_CTX_new();
  u->tar_md = EVP_MD_CTX_new();
  if (!sha256_begin(u->blob_md))
    return hutch_err_set(err, ENOMEM, "sha256");
  if (!sha256_begin(u->tar_md))
    return hutch_err_set(err, ENOMEM, "sha256");

  if (mkdir(staged, 0755) < 0)
    return hutch_err_set(err, errno, "%s", staged);
  u->root = open(staged, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (u->root < 0)
    return hutch_err_set(err, errno, "%s", staged);
  return 0;
}

int unpack_layer_counted(struct image_ctx *ctx, int fd, const char *expect_digest,
                         struct unpack_budget *used, char hex_out[65], struct hutch_err *err) {
  struct unpack_budget alone = {0};
  char hex[65];
  if (expect_digest && !unpack_digest_hex(expect_digest, hex))
    return hutch_err_fail(err, HUTCH_ERR_INVALID, "bad_digest", "'%.80s' is not a sha256 digest",
                          expect_digest);

  _cleanup_free_ char *tmp = hutch_images_tmpdir(&ctx->store, err);
  if (!tmp)
    return -1;
  _cleanup_free_ char *staged = xasprintf("%s/layer", tmp);
  struct unpack *u = xcalloc(1, sizeof *u);
  *u = (struct unpack){.ctx = ctx, .err = err, .fd = fd, .root = -1, .used = used ? used : &alone};
  u->tar_cap = ctx->max_bytes > u->used->bytes ? ctx->max_bytes - u->used->bytes : 0;
  int rc = unpack_begin(u, staged, err);
  if (rc == 0)
    rc = unpack_into(u);
  if (rc == 0)
    rc = commit(u, staged, expect_digest, hex_out);
  if (rc == 0) {
    u->used->bytes += u->tar_bytes;
    u->used->files += u->files;
  }

  struct hutch_err ignored = {0};
  hutch_layer_remove(tmp, &ignored);
  if (u->root >= 0)
    close(u->root);
  for (size_t i = 0; i < u->ndirs; i++)
    free(u->dirs[i].path);
  free(u->dirs);
  EVP_MD_CTX_free(u->blob_md);
  EVP_MD_CTX_free(u->tar_md);
  free(u);
  return rc;
}

int unpack_layer(struct image_ctx *ctx, int fd, const char *expect_digest, char hex_out[65],
                 struct hutch_err *err) {
  return unpack_layer_counted(ctx, fd, expect_digest, NULL, hex_out, err);
}
