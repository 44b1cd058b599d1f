/* What keeps a template's layers, and what goes once nothing does
 * (images.h): a sandbox's pin and a holder's reference keep a removed
 * template (retired as <id>.gone, else forgotten at once), and the
 * collection removes every layer no template, kept template or build cache
 * entry names (hutch_images_gc), under the store's lock. */
#include "images.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "cleanup.h"
#include "layer.h"
#include "util.h"

/* Whether templates/<id>.refs holds anything (a missing one does not). */
static bool held(const struct hutch_images *s, const char *id) {
  _cleanup_free_ char *refs = xasprintf("templates/%s.refs", id);
  DIR *d = hutch_images_opendir(s, refs);
  if (!d)
    return false;

  struct dirent *e;
  bool any = false;
  while (!any && (e = readdir(d)))
    any = e->d_name[0] != '.';
  closedir(d);
  return any;
}

/* Whether anything keeps template id's layers: a sandbox's pin, or a
 * holder's reference. When nothing does, *lock holds the pin file locked
 * until the caller has forgotten the template (and closes it): a pin taken
 * meanwhile waits, then finds its file unlinked (hutch_images_pin). */
static bool in_use(const struct hutch_images *s, const char *id, int *lock) {
  _cleanup_free_ char *pin = xasprintf("templates/%s.pin", id);
  *lock = openat(s->dirfd, pin, O_RDONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
  bool pinned = *lock >= 0 && flock(*lock, LOCK_EX | LOCK_NB) < 0;
  if (pinned || held(s, id)) {
    if (*lock >= 0)
      close(*lock);
    *lock = -1;
    return true;
  }
  return false;
}

/* What is left of a template nothing uses any more. */
static void forget(const struct hutch_images *s, const char *id) {
  static const char *const suffixes[] = {"json", "gone", "pin"};
  for (size_t i = 0; i < ARRAY_SIZE(suffixes); i++) {
    _cleanup_free_ char *name = xasprintf("templates/%s.%s", id, suffixes[i]);
    unlinkat(s->dirfd, name, 0);
  }
  _cleanup_free_ char *refs = xasprintf("templates/%s.refs", id);
  unlinkat(s->dirfd, refs, AT_REMOVEDIR);
}

/* A removed template's record leaves: gone at once when nothing uses it,
 * else kept as <id>.gone (its layers kept) until nothing does. */
int hutch_images_gc_retire(const struct hutch_images *s, const char *id, struct hutch_err *err) {
  _cleanup_free_ char *rec = xasprintf("templates/%s.json", id);
  _cleanup_free_ char *gone = xasprintf("templates/%s.gone", id);
  _cleanup_close_ int lock = -1;
  if (in_use(s, id, &lock)) {
    if (renameat(s->dirfd, rec, s->dirfd, gone) < 0)
      return hutch_err_set(err, errno, "template store: %s", rec);
    return 0;
  }
  forget(s, id);
  return 0;
}

/* Each name in the store's directory sub ending in suffix, without it. */
static char **names_in(const struct hutch_images *s, const char *sub, const char *suffix,
                       size_t *n) {
  *n = 0;
  DIR *d = hutch_images_opendir(s, sub);
  if (!d)
    return NULL;
  char **v = NULL;
  size_t cap = 0, sl = strlen(suffix);
  struct dirent *e;
  while ((e = readdir(d))) {
    size_t len = strlen(e->d_name);
    if (e->d_name[0] == '.' || len <= sl || strcmp(e->d_name + len - sl, suffix) != 0)
      continue;
    if (*n == cap)
      v = xrealloc(v, (cap = cap ? 2 * cap : 16) * sizeof *v);
    v[(*n)++] = xasprintf("%.*s", (int)(len - sl), e->d_name);
  }
  closedir(d);
  return v;
}

static void free_names(char **v, size_t n) {
  for (size_t i = 0; i < n; i++)
    free(v[i]);
  free(v);
}

static json_t *load_at(const struct hutch_images *s, const char *name) {
  _cleanup_close_ int fd = openat(s->dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  return hutch_images_load_fd(fd);
}

/* Mark the layers a record or a cache entry names ("layers", "top",
 * "layer"); false when one is missing. */
bool hutch_images_gc_mark(json_t *used, json_t *v, const struct hutch_images *s) {
  bool all = true;
  json_t *l;
  size_t i;
  json_array_foreach(json_object_get(v, "layers"), i, l) {
    if (json_is_string(l)) {
      all = all && hutch_images_layer_exists(s, json_string_value(l));
      json_object_set_new(used, json_string_value(l), json_true());
    }
  }
  static const char *const keys[] = {"top", "layer"};
  for (size_t k = 0; k < ARRAY_SIZE(keys); k++)
    if ((l = json_object_get(v, keys[k])) && json_is_string(l)) {
      all = all && hutch_images_layer_exists(s, json_string_value(l));
      json_object_set_new(used, json_string_value(l), json_true());
    }
  return all;
}

/* The layers of every template in used. */
static void mark_templates(const struct hutch_images *s, json_t *used) {
  size_t n;
  char **ids = names_in(s, "templates", ".json", &n);
  for (size_t i = 0; i < n; i++) {
    _cleanup_free_ char *name = xasprintf("templates/%s.json", ids[i]);
    json_t *rec = load_at(s, name);
    hutch_images_gc_mark(used, rec, s);
    json_decref(rec);
  }
  free_names(ids, n);
}

/* Removed templates whose sandboxes are all gone go now; the layers of
 * those still in use are marked in used. */
static void mark_or_forget_gone(const struct hutch_images *s, json_t *used) {
  size_t n;
  char **ids = names_in(s, "templates", ".gone", &n);
  for (size_t i = 0; i < n; i++) {
    _cleanup_free_ char *gone = xasprintf("templates/%s.gone", ids[i]);
    _cleanup_close_ int pin = -1;
    if (in_use(s, ids[i], &pin)) {
      json_t *rec = load_at(s, gone);
      hutch_images_gc_mark(used, rec, s);
      json_decref(rec);
    } else {
      forget(s, ids[i]);
    }
  }
  free_names(ids, n);
}

/* Build cache entries keep their layers, unless one is missing; one
 * outside an owner's directory (an older layout's) is nobody's to
 * charge, and goes. */
static void mark_cache(const struct hutch_images *s, json_t *used) {
  size_t n;
  char **ids = names_in(s, "cache", ".json", &n);
  for (size_t i = 0; i < n; i++) {
    _cleanup_free_ char *name = xasprintf("cache/%s.json", ids[i]);
    unlinkat(s->dirfd, name, 0);
  }
  free_names(ids, n);
  hutch_images_cache_keep(s, used);
}

/* Every layer not in used, removed. A layer committed for a template not
 * added yet is in no record: while any process works in tmp/ (work.lock
 * shared), no layer goes. */
static int remove_unused(const struct hutch_images *s, json_t *used, struct hutch_err *err) {
  _cleanup_close_ int work =
      openat(s->dirfd, "work.lock", O_RDONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (work < 0 || flock(work, LOCK_EX | LOCK_NB) < 0)
    return 0;

  int r = 0;
  size_t n;
  char **hexes = names_in(s, "layers", ".json", &n);
  for (size_t i = 0; i < n && r == 0; i++) {
    if (json_object_get(used, hexes[i]) || !hutch_images_hex_ok(hexes[i]))
      continue;
    _cleanup_free_ char *dir = hutch_images_layer_path(s, hexes[i]);
    _cleanup_free_ char *meta = xasprintf("layers/%s.json", hexes[i]);
    r = hutch_layer_remove(dir, err);
    if (r == 0)
      unlinkat(s->dirfd, meta, 0);
  }
  free_names(hexes, n);
  return r;
}

int hutch_images_gc(struct hutch_images *s, struct hutch_err *err) {
  _cleanup_close_ int lock = hutch_images_lock(s, err);
  if (lock < 0)
    return -1;

  json_t *used = json_object();
  mark_templates(s, used);
  mark_or_forget_gone(s, used);
  mark_cache(s, used);

  int r = remove_unused(s, used, err);
  json_decref(used);
  return r;
}
