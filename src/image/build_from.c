/* Reading an earlier stage (build.h): COPY --from through a read-only
 * overlay of the stage's layers, and --chown's names from the stage's
 * /etc/passwd and /etc/group.
 *
 * Why an overlay: a stage's files are spread over its layers, with
 * whiteouts and opaque directories hiding lower ones; the kernel's overlay
 * merges them exactly as a sandbox sees them, where merging by hand would
 * be a second, subtly different implementation. It is mounted read-only,
 * nosuid and nodev, in a child's own mount namespace (the host never sees
 * it, and it goes when the child does), and the sources resolve inside
 * its root (RESOLVE_IN_ROOT), so an absolute link in the image means the
 * image's path, never the host's. The child writes only into the new
 * layer's directory and reports a failure through a pipe. */
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "build.h"
#include "cleanup.h"
#include "layout.h"
#include "util.h"

#define ID_FILE_MAX (4u << 20)

/* In the child: the stage's overlay at work/m, its root as c->src_root. */
static int mount_stage(struct copier *c, const struct stage *st, const char *work,
                       struct hutch_err *err) {
  size_t n = json_array_size(st->layers);
  if (n == 0)
    return hutch_err_not_found(err, "stage %s has no files", st->name ? st->name : "");
  _cleanup_free_ char *m = xasprintf("%s/m", work), *e = xasprintf("%s/e", work);
  _cleanup_free_ char *layers = xasprintf("%s/layers", c->b->ctx->store.dir);

  if (unshare(CLONE_NEWNS) < 0)
    return hutch_err_set(err, errno, "a mount namespace for COPY --from");
  if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
    return hutch_err_set(err, errno, "a mount namespace for COPY --from");
  if (mkdir(m, 0700) < 0)
    return hutch_err_set(err, errno, "COPY --from: work directories");
  if (mkdir(e, 0700) < 0)
    return hutch_err_set(err, errno, "COPY --from: work directories");
  if (chdir(layers) < 0)
    return hutch_err_set(err, errno, "COPY --from: work directories");

  /* Layer names relative to the layers directory keep the options within
   * a page; the empty directory is the bottom (overlay needs two lowers). */
  char opts[4096];
  size_t len = (size_t)snprintf(opts, sizeof opts, "lowerdir=");
  for (size_t i = n; i-- > 0 && len < sizeof opts;)
    len += (size_t)snprintf(opts + len, sizeof opts - len,
                            "%s:", json_string_value(json_array_get(st->layers, i)));
  if (len < sizeof opts)
    len += (size_t)snprintf(opts + len, sizeof opts - len, "%s", e);
  if (len >= sizeof opts)
    return hutch_err_invalid(err, "COPY --from: stage has too many layers (%zu)", n);

  if (mount("hutch-stage", m, "overlay", MS_RDONLY | MS_NOSUID | MS_NODEV, opts) < 0)
    return hutch_err_set(err, errno, "COPY --from: mount the stage's layers");
  if ((c->src_root = open(m, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
    return hutch_err_set(err, errno, "COPY --from: open the stage");
  return 0;
}

/* The child's part: the stage mounted, the sources copied, and a failure's
 * error written whole to out. */
static void __attribute__((noreturn))
copy_in_child(struct copier *c, const struct copy_req *req, const char *work, int out) {
  struct hutch_err e = {0};
  int r = mount_stage(c, req->from, work, &e);
  if (r == 0)
    r = build_copy_sources(c, req, &e);
  if (r < 0)
    (void)!write(out, &e, sizeof e);
  _exit(r < 0 ? 1 : 0);
}

int build_copy_from_stage(struct copier *c, const struct copy_req *req, const char *work,
                          struct hutch_err *err) {
  int p[2];
  if (pipe2(p, O_CLOEXEC) < 0)
    return hutch_err_set(err, errno, "pipe");
  fflush(NULL);
  pid_t pid = fork();
  if (pid < 0) {
    close(p[0]), close(p[1]);
    return hutch_err_set(err, errno, "fork");
  }
  if (pid == 0) {
    close(p[0]);
    copy_in_child(c, req, work, p[1]);
  }

  close(p[1]);
  struct hutch_err child = {0};
  ssize_t got = read_all(p[0], &child, sizeof child);
  close(p[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
    ;

  if (got == (ssize_t)sizeof child) {
    child.msg[sizeof child.msg - 1] = '\0';
    child.code = NULL; /* a pointer of the child's: its literal is ours too, but say nothing */
    *err = child;
    return -1;
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    return hutch_err_set(err, 0, "COPY --from: the copying process failed");
  return 0;
}

/* The text of the regular file dirfd/name, size bytes at most (malloc'd;
 * "" when it cannot be read). */
static char *read_small(int dirfd, const char *name, off_t size) {
  _cleanup_close_ int f = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  char *text = xmalloc((size_t)size + 1);
  ssize_t n = -1;
  if (f >= 0)
    n = read_all(f, text, (size_t)size);
  text[n < 0 ? 0 : n] = '\0';
  return text;
}

/* What layer hex shows at dir/base: its type (S_IFMT bits; with content,
 * a small regular file's text in *content), 0 when it holds nothing there
 * (the layers below decide), or -1 when it hides what is below (a
 * whiteout, an opaque directory, a parent that is no directory). */
static int lookup_in_layer(struct build *b, const char *hex, const char *dir, const char *base,
                           char **content) {
  _cleanup_free_ char *root = xasprintf("layers/%s", hex);
  _cleanup_close_ int rfd = openat(b->ctx->store.dirfd, root, O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (rfd < 0)
    return 0;
  struct open_how how = {
      .flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC,
      .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
  };
  _cleanup_close_ int fd = (int)syscall(SYS_openat2, rfd, dir, &how, sizeof how);
  if (fd < 0 && errno != ENOENT)
    return -1; /* a parent that is a whiteout, a file or a link hides it */
  if (fd < 0)
    return 0;

  char o;
  bool opaque = fgetxattr(fd, "trusted.overlay.opaque", &o, 1) == 1 && o == 'y';
  struct stat fst;
  if (fstatat(fd, base, &fst, AT_SYMLINK_NOFOLLOW) < 0)
    return opaque ? -1 : 0;
  if (S_ISCHR(fst.st_mode) && fst.st_rdev == makedev(0, 0))
    return -1;

  if (content && S_ISREG(fst.st_mode) && fst.st_size < ID_FILE_MAX)
    *content = read_small(fd, base, fst.st_size);
  return (int)(fst.st_mode & S_IFMT);
}

int build_stage_lookup(struct build *b, const struct stage *st, const char *path, char **content) {
  while (*path == '/')
    path++;
  if (content)
    *content = NULL;
  if (!*path)
    return S_IFDIR;

  const char *slash = strrchr(path, '/');
  const char *base = slash ? slash + 1 : path;
  _cleanup_free_ char *dir = slash ? xasprintf("%.*s", (int)(slash - path), path) : xstrdup(".");
  for (size_t i = json_array_size(st->layers); i-- > 0;) {
    const char *hex = json_string_value(json_array_get(st->layers, i));
    int r = lookup_in_layer(b, hex, dir, base, content);
    if (r != 0)
      return r;
  }
  return -1;
}

/* name's id in a passwd or group text (field 3), or -1. */
static long id_of(const char *text, const char *name) {
  size_t nl = strlen(name);
  for (const char *l = text; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
    if (strncmp(l, name, nl) != 0 || l[nl] != ':')
      continue;
    const char *f = strchr(l + nl + 1, ':');
    uint64_t v;
    if (!f)
      return -1;
    size_t dl = strspn(f + 1, "0123456789");
    char num[24];
    if (dl == 0 || dl >= sizeof num)
      return -1;
    memcpy(num, f + 1, dl), num[dl] = '\0';
    return parse_u64(num, &v) && v < HUTCH_ID_RANGE ? (long)v : -1;
  }
  return -1;
}

static int one_id(struct build *b, const struct stage *st, const char *file, const char *s,
                  long *out, struct hutch_err *err) {
  uint64_t v;
  if (parse_u64(s, &v)) {
    if (v >= HUTCH_ID_RANGE)
      return hutch_err_invalid(err, "--chown %s: ids go up to %d", s, HUTCH_ID_RANGE - 1);
    *out = (long)v;
    return 0;
  }
  _cleanup_free_ char *text = NULL;
  *out = -1;
  if (build_stage_lookup(b, st, file, &text) == S_IFREG && text)
    *out = id_of(text, s);
  if (*out < 0)
    return hutch_err_invalid(err, "--chown: no %s '%s' in the stage's /%s",
                             strcmp(file, "etc/passwd") == 0 ? "user" : "group", s, file);
  return 0;
}

int build_chown(struct build *b, const struct stage *st, const char *spec, uid_t *uid, gid_t *gid,
                struct hutch_err *err) {
  _cleanup_free_ char *user = xstrdup(spec);
  char *group = strchr(user, ':');
  if (group)
    *group++ = '\0';
  long u, g;
  if (!user[0] || (group && !group[0]))
    return hutch_err_invalid(err, "--chown=%s: expected USER[:GROUP]", spec);
  if (one_id(b, st, "etc/passwd", user, &u, err) < 0)
    return -1;
  /* A user alone: its numeric id as the group too, as Docker does. */
  g = u;
  if (group && one_id(b, st, "etc/group", group, &g, err) < 0)
    return -1;
  *uid = (uid_t)u;
  *gid = (gid_t)g;
  return 0;
}
