/* `hutch template context TAR... DIR`: unpack build-context archives
 * (plain or compressed tars, as E2B's SDK uploads them for COPY, or the
 * native API's context upload) into the directory DIR, for a build to read.
 *
 * The archives come from API clients: hostile. Each entry lands inside DIR
 * or the whole fails: no absolute path, no `..`, no write through a
 * symlink (libarchive's SECURE flags refuse all three), no hard link to a
 * path those would refuse, only files, directories and links (no devices
 * or fifos), no setuid or setgid bit, nobody's ownership but root's, and
 * at most ctx->max_bytes and ctx->max_files unpacked (a decompression
 * bomb stops there). What a failed unpack wrote stays in DIR, which the
 * caller removes whole. */
#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "image.h"

#define EXTRACT_FLAGS                                                              \
  (ARCHIVE_EXTRACT_PERM | ARCHIVE_EXTRACT_TIME | ARCHIVE_EXTRACT_SECURE_SYMLINKS | \
   ARCHIVE_EXTRACT_SECURE_NODOTDOT | ARCHIVE_EXTRACT_SECURE_NOABSOLUTEPATHS)

/* A path that stays inside the directory: relative, without a `..` part. */
static bool path_inside(const char *p) {
  if (!p || !*p || *p == '/')
    return false;
  for (const char *s = p; *s;) {
    const char *e = strchrnul(s, '/');
    if (e - s == 2 && s[0] == '.' && s[1] == '.')
      return false;
    s = *e ? e + 1 : e;
  }
  return true;
}

static int entry_check(struct archive_entry *e, struct hutch_err *err) {
  const char *path = archive_entry_pathname(e);
  if (!path_inside(path))
    return hutch_err_invalid(err, "entry '%s' leaves the context", path ? path : "");
  const char *link = archive_entry_hardlink(e);
  if (link && !path_inside(link))
    return hutch_err_invalid(err, "hard link '%s' points out of the context", path);
  mode_t type = archive_entry_filetype(e);
  if (!link && type != AE_IFREG && type != AE_IFDIR && type != AE_IFLNK)
    return hutch_err_invalid(err, "entry '%s' is a device, fifo or socket", path);
  archive_entry_set_perm(e, archive_entry_perm(e) & 0777);
  archive_entry_set_uid(e, 0);
  archive_entry_set_gid(e, 0);
  return 0;
}

static int copy_data(struct archive *in, struct archive *out, uint64_t *bytes, uint64_t max,
                     struct hutch_err *err) {
  const void *buf;
  size_t n;
  la_int64_t off;
  int r;
  while ((r = archive_read_data_block(in, &buf, &n, &off)) == ARCHIVE_OK) {
    *bytes += n;
    if (*bytes > max)
      return hutch_err_fail(err, HUTCH_ERR_INVALID, "too_large",
                            "the context unpacks to more than %llu bytes", (unsigned long long)max);
    if (archive_write_data_block(out, buf, n, off) != ARCHIVE_OK)
      return hutch_err_set(err, 0, "%s", archive_error_string(out));
  }
  if (r != ARCHIVE_EOF)
    return hutch_err_invalid(err, "%s", archive_error_string(in));
  return 0;
}

/* One entry of a context tar: counted, checked, and written. */
static int unpack_entry(struct image_ctx *ctx, struct archive *in, struct archive *out,
                        struct archive_entry *e, uint64_t *bytes, uint64_t *files,
                        struct hutch_err *err) {
  if (++*files > ctx->max_files)
    return hutch_err_fail(err, HUTCH_ERR_INVALID, "too_large",
                          "the context holds more than %llu files",
                          (unsigned long long)ctx->max_files);
  if (entry_check(e, err) != 0)
    return -1;

  if (archive_write_header(out, e) != ARCHIVE_OK)
    return hutch_err_invalid(err, "%s: %s", archive_entry_pathname(e), archive_error_string(out));
  if (archive_entry_size(e) > 0 && !archive_entry_hardlink(e)) {
    if (copy_data(in, out, bytes, ctx->max_bytes, err) < 0)
      return -1;
  }
  if (archive_write_finish_entry(out) != ARCHIVE_OK)
    return hutch_err_invalid(err, "%s: %s", archive_entry_pathname(e), archive_error_string(out));
  return 0;
}

/* The n-th tar of the command line into the current directory. Its
 * errors name it by n: hutch serve's context tars lie under its state
 * directory, whose paths are the host's, never a tenant's to read. */
static int unpack_one(struct image_ctx *ctx, const char *tar, int n, uint64_t *bytes,
                      uint64_t *files, struct hutch_err *err) {
  struct archive *in = archive_read_new(), *out = archive_write_disk_new();
  archive_read_support_filter_all(in);
  archive_read_support_format_tar(in);
  archive_read_support_format_gnutar(in);
  archive_write_disk_set_options(out, EXTRACT_FLAGS);

  int r = 0;
  if (archive_read_open_filename(in, tar, 64 << 10) != ARCHIVE_OK)
    r = hutch_err_invalid(err, "context tar %d: %s", n, archive_error_string(in));
  struct archive_entry *e;
  while (r == 0) {
    int h = archive_read_next_header(in, &e);
    if (h == ARCHIVE_EOF)
      break;
    if (h != ARCHIVE_OK && h != ARCHIVE_WARN)
      r = hutch_err_invalid(err, "context tar %d: %s", n, archive_error_string(in));
    else
      r = unpack_entry(ctx, in, out, e, bytes, files, err);
  }

  archive_read_free(in);
  archive_write_free(out);
  return r;
}

int cmd_context(struct image_ctx *ctx, int argc, char **argv) {
  struct hutch_err err = {0};
  if (argc < 3) {
    hutch_err_invalid(&err, "usage: hutch template context TAR... DIR");
    return image_fail(ctx, "context", &err);
  }

  const char *dir = argv[argc - 1];
  struct stat st;
  /* Relative entries resolve from DIR, which must be a real directory. */
  if (lstat(dir, &st) < 0 || !S_ISDIR(st.st_mode) || chdir(dir) < 0) {
    hutch_err_invalid(&err, "%s: not a directory", dir);
    return image_fail(ctx, "context", &err);
  }

  umask(022);
  uint64_t bytes = 0, files = 0;
  for (int i = 1; i < argc - 1; i++)
    if (unpack_one(ctx, argv[i], i, &bytes, &files, &err) < 0)
      return image_fail(ctx, "context", &err);
  image_progress(ctx, json_pack("{s:s,s:I,s:I,s:s}", "event", "context", "bytes", (json_int_t)bytes,
                                "files", (json_int_t)files, "message", "build context unpacked"));
  return 0;
}
