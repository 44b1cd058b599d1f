/* File operations, run in a worker process that is the sandbox user under
 * the workload seccomp filter (child.c): a path resolves exactly as it
 * would for the user's own programs, symlinks included, and can reach
 * nothing they could not. Data goes out on out_fd, comes in on in_fd; the
 * outcome is one JSON object on result_fd: {"ok": {...}} or
 * {"error": {"code", "message"}}. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/capability.h>
#include <linux/magic.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "agent.h"
#include "util.h"

#define LIST_MAX_DEPTH 64

static int result(int fd, json_t *j) {
  char *s = json_dumps(j, JSON_COMPACT);
  json_decref(j);
  int r = s ? write_all(fd, s, strlen(s)) : -1;
  free(s);
  return r;
}

static const char *errno_code(int e) {
  switch (e) {
  case ENOENT:
    return "not_found";
  case EACCES:
  case EPERM:
  case EROFS:
    return "permission_denied";
  case EEXIST:
    return "exists";
  case ENOTDIR:
    return "not_a_directory";
  case EISDIR:
    return "is_a_directory";
  case ENOTEMPTY:
    return "not_empty";
  case ENOSPC:
  case EDQUOT:
  case EFBIG:
    return "no_space";
  case EINVAL:
  case ENAMETOOLONG:
  case ELOOP:
  case EXDEV:
    return "invalid";
  case EOPNOTSUPP:
    return "not_supported";
  default:
    return "io";
  }
}

int files_fail(int fd, int e, const char *what, const char *path) {
  char msg[PATH_MAX + 128];
  snprintf(msg, sizeof msg, "%s %s: %s", what, path, strerror(e));
  result(fd, json_pack("{s:{s:s, s:o}}", "error", "code", errno_code(e), "message",
                       hutch_json_text(msg)));
  return -1;
}

static const char *type_name(mode_t m) {
  if (S_ISREG(m))
    return "file";
  if (S_ISDIR(m))
    return "dir";
  if (S_ISLNK(m))
    return "symlink";
  return "other";
}

/* A link's target as envd gives it, absolute: where the link leads in
 * the end, or, when that is not there, its text taken from the link's
 * directory. NULL when it cannot be read. */
static char *link_target(const char *path, const char *name, int at) {
  char text[PATH_MAX];
  ssize_t n = readlinkat(at, at == AT_FDCWD ? path : name, text, sizeof text - 1);
  if (n < 0)
    return NULL;
  text[n] = '\0';
  char *real = realpath(path, NULL);
  if (real || text[0] == '/')
    return real ? real : xstrdup(text);
  const char *slash = strrchr(path, '/');
  if (!slash)
    return xstrdup(text);
  return xasprintf("%.*s/%s", (int)(slash - path), path, text);
}

/* A file's metadata, as envd keeps it: extended attributes in the
 * user.e2b. namespace, named without it. NULL when there is none. Read
 * without following a link (the entry is the link). */
#define META_NS "user.e2b."
#define META_MAX 4096

static json_t *metadata(const char *path) {
  char names[META_MAX * 2];
  ssize_t n = llistxattr(path, names, sizeof names);
  json_t *m = NULL;
  for (ssize_t i = 0; i < n; i += (ssize_t)strlen(names + i) + 1) {
    const char *name = names + i;
    char value[META_MAX + 1];
    if (strncmp(name, META_NS, strlen(META_NS)) != 0)
      continue;
    ssize_t v = lgetxattr(path, name, value, sizeof value - 1);
    if (v < 0)
      continue;
    value[v] = '\0';
    if (!m)
      m = json_object();
    json_object_set_new(m, name + strlen(META_NS), hutch_json_text(value));
  }
  return m;
}

/* Replace the open file's metadata with meta's keys (an upload's): the
 * old keys go, the new are set. A file system without user attributes
 * fails only when there is something to set. */
static int metadata_set(int fd, json_t *meta) {
  char names[META_MAX * 2];
  ssize_t n = flistxattr(fd, names, sizeof names);
  for (ssize_t i = 0; i < n; i += (ssize_t)strlen(names + i) + 1)
    if (strncmp(names + i, META_NS, strlen(META_NS)) == 0 && fremovexattr(fd, names + i) < 0)
      return -1;
  const char *key;
  json_t *v;
  json_object_foreach(meta, key, v) {
    char *name = xasprintf("%s%s", META_NS, key);
    const char *s = json_string_value(v);
    int r = s ? fsetxattr(fd, name, s, strlen(s), 0) : 0;
    free(name);
    if (r < 0)
      return -1;
  }
  return 0;
}

/* Names come from the file system, where a workload may have made them any
 * bytes: they are reported lossily rather than not at all. */
json_t *files_entry(const char *path, const char *name, const struct stat *st, int at) {
  json_t *e = json_pack("{s:o, s:o, s:s, s:I, s:i, s:i, s:i, s:f}", "name", hutch_json_text(name),
                        "path", hutch_json_text(path), "type", type_name(st->st_mode), "size",
                        (json_int_t)st->st_size, "mode", (int)(st->st_mode & 07777), "uid",
                        (int)st->st_uid, "gid", (int)st->st_gid, "mtime",
                        (double)st->st_mtim.tv_sec + st->st_mtim.tv_nsec / 1e9);
  json_t *meta = metadata(path);
  if (meta)
    json_object_set_new(e, "metadata", meta);
  if (S_ISLNK(st->st_mode)) {
    char *target = link_target(path, name, at);
    if (target)
      json_object_set_new(e, "target", hutch_json_text(target));
    free(target);
  }
  return e;
}

/* From a pipe or into one (the agent's end of the stream), splice(2)
 * moves the bytes in the kernel: the same descriptors, the same process
 * and user, no more reach than read and write; a file system without
 * splice (EINVAL) gets read and write. */
static int copy_splice(int from, int to, uint64_t *total) {
  for (;;) {
    ssize_t r = splice(from, NULL, to, NULL, 1u << 20, SPLICE_F_MOVE);
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0)
      return (int)r;
    *total += (uint64_t)r;
  }
}

static int copy(int from, int to, uint64_t *total) {
  static char buf[256 << 10];
  bool splicing = true;
  for (;;) {
    if (splicing && copy_splice(from, to, total) < 0) {
      if (errno != EINVAL || *total)
        return -1;
      splicing = false;
    }
    /* splice's 0 is the end, except in gVisor's kernel, whose splice from
     * a pipe answers 0 while the pipe is only empty for now: a read,
     * which waits for the writer, tells. */
    ssize_t r = read(from, buf, sizeof buf);
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0)
      return (int)r;
    if (write_all(to, buf, (size_t)r) < 0)
      return -1;
    *total += (uint64_t)r;
  }
}

/* Only regular files are read or written: a FIFO or a device would block
 * the worker forever or act on something that is not a file. */
static int open_regular(const char *path, int flags, mode_t mode, int res) {
  int fd = open(path, flags | O_NOCTTY | O_NONBLOCK | O_CLOEXEC, mode);
  /* ENXIO: a FIFO no process reads, a socket, a device with nothing behind
   * it: none a regular file. */
  if (fd < 0 && errno == ENXIO)
    return files_fail(res, EINVAL, "not a regular file:", path);
  if (fd < 0)
    return files_fail(res, errno, "open", path);
  struct stat st;
  if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
    int e = S_ISDIR(st.st_mode) ? EISDIR : EINVAL;
    close(fd);
    return files_fail(res, e, "not a regular file:", path);
  }
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  return fd;
}

static int op_read(json_t *req, const char *path, int out, int in, int res) {
  (void)req, (void)in;
  uint64_t n = 0;
  int fd = open_regular(path, O_RDONLY, 0, res);
  if (fd < 0)
    return -1;
  int r = copy(fd, out, &n);
  close(fd);
  if (r < 0)
    return files_fail(res, errno, "read", path);
  return result(res, json_pack("{s:{s:I}}", "ok", "size", (json_int_t)n));
}

static int mkdir_parents(char *path, mode_t mode) {
  for (char *s = path + 1; *s; s++) {
    if (*s != '/')
      continue;
    *s = '\0';
    int r = mkdir(path, mode);
    *s = '/';
    if (r < 0 && errno != EEXIST)
      return -1;
  }
  return 0;
}

/* Make what it can of path's missing directories (its parents, and the
 * last one too with last) as the sandbox's root, and give each one made
 * to the owner, as envd does; existing ones are left as they are. Root
 * has no DAC_OVERRIDE: where it may not make one (in the user's own
 * directories), the user's own mkdir goes on from there. A directory made
 * is opened without following a link, so that nothing swapped in its
 * place is chowned through one, and all are made before any is given away
 * (root may not write in the user's). Whether it made the last one. */
static bool owned_dirs(const char *path, bool last, uid_t uid, gid_t gid) {
  char *p = xstrdup(path);
  int dfd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC), *made = NULL;
  size_t n = 0;
  bool made_last = false;
  char *save = NULL, *comp = strtok_r(p, "/", &save);

  while (dfd >= 0 && comp) {
    char *next = strtok_r(NULL, "/", &save);
    if (!next && !last)
      break;

    /* A link on the way (the user's to plant) ends root's walk: the
     * user's own mkdir_parents goes on from there, as the user. */
    int nd = openat(dfd, comp, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    bool now = false;
    if (nd < 0 && errno == ENOENT && mkdirat(dfd, comp, 0755) == 0) {
      nd = openat(dfd, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (nd >= 0) {
        made = xrealloc(made, (n + 1) * sizeof *made);
        made[n++] = fcntl(nd, F_DUPFD_CLOEXEC, 0);
        now = true;
      }
    }

    made_last = !next && now;
    close(dfd);
    dfd = nd;
    comp = next;
  }
  if (dfd >= 0)
    close(dfd);

  for (size_t i = 0; i < n; i++) {
    struct stat st;
    if (made[i] >= 0 && fstat(made[i], &st) == 0 && st.st_uid == 0)
      (void)!fchown(made[i], uid, gid);
    if (made[i] >= 0)
      close(made[i]);
  }

  free(made);
  free(p);
  return made_last;
}

/* The worker becomes the owner for good: its ids, and no capability
 * left (the kernel clears them as root's ids go; capset says so again). */
static int become(uid_t uid, gid_t gid) {
  struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
  struct __user_cap_data_struct d[2] = {{0, 0, 0}, {0, 0, 0}};
  if (setresgid(gid, gid, gid) < 0)
    return -1;
  if (setresuid(uid, uid, uid) < 0)
    return -1;
  if (syscall(SYS_capset, &h, d) < 0)
    return -1;
  return 0;
}

/* A worker job.c started as root for a request with an "owner": the
 * missing directories of an absolute path with "parents" made for the
 * owner (owned_dirs), then the owner for good. Whether it made the last. */
static bool owner_first(json_t *req, const char *path, bool last) {
  json_t *owner = json_object_get(req, "owner");
  if (!owner)
    return false;
  uid_t uid = (uid_t)json_integer_value(json_object_get(owner, "uid"));
  gid_t gid = (gid_t)json_integer_value(json_object_get(owner, "gid"));
  bool made = path[0] == '/' && json_is_true(json_object_get(req, "parents")) &&
              owned_dirs(path, last, uid, gid);
  if (become(uid, gid) < 0)
    _exit(125); /* never go on as root */
  return made;
}

static int op_write(json_t *req, const char *path, int out, int in, int res) {
  (void)out;
  owner_first(req, path, false);

  json_int_t mode = json_is_integer(json_object_get(req, "mode"))
                        ? json_integer_value(json_object_get(req, "mode"))
                        : 0644;
  /* An exclusive write makes the file here, or does not happen at all (a
   * link there is something too). */
  int how = O_TRUNC;
  if (json_is_true(json_object_get(req, "exclusive")))
    how = O_EXCL;
  else if (json_is_true(json_object_get(req, "append")))
    how = O_APPEND;

  if (json_is_true(json_object_get(req, "parents"))) {
    char *p = xstrdup(path);
    int r = mkdir_parents(p, 0755);
    free(p);
    if (r < 0)
      return files_fail(res, errno, "create parents of", path);
  }

  int fd = open_regular(path, O_WRONLY | O_CREAT | how, (mode_t)(mode & 07777), res);
  if (fd < 0)
    return -1;

  json_t *meta = json_object_get(req, "metadata");
  if (json_is_object(meta) && metadata_set(fd, meta) < 0) {
    int e = errno;
    close(fd);
    return files_fail(res, e, "set the metadata of", path);
  }

  uint64_t n = 0;
  int r = copy(in, fd, &n);
  int e = errno;
  if (close(fd) < 0 && r == 0) {
    r = -1;
    e = errno;
  }
  if (r < 0)
    return files_fail(res, e, "write", path);

  json_t *ok = json_pack("{s:I}", "size", (json_int_t)n);
  if (json_object_size(meta))
    json_object_set(ok, "metadata", meta);
  return result(res, json_pack("{s:o}", "ok", ok));
}

static int name_cmp(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* A directory's names, sorted byte-wise as envd's (Go's os.ReadDir) are;
 * NULL when it cannot be read (errno). */
static char **dir_names(DIR *d, size_t *n) {
  char **names = NULL;
  size_t cap = 0;
  *n = 0;
  errno = 0;
  for (struct dirent *de; (de = readdir(d));) {
    if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
      continue;
    if (*n == cap)
      names = xrealloc(names, (cap = cap ? 2 * cap : 64) * sizeof *names);
    names[(*n)++] = xstrdup(de->d_name);
  }
  if (errno) {
    while (*n)
      free(names[--*n]);
    free(names);
    return NULL;
  }
  if (*n)
    qsort(names, *n, sizeof *names, name_cmp);
  return names ? names : xcalloc(1, sizeof *names);
}

static int list_dir(int fd, const char *path, int depth, int out, uint64_t *count) {
  DIR *d = fdopendir(fd);
  if (!d) {
    close(fd);
    return -1;
  }

  size_t n;
  char **names = dir_names(d, &n);
  int r = names ? 0 : -1;
  for (size_t i = 0; i < n; i++) {
    struct stat st;
    const char *name = names[i];
    if (r < 0)
      continue;
    if (fstatat(dirfd(d), name, &st, AT_SYMLINK_NOFOLLOW) < 0)
      continue; /* gone since readdir */

    char *child = xasprintf("%s%s%s", path, path[strlen(path) - 1] == '/' ? "" : "/", name);
    char *line =
        json_dumps(files_entry(child, name, &st, dirfd(d)), JSON_COMPACT | JSON_ENSURE_ASCII);
    r = line ? write_all(out, line, strlen(line)) : -1;
    if (r == 0)
      r = write_all(out, "\n", 1);
    free(line);
    (*count)++;

    if (r == 0 && S_ISDIR(st.st_mode) && depth > 1) {
      int sub = openat(dirfd(d), name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (sub >= 0)
        list_dir(sub, child, depth - 1, out, count);
    }
    free(child);
  }

  for (size_t i = 0; i < n; i++)
    free(names[i]);
  free(names);
  int e = errno;
  closedir(d);
  errno = e;
  return r;
}

static int op_list(json_t *req, const char *path, int out, int in, int res) {
  (void)in;
  json_int_t depth = json_is_integer(json_object_get(req, "depth"))
                         ? json_integer_value(json_object_get(req, "depth"))
                         : 1;
  if (depth < 1 || depth > LIST_MAX_DEPTH)
    return files_fail(res, EINVAL, "depth out of range for", path);
  int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    return files_fail(res, errno, "list", path);
  uint64_t count = 0;
  if (list_dir(fd, path, (int)depth, out, &count) < 0)
    return files_fail(res, errno, "list", path);
  return result(res, json_pack("{s:{s:I}}", "ok", "count", (json_int_t)count));
}

static int op_stat(json_t *req, const char *path, int out, int in, int res) {
  (void)req, (void)out, (void)in;
  struct stat st;
  if (lstat(path, &st) < 0)
    return files_fail(res, errno, "stat", path);
  const char *slash = strrchr(path, '/');
  const char *name = slash && slash[1] ? slash + 1 : path;
  return result(res, json_pack("{s:o}", "ok", files_entry(path, name, &st, AT_FDCWD)));
}

static int op_mkdir(json_t *req, const char *path, int out, int in, int res) {
  (void)out, (void)in;
  if (owner_first(req, path, true))
    return result(res, json_pack("{s:{s:b}}", "ok", "created", 1));
  if (json_is_true(json_object_get(req, "parents"))) {
    char *p = xstrdup(path);
    int r = mkdir_parents(p, 0755);
    free(p);
    if (r < 0)
      return files_fail(res, errno, "mkdir", path);
  }
  bool created = mkdir(path, 0755) == 0;
  struct stat st;
  if (!created && (errno != EEXIST || stat(path, &st) < 0 || !S_ISDIR(st.st_mode)))
    return files_fail(res, errno == EEXIST ? EEXIST : errno, "mkdir", path);
  return result(res, json_pack("{s:{s:b}}", "ok", "created", created));
}

static int remove_entry(const char *p, const struct stat *st, int type, struct FTW *ftw) {
  (void)st, (void)ftw;
  int r = type == FTW_DP ? rmdir(p) : unlink(p);
  return r < 0 && errno != ENOENT ? -1 : 0;
}

static int op_remove(json_t *req, const char *path, int out, int in, int res) {
  (void)out, (void)in;
  struct stat st;
  if (lstat(path, &st) < 0)
    return files_fail(res, errno, "remove", path);
  int r;
  if (!S_ISDIR(st.st_mode))
    r = unlink(path);
  else if (json_is_true(json_object_get(req, "recursive")))
    r = nftw(path, remove_entry, 32, FTW_DEPTH | FTW_PHYS);
  else
    r = rmdir(path);
  if (r < 0)
    return files_fail(res, errno, "remove", path);
  return result(res, json_pack("{s:{}}", "ok"));
}

static int op_move(json_t *req, const char *path, int out, int in, int res) {
  (void)out, (void)in;
  const char *to = json_string_value(json_object_get(req, "to"));
  if (!to || !*to)
    return files_fail(res, EINVAL, "move: no destination for", path);
  if (rename(path, to) < 0)
    return files_fail(res, errno, "move", path);
  return result(res, json_pack("{s:{}}", "ok"));
}

/* A request with a "root" (a volume's worker, docs/e2b.md) acts beneath
 * that directory alone: no link on the path may be crossed, and the last
 * part may be one only for a stat or a remove, which act on the link
 * itself; a read, a write or a list of a link is refused. A missing part
 * is the operation's to report (a write makes it, a directory). The
 * volume is also mounted by sandboxes of the same tenant, which could
 * swap a directory for a link between this check and the operation: what
 * that could reach is the worker's own root, which any sandbox of the
 * tenant sees already. 0, or -1 after the error. */
static int confined(json_t *req, const char *op, const char *path, int res) {
  const char *root = json_string_value(json_object_get(req, "root"));
  if (!root)
    return 0;
  size_t n = strlen(root);
  if (strncmp(path, root, n) != 0 || (path[n] && path[n] != '/') ||
      json_object_get(req, "to")) /* a move names a second path: none here */
    return files_fail(res, EXDEV, "outside", root);

  /* A part at a time, each opened without following it: gVisor 2022 has
   * no openat2 to ask RESOLVE_NO_SYMLINKS of. */
  int dir = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0)
    return files_fail(res, errno, "open", root);

  for (const char *p = path + n; *p;) {
    p += strspn(p, "/");
    size_t len = strcspn(p, "/");
    if (!len || (len == 1 && *p == '.')) {
      p += len;
      continue;
    }

    char part[NAME_MAX + 1];
    if (len > NAME_MAX || (len == 2 && strncmp(p, "..", 2) == 0)) {
      close(dir);
      return files_fail(res, EXDEV, "outside the root:", path);
    }
    memcpy(part, p, len);
    part[len] = '\0';
    p += len;

    int next = openat(dir, part, O_PATH | O_NOFOLLOW | O_CLOEXEC);
    int e = errno;
    close(dir);
    if (next < 0) /* missing, or not a directory: the operation tells */
      return e == ENOENT || e == ENOTDIR ? 0 : files_fail(res, e, "open", path);

    struct stat st;
    bool last = !p[strspn(p, "/")];
    if (fstat(next, &st) == 0 && S_ISLNK(st.st_mode) &&
        (!last || (strcmp(op, "stat") != 0 && strcmp(op, "remove") != 0))) {
      close(next);
      return files_fail(res, ELOOP, "a link on the way to", path);
    }
    dir = next;
  }

  close(dir);
  return 0;
}

/* ---- changed: an exec's artifacts ---- */

#define CHANGED_VISIT_MAX 20000       /* entries looked at */
#define CHANGED_FILES_MAX 100         /* files reported */
#define CHANGED_BYTES_MAX (32u << 10) /* of their paths: the result stays under the agent's cap */

/* Tool caches and version control, and the bash kernel's cells
 * (share/kernels/kernel.py): not what a command is asked to make. */
static bool not_artifacts(const char *name) {
  static const char *const skip[] = {".cache", ".config",     ".local",       ".npm", ".ipython",
                                     ".git",   "__pycache__", "node_modules", NULL};
  for (const char *const *s = skip; *s; s++)
    if (strcmp(name, *s) == 0)
      return true;
  return strncmp(name, "hutch-bash-", 11) == 0;
}

/* Under /proc, /sys or /dev: the kernel's own, not files anyone made, and
 * (/proc/1) the agent's, which looks as itself (job.c, exec_changed). */
static bool kernel_fs(const char *path) {
  static const char *const fs[] = {"/proc", "/sys", "/dev"};
  for (size_t i = 0; i < ARRAY_SIZE(fs); i++) {
    size_t n = strlen(fs[i]);
    if (strncmp(path, fs[i], n) == 0 && (path[n] == '\0' || path[n] == '/'))
      return true;
  }
  return false;
}

/* Not looked in, by what a directory is on: the kernel's own file
 * systems, nothing anyone made, and (/proc/1) the agent's own, which it
 * may open whatever its file-system ids; and a read-only mount, where no
 * exec changed anything: the host template's /usr, most of what a cwd of
 * "/" holds (it took the whole budget, 130 ms after every such exec). */
static bool unchanging_dir(int fd) {
  static const long types[] = {PROC_SUPER_MAGIC, SYSFS_MAGIC, CGROUP_SUPER_MAGIC,
                               CGROUP2_SUPER_MAGIC, DEVPTS_SUPER_MAGIC};
  struct statfs sf;
  if (fstatfs(fd, &sf) < 0 || (sf.f_flags & ST_RDONLY))
    return true;
  for (size_t i = 0; i < ARRAY_SIZE(types); i++)
    if ((long)sf.f_type == types[i])
      return true;
  return false;
}

struct changed {
  int64_t since_ns;
  unsigned visits;
  size_t bytes;
  json_t *files;
  const char *const *roots; /* each looked in on its own, never from another */
  const char *root;         /* the one looked in now, as asked */
  int root_fd;              /* it, opened */
  char **dirs;              /* beneath it, to look in: a stack of paths relative to root_fd */
  size_t ndirs, cap;
};

static void changed_push(struct changed *c, char *dir) {
  if (c->ndirs == c->cap) {
    c->cap = c->cap ? 2 * c->cap : 64;
    c->dirs = xrealloc(c->dirs, c->cap * sizeof *c->dirs);
  }
  c->dirs[c->ndirs++] = dir;
}

/* A directory beneath the root (rel "" the root itself), opened without
 * following a link anywhere on the way: the agent looks itself, and a link
 * a workload swapped in (to /proc/1/fd/N, the agent's own descriptors)
 * must lead nowhere. gVisor's kernel has no openat2: there only a worker
 * looks, which is the user, and O_NOFOLLOW guards the last step. */
static int open_beneath(int root, const char *rel) {
  struct open_how how = {.flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC,
                         .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS};
  const char *p = *rel ? rel : ".";
  int fd = (int)syscall(SYS_openat2, root, p, &how, sizeof how);
  if (fd < 0 && errno == ENOSYS)
    fd = openat(root, p, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  return fd;
}

/* A root as asked: an ordinary link on its path is the user's to follow,
 * a magic one (/proc/PID/fd, root, cwd) never. */
static int open_root(const char *path) {
  struct open_how how = {.flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC,
                         .resolve = RESOLVE_NO_MAGICLINKS};
  int fd = (int)syscall(SYS_openat2, AT_FDCWD, path, &how, sizeof how);
  if (fd < 0 && errno == ENOSYS)
    fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  return fd;
}

/* One directory's regular files whose inode changed at or after since_ns
 * (lstat: a symlink is never followed, nor reported), its subdirectories
 * to the stack. */
static void changed_dir(struct changed *c, const char *rel) {
  int fd = open_beneath(c->root_fd, rel);
  DIR *d = fd < 0 || unchanging_dir(fd) ? NULL : fdopendir(fd);
  if (!d) {
    if (fd >= 0)
      close(fd);
    return;
  }

  char dir[PATH_MAX];
  if (snprintf(dir, sizeof dir, "%s%s%s", strcmp(c->root, "/") ? c->root : "", *rel ? "/" : "",
               rel) >= (int)sizeof dir) {
    closedir(d);
    return;
  }

  struct dirent *e;
  while ((e = readdir(d)) && c->visits < CHANGED_VISIT_MAX) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
      continue;
    c->visits++;

    char path[PATH_MAX], sub[PATH_MAX];
    struct stat st;
    if (snprintf(path, sizeof path, "%s/%s", dir, e->d_name) >= (int)sizeof path)
      continue;
    if (snprintf(sub, sizeof sub, "%s%s%s", rel, *rel ? "/" : "", e->d_name) >= (int)sizeof sub)
      continue;
    if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
      continue;

    int64_t ctime_ns = (int64_t)st.st_ctim.tv_sec * 1000000000 + st.st_ctim.tv_nsec;
    /* The kernel's own file systems (a cwd of "/"): not files anyone made. */
    bool skip = not_artifacts(e->d_name) || kernel_fs(path);
    for (const char *const *r = c->roots; *r && !skip; r++)
      skip = strcmp(path, *r) == 0;

    if (S_ISDIR(st.st_mode) && !skip)
      changed_push(c, xstrdup(sub));
    else if (S_ISREG(st.st_mode) && ctime_ns >= c->since_ns &&
             json_array_size(c->files) < CHANGED_FILES_MAX &&
             c->bytes + strlen(path) <= CHANGED_BYTES_MAX) {
      c->bytes += strlen(path);
      json_array_append_new(c->files,
                            json_pack("{s:o,s:I,s:I}", "path", hutch_json_text(path), "size",
                                      (json_int_t)st.st_size, "ctime_ns", (json_int_t)ctime_ns));
    }
  }

  closedir(d);
}

static int by_path(const void *a, const void *b) {
  return strcmp(json_string_value(json_object_get(*(json_t *const *)a, "path")),
                json_string_value(json_object_get(*(json_t *const *)b, "path")));
}

/* The regular files under path, home (NULL: none) and /tmp whose inode
 * changed (written, made, moved in) at or after since_ns, by path, with
 * what the caller can read: what it cannot is not looked in. */
json_t *files_changed_since(const char *path, const char *home, int64_t since_ns) {
  struct changed c = {.since_ns = since_ns, .files = json_array()};
  /* The likeliest small first: a cwd of "/" would take the whole budget. */
  const char *roots[] = {"/tmp", home ? home : "/tmp", path, NULL};
  c.roots = roots;

  for (size_t i = 0; roots[i]; i++) {
    bool again = kernel_fs(roots[i]);
    for (size_t k = 0; k < i; k++)
      again |= strcmp(roots[i], roots[k]) == 0;
    if (again)
      continue;
    c.root_fd = open_root(roots[i]);
    if (c.root_fd < 0)
      continue;

    c.root = roots[i];
    changed_push(&c, xstrdup(""));
    while (c.ndirs > 0 && c.visits < CHANGED_VISIT_MAX) {
      char *dir = c.dirs[--c.ndirs];
      changed_dir(&c, dir);
      free(dir);
    }
    while (c.ndirs > 0)
      free(c.dirs[--c.ndirs]);
    close(c.root_fd);
  }
  free(c.dirs);

  /* The files, sorted by path. */
  size_t n = json_array_size(c.files);
  json_t **items = xcalloc(n ? n : 1, sizeof *items);
  for (size_t i = 0; i < n; i++)
    items[i] = json_incref(json_array_get(c.files, i));
  qsort(items, n, sizeof *items, by_path);
  json_array_clear(c.files);
  for (size_t i = 0; i < n; i++)
    json_array_append_new(c.files, items[i]);
  free(items);

  return c.files;
}

/* The same, for a file worker, which runs as the user (the agent looks
 * itself where it can: job.c, exec_changed). */
static int op_changed(json_t *req, const char *path, int out, int in, int res) {
  (void)out, (void)in;
  struct who w;
  struct hutch_err err = {0};
  const char *user = json_string_value(json_object_get(req, "user"));
  /* A UID without a name has "/" for a home: none to look in. */
  bool home = agent_who(user, &w, &err) == 0 && strcmp(w.home, "/") != 0;
  json_t *files = files_changed_since(path, home ? w.home : NULL,
                                      json_integer_value(json_object_get(req, "since_ns")));
  return result(res, json_pack("{s:{s:o}}", "ok", "files", files));
}

int files_run(json_t *req, int out_fd, int in_fd, int result_fd) {
  static const struct {
    const char *op;
    int (*run)(json_t *, const char *, int, int, int);
  } ops[] = {{"read", op_read}, {"write", op_write},    {"list", op_list},
             {"stat", op_stat}, {"mkdir", op_mkdir},    {"remove", op_remove},
             {"move", op_move}, {"watch", watch_files}, {"changed", op_changed}};
  const char *op = json_string_value(json_object_get(req, "op"));
  const char *path = json_string_value(json_object_get(req, "path"));
  if (!path || !*path || strlen(path) >= PATH_MAX)
    return files_fail(result_fd, EINVAL, "request:", "a non-empty \"path\" is required");

  for (size_t i = 0; i < ARRAY_SIZE(ops); i++) {
    if (!op || strcmp(op, ops[i].op) != 0)
      continue;
    if (confined(req, op, path, result_fd) < 0)
      return -1;
    return ops[i].run(req, path, out_fd, in_fd, result_fd);
  }

  return files_fail(result_fd, EINVAL, "unknown file operation", op ? op : "(none)");
}
