/* Files uploaded for templates (tplfiles.h). The bytes go to disk off the
 * loop (libuv's file requests), one piece at a time: the front end pauses
 * the client's body until each piece is written, so an upload holds one
 * piece of memory whatever its size. */
#include "core/disk/tplfiles.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "cleanup.h"
#include "digest.h"
#include "util.h"
#include "core/base/server.h"
#include "core/disk/templates.h"

/* STATE/template-files/<sha256 of the tenant>/ (malloc'd), made if
 * missing: each tenant's files in a directory of their own, so that what
 * they hold can be counted against the tenant's disk quota. */
static char *tenant_dir(struct server *srv, const char *tenant) {
  _cleanup_free_ char *top = xasprintf("%s/template-files", srv->cfg.state_dir);
  if (mkdir(top, 0700) < 0 && errno != EEXIST)
    fprintf(stderr, "hutch serve: mkdir %s: %s\n", top, strerror(errno));
  char hex[65];
  digest_sha256_hex(tenant, strlen(tenant), hex);
  char *dir = xasprintf("%s/%s", top, hex);
  if (mkdir(dir, 0700) < 0 && errno != EEXIST)
    fprintf(stderr, "hutch serve: mkdir %s: %s\n", dir, strerror(errno));
  return dir;
}

char *tplfiles_path(struct server *srv, const char *tenant, const char *hash) {
  _cleanup_free_ char *dir = tenant_dir(srv, tenant);
  /* The tenant's name is part of the file's: one tenant's hash never
   * names another's file. */
  _cleanup_free_ char *key = xasprintf("%s/%s", tenant, hash);
  char hex[65];
  digest_sha256_hex(key, strlen(key), hex);
  return xasprintf("%s/%s.tar", dir, hex);
}

bool tplfiles_present(struct server *srv, const char *tenant, const char *hash) {
  _cleanup_free_ char *p = tplfiles_path(srv, tenant, hash);
  struct stat st;
  if (stat(p, &st) < 0 || !S_ISREG(st.st_mode))
    return false;
  /* Used now: the last the room-making below removes. */
  utimensat(AT_FDCWD, p, NULL, 0);
  return true;
}

struct kept {
  char name[80];
  int64_t mtime;
  uint64_t bytes;
};

/* The tenant's files, oldest first (malloc'd), and their count. */
static struct kept *kept_files(struct server *srv, const char *tenant, size_t *n) {
  _cleanup_free_ char *dir = tenant_dir(srv, tenant);
  struct kept *v = NULL;
  size_t cap = 0;
  *n = 0;

  DIR *d = opendir(dir);
  for (struct dirent *e; d && (e = readdir(d));) {
    struct stat st;
    if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode) ||
        strlen(e->d_name) >= sizeof v->name)
      continue;
    if (*n == cap) {
      cap = cap ? 2 * cap : 16;
      v = xrealloc(v, cap * sizeof *v);
    }
    str_copy(v[*n].name, sizeof v[*n].name, e->d_name);
    v[*n].mtime = st.st_mtim.tv_sec;
    v[(*n)++].bytes = (uint64_t)st.st_size;
  }
  if (d)
    closedir(d);

  for (size_t i = 1; i < *n; i++)
    for (size_t j = i; j > 0 && v[j].mtime < v[j - 1].mtime; j--) {
      struct kept t = v[j];
      v[j] = v[j - 1];
      v[j - 1] = t;
    }
  return v;
}

uint64_t tplfiles_bytes(struct server *srv, const char *tenant) {
  size_t n;
  _cleanup_free_ struct kept *v = kept_files(srv, tenant, &n);
  uint64_t bytes = 0;
  for (size_t i = 0; i < n; i++)
    bytes += v[i].bytes;
  return bytes;
}

int tplfiles_make_room(struct server *srv, const char *tenant, uint64_t quota_left, uint64_t need,
                       struct hutch_err *err) {
  size_t n;
  _cleanup_free_ struct kept *v = kept_files(srv, tenant, &n);
  _cleanup_free_ char *dir = tenant_dir(srv, tenant);
  int64_t recent = (int64_t)time(NULL) - TEMPLATE_FILES_FRESH_S;
  size_t left = n;

  for (size_t i = 0;
       i < n && (quota_left < need || left >= TEMPLATE_FILES_MAX) && v[i].mtime < recent; i++) {
    _cleanup_free_ char *p = xasprintf("%s/%s", dir, v[i].name);
    if (unlink(p) == 0) {
      quota_left += v[i].bytes;
      left--;
    }
  }

  /* Their count is bounded too: each quota check lists them, on the loop. */
  if (left >= TEMPLATE_FILES_MAX)
    return hutch_err_fail(err, HUTCH_ERR_QUOTA, "quota_exceeded",
                          "tenant %s keeps %d uploaded files, all used in the last %d minutes",
                          tenant, TEMPLATE_FILES_MAX, TEMPLATE_FILES_FRESH_S / 60);
  return 0;
}

struct tpl_upload {
  struct server *srv;
  char *dir, *path;
  uv_file fd;
  uint64_t size, max;
  EVP_MD_CTX *md;
  char hex[65];
  uv_fs_t req;
  char *buf;
  bool writing, closing;
  void (*written)(void *arg);
  void *arg;
};

struct tpl_upload *tplfiles_upload_open(struct server *srv, uint64_t max, struct hutch_err *err) {
  char *dir = hutch_images_scratchdir(&srv->images, err);
  if (!dir)
    return NULL;
  struct tpl_upload *u = xcalloc(1, sizeof *u);
  u->srv = srv;
  u->dir = dir;
  u->path = xasprintf("%s/upload", dir);
  u->max = max;
  u->fd = open(u->path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (u->fd < 0) {
    hutch_err_set(err, errno, "%s", u->path);
    tplfiles_upload_close(u);
    return NULL;
  }
  u->md = EVP_MD_CTX_new();
  EVP_DigestInit_ex(u->md, EVP_sha256(), NULL);
  return u;
}

static void tplfiles_free(struct tpl_upload *u) {
  if (u->fd >= 0)
    close(u->fd);
  if (u->dir)
    offload_remove(u->srv, u->dir, true, NULL, NULL);
  EVP_MD_CTX_free(u->md);
  free(u->path);
  free(u->buf);
  free(u);
}

static void piece_written(uv_fs_t *req) {
  struct tpl_upload *u = req->data;
  ssize_t r = req->result;
  uv_fs_req_cleanup(req);
  u->writing = false;
  free(u->buf);
  u->buf = NULL;
  if (u->closing) {
    tplfiles_free(u);
    return;
  }
  if (r < 0) {
    /* Said at the end: the file is shorter than what came. */
    fprintf(stderr, "hutch serve: write %s: %s\n", u->path, uv_strerror((int)r));
    u->size = UINT64_MAX;
  }
  u->written(u->arg);
}

int tplfiles_upload_write(struct tpl_upload *u, const char *data, size_t n,
                          void (*written)(void *arg), void *arg, struct hutch_err *err) {
  if (u->size == UINT64_MAX)
    return hutch_err_set(err, EIO, "writing the upload failed");
  if (u->size + n > u->max)
    return hutch_err_fail(err, HUTCH_ERR_TOO_LARGE, "too_large",
                          "an upload may carry at most %llu MiB",
                          (unsigned long long)(u->max >> 20));

  u->size += n;
  EVP_DigestUpdate(u->md, data, n);
  u->buf = xmalloc(n ? n : 1);
  memcpy(u->buf, data, n);
  u->written = written;
  u->arg = arg;

  u->req.data = u;
  uv_buf_t b = uv_buf_init(u->buf, (unsigned)n);
  int r = uv_fs_write(u->srv->loop, &u->req, u->fd, &b, 1, -1, piece_written);
  if (r < 0) {
    free(u->buf);
    u->buf = NULL;
    return hutch_err_fail(err, HUTCH_ERR_SYSTEM, NULL, "write %s: %s", u->path, uv_strerror(r));
  }
  u->writing = true;
  return 0;
}

const char *tplfiles_upload_digest(struct tpl_upload *u) {
  if (!u->hex[0])
    digest_sha256_final_hex(u->md, u->hex);
  return u->hex;
}

uint64_t tplfiles_upload_size(const struct tpl_upload *u) {
  return u->size;
}
const char *tplfiles_upload_path(const struct tpl_upload *u) {
  return u->path;
}

char *tplfiles_upload_take_dir(struct tpl_upload *u) {
  char *d = u->dir;
  u->dir = NULL;
  return d;
}

int tplfiles_upload_whole(const struct tpl_upload *u, struct hutch_err *err) {
  if (u->size == UINT64_MAX)
    return hutch_err_set(err, EIO, "writing the upload failed");
  return 0;
}

int tplfiles_upload_move(struct tpl_upload *u, const char *path, struct hutch_err *err) {
  if (tplfiles_upload_whole(u, err) < 0)
    return -1;
  if (rename(u->path, path) < 0)
    return hutch_err_set(err, errno, "rename %s", path);
  return 0;
}

void tplfiles_upload_close(struct tpl_upload *u) {
  if (!u)
    return;
  if (u->writing) {
    u->closing = true;
    return;
  }
  tplfiles_free(u);
}
