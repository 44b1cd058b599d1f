/* The build cache of the template store (images.h): each owner's steps
 * under cache/<sha256 of the owner>/<key>.json, {"layer": hex, "size":
 * bytes, "files": n}, the entry's mtime its last use. One owner's entries
 * are a directory of their own, so that the server counts and collects a
 * tenant's cache without reading another's, and a remove drops them. */
#include "images.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cleanup.h"
#include "digest.h"
#include "util.h"

static char *owner_dir(const char *owner) {
  char hex[65];
  digest_sha256_hex(owner ? owner : "", strlen(owner ? owner : ""), hex);
  return xasprintf("cache/%s", hex);
}

static char *entry_name(const char *owner, const char *key) {
  _cleanup_free_ char *dir = owner_dir(owner);
  return xasprintf("%s/%s.json", dir, key);
}

static json_t *load_entry(const struct hutch_images *s, const char *name) {
  _cleanup_close_ int fd = openat(s->dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  json_t *j = hutch_images_load_fd(fd);
  if (j && !hutch_images_hex_ok(json_string_value(json_object_get(j, "layer")) ?: "")) {
    json_decref(j);
    return NULL;
  }
  return j;
}

bool hutch_images_cache_get(const struct hutch_images *s, const char *owner, const char *key,
                            char hex[65]) {
  if (!hutch_images_hex_ok(key))
    return false;
  _cleanup_free_ char *name = entry_name(owner, key);
  json_t *j = load_entry(s, name);
  const char *layer = json_string_value(json_object_get(j, "layer"));
  bool ok = layer && hutch_images_layer_exists(s, layer);
  if (ok) {
    memcpy(hex, layer, 65);
    /* Used now: the last its owner's collection takes. */
    utimensat(s->dirfd, name, NULL, AT_SYMLINK_NOFOLLOW);
  }
  json_decref(j);
  return ok;
}

static int by_use(const void *a, const void *b) {
  const struct hutch_cache_entry *x = a, *y = b;
  return x->used < y->used ? -1 : x->used > y->used;
}

/* The entries of cache directory dir, least recently used first. */
static struct hutch_cache_entry *list_dir(const struct hutch_images *s, const char *dir,
                                          size_t *n) {
  *n = 0;
  DIR *d = hutch_images_opendir(s, dir);
  if (!d)
    return NULL;

  struct hutch_cache_entry *v = NULL;
  size_t cap = 0;
  for (struct dirent *e; (e = readdir(d));) {
    size_t len = strlen(e->d_name);
    struct stat st;
    if (len != 69 || strcmp(e->d_name + 64, ".json") != 0 ||
        fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode))
      continue;
    _cleanup_free_ char *name = xasprintf("%s/%s", dir, e->d_name);
    json_t *j = load_entry(s, name);
    if (!j) {
      unlinkat(s->dirfd, name, 0);
      continue;
    }

    if (*n == cap)
      v = xrealloc(v, (cap = cap ? 2 * cap : 16) * sizeof *v);
    struct hutch_cache_entry *c = &v[(*n)++];
    memcpy(c->key, e->d_name, 64);
    c->key[64] = '\0';
    str_copy(c->layer, sizeof c->layer, json_string_value(json_object_get(j, "layer")));
    c->size = (uint64_t)json_integer_value(json_object_get(j, "size"));
    c->files = (uint64_t)json_integer_value(json_object_get(j, "files"));
    c->used = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
    json_decref(j);
  }
  closedir(d);

  if (*n)
    qsort(v, *n, sizeof *v, by_use);
  return v;
}

struct hutch_cache_entry *hutch_images_cache_list(const struct hutch_images *s, const char *owner,
                                                  size_t *n) {
  _cleanup_free_ char *dir = owner_dir(owner);
  return list_dir(s, dir, n);
}

void hutch_images_cache_keep(const struct hutch_images *s, json_t *used) {
  DIR *d = hutch_images_opendir(s, "cache");
  if (!d)
    return;
  for (struct dirent *e; (e = readdir(d));) {
    if (!hutch_images_hex_ok(e->d_name))
      continue;
    _cleanup_free_ char *dir = xasprintf("cache/%s", e->d_name);
    size_t n;
    _cleanup_free_ struct hutch_cache_entry *v = list_dir(s, dir, &n);
    for (size_t i = 0; i < n; i++) {
      _cleanup_free_ char *name = xasprintf("%s/%s.json", dir, v[i].key);
      if (hutch_images_layer_exists(s, v[i].layer))
        json_object_set_new(used, v[i].layer, json_true());
      else
        unlinkat(s->dirfd, name, 0);
    }
  }
  closedir(d);
}

void hutch_images_cache_follow(const struct hutch_images *s, const char *owner, json_t *held) {
  size_t n;
  _cleanup_free_ struct hutch_cache_entry *v = hutch_images_cache_list(s, owner, &n);
  for (size_t i = 0; i < n; i++)
    if (!json_object_get(held, v[i].layer))
      hutch_images_cache_drop(s, owner, v[i].key);
}

void hutch_images_cache_drop(const struct hutch_images *s, const char *owner, const char *key) {
  if (!hutch_images_hex_ok(key))
    return;
  _cleanup_free_ char *name = entry_name(owner, key);
  unlinkat(s->dirfd, name, 0);
}

/* A layer's meta number ("size", "files"), 0 when unknown. */
static json_int_t meta_of(const struct hutch_images *s, const char *hex, const char *key) {
  _cleanup_free_ char *name = xasprintf("layers/%s.json", hex);
  _cleanup_close_ int fd = openat(s->dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  json_t *m = hutch_images_load_fd(fd);
  json_int_t v = json_integer_value(json_object_get(m, key));
  json_decref(m);
  return v > 0 ? v : 0;
}

/* text into tmp, synced, then renamed to name (both in the store). */
static int write_whole(const struct hutch_images *s, const char *tmp, const char *name,
                       const char *text) {
  _cleanup_close_ int fd = openat(s->dirfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0)
    return -1;
  if (write_all(fd, text, strlen(text)) < 0)
    return -1;
  if (fsync(fd) < 0)
    return -1;
  return renameat(s->dirfd, tmp, s->dirfd, name);
}

void hutch_images_cache_put(const struct hutch_images *s, const char *owner, const char *key,
                            const char *hex) {
  _cleanup_free_ char *dir = owner_dir(owner);
  if (!hutch_images_hex_ok(key) || !hutch_images_hex_ok(hex))
    return;
  if (mkdirat(s->dirfd, dir, 0700) < 0 && errno != EEXIST)
    return;

  /* Written whole by rename: a reader sees the entry or none. A failure
   * costs only a later rebuild. */
  _cleanup_free_ char *name = entry_name(owner, key);
  _cleanup_free_ char *tmp = xasprintf("%s/.%s.%d", dir, key, (int)getpid());
  _cleanup_free_ char *text =
      xasprintf("{\"layer\": \"%s\", \"size\": %lld, \"files\": %lld}\n", hex,
                (long long)meta_of(s, hex, "size"), (long long)meta_of(s, hex, "files"));
  if (write_whole(s, tmp, name, text) < 0) {
    unlinkat(s->dirfd, tmp, 0);
    return;
  }

  /* Each count of the server's lists the owner's entries: their number
   * is bounded, the least recently used going first. */
  size_t n;
  _cleanup_free_ struct hutch_cache_entry *v = hutch_images_cache_list(s, owner, &n);
  for (size_t i = 0; i + HUTCH_IMAGES_CACHE_MAX < n; i++)
    if (strcmp(v[i].key, key) != 0)
      hutch_images_cache_drop(s, owner, v[i].key);
}
