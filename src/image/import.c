/* hutch template import FILE|DIR --name NAME: an OCI image layout
 * directory, an oci-archive (a tar of one) or a docker-archive (a tar, or
 * directory, of manifest.json, a config and layer tars), told apart by
 * what they hold. An archive is first extracted into a directory under
 * the store's tmp/, as hostile as any layer: members are written relative
 * to directory fds without following links, only files and directories
 * are made, and the whole is capped by --max-bytes and --max-files. */
#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cleanup.h"
#include "image.h"
#include "layer.h"
#include "oci.h"
#include "unpack.h"
#include "util.h"

/* A link member, made once every file is in: only as a hard link to a
 * regular file the archive holds (old `docker save` links a layer shared
 * by two images to the first one's tar). */
struct link_member {
  char *path, *target;
};

static int bad_member(struct hutch_err *err, const char *name, const char *why) {
  return hutch_err_fail(err, HUTCH_ERR_INVALID, "bad_archive", "archive member '%.200s' %s", name,
                        why);
}

/* target of the link at path, as a clean path under the root: a relative
 * one from path's directory, with ".." resolved by name; out of the root
 * is refused. */
static int link_target(const char *path, const char *target, char *out, size_t size,
                       struct hutch_err *err) {
  char joined[PATH_MAX * 2];
  const char *slash = strrchr(path, '/');
  if (target[0] == '/')
    snprintf(joined, sizeof joined, "%s", target);
  else
    snprintf(joined, sizeof joined, "%.*s/%s", slash ? (int)(slash - path) : 0, path, target);

  size_t len = 0;
  for (char *p = joined, *end; *p; p = end) {
    while (*p == '/')
      p++;
    end = strchrnul(p, '/');
    size_t n = (size_t)(end - p);
    if (n == 2 && p[0] == '.' && p[1] == '.') {
      if (!len)
        return bad_member(err, path, "links out of the archive");
      while (len && out[--len] != '/')
        ;
    } else if (n && !(n == 1 && *p == '.')) {
      if (len + n + 2 > size)
        return bad_member(err, path, "links too far");
      if (len)
        out[len++] = '/';
      memcpy(out + len, p, n);
      len += n;
    }
  }
  out[len] = '\0';
  return 0;
}

static int make_link(int root, const struct link_member *l, bool hard, struct hutch_err *err) {
  char target[PATH_MAX];
  const char *leaf, *tleaf;
  int r;
  if (hard)
    r = unpack_clean_path(l->target, target, sizeof target, err);
  else
    r = link_target(l->path, l->target, target, sizeof target, err);
  if (r < 0)
    return -1;
  if (!*target)
    return bad_member(err, l->path, "links to the root");

  _cleanup_close_ int tdir = unpack_open_parent(root, target, false, &tleaf, err);
  if (tdir < 0)
    return err->kind == HUTCH_ERR_INVALID
               ? bad_member(err, l->path, "links to no file of the archive")
               : -1;
  _cleanup_close_ int dir = unpack_open_parent(root, l->path, true, &leaf, err);
  struct stat st;
  if (dir < 0)
    return -1;
  if (fstatat(tdir, tleaf, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode))
    return bad_member(err, l->path, "links to no file of the archive");

  if (linkat(tdir, tleaf, dir, leaf, 0) < 0)
    return errno == EEXIST ? bad_member(err, l->path, "is there twice")
                           : hutch_err_set(err, errno, "link %.200s", l->path);
  return 0;
}

static int extract_file(struct archive *a, struct archive_entry *e, int root, const char *path,
                        uint64_t *total, const struct image_ctx *ctx, struct hutch_err *err) {
  const char *leaf;
  _cleanup_close_ int dir = unpack_open_parent(root, path, true, &leaf, err);
  if (dir < 0)
    return -1;
  _cleanup_close_ int fd =
      openat(dir, leaf, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0)
    return errno == EEXIST ? bad_member(err, path, "is there twice")
                           : hutch_err_set(err, errno, "%.200s", path);

  const void *buf;
  size_t size;
  la_int64_t off;
  int r;
  while ((r = archive_read_data_block(a, &buf, &size, &off)) == ARCHIVE_OK) {
    if ((*total += size) > ctx->max_bytes || off < 0 || (uint64_t)off + size > ctx->max_bytes)
      return hutch_err_fail(err, HUTCH_ERR_TOO_LARGE, "too_large",
                            "the archive holds more than %llu bytes (--max-bytes)",
                            (unsigned long long)ctx->max_bytes);
    if (pwrite(fd, buf, size, off) != (ssize_t)size)
      return hutch_err_set(err, errno, "write %.200s", path);
  }
  if (r != ARCHIVE_EOF)
    return hutch_err_fail(err, HUTCH_ERR_INVALID, "bad_archive", "%.200s: %s", path,
                          archive_error_string(a));

  if (archive_entry_size(e) < 0 || (uint64_t)archive_entry_size(e) > ctx->max_bytes)
    return hutch_err_fail(err, HUTCH_ERR_TOO_LARGE, "too_large",
                          "archive member '%.200s' is larger than --max-bytes", path);
  if (ftruncate(fd, archive_entry_size(e)) < 0)
    return hutch_err_set(err, errno, "%.200s", path);
  return 0;
}

/* A directory member at path (clean, not the root), made in root. */
static int extract_dir(int root, const char *path, struct hutch_err *err) {
  const char *leaf;
  _cleanup_close_ int dir = unpack_open_parent(root, path, true, &leaf, err);
  if (dir < 0)
    return -1;
  if (mkdirat(dir, leaf, 0700) < 0 && errno != EEXIST)
    return hutch_err_set(err, errno, "%.200s", path);
  return 0;
}

static int extract_entry(struct archive *a, struct archive_entry *e, int root,
                         struct link_member **links, size_t *nlinks, uint64_t *total,
                         const struct image_ctx *ctx, struct hutch_err *err) {
  char path[PATH_MAX];
  const char *name = archive_entry_pathname(e);
  if (!name)
    return bad_member(err, "?", "has no name");
  if (unpack_clean_path(name, path, sizeof path, err) < 0)
    return -1;

  /* Links are made last, once their targets are there: a hard link's
   * target is a name in the archive ("/" first says so). */
  mode_t type = archive_entry_filetype(e);
  const char *hard = archive_entry_hardlink(e), *sym = archive_entry_symlink(e);
  if (hard || type == AE_IFLNK) {
    const char *target = hard ? hard : sym;
    if (!*path || !target)
      return bad_member(err, name, "is a link without a name or target");
    *links = xrealloc(*links, (*nlinks + 1) * sizeof **links);
    (*links)[(*nlinks)++] =
        (struct link_member){xstrdup(path), xasprintf("%s%s", hard ? "/" : "", target)};
    return 0;
  }

  if (type == AE_IFREG && *path)
    return extract_file(a, e, root, path, total, ctx, err);
  if (type != AE_IFDIR)
    return bad_member(err, name, "is neither a file, a directory nor a link");
  if (!*path)
    return 0;
  return extract_dir(root, path, err);
}

/* Every member of the archive a into root; the links in *links, to make
 * once everything else is there. */
static int extract_members(const struct image_ctx *ctx, struct archive *a, int root,
                           struct link_member **links, size_t *nlinks, struct hutch_err *err) {
  uint64_t total = 0, files = 0;
  for (;;) {
    struct archive_entry *e;
    int r = archive_read_next_header(a, &e);
    if (r == ARCHIVE_EOF)
      return 0;
    if (r < ARCHIVE_WARN)
      return hutch_err_fail(err, HUTCH_ERR_INVALID, "bad_archive", "not a tar archive: %s",
                            archive_error_string(a));
    if (++files > ctx->max_files)
      return hutch_err_fail(err, HUTCH_ERR_TOO_LARGE, "too_large",
                            "the archive holds more than %llu members (--max-files)",
                            (unsigned long long)ctx->max_files);
    if (extract_entry(a, e, root, links, nlinks, &total, ctx, err) < 0)
      return -1;
  }
}

/* The archive at fd (a tar, compressed or not) into the directory root. */
static int extract(const struct image_ctx *ctx, int fd, int root, struct hutch_err *err) {
  struct archive *a = archive_read_new();
  archive_read_support_filter_all(a);
  archive_read_support_format_tar(a);
  struct link_member *links = NULL;
  size_t nlinks = 0;

  int rc = -1;
  if (archive_read_open_fd(a, fd, 65536) != ARCHIVE_OK)
    hutch_err_fail(err, HUTCH_ERR_INVALID, "bad_archive", "not a tar archive: %s",
                   archive_error_string(a));
  else
    rc = extract_members(ctx, a, root, &links, &nlinks, err);
  for (size_t i = 0; i < nlinks && rc == 0; i++)
    rc = make_link(root, &links[i], links[i].target[0] == '/', err);

  for (size_t i = 0; i < nlinks; i++)
    free(links[i].path), free(links[i].target);
  free(links);
  archive_read_free(a);
  return rc;
}

static bool has_member(const char *dir, const char *name) {
  _cleanup_free_ char *p = xasprintf("%s/%s", dir, name);
  struct stat st;
  return lstat(p, &st) == 0 && S_ISREG(st.st_mode);
}

/* The image in dir: an OCI layout has index.json, a docker-archive
 * manifest.json (`docker save` since 25 writes both: the layout is read). */
static json_t *import_dir(struct image_ctx *ctx, const char *dir, const char *name, const char *ref,
                          struct hutch_err *err) {
  if (has_member(dir, "index.json"))
    return oci_import_layout(ctx, dir, name, "import", ref, err);
  if (has_member(dir, "manifest.json"))
    return oci_import_docker(ctx, dir, name, "import", ref, err);
  hutch_err_fail(err, HUTCH_ERR_INVALID, "bad_image",
                 "%.200s is neither an OCI image layout (index.json) nor a docker-archive "
                 "(manifest.json)",
                 ref);
  return NULL;
}

/* The image at input as the template name. shown is what the record,
 * the progress and the errors say it came from: the absolute path when
 * NULL (the local user's own), else what --ref gave (hutch serve's
 * "upload@sha256:HEX": its upload's path under the state directory is
 * the host's, never a tenant's to see). */
/* The archive at fd, extracted into the store's work directory tmp, and
 * the image there imported. */
static json_t *import_archive(struct image_ctx *ctx, int fd, const char *tmp, const char *name,
                              const char *ref, struct hutch_err *err) {
  _cleanup_close_ int root = open(tmp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  image_progress(ctx, json_pack("{s:s,s:s,s:s+}", "event", "extract", "path", ref, "message",
                                "extracting ", ref));
  if (root < 0) {
    hutch_err_set(err, errno, "open the store's tmp/");
    return NULL;
  }
  if (extract(ctx, fd, root, err) < 0)
    return NULL;
  return import_dir(ctx, tmp, name, ref, err);
}

static json_t *import_path(struct image_ctx *ctx, const char *input, const char *name,
                           const char *shown, struct hutch_err *err) {
  char path[PATH_MAX];
  if (!realpath(input, path)) {
    hutch_err_fail(err, HUTCH_ERR_INVALID, "bad_image", "%.200s: %s", shown ? shown : input,
                   strerror(errno));
    return NULL;
  }

  const char *ref = shown ? shown : path;
  struct stat st;
  if (stat(path, &st) < 0) {
    hutch_err_set(err, errno, "%.200s", ref);
    return NULL;
  }
  if (S_ISDIR(st.st_mode))
    return import_dir(ctx, path, name, ref, err);

  _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) {
    hutch_err_set(err, errno, "%.200s", ref);
    return NULL;
  }
  _cleanup_free_ char *tmp = hutch_images_tmpdir(&ctx->store, err);
  if (!tmp)
    return NULL;
  json_t *record = import_archive(ctx, fd, tmp, name, ref, err);
  struct hutch_err ignored = {0};
  hutch_layer_remove(tmp, &ignored);
  return record;
}

/* import's options: --name's, --ref's, the caps and --replace. */
static int parse_import(struct image_ctx *ctx, int argc, char **argv, const char **name,
                        const char **ref, struct hutch_err *err) {
  static const struct option opts[] = {
      {"name", required_argument, 0, 'n'},      {"replace", no_argument, 0, 'r'},
      {"max-bytes", required_argument, 0, 'b'}, {"max-files", required_argument, 0, 'f'},
      {"ref", required_argument, 0, 'R'},       {0, 0, 0, 0}};
  int c;
  while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
    switch (c) {
    case 'n':
      *name = optarg;
      break;
    case 'r':
      ctx->replace = true;
      break;
    case 'R':
      *ref = optarg;
      break;
    case 'b':
    case 'f':
      if (!parse_u64(optarg, c == 'b' ? &ctx->max_bytes : &ctx->max_files))
        return hutch_err_invalid(err, "--max-%s takes a number", c == 'b' ? "bytes" : "files");
      break;
    default:
      return hutch_err_invalid(err, "usage: hutch template import FILE|DIR --name NAME "
                                    "[--replace] [--max-bytes N] [--max-files N] [--ref REF]");
    }
  }

  if (optind + 1 != argc || !*name)
    return hutch_err_invalid(err, "usage: hutch template import FILE|DIR --name NAME [--replace]");
  if (!hutch_images_name_ok(*name))
    return hutch_err_invalid(err,
                             "'%.200s' is not a template name ([a-z0-9._/-], starting with "
                             "a letter or digit, not 'host')",
                             *name);
  return 0;
}

int cmd_import(struct image_ctx *ctx, int argc, char **argv) {
  const char *name = NULL, *ref = NULL;
  struct hutch_err err = {0};
  if (parse_import(ctx, argc, argv, &name, &ref, &err) < 0)
    return image_fail(ctx, "import", &err);

  json_t *record = import_path(ctx, argv[optind], name, ref, &err);
  return record ? image_done(ctx, "imported", record) : image_fail(ctx, "import", &err);
}
