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
#include <sys/stat.h>
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
  case ENOENT: return "not_found";
  case EACCES: case EPERM: case EROFS: return "permission_denied";
  case EEXIST: return "exists";
  case ENOTDIR: return "not_a_directory";
  case EISDIR: return "is_a_directory";
  case ENOTEMPTY: return "not_empty";
  case ENOSPC: case EDQUOT: case EFBIG: return "no_space";
  case EINVAL: case ENAMETOOLONG: case ELOOP: case EXDEV: return "invalid";
  default: return "io";
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
  return S_ISREG(m) ? "file" : S_ISDIR(m) ? "dir" : S_ISLNK(m) ? "symlink" : "other";
}

/* Names come from the file system, where a workload may have made them any
 * bytes: they are reported lossily rather than not at all. */
static json_t *entry(const char *path, const char *name, const struct stat *st, int at) {
  json_t *e = json_pack("{s:o, s:o, s:s, s:I, s:i, s:i, s:i, s:f}", "name", hutch_json_text(name),
                        "path", hutch_json_text(path),
                        "type", type_name(st->st_mode), "size", (json_int_t)st->st_size, "mode",
                        (int)(st->st_mode & 07777), "uid", (int)st->st_uid, "gid",
                        (int)st->st_gid, "mtime",
                        (double)st->st_mtim.tv_sec + st->st_mtim.tv_nsec / 1e9);
  if (S_ISLNK(st->st_mode)) {
    char target[PATH_MAX];
    ssize_t n = readlinkat(at, at == AT_FDCWD ? path : name, target, sizeof target - 1);
    if (n >= 0) {
      target[n] = '\0';
      json_object_set_new(e, "target", hutch_json_text(target));
    }
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

static int op_write(json_t *req, const char *path, int out, int in, int res) {
  (void)out;
  json_int_t mode = json_is_integer(json_object_get(req, "mode"))
                        ? json_integer_value(json_object_get(req, "mode"))
                        : 0644;
  bool append = json_is_true(json_object_get(req, "append"));
  if (json_is_true(json_object_get(req, "parents"))) {
    char *p = xstrdup(path);
    int r = mkdir_parents(p, 0755);
    free(p);
    if (r < 0)
      return files_fail(res, errno, "create parents of", path);
  }
  int fd = open_regular(path, O_WRONLY | O_CREAT | (append ? O_APPEND : O_TRUNC),
                        (mode_t)(mode & 07777), res);
  if (fd < 0)
    return -1;
  uint64_t n = 0;
  int r = copy(in, fd, &n);
  int e = errno;
  if (close(fd) < 0 && r == 0) {
    r = -1;
    e = errno;
  }
  if (r < 0)
    return files_fail(res, e, "write", path);
  return result(res, json_pack("{s:{s:I}}", "ok", "size", (json_int_t)n));
}

static int list_dir(int fd, const char *path, int depth, int out, uint64_t *count) {
  DIR *d = fdopendir(fd);
  if (!d) {
    close(fd);
    return -1;
  }
  for (struct dirent *de; (de = readdir(d));) {
    if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
      continue;
    struct stat st;
    if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
      continue; /* gone since readdir */
    char *child = xasprintf("%s%s%s", path, path[strlen(path) - 1] == '/' ? "" : "/", de->d_name);
    char *line = json_dumps(entry(child, de->d_name, &st, dirfd(d)), JSON_COMPACT | JSON_ENSURE_ASCII);
    int r = line ? write_all(out, line, strlen(line)) : -1;
    if (r == 0)
      r = write_all(out, "\n", 1);
    free(line);
    (*count)++;
    if (r == 0 && S_ISDIR(st.st_mode) && depth > 1) {
      int sub = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (sub >= 0)
        list_dir(sub, child, depth - 1, out, count);
    }
    free(child);
    if (r < 0) {
      closedir(d);
      return -1;
    }
  }
  closedir(d);
  return 0;
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
  return result(res, json_pack("{s:o}", "ok", entry(path, name, &st, AT_FDCWD)));
}

static int op_mkdir(json_t *req, const char *path, int out, int in, int res) {
  (void)out, (void)in;
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
  return (type == FTW_DP ? rmdir(p) : unlink(p)) < 0 && errno != ENOENT ? -1 : 0;
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

/* ---- changed: an exec's artifacts ---- */

#define CHANGED_VISIT_MAX 20000       /* entries looked at */
#define CHANGED_FILES_MAX 100         /* files reported */
#define CHANGED_BYTES_MAX (32u << 10) /* of their paths: the result stays under the agent's cap */

/* Tool caches and version control, and the bash kernel's cells
 * (share/kernels/kernel.py): not what a command is asked to make. */
static bool not_artifacts(const char *name) {
  static const char *const skip[] = {".cache", ".config", ".local", ".npm", ".ipython", ".git",
                                     "__pycache__", "node_modules", NULL};
  for (const char *const *s = skip; *s; s++)
    if (strcmp(name, *s) == 0)
      return true;
  return strncmp(name, "hutch-bash-", 11) == 0;
}

struct changed {
  int64_t since_ns;
  unsigned visits;
  size_t bytes;
  json_t *files;
  const char *const *roots; /* each looked in on its own, never from another */
  char **dirs; /* to look in: a stack */
  size_t ndirs, cap;
};

static void changed_push(struct changed *c, char *dir) {
  if (c->ndirs == c->cap) {
    c->cap = c->cap ? 2 * c->cap : 64;
    c->dirs = xrealloc(c->dirs, c->cap * sizeof *c->dirs);
  }
  c->dirs[c->ndirs++] = dir;
}

/* One directory's regular files whose inode changed at or after since_ns
 * (lstat: a symlink is never followed, nor reported), its subdirectories
 * to the stack. */
static void changed_dir(struct changed *c, const char *dir) {
  DIR *d = opendir(dir);
  if (!d)
    return;
  struct dirent *e;
  while ((e = readdir(d)) && c->visits < CHANGED_VISIT_MAX) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
      continue;
    c->visits++;
    char path[PATH_MAX];
    struct stat st;
    if (snprintf(path, sizeof path, "%s/%s", strcmp(dir, "/") ? dir : "", e->d_name) >=
            (int)sizeof path ||
        fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
      continue;
    int64_t ctime_ns = (int64_t)st.st_ctim.tv_sec * 1000000000 + st.st_ctim.tv_nsec;
    /* The kernel's own file systems (a cwd of "/"): not files anyone made. */
    bool skip = not_artifacts(e->d_name) || strcmp(path, "/proc") == 0 ||
                strcmp(path, "/sys") == 0 || strcmp(path, "/dev") == 0;
    for (const char *const *r = c->roots; *r && !skip; r++)
      skip = strcmp(path, *r) == 0;
    if (S_ISDIR(st.st_mode) && !skip)
      changed_push(c, xstrdup(path));
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

/* The regular files under path, the user's home and /tmp whose inode
 * changed (written, made, moved in) at or after since_ns, by path. As the
 * user: what it cannot read is not looked in. */
static int op_changed(json_t *req, const char *path, int out, int in, int res) {
  (void)out, (void)in;
  struct changed c = {.since_ns = json_integer_value(json_object_get(req, "since_ns")),
                      .files = json_array()};
  struct who w;
  struct hutch_err err = {0};
  const char *user = json_string_value(json_object_get(req, "user"));
  /* A UID without a name has "/" for a home: none to look in. */
  bool home = agent_who(user, &w, &err) == 0 && strcmp(w.home, "/") != 0;
  /* The likeliest small first: a cwd of "/" would take the whole budget. */
  const char *roots[] = {"/tmp", home ? w.home : "/tmp", path, NULL};
  c.roots = roots;
  for (size_t i = 0; roots[i]; i++) {
    bool again = false;
    for (size_t k = 0; k < i; k++)
      again |= strcmp(roots[i], roots[k]) == 0;
    if (again)
      continue;
    changed_push(&c, xstrdup(roots[i]));
    while (c.ndirs > 0 && c.visits < CHANGED_VISIT_MAX) {
      char *dir = c.dirs[--c.ndirs];
      changed_dir(&c, dir);
      free(dir);
    }
  }
  while (c.ndirs > 0)
    free(c.dirs[--c.ndirs]);
  free(c.dirs);
  size_t n = json_array_size(c.files);
  json_t **items = xcalloc(n ? n : 1, sizeof *items);
  for (size_t i = 0; i < n; i++)
    items[i] = json_incref(json_array_get(c.files, i));
  qsort(items, n, sizeof *items, by_path);
  json_array_clear(c.files);
  for (size_t i = 0; i < n; i++)
    json_array_append_new(c.files, items[i]);
  free(items);
  return result(res, json_pack("{s:{s:o}}", "ok", "files", c.files));
}

int files_run(json_t *req, int out_fd, int in_fd, int result_fd) {
  static const struct {
    const char *op;
    int (*run)(json_t *, const char *, int, int, int);
  } ops[] = {{"read", op_read},   {"write", op_write},   {"list", op_list}, {"stat", op_stat},
             {"mkdir", op_mkdir}, {"remove", op_remove}, {"move", op_move},
             {"watch", files_watch}, {"changed", op_changed}};
  const char *op = json_string_value(json_object_get(req, "op"));
  const char *path = json_string_value(json_object_get(req, "path"));
  if (!path || !*path || strlen(path) >= PATH_MAX)
    return files_fail(result_fd, EINVAL, "request:", "a non-empty \"path\" is required");
  for (size_t i = 0; i < ARRAY_SIZE(ops); i++)
    if (op && strcmp(op, ops[i].op) == 0)
      return ops[i].run(req, path, out_fd, in_fd, result_fd);
  return files_fail(result_fd, EINVAL, "unknown file operation", op ? op : "(none)");
}
