/* The "watch" file operation: changes under a path, as JSON lines on the
 * worker's output, until the client closes the stream (which kills the
 * worker). It runs in the file worker, as the sandbox user under the
 * workload filter, so it watches only what that user can read.
 *
 *   {"type":"create"|"write"|"remove"|"rename","path":"…","dir":bool}
 *   {"type":"ready"}      first: the watches are in place
 *   {"type":"overflow"}   events were lost (the kernel's queue filled)
 *
 * With "entry", an event also has "entry": what is at the path now (as
 * stat reports it), when something is. "rename" is the old name; the new
 * one comes as "create". With
 * "recursive", directories below are watched too, new ones as they come
 * (at most WATCH_MAX directories). A new directory's watch is added only
 * once its creation is read, and what was made in it meanwhile made no
 * event: its entries are announced after the watch is in place, as
 * "create" (and "write" for a file with content), so a client may see a
 * create twice but never misses one. */
#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent.h"
#include "util.h"

#define WATCH_MAX 8192
#define WATCH_MASK \
  (IN_CREATE | IN_MODIFY | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_DELETE_SELF | IN_ONLYDIR)

struct watches {
  int fd;
  bool entries;          /* each event carries its entry */
  char *path[WATCH_MAX]; /* by watch descriptor, for those below WATCH_MAX */
  size_t n;
  bool recursive;
};

/* Below the watched path (depth > 0) links are not followed: a directory
 * swapped for a link (to /etc, to /) between its creation and its watch
 * must not bring the link's target in. The path itself may be a link. */
static void add(struct watches *w, const char *dir, int depth) {
  if (w->n >= WATCH_MAX)
    return;
  int wd = inotify_add_watch(w->fd, dir, WATCH_MASK | (depth ? IN_DONT_FOLLOW : 0));
  if (wd < 0 || wd >= WATCH_MAX)
    return;
  if (!w->path[wd]) {
    w->path[wd] = xstrdup(dir);
    w->n++;
  }

  if (!w->recursive || depth >= 64)
    return;
  int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC | (depth ? O_NOFOLLOW : 0));
  DIR *d = fd < 0 ? NULL : fdopendir(fd);
  if (!d) {
    if (fd >= 0)
      close(fd);
    return;
  }

  for (struct dirent *e; (e = readdir(d));) {
    if (e->d_type != DT_DIR || !strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
      continue;
    char *sub = xasprintf("%s/%s", dir, e->d_name);
    add(w, sub, depth + 1);
    free(sub);
  }

  closedir(d);
}

/* An event's line; with entries (the watch's "entry"), what is at path
 * now, when something is (not after a remove or a rename away). */
static int emit(int out, const char *type, const char *path, bool dir, bool entries) {
  json_t *j =
      path ? json_pack("{s:s,s:o,s:b}", "type", type, "path", hutch_json_text(path), "dir", dir)
           : json_pack("{s:s}", "type", type);
  struct stat st;
  if (path && entries && lstat(path, &st) == 0) {
    const char *slash = strrchr(path, '/');
    json_object_set_new(j, "entry", files_entry(path, slash ? slash + 1 : path, &st, AT_FDCWD));
  }
  char *s = json_dumps(j, JSON_COMPACT);
  json_decref(j);
  int r = s ? write_all(out, s, strlen(s)) : -1;
  if (r == 0)
    r = write_all(out, "\n", 1);
  free(s);
  return r;
}

/* What a directory new to the watch already holds; -1 when the reader has
 * gone. */
static int announce(const struct watches *w, int out, const char *dir, int depth) {
  /* Not through a link the workload put in the new directory's place. */
  int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  DIR *d = fd < 0 ? NULL : fdopendir(fd);
  if (!d) {
    if (fd >= 0)
      close(fd);
    return 0; /* gone again, a link, or not ours to read: nothing to tell */
  }

  int r = 0;
  for (struct dirent *e; r == 0 && (e = readdir(d));) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
      continue;
    char *sub = xasprintf("%s/%s", dir, e->d_name);
    struct stat st;
    if (lstat(sub, &st) == 0) {
      bool is_dir = S_ISDIR(st.st_mode);
      r = emit(out, "create", sub, is_dir, w->entries);
      if (r == 0 && S_ISREG(st.st_mode) && st.st_size > 0)
        r = emit(out, "write", sub, false, w->entries);
      if (r == 0 && is_dir && depth < 64)
        r = announce(w, out, sub, depth + 1);
    }
    free(sub);
  }

  closedir(d);
  return r;
}

/* The event's type as the watch reports it; NULL for one it does not. */
static const char *event_type(uint32_t mask) {
  if (mask & (IN_CREATE | IN_MOVED_TO))
    return "create";
  if (mask & IN_MODIFY)
    return "write";
  if (mask & IN_DELETE)
    return "remove";
  if (mask & IN_MOVED_FROM)
    return "rename";
  return NULL;
}

int watch_files(json_t *req, const char *path, int out, int in, int res) {
  (void)in;
  struct stat st;
  if (stat(path, &st) < 0)
    return files_fail(res, errno, "watch", path);
  if (!S_ISDIR(st.st_mode))
    return files_fail(res, ENOTDIR, "watch", path);

  struct watches *w = xcalloc(1, sizeof *w);
  w->recursive = json_is_true(json_object_get(req, "recursive"));
  w->entries = json_is_true(json_object_get(req, "entry"));
  w->fd = inotify_init1(IN_CLOEXEC);
  if (w->fd < 0)
    return files_fail(res, errno, "watch", path);
  add(w, path, 0);
  if (w->n == 0)
    return files_fail(res, errno ? errno : EACCES, "watch", path);

  if (emit(out, "ready", NULL, false, false) < 0)
    return 0;

  char buf[64 << 10] __attribute__((aligned(__alignof__(struct inotify_event))));
  for (;;) {
    ssize_t n = read(w->fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return files_fail(res, errno, "watch", path);
    for (char *p = buf; p < buf + n;) {
      struct inotify_event *ev = (struct inotify_event *)p;
      p += sizeof *ev + ev->len;
      if (ev->mask & IN_Q_OVERFLOW) {
        if (emit(out, "overflow", NULL, false, false) < 0)
          return 0; /* the reader has gone */
        continue;
      }
      const char *dir = ev->wd >= 0 && ev->wd < WATCH_MAX ? w->path[ev->wd] : NULL;
      if (!dir || !ev->len)
        continue;

      char *full = xasprintf("%s%s%s", dir, dir[strlen(dir) - 1] == '/' ? "" : "/", ev->name);
      bool is_dir = ev->mask & IN_ISDIR;
      const char *type = event_type(ev->mask);
      int r = type ? emit(out, type, full, is_dir, w->entries) : 0;
      if (r == 0 && type && !strcmp(type, "create") && is_dir && w->recursive) {
        add(w, full, 1);
        r = announce(w, out, full, 1);
      }

      free(full);
      if (r < 0)
        return 0;
    }
  }
}
