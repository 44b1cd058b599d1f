/* hutch cp [-L] [-q] SRC DST: files and directory trees between the
 * host and a sandbox, one side ID:PATH, the other a host path or - (a
 * tar on stdin or stdout, as docker cp's). Files go one by one over the
 * native files routes, streamed; a bar on a terminal's stderr.
 *
 * Links are not followed unless -L, on either side: a link inside the
 * sandbox is skipped with a warning (the sandbox's files decide what is
 * in it; a link written out on the host would point into the host's own
 * tree), and a link on the host is not read through, so that hutch reads
 * and sends only what was named. A link named as SRC itself is an error
 * without -L. */
#include "cp.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ctl.h"
#include "util.h"

/* ---- names ---- */

/* A name the server gave for an entry, taken as one component of a host
 * path only when it is one: not empty, not . or .., no slash. Anything
 * else (which an agent that was made to lie might send) would make the
 * host path leave the directory it is written under. */
static bool name_ok(const char *name) {
  return name[0] && strcmp(name, ".") != 0 && strcmp(name, "..") != 0 && !strchr(name, '/');
}

/* The last component of path (trailing slashes ignored), malloc'd. */
static char *last_name(const char *path) {
  size_t n = strlen(path);
  while (n > 1 && path[n - 1] == '/')
    n--;
  size_t start = n;
  while (start > 0 && path[start - 1] != '/')
    start--;
  return xasprintf("%.*s", (int)(n - start), path + start);
}

/* ---- directories copied once ---- */

/* With -L a tree can reach a directory again through a link: a cycle (a
 * link to . or to a parent) would be walked until CP_DEPTH_MAX, and two
 * such links in a directory make that 2^64 walks, each writing files on
 * the host; links that each lead to the next level twice do the same
 * without a cycle. Whoever wrote the tree (a sandbox, for a copy out)
 * would fill the host's disk. So each directory is copied once per run,
 * known by what names it whatever the path it was reached by: its device
 * and inode on the host; in the sandbox its path, which the server gives
 * resolved (a link's end is its realpath). A directory seen again is
 * skipped with a warning. (cp.h's struct cp_seen) */
static size_t key_hash(const char *k) {
  size_t h = 14695981039346656037u;
  for (; *k; k++)
    h = (h ^ (unsigned char)*k) * 1099511628211u;
  return h;
}

/* Adds key (taken); false when it was there already (key freed). */
static bool seen_add(struct cp_seen *s, char *key) {
  if (s->n * 2 >= s->cap) {
    struct cp_seen grown = {.cap = s->cap ? s->cap * 2 : 64};
    grown.keys = xcalloc(grown.cap, sizeof *grown.keys);
    for (size_t i = 0; i < s->cap; i++)
      if (s->keys[i])
        seen_add(&grown, s->keys[i]);
    free(s->keys);
    *s = grown;
  }
  size_t i = key_hash(key) & (s->cap - 1);
  for (; s->keys[i]; i = (i + 1) & (s->cap - 1))
    if (strcmp(s->keys[i], key) == 0) {
      free(key);
      return false;
    }
  s->keys[i] = key;
  s->n++;
  return true;
}

void cp_seen_free(struct cp_seen *s) {
  for (size_t i = 0; i < s->cap; i++)
    free(s->keys[i]);
  free(s->keys);
}

/* A sandbox path as a key: its repeated slashes, "." parts and trailing
 * slash gone ("/a//./b/" is "/a/b"); ".." is left (a link may precede it). */
static char *path_key(const char *path) {
  char *k = xmalloc(strlen(path) + 2), *o = k;
  for (const char *p = path; *p;) {
    while (*p == '/')
      p++;
    size_t n = strcspn(p, "/");
    if (n && !(n == 1 && p[0] == '.')) {
      *o++ = '/';
      memcpy(o, p, n);
      o += n;
    }
    p += n;
  }
  if (o == k)
    *o++ = '/';
  *o = '\0';
  return k;
}

/* ---- the walk of the sandbox's tree ---- */

int cp_resolve(const struct cp_remote *r, const struct cp_entry *link, struct cp_entry *out) {
  struct cp_entry cur = {.target = link->target ? xstrdup(link->target) : NULL};
  for (int hops = 0; hops < 40; hops++) {
    if (!cur.target) {
      ctl_fail(r->ctl, CTL_EXIT_FAILED, "%s: a link whose end the server did not say", link->path);
      break;
    }
    struct cp_entry next;
    int r1 = cp_stat(r, cur.target, &next);
    if (r1 != 0) {
      if (r1 == 1)
        ctl_fail(r->ctl, CTL_EXIT_FAILED, "%s: a link to %s, which is not there", link->path,
                 cur.target);
      break;
    }
    cp_entry_free(&cur);
    if (next.type != CP_LINK) {
      *out = next;
      return 0;
    }
    cur = next;
  }
  cp_entry_free(&cur);
  return -1;
}

static void walk_dir(struct cp_walk *w, void *dir, const char *rel, const struct cp_entry *e,
                     int depth) {
  struct cp_entry *es;
  size_t n;
  if (cp_list(w->r, e->path, &es, &n) < 0) {
    w->failed = true;
    return;
  }
  for (size_t i = 0; i < n; i++) {
    if (!name_ok(es[i].name)) {
      ctl_fail(w->r->ctl, CTL_EXIT_FAILED, "%s: refused an entry named \"%s\" (not one file name)",
               e->path, es[i].name);
      w->failed = true;
      continue;
    }
    char *sub = xasprintf("%s/%s", rel, es[i].name);
    cp_walk(w, dir, es[i].name, sub, &es[i], depth + 1);
    free(sub);
    cp_entry_free(&es[i]);
  }
  free(es);
}

void cp_walk(struct cp_walk *w, void *dir, const char *name, const char *rel,
             const struct cp_entry *e, int depth) {
  if (depth > CP_DEPTH_MAX) {
    ctl_fail(w->r->ctl, CTL_EXIT_FAILED, "%s: deeper than %d directories: not copied", e->path,
             CP_DEPTH_MAX);
    w->failed = true;
    return;
  }
  if (e->type == CP_LINK) {
    struct cp_entry end;
    if (!w->follow) {
      ctl_fail(w->r->ctl, 0, "warning: %s is a link: skipped (-L copies what it points to)",
               e->path);
    } else if (cp_resolve(w->r, e, &end) == 0) {
      cp_walk(w, dir, name, rel, &end, depth + 1);
      cp_entry_free(&end);
    } else {
      w->failed = true;
    }
    return;
  }

  if (e->type == CP_DIR && !seen_add(&w->seen, path_key(e->path))) {
    ctl_fail(w->r->ctl, 0, "warning: %s: a directory copied already (through a link): skipped",
             rel);
  } else if (e->type == CP_DIR) {
    void *sub = w->ops->enter(w->out, dir, name, rel, e);
    if (!sub) {
      w->failed = true;
      return;
    }
    walk_dir(w, sub, rel, e, depth);
    w->ops->leave(w->out, sub);
  } else if (e->type == CP_FILE) {
    if (!w->ops->begin(w->out, dir, name, rel, e)) {
      w->failed = true;
      return;
    }
    bool ok = cp_get(w->r, e->path, e->size, w->ops->write, w->out) == 0;
    bool ended = w->ops->end(w->out, ok);
    if (!ok || !ended)
      w->failed = true;
  } else {
    ctl_fail(w->r->ctl, 0, "warning: %s is not a file, directory or link: skipped", e->path);
  }
}

/* ---- the host's side of a copy out of the sandbox ---- */

struct host_out {
  struct ctl *ctl;
  int fd;       /* the file being written */
  double mtime; /* ... and its time in the sandbox, given it at its end */
};

static void *host_enter(void *out, void *dir, const char *name, const char *rel,
                        const struct cp_entry *e) {
  (void)e;
  struct host_out *h = out;
  int dfd = *(int *)dir;
  if (mkdirat(dfd, name, 0755) < 0 && errno != EEXIST) {
    ctl_fail(h->ctl, CTL_EXIT_FAILED, "%s: %s", rel, strerror(errno));
    return NULL;
  }
  /* O_NOFOLLOW: a link already there under that name is not gone through. */
  int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    ctl_fail(h->ctl, CTL_EXIT_FAILED, "%s: %s", rel,
             errno == ELOOP ? "a link is there: not written through" : strerror(errno));
    return NULL;
  }
  int *box = xmalloc(sizeof *box);
  *box = fd;
  return box;
}

static void host_leave(void *out, void *dir) {
  (void)out;
  close(*(int *)dir);
  free(dir);
}

static bool host_begin(void *out, void *dir, const char *name, const char *rel,
                       const struct cp_entry *e) {
  struct host_out *h = out;
  mode_t mode = e->mode & 0777 ? e->mode & 0777 : 0644;
  h->mtime = e->mtime;
  h->fd = openat(*(int *)dir, name, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, mode);
  if (h->fd < 0) {
    ctl_fail(h->ctl, CTL_EXIT_FAILED, "%s: %s", rel,
             errno == ELOOP ? "a link is there: not written through" : strerror(errno));
    return false;
  }
  return true;
}

static bool host_write(void *out, const char *data, size_t n) {
  struct host_out *h = out;
  if (write_all(h->fd, data, n) < 0) {
    ctl_fail(h->ctl, CTL_EXIT_FAILED, "writing: %s", strerror(errno));
    return false;
  }
  return true;
}

static bool host_end(void *out, bool ok) {
  struct host_out *h = out;
  if (ok && h->mtime > 0) {
    struct timespec t = {.tv_sec = (time_t)h->mtime,
                         .tv_nsec = (long)((h->mtime - (double)(time_t)h->mtime) * 1e9)};
    futimens(h->fd, (struct timespec[]){{.tv_nsec = UTIME_OMIT}, t});
  }
  int r = close(h->fd);
  h->fd = -1;
  return r == 0;
}

static const struct cp_out host_ops = {.enter = host_enter,
                                       .leave = host_leave,
                                       .begin = host_begin,
                                       .write = host_write,
                                       .end = host_end};

/* SRC's entry in the sandbox, a link resolved with -L (refused without):
 * 0, else the exit code (said). */
static int src_entry(const struct cp_remote *r, const char *src, bool follow, struct cp_entry *e) {
  int st = cp_stat(r, src, e);
  if (st == 1)
    return ctl_fail(r->ctl, CTL_EXIT_NOT_FOUND, "%s:%s: no such file or directory", r->sandbox,
                    src);
  if (st < 0)
    return CTL_EXIT_FAILED;
  if (e->type != CP_LINK)
    return 0;

  struct cp_entry end;
  if (!follow)
    ctl_fail(r->ctl, CTL_EXIT_FAILED, "%s:%s is a link: -L copies what it points to", r->sandbox,
             src);
  st = follow ? cp_resolve(r, e, &end) : -1;
  cp_entry_free(e);
  if (st < 0)
    return CTL_EXIT_FAILED;
  *e = end;
  return 0;
}

/* Where SRC goes on the host: the directory dst names (then under src's
 * name), else dst's parent (then as dst's name). dst itself is the user's
 * to name, links and all; what is made under it is made by descriptor,
 * nothing followed. The directory's descriptor and *name (malloc'd), or
 * -1 (said). */
static int host_dest(const struct cp_remote *r, const char *src, const char *dst, char **name) {
  struct stat sb;
  int dfd;
  if (stat(dst, &sb) == 0 && S_ISDIR(sb.st_mode)) {
    *name = last_name(src);
    dfd = open(dst, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  } else {
    *name = last_name(dst);
    char *parent = xstrdup(dst);
    char *slash = strrchr(parent, '/');
    if (slash)
      slash[slash == parent ? 1 : 0] = '\0';
    dfd = open(slash ? parent : ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    free(parent);
  }
  if (dfd < 0) {
    ctl_fail(r->ctl, CTL_EXIT_FAILED, "%s: %s", dst, strerror(errno));
  } else if (!name_ok(*name)) {
    ctl_fail(r->ctl, CTL_EXIT_FAILED, "%s: name the file or directory to write", dst);
    close(dfd);
    dfd = -1;
  }
  if (dfd < 0) {
    free(*name);
    *name = NULL;
  }
  return dfd;
}

/* ID:SRC to the host path dst, or to stdout as a tar (-). */
static int copy_out(const struct cp_remote *r, const char *src, const char *dst, bool follow) {
  struct cp_entry e;
  int code = src_entry(r, src, follow, &e);
  if (code)
    return code;

  char *name = NULL;
  code = CTL_EXIT_FAILED;
  if (strcmp(dst, "-") == 0) {
    name = last_name(src);
    if (name_ok(name))
      code = cp_tar_out(r, &e, name, follow);
    else
      ctl_fail(r->ctl, CTL_EXIT_FAILED, "%s: name a file or directory to put in the tar", src);
  } else {
    int dfd = host_dest(r, src, dst, &name);
    if (dfd >= 0) {
      struct host_out h = {.ctl = r->ctl, .fd = -1};
      struct cp_walk w = {.r = r, .ops = &host_ops, .out = &h, .follow = follow};
      cp_walk(&w, &dfd, name, name, &e, 0);
      cp_seen_free(&w.seen);
      code = w.failed ? CTL_EXIT_FAILED : 0;
      close(dfd);
    }
  }
  free(name);
  cp_entry_free(&e);
  return code;
}

/* ---- into the sandbox ---- */

struct host_in {
  struct ctl *ctl;
  int fd;
};

static size_t read_fd(void *arg, char *buf, size_t cap) {
  struct host_in *in = arg;
  for (;;) {
    ssize_t n = read(in->fd, buf, cap);
    if (n >= 0)
      return (size_t)n;
    if (errno != EINTR) {
      ctl_fail(in->ctl, CTL_EXIT_FAILED, "reading: %s", strerror(errno));
      return (size_t)-1;
    }
  }
}

struct put {
  const struct cp_remote *r;
  bool follow, failed;
  struct cp_seen seen; /* the directories copied */
};

static void put_tree(struct put *p, int dfd, const char *name, const char *host, const char *dst,
                     int depth);

static void put_dir(struct put *p, int fd, const char *host, const char *dst, int depth) {
  if (cp_mkdir(p->r, dst) < 0) {
    p->failed = true;
    return;
  }
  DIR *d = fdopendir(dup(fd));
  if (!d) {
    ctl_fail(p->r->ctl, CTL_EXIT_FAILED, "%s: %s", host, strerror(errno));
    p->failed = true;
    return;
  }
  for (struct dirent *de; (de = readdir(d));) {
    if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
      continue;
    char *h = xasprintf("%s/%s", host, de->d_name);
    char *s = xasprintf("%s/%s", strcmp(dst, "/") == 0 ? "" : dst, de->d_name);
    put_tree(p, fd, de->d_name, h, s, depth + 1);
    free(s);
    free(h);
  }
  closedir(d);
}

/* name under dfd opened, and checked again on its descriptor to be a file
 * or a directory: one swapped for a link or a FIFO since it was looked at
 * is neither followed (O_NOFOLLOW) nor waited on (O_NONBLOCK). -1 (said)
 * when it cannot be. */
static int open_checked(struct put *p, int dfd, const char *name, const char *host,
                        struct stat *sb) {
  int fd = openat(dfd, name, O_RDONLY | O_CLOEXEC | O_NONBLOCK | (p->follow ? 0 : O_NOFOLLOW));
  if (fd < 0) {
    ctl_fail(p->r->ctl, CTL_EXIT_FAILED, "%s: %s", host, strerror(errno));
    return -1;
  }
  if (fstat(fd, sb) == 0 && (S_ISREG(sb->st_mode) || S_ISDIR(sb->st_mode)))
    return fd;
  ctl_fail(p->r->ctl, CTL_EXIT_FAILED, "%s: changed while it was copied", host);
  close(fd);
  return -1;
}

/* name under dfd (host, to say it) to dst in the sandbox. */
static void put_tree(struct put *p, int dfd, const char *name, const char *host, const char *dst,
                     int depth) {
  struct stat sb;
  int nofollow = p->follow ? 0 : AT_SYMLINK_NOFOLLOW;
  if (depth > CP_DEPTH_MAX) {
    ctl_fail(p->r->ctl, CTL_EXIT_FAILED, "%s: deeper than %d directories: not copied", host,
             CP_DEPTH_MAX);
    p->failed = true;
    return;
  }
  if (fstatat(dfd, name, &sb, nofollow) < 0) {
    ctl_fail(p->r->ctl, CTL_EXIT_FAILED, "%s: %s", host, strerror(errno));
    p->failed = true;
    return;
  }
  if (S_ISLNK(sb.st_mode)) {
    ctl_fail(p->r->ctl, 0, "warning: %s is a link: skipped (-L copies what it points to)", host);
    return;
  }
  if (!S_ISREG(sb.st_mode) && !S_ISDIR(sb.st_mode)) {
    ctl_fail(p->r->ctl, 0, "warning: %s is not a file, directory or link: skipped", host);
    return;
  }

  int fd = open_checked(p, dfd, name, host, &sb);
  if (fd < 0) {
    p->failed = true;
    return;
  }
  if (S_ISDIR(sb.st_mode) &&
      !seen_add(&p->seen, xasprintf("%ju:%ju", (uintmax_t)sb.st_dev, (uintmax_t)sb.st_ino))) {
    ctl_fail(p->r->ctl, 0, "warning: %s: a directory copied already (through a link): skipped",
             host);
  } else if (S_ISDIR(sb.st_mode)) {
    put_dir(p, fd, host, dst, depth);
  } else {
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    struct host_in in = {.ctl = p->r->ctl, .fd = fd};
    if (cp_put(p->r, dst, (uint64_t)sb.st_size, read_fd, &in) < 0)
      p->failed = true;
  }
  close(fd);
}

/* Where SRC goes in the sandbox: into the directory DST names (a link to
 * one too), else DST itself; NULL (said) when a directory would go over
 * something else. */
static char *sandbox_dest(const struct cp_remote *r, const char *dst, const char *src, bool dir) {
  struct cp_entry e, end;
  int st = cp_stat(r, dst, &e);
  if (st < 0)
    return NULL;
  if (st == 1)
    return xstrdup(dst);
  if (e.type == CP_LINK && e.target && cp_stat(r, e.target, &end) == 0) {
    cp_entry_free(&e);
    e = end;
  }

  char *target = NULL;
  if (e.type == CP_DIR) {
    char *name = last_name(src);
    target = xasprintf("%s/%s", strcmp(e.path, "/") == 0 ? "" : e.path, name);
    free(name);
  } else if (dir) {
    ctl_fail(r->ctl, CTL_EXIT_FAILED,
             "%s:%s is not a directory: a directory cannot be copied over it", r->sandbox, dst);
  } else {
    target = xstrdup(dst);
  }
  cp_entry_free(&e);
  return target;
}

/* The host path src (or a tar on stdin: -) to ID:DST. */
static int copy_in(const struct cp_remote *r, const char *src, const char *dst, bool follow) {
  if (strcmp(src, "-") == 0)
    return cp_tar_in(r, dst);

  struct stat sb;
  if ((follow ? stat(src, &sb) : lstat(src, &sb)) < 0) {
    int e = errno;
    return ctl_fail(r->ctl, e == ENOENT ? CTL_EXIT_NOT_FOUND : CTL_EXIT_FAILED, "%s: %s", src,
                    strerror(e));
  }
  if (S_ISLNK(sb.st_mode))
    return ctl_fail(r->ctl, CTL_EXIT_FAILED, "%s is a link: -L copies what it points to", src);

  char *target = sandbox_dest(r, dst, src, S_ISDIR(sb.st_mode));
  if (!target)
    return CTL_EXIT_FAILED;
  struct put p = {.r = r, .follow = follow};
  put_tree(&p, AT_FDCWD, src, src, target, 0);
  cp_seen_free(&p.seen);
  free(target);
  return p.failed ? CTL_EXIT_FAILED : 0;
}

/* ---- the verb ---- */

/* "ID:PATH" split; false for a host path (one with no colon before its
 * first slash: ./a:b is a host path). */
static bool remote_of(const char *arg, char **id, const char **path) {
  const char *colon = strchr(arg, ':');
  const char *slash = strchr(arg, '/');
  if (!colon || colon == arg || (slash && slash < colon))
    return false;
  *id = xasprintf("%.*s", (int)(colon - arg), arg);
  *path = colon[1] ? colon + 1 : "/home/user";
  return true;
}

static const struct ctl_opt opts[] = {
    {'L', "follow-link", NULL, "follow links (on the host, or inside the sandbox)"},
    {'q', "quiet", NULL, "no progress bar"},
    {0},
};

static int cp_run(struct ctl *ctl, int argc, char **argv) {
  bool follow = false, quiet = false;
  const char *arg;
  int c, rc;
  while ((c = ctl_opt_next(ctl, argc, argv, &arg)) >= 0) {
    if (c == 'L')
      follow = true;
    else if (c == 'q')
      quiet = true;
  }
  if (!ctl_opts_end(ctl, c, argc, argv, 2, 2, &rc))
    return rc;

  const char *src = argv[optind], *dst = argv[optind + 1], *spath, *dpath;
  char *sid = NULL, *did = NULL;
  bool from = remote_of(src, &sid, &spath), to = remote_of(dst, &did, &dpath);
  int code;
  if (from == to) {
    code =
        ctl_fail(ctl, CTL_EXIT_FAILED, "one of SRC and DST is ID:PATH, the other a host path or -");
  } else {
    /* The sandbox first: a wrong id or key is said as such, once. */
    char *path = ctl_path("/v1/sandboxes/%s", from ? sid : did);
    code = ctl_api(ctl, "GET", path, NULL, NULL);
    free(path);
    struct cp_remote r = {.ctl = ctl, .sandbox = from ? sid : did, .progress = !quiet && isatty(2)};
    if (code == 0)
      code = from ? copy_out(&r, spath, dst, follow) : copy_in(&r, src, dpath, follow);
  }
  free(sid);
  free(did);
  return code;
}

const struct ctl_verb ctl_verb_cp = {
    "cp", "[-L] [-q] SRC DST",
    "copy files and directories between the host and a sandbox (ID:PATH; - is a tar)", opts,
    cp_run};
