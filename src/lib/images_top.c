/* hutch's top layer, above every template's image layers (images.h,
 * hutch_images_top_layer): the files Docker bind-mounts over an image and
 * the user `user`, read off the image's own stack of layers without
 * following its links, then written as a layer of the store named by
 * their digest. */
#include "images.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "cleanup.h"
#include "digest.h"
#include "layer.h"
#include "util.h"

/* path under a layer's root, opened O_PATH (flags: O_DIRECTORY or 0)
 * without following any symlink on the way: an image's /etc may be a link
 * to the host's. -1 when it is not there so. */
static int open_in_layer(int layer, const char *path, int flags) {
  struct open_how how = {.flags = (uint64_t)(O_PATH | O_NOFOLLOW | O_CLOEXEC | flags),
                         .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS |
                                    RESOLVE_NO_XDEV};
  return (int)syscall(SYS_openat2, layer, path, &how, sizeof how);
}

/* The layer (of dirs, topmost first) whose entry path is what the stack
 * shows, its fd, and the entry's stat; -1 when none shows it (absent,
 * deleted by a whiteout, or hidden under an opaque directory above). */
static int stack_lookup(const int *dirs, size_t n, const char *path, struct stat *st) {
  for (size_t i = 0; i < n; i++) {
    _cleanup_close_ int fd = dirs[i] < 0 ? -1 : open_in_layer(dirs[i], path, 0);
    if (fd >= 0 && fstat(fd, st) == 0)
      return S_ISCHR(st->st_mode) && st->st_rdev == 0 ? -1 : dirs[i];
    /* An opaque parent in this layer hides every layer below. */
    _cleanup_free_ char *parent = xstrdup(path);
    char *slash = strrchr(parent, '/');
    if (slash) {
      *slash = '\0';
      char v[2];
      _cleanup_close_ int pd = dirs[i] < 0 ? -1 : open_in_layer(dirs[i], parent, O_DIRECTORY);
      _cleanup_free_ char *proc = pd < 0 ? NULL : xasprintf("/proc/self/fd/%d", pd);
      if (proc && getxattr(proc, "trusted.overlay.opaque", v, sizeof v) == 1 && v[0] == 'y')
        return -1;
    }
  }
  return -1;
}

/* The image's regular file at path (at most max bytes), or NULL. */
static char *stack_read(const int *dirs, size_t n, const char *path, size_t max) {
  struct stat st;
  int at = stack_lookup(dirs, n, path, &st);
  _cleanup_close_ int pfd = at < 0 ? -1 : open_in_layer(at, path, 0);
  if (pfd < 0 || fstat(pfd, &st) < 0 || !S_ISREG(st.st_mode) || (size_t)st.st_size > max)
    return NULL;
  _cleanup_free_ char *proc = xasprintf("/proc/self/fd/%d", pfd);
  _cleanup_close_ int fd = open(proc, O_RDONLY | O_CLOEXEC);
  char *buf = xmalloc((size_t)st.st_size + 1);
  ssize_t got = fd < 0 ? -1 : read_all(fd, buf, (size_t)st.st_size);
  if (got < 0) {
    free(buf);
    return NULL;
  }
  buf[got] = '\0';
  return buf;
}

/* Whether an /etc/passwd or /etc/group text has an entry with id 1000
 * (the third field of both). */
static bool has_id_1000(const char *text) {
  for (const char *line = text; *line;) {
    const char *end = strchrnul(line, '\n'), *f = line;
    int colons = 0;
    while (f < end && colons < 2)
      if (*f++ == ':')
        colons++;
    if (colons == 2 && end - f >= 5 && strncmp(f, "1000:", 5) == 0)
      return true;
    line = *end ? end + 1 : end;
  }
  return false;
}

static const char *with_newline(const char *text) {
  return text[0] && text[strlen(text) - 1] != '\n' ? "\n" : "";
}

struct top_file {
  const char *path;
  char *content; /* NULL: a directory */
  mode_t mode;
  uid_t uid;
};

/* What the image's stack (layers, bottom first) holds of its users: its
 * /etc/passwd and /etc/group (malloc'd; NULL when there is none) and
 * whether it has /home/user. */
static void image_users(struct hutch_images *s, json_t *layers, char **passwd, char **group,
                        bool *home) {
  size_t n = json_array_size(layers);
  int *dirs = xcalloc(n ? n : 1, sizeof *dirs);
  for (size_t i = 0; i < n; i++) {
    _cleanup_free_ char *p =
        hutch_images_layer_path(s, json_string_value(json_array_get(layers, n - 1 - i)));
    dirs[i] = open(p, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  }

  *passwd = stack_read(dirs, n, "etc/passwd", 1 << 20);
  *group = stack_read(dirs, n, "etc/group", 1 << 20);
  struct stat st;
  *home = stack_lookup(dirs, n, "home/user", &st) >= 0;

  for (size_t i = 0; i < n; i++)
    if (dirs[i] >= 0)
      close(dirs[i]);
  free(dirs);
}

/* The top layer's files (8 at most) over an image with these users
 * (image_users); returns how many. */
static size_t top_files(struct top_file files[8], const char *passwd, const char *group,
                        bool home) {
  size_t nf = 0;
  files[nf++] = (struct top_file){"etc", NULL, 0755, 0};
  files[nf++] = (struct top_file){"etc/hosts",
                                  xstrdup("127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost "
                                          "ip6-loopback\n"),
                                  0644, 0};
  files[nf++] = (struct top_file){"etc/hostname", xstrdup("sandbox\n"), 0644, 0};
  files[nf++] = (struct top_file){
      "etc/resolv.conf", xstrdup("# hutch: this sandbox has no network but loopback\n"), 0644, 0};
  if (passwd && has_id_1000(passwd))
    return nf;

  /* The user `user`, appended to the image's own files (or to root alone). */
  const char *users = passwd ? passwd : "root:x:0:0:root:/root:/bin/sh\n";
  files[nf++] = (struct top_file){
      "etc/passwd",
      xasprintf("%s%suser:x:1000:1000:user:/home/user:/bin/sh\n", users, with_newline(users)), 0644,
      0};
  if (!group || !has_id_1000(group)) {
    const char *groups = group ? group : "root:x:0:\n";
    files[nf++] = (struct top_file){
        "etc/group", xasprintf("%s%suser:x:1000:\n", groups, with_newline(groups)), 0644, 0};
  }
  if (!home) {
    files[nf++] = (struct top_file){"home", NULL, 0755, 0};
    files[nf++] = (struct top_file){"home/user", NULL, 0755, 1000};
  }
  return nf;
}

/* The top layer's name: the sha256 of its files' paths, modes, owners
 * and contents. */
static void top_digest(const struct top_file *files, size_t nf, char hex[65]) {
  EVP_MD_CTX *md = EVP_MD_CTX_new();
  EVP_DigestInit_ex(md, EVP_sha256(), NULL);
  for (size_t i = 0; i < nf; i++) {
    char head[64];
    int len =
        snprintf(head, sizeof head, "%o %u ", (unsigned)files[i].mode, (unsigned)files[i].uid);
    EVP_DigestUpdate(md, files[i].path, strlen(files[i].path) + 1);
    EVP_DigestUpdate(md, head, (size_t)len);
    if (files[i].content)
      EVP_DigestUpdate(md, files[i].content, strlen(files[i].content) + 1);
  }
  digest_sha256_final_hex(md, hex);
  EVP_MD_CTX_free(md);
}

/* One file (or directory) of the top layer, made in fd at its mode and
 * owner. */
static int top_write_one(int fd, const struct top_file *f, struct hutch_err *err) {
  if (!f->content) {
    if (mkdirat(fd, f->path, f->mode) < 0)
      return hutch_err_set(err, errno, "top layer: %s", f->path);
  } else if (create_file_at(fd, f->path, f->content, f->mode, err) < 0) {
    return -1;
  }

  if (fchmodat(fd, f->path, f->mode, 0) < 0)
    return hutch_err_set(err, errno, "top layer: %s", f->path);
  if (fchownat(fd, f->path, f->uid, f->uid, AT_SYMLINK_NOFOLLOW) < 0)
    return hutch_err_set(err, errno, "top layer: %s", f->path);
  return 0;
}

/* The top layer's files, written into the work directory dir. */
static int top_write(const char *dir, const struct top_file *files, size_t nf,
                     struct hutch_err *err) {
  _cleanup_close_ int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    return hutch_err_set(err, errno, "%s", dir);
  if (fchmod(fd, 0755) < 0)
    return hutch_err_set(err, errno, "top layer");

  for (size_t i = 0; i < nf; i++)
    if (top_write_one(fd, &files[i], err) < 0)
      return -1;
  return 0;
}

/* The top layer committed to the store as layers/<hex>, unless it is
 * there already. */
static int top_commit(struct hutch_images *s, const struct top_file *files, size_t nf,
                      const char hex[65], struct hutch_err *err) {
  if (hutch_images_layer_exists(s, hex))
    return 0;

  _cleanup_free_ char *dir = hutch_images_tmpdir(s, err);
  if (!dir)
    return -1;
  if (top_write(dir, files, nf, err) < 0) {
    struct hutch_err ignored = {0};
    hutch_layer_remove(dir, &ignored);
    return -1;
  }

  json_t *meta = json_pack("{s:i,s:i}", "size", 0, "files", (int)nf);
  int r = hutch_images_layer_commit(s, dir, hex, meta, err);
  json_decref(meta);
  return r;
}

/* hutch's layer above an image's: what Docker bind-mounts over an image
 * (hosts, hostname, resolv.conf), and the user `user` (uid 1000, home
 * /home/user) that E2B's SDKs and hutch's defaults run as, when the image
 * has no uid 1000. Named by the sha256 of what it holds, so templates of
 * one image share it. */
int hutch_images_top_layer(struct hutch_images *s, json_t *layers, char hex[65],
                           struct hutch_err *err) {
  char *passwd, *group;
  bool home;
  image_users(s, layers, &passwd, &group, &home);

  struct top_file files[8];
  size_t nf = top_files(files, passwd, group, home);
  free(passwd);
  free(group);

  top_digest(files, nf, hex);
  int r = top_commit(s, files, nf, hex, err);

  for (size_t i = 0; i < nf; i++)
    free(files[i].content);
  return r;
}
