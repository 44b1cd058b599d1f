/* `hutch cp`'s - (cp.h): a tree of the sandbox written to stdout as a
 * pax tar, and a tar (any format and compression libarchive reads) from
 * stdin made in the sandbox, entry by entry, as docker cp's - does.
 *
 * A tar from stdin is hostile input: an entry's path is taken only when
 * it stays under the directory named (no absolute path, no .. part), and
 * links in it are not made (the files routes make files and directories
 * only), so nothing it holds can send a later entry elsewhere. */
#include "cp.h"

#include <archive.h>
#include <archive_entry.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ctl.h"
#include "util.h"

/* ---- out: the sandbox's tree as a tar ---- */

struct tar {
  struct ctl *ctl;
  struct archive *a;
};

static struct archive_entry *header(const char *rel, const struct cp_entry *e, mode_t type) {
  struct archive_entry *ae = archive_entry_new();
  archive_entry_set_pathname(ae, rel);
  archive_entry_set_filetype(ae, type);
  archive_entry_set_perm(ae, e->mode & 07777 ? e->mode & 0777 : (type == AE_IFDIR ? 0755 : 0644));
  archive_entry_set_mtime(ae, (time_t)e->mtime, 0);
  if (type == AE_IFREG)
    archive_entry_set_size(ae, (la_int64_t)e->size);
  return ae;
}

static bool write_header(struct tar *t, struct archive_entry *ae) {
  int r = archive_write_header(t->a, ae);
  archive_entry_free(ae);
  if (r < ARCHIVE_WARN)
    ctl_fail(t->ctl, CTL_EXIT_FAILED, "writing the tar: %s", archive_error_string(t->a));
  return r >= ARCHIVE_WARN;
}

static void *tar_enter(void *out, void *dir, const char *name, const char *rel,
                       const struct cp_entry *e) {
  (void)dir, (void)name;
  return write_header(out, header(rel, e, AE_IFDIR)) ? out : NULL; /* any non-NULL */
}

static void tar_leave(void *out, void *dir) {
  (void)out, (void)dir;
}

/* The header says the size stat gave: libarchive pads a file that shrank
 * meanwhile and cuts one that grew, so the tar stays well formed. */
static bool tar_begin(void *out, void *dir, const char *name, const char *rel,
                      const struct cp_entry *e) {
  (void)dir, (void)name;
  return write_header(out, header(rel, e, AE_IFREG));
}

static bool tar_write(void *out, const char *data, size_t n) {
  struct tar *t = out;
  if (archive_write_data(t->a, data, n) < 0) {
    ctl_fail(t->ctl, CTL_EXIT_FAILED, "writing the tar: %s", archive_error_string(t->a));
    return false;
  }
  return true;
}

static bool tar_end(void *out, bool ok) {
  struct tar *t = out;
  (void)ok;
  return archive_write_finish_entry(t->a) >= ARCHIVE_WARN;
}

static const struct cp_out tar_ops = {
    .enter = tar_enter, .leave = tar_leave, .begin = tar_begin, .write = tar_write, .end = tar_end};

int cp_tar_out(const struct cp_remote *r, const struct cp_entry *e, const char *name, bool follow) {
  struct archive *a = archive_write_new();
  archive_write_set_format_pax_restricted(a);
  archive_write_set_bytes_in_last_block(a, 1);
  if (archive_write_open_fd(a, 1) != ARCHIVE_OK) {
    ctl_fail(r->ctl, CTL_EXIT_FAILED, "stdout: %s", archive_error_string(a));
    archive_write_free(a);
    return CTL_EXIT_FAILED;
  }
  struct cp_remote quiet = *r;
  quiet.progress = false; /* stderr may be the terminal, stdout is the tar */
  struct tar t = {.ctl = r->ctl, .a = a};
  struct cp_walk w = {.r = &quiet, .ops = &tar_ops, .out = &t, .follow = follow};
  cp_walk(&w, NULL, name, name, e, 0);
  cp_seen_free(&w.seen);
  if (archive_write_close(a) != ARCHIVE_OK) {
    ctl_fail(r->ctl, CTL_EXIT_FAILED, "writing the tar: %s", archive_error_string(a));
    w.failed = true;
  }
  archive_write_free(a);
  return w.failed ? CTL_EXIT_FAILED : 0;
}

/* ---- in: a tar from stdin ---- */

/* The entry's path without leading ./ (NULL when it would leave the
 * directory: absolute, or a .. part). */
static const char *inside(const char *path) {
  if (!path || path[0] == '/')
    return NULL;
  while (strncmp(path, "./", 2) == 0)
    path += 2;
  for (const char *p = path; *p;) {
    size_t n = strcspn(p, "/");
    if (n == 2 && strncmp(p, "..", 2) == 0)
      return NULL;
    p += n;
    p += strspn(p, "/");
  }
  return path;
}

static size_t read_entry(void *arg, char *buf, size_t cap) {
  struct tar *t = arg;
  la_ssize_t n = archive_read_data(t->a, buf, cap);
  if (n < 0) {
    ctl_fail(t->ctl, CTL_EXIT_FAILED, "reading the tar: %s", archive_error_string(t->a));
    return (size_t)-1;
  }
  return (size_t)n;
}

/* One entry made at dir/rel; false when the copy must stop. */
static bool make_entry(const struct cp_remote *r, struct tar *t, struct archive_entry *ae,
                       const char *dir, const char *rel) {
  char *path = xasprintf("%s/%s", strcmp(dir, "/") == 0 ? "" : dir, rel);
  bool ok = true;
  size_t n = strlen(path);
  while (n > 1 && path[n - 1] == '/')
    path[--n] = '\0';
  if (rel[0] == '\0' || archive_entry_filetype(ae) == AE_IFDIR)
    ok = cp_mkdir(r, path) == 0;
  else if (archive_entry_filetype(ae) == AE_IFREG && !archive_entry_hardlink(ae))
    ok = cp_put(r, path, (uint64_t)archive_entry_size(ae), read_entry, t) == 0;
  else
    ctl_fail(r->ctl, 0, "warning: %s in the tar is not a file or directory: skipped", rel);
  free(path);
  return ok;
}

int cp_tar_in(const struct cp_remote *r, const char *dir) {
  struct archive *a = archive_read_new();
  archive_read_support_format_all(a);
  archive_read_support_filter_all(a);
  if (archive_read_open_fd(a, 0, 65536) != ARCHIVE_OK) {
    ctl_fail(r->ctl, CTL_EXIT_FAILED, "stdin: %s", archive_error_string(a));
    archive_read_free(a);
    return CTL_EXIT_FAILED;
  }
  if (cp_mkdir(r, dir) < 0) {
    archive_read_free(a);
    return CTL_EXIT_FAILED;
  }

  int code = 0;
  struct tar t = {.ctl = r->ctl, .a = a};
  struct archive_entry *ae;
  int rr;
  while ((rr = archive_read_next_header(a, &ae)) == ARCHIVE_OK || rr == ARCHIVE_WARN) {
    const char *rel = inside(archive_entry_pathname(ae));
    if (!rel) {
      ctl_fail(r->ctl, CTL_EXIT_FAILED, "refused the tar's entry %s: it leads out of %s",
               archive_entry_pathname(ae) ?: "(no name)", dir);
      code = CTL_EXIT_FAILED;
      break;
    }
    if (!make_entry(r, &t, ae, dir, rel)) {
      code = CTL_EXIT_FAILED;
      break;
    }
  }
  if (code == 0 && rr != ARCHIVE_EOF) {
    ctl_fail(r->ctl, CTL_EXIT_FAILED, "reading the tar: %s", archive_error_string(a));
    code = CTL_EXIT_FAILED;
  }
  archive_read_free(a);
  return code;
}
