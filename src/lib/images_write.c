/* The template store, the side that changes it (images.h): layers
 * committed, templates added with hutch's own top layer (images_top.c),
 * tagged, untagged and removed, after which what nothing uses is collected
 * (images_gc.c). Every change holds the store's lock. */
#include "images.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cleanup.h"
#include "layer.h"
#include "util.h"

/* The store's lock, exclusive (closed by the caller). */
int hutch_images_lock(const struct hutch_images *s, struct hutch_err *err) {
  int fd = openat(s->dirfd, "lock", O_RDONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0 || flock(fd, LOCK_EX) < 0) {
    hutch_err_set(err, errno, "template store: lock");
    if (fd >= 0)
      close(fd);
    return -1;
  }
  return fd;
}

/* Write name (relative to the store) whole: beside, then renamed. */
static int write_json(const struct hutch_images *s, const char *name, json_t *v,
                      struct hutch_err *err) {
  _cleanup_free_ char *tmp = xasprintf("%s.%ld.tmp", name, (long)getpid());
  _cleanup_free_ char *text = json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS);
  if (!text)
    return hutch_err_fail(err, HUTCH_ERR_SYSTEM, NULL, "template store: %s: cannot encode", name);
  unlinkat(s->dirfd, tmp, 0);
  if (create_file_at(s->dirfd, tmp, text, 0600, err) < 0)
    return hutch_err_wrap(err, "template store");
  if (renameat(s->dirfd, tmp, s->dirfd, name) < 0) {
    int e = errno;
    unlinkat(s->dirfd, tmp, 0);
    return hutch_err_set(err, e, "template store: %s", name);
  }
  return 0;
}

int hutch_images_layer_commit(struct hutch_images *s, const char *staged, const char *hex,
                              json_t *meta, struct hutch_err *err) {
  if (!hutch_images_hex_ok(hex))
    return hutch_err_fail(err, HUTCH_ERR_SYSTEM, NULL, "layer name '%.70s' is no sha256", hex);
  _cleanup_close_ int lock = hutch_images_lock(s, err);
  if (lock < 0)
    return -1;
  _cleanup_free_ char *dest = hutch_images_layer_path(s, hex);
  _cleanup_free_ char *meta_name = xasprintf("layers/%s.json", hex);
  if (rename(staged, dest) < 0) {
    int e = errno;
    /* Already there: the same content, shared. */
    if (e != EEXIST && e != ENOTEMPTY)
      return hutch_err_set(err, e, "template store: layer %.12s", hex);
    struct hutch_err ignored = {0};
    hutch_layer_remove(staged, &ignored);
    return 0;
  }
  return write_json(s, meta_name, meta, err);
}

uint64_t hutch_images_layer_meta(const struct hutch_images *s, const char *hex, const char *key) {
  _cleanup_free_ char *name = xasprintf("layers/%s.json", hex);
  _cleanup_close_ int fd = openat(s->dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  json_t *m = hutch_images_load_fd(fd);
  uint64_t v = (uint64_t)json_integer_value(json_object_get(m, key));
  json_decref(m);
  return v;
}

static bool holder_ok(const char *h) {
  size_t n = strlen(h);
  if (n == 0 || n > 64)
    return false;
  for (size_t i = 0; i < n; i++)
    if (!((h[i] >= 'a' && h[i] <= 'z') || (h[i] >= 'A' && h[i] <= 'Z') ||
          (h[i] >= '0' && h[i] <= '9') || h[i] == '_' || h[i] == '-'))
      return false;
  return true;
}

int hutch_images_hold(struct hutch_images *s, const char *id, const char *holder, bool hold,
                      struct hutch_err *err) {
  if (!holder_ok(id) || !holder_ok(holder))
    return hutch_err_fail(err, HUTCH_ERR_SYSTEM, NULL, "template hold: bad name");
  _cleanup_close_ int lock = hutch_images_lock(s, err);
  if (lock < 0)
    return -1;

  _cleanup_free_ char *refs = xasprintf("templates/%s.refs", id);
  _cleanup_free_ char *ref = xasprintf("templates/%s.refs/%s", id, holder);
  if (!hold) {
    unlinkat(s->dirfd, ref, 0);
    return 0;
  }

  /* Forgotten (a removal found it unused): its layers may be gone, and
   * nothing would ever remove a reference to it. */
  struct hutch_err none = {0};
  json_t *rec = hutch_images_get(s, id, &none);
  if (!rec)
    return hutch_err_fail(err, HUTCH_ERR_NOT_FOUND, "template_not_found", "template %s was removed",
                          id);
  json_decref(rec);

  if (mkdirat(s->dirfd, refs, 0700) < 0 && errno != EEXIST)
    return hutch_err_set(err, errno, "template store: %s", refs);
  _cleanup_close_ int fd = openat(s->dirfd, ref, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0)
    return hutch_err_set(err, errno, "template store: %s", ref);
  return 0;
}

/* layers with each listed once, at its topmost place (tools repeat the
 * empty layer): overlayfs refuses a lower directory twice. */
static json_t *unique_layers(json_t *layers) {
  json_t *once = json_array();
  for (size_t k = json_array_size(layers); k-- > 0;) {
    json_t *l = json_array_get(layers, k), *seen;
    size_t j;
    bool dup = false;
    json_array_foreach(once, j, seen)
      dup |= json_equal(seen, l);
    if (!dup)
      json_array_insert(once, 0, l);
  }
  return once;
}

/* Check rec's name and layers, and fill in its size and top layer. */
static int add_check(struct hutch_images *s, json_t *rec, struct hutch_err *err) {
  const char *name = json_string_value(json_object_get(rec, "name"));
  json_t *layers = json_object_get(rec, "layers");
  if (!name || !hutch_images_name_ok(name))
    return hutch_err_fail(err, HUTCH_ERR_INVALID, "invalid_argument",
                          "'%.64s' is no template name (1-128 of a-z 0-9 . _ - and / between "
                          "parts)",
                          name ? name : "");
  if (!json_is_array(layers) || json_array_size(layers) > HUTCH_IMAGE_MAX_LAYERS)
    return hutch_err_fail(err, HUTCH_ERR_INVALID, "invalid_argument",
                          "template %s: more than %d layers", name, HUTCH_IMAGE_MAX_LAYERS);

  json_object_set_new(rec, "layers", unique_layers(layers));
  layers = json_object_get(rec, "layers");
  uint64_t size = 0, files = 0;
  size_t i;
  json_t *v;
  json_array_foreach(layers, i, v) {
    if (!json_is_string(v) || !hutch_images_layer_exists(s, json_string_value(v)))
      return hutch_err_fail(err, HUTCH_ERR_SYSTEM, NULL,
                            "template %s: layer %zu is not in the store", name, i);
    size += hutch_images_layer_meta(s, json_string_value(v), "size");
    files += hutch_images_layer_meta(s, json_string_value(v), "files");
  }

  char top[65];
  if (hutch_images_top_layer(s, layers, top, err) < 0)
    return -1;
  json_object_set_new(rec, "top", json_string(top));
  json_object_set_new(rec, "size_bytes", json_integer((json_int_t)size));
  json_object_set_new(rec, "files", json_integer((json_int_t)files));
  return 0;
}

/* Every build of owner's template name (owner "": the public ones). */
static json_t *builds_of(const struct hutch_images *s, const char *owner, const char *name) {
  json_t *all = hutch_images_list(s, NULL), *out = json_array(), *v;
  size_t i;
  json_array_foreach(all, i, v) {
    const char *o = json_string_value(json_object_get(v, "owner"));
    const char *n = json_string_value(json_object_get(v, "name"));
    if (o && n && strcmp(o, owner) == 0 && strcmp(n, name) == 0)
      json_array_append(out, v);
  }
  json_decref(all);
  return out;
}

static bool in_tags(json_t *tags, const char *tag) {
  json_t *v;
  size_t i;
  json_array_foreach(tags, i, v)
    if (json_is_string(v) && strcmp(json_string_value(v), tag) == 0)
      return true;
  return false;
}

/* Take tags off each build of builds but keep (its id): rewritten, or
 * retired when no tag is left. held: whether any had one. */
static int untag(const struct hutch_images *s, json_t *builds, json_t *tags, const char *keep,
                 bool *held, struct hutch_err *err) {
  json_t *b;
  size_t i;
  json_array_foreach(builds, i, b) {
    const char *id = json_string_value(json_object_get(b, "id"));
    if (keep && strcmp(id, keep) == 0)
      continue;

    json_t *old = json_object_get(b, "tags"), *left = json_array(), *t;
    size_t k;
    json_array_foreach(old, k, t)
      if (!in_tags(tags, json_string_value(t)))
        json_array_append(left, t);
    if (json_array_size(left) == json_array_size(old)) {
      json_decref(left);
      continue;
    }

    if (held)
      *held = true;
    int r;
    if (json_array_size(left) == 0) {
      json_decref(left);
      r = hutch_images_gc_retire(s, id, err);
    } else {
      json_object_set_new(b, "tags", left);
      _cleanup_free_ char *name = xasprintf("templates/%s.json", id);
      r = write_json(s, name, b, err);
    }
    if (r < 0)
      return -1;
  }
  return 0;
}

/* The tags rec asks for, checked: each a tag name, at least latest. */
static json_t *tags_of(json_t *rec, struct hutch_err *err) {
  json_t *tags = json_object_get(rec, "tags"), *v;
  if (!json_is_array(tags) || json_array_size(tags) == 0)
    return json_pack("[s]", "latest");
  size_t i;
  json_t *out = json_array();
  json_array_foreach(tags, i, v) {
    if (!json_is_string(v) || !hutch_images_tag_ok(json_string_value(v))) {
      json_decref(out);
      hutch_err_fail(err, HUTCH_ERR_INVALID, "invalid_argument",
                     "'%.64s' is no tag (1-128 of A-Z a-z 0-9 . _ -)",
                     json_is_string(v) ? json_string_value(v) : "");
      return NULL;
    }
    if (!in_tags(out, json_string_value(v)))
      json_array_append(out, v);
  }
  return out;
}

/* A conflict when a build of builds holds one of tags already. */
static int tags_free(json_t *builds, json_t *tags, const char *name, struct hutch_err *err) {
  json_t *b, *t;
  size_t i, k;
  json_array_foreach(builds, i, b)
    json_array_foreach(tags, k, t) {
      if (in_tags(json_object_get(b, "tags"), json_string_value(t)))
        return hutch_err_fail(err, HUTCH_ERR_CONFLICT, "template_exists",
                              "a template '%s:%s' exists (--replace replaces it)", name,
                              json_string_value(t));
    }
  return 0;
}

/* A new template id: 16 random hex digits. */
static int new_id(char id[17], struct hutch_err *err) {
  unsigned char rnd[8];
  if (getrandom(rnd, sizeof rnd, 0) != sizeof rnd)
    return hutch_err_set(err, errno, "getrandom");
  for (size_t n = 0; n < sizeof rnd; n++)
    snprintf(id + 2 * n, 3, "%02x", rnd[n]);
  return 0;
}

/* rec written as a new build of owner's, with tags, which the name's
 * other builds (builds) then lose. */
static int add_build(struct hutch_images *s, json_t *rec, const char *owner, json_t *builds,
                     json_t *tags, bool replace, struct hutch_err *err) {
  const char *name = json_string_value(json_object_get(rec, "name"));
  if (!replace && tags_free(builds, tags, name, err) < 0)
    return -1;
  char id[17];
  if (new_id(id, err) < 0)
    return -1;

  json_object_set_new(rec, "id", json_string(id));
  json_object_set_new(rec, "owner", json_string(owner));
  json_object_set_new(rec, "created_at", json_integer((json_int_t)wall_ms()));
  json_object_set(rec, "tags", tags);
  if (!json_is_object(json_object_get(rec, "config")))
    json_object_set_new(rec, "config", json_object());
  _cleanup_free_ char *rname = xasprintf("templates/%s.json", id);
  if (write_json(s, rname, rec, err) < 0)
    return -1;

  return untag(s, builds, tags, id, NULL, err);
}

/* Write rec as a new build of owner's template of its name, with its
 * tags: a tag another build of the name holds is moved to it when
 * replace is set (a build left with none goes), else a conflict. Under
 * the store's lock. */
static int add_locked(struct hutch_images *s, json_t *rec, const char *owner, bool replace,
                      struct hutch_err *err) {
  const char *name = json_string_value(json_object_get(rec, "name"));
  json_t *tags = tags_of(rec, err);
  if (!tags)
    return -1;

  json_t *builds = builds_of(s, owner, name);
  int r = add_build(s, rec, owner, builds, tags, replace, err);
  json_decref(builds);
  json_decref(tags);
  return r;
}

json_t *hutch_images_add(struct hutch_images *s, json_t *record, bool replace,
                         struct hutch_err *err) {
  const char *owner = json_string_value(json_object_get(record, "owner"));
  json_t *rec = json_deep_copy(record);
  if (add_check(s, rec, err) < 0) {
    json_decref(rec);
    return NULL;
  }
  _cleanup_close_ int lock = hutch_images_lock(s, err);
  if (lock < 0) {
    json_decref(rec);
    return NULL;
  }
  if (add_locked(s, rec, owner ? owner : "", replace, err) < 0) {
    json_decref(rec);
    return NULL;
  }
  return rec;
}

/* An owner's build cache lives for its templates: once one goes, the
 * entries whose layer none of the owner's templates left holds go too (a
 * deleted template's steps, a failed build's), and the collection after
 * frees their layers; else a tenant building and deleting templates would
 * keep every step's layer. */
static void cache_follow(const struct hutch_images *s, const char *owner) {
  json_t *all = hutch_images_list(s, owner), *held = json_object(), *v;
  size_t i;
  json_array_foreach(all, i, v) {
    if (strcmp(json_string_value(json_object_get(v, "owner")) ?: "", owner) == 0)
      hutch_images_gc_mark(held, v, s);
  }
  json_decref(all);
  hutch_images_cache_follow(s, owner, held);
  json_decref(held);
}

/* What ref names of a template (id: the build found; builds: every
 * build of its name) goes: NAME:TAG takes the tag away (the build goes
 * with its last one), NAME every build of the template, an id that
 * build. */
static int remove_named(const struct hutch_images *s, const char *ref, const char *id,
                        json_t *builds, struct hutch_err *err) {
  _cleanup_free_ char *name = xstrdup(ref);
  const char *tag = hutch_images_split_tag(name);
  if (tag) {
    json_t *tags = json_pack("[s]", tag);
    int r = untag(s, builds, tags, NULL, NULL, err);
    json_decref(tags);
    return r;
  }

  if (strcmp(id, ref) == 0)
    return hutch_images_gc_retire(s, id, err);

  json_t *b;
  size_t i;
  json_array_foreach(builds, i, b) {
    if (hutch_images_gc_retire(s, json_string_value(json_object_get(b, "id")), err) < 0)
      return -1;
  }
  return 0;
}

/* The template ref names, which owner may change (verb says how: "removes",
 * "tags"). A public template is found by every tenant, changed by none
 * but an admin (owner NULL). */
static json_t *find_changeable(const struct hutch_images *s, const char *owner, const char *ref,
                               const char *verb, struct hutch_err *err) {
  json_t *rec = hutch_images_find(s, owner, ref, err);
  if (!rec)
    return NULL;
  const char *rowner = json_string_value(json_object_get(rec, "owner"));
  if (owner && rowner && strcmp(rowner, owner) != 0) {
    json_decref(rec);
    hutch_err_fail(err, HUTCH_ERR_FORBIDDEN, "forbidden",
                   "template '%s' is public: only an admin %s it", ref, verb);
    return NULL;
  }
  return rec;
}

/* hutch_images_remove's part under the store's lock. */
static int remove_locked(struct hutch_images *s, const char *owner, const char *ref,
                         struct hutch_err *err) {
  _cleanup_close_ int lock = hutch_images_lock(s, err);
  if (lock < 0)
    return -1;
  json_t *rec = find_changeable(s, owner, ref, "removes", err);
  if (!rec)
    return -1;

  const char *rowner = json_string_value(json_object_get(rec, "owner"));
  const char *id = json_string_value(json_object_get(rec, "id"));
  const char *of = rowner ? rowner : "";
  json_t *builds = builds_of(s, of, json_string_value(json_object_get(rec, "name")));
  int r = remove_named(s, ref, id, builds, err);
  json_decref(builds);
  if (r == 0)
    cache_follow(s, of);
  json_decref(rec);
  return r;
}

int hutch_images_remove(struct hutch_images *s, const char *owner, const char *ref,
                        struct hutch_err *err) {
  if (remove_locked(s, owner, ref, err) < 0)
    return -1;
  return hutch_images_gc(s, err);
}

/* The tags of want onto target's build, and away from its name's other
 * builds. */
static int tag_build(const struct hutch_images *s, json_t *target, json_t *want,
                     struct hutch_err *err) {
  const char *towner = json_string_value(json_object_get(target, "owner"));
  json_t *builds =
      builds_of(s, towner ? towner : "", json_string_value(json_object_get(target, "name")));
  const char *id = json_string_value(json_object_get(target, "id"));
  json_t *mine = json_object_get(target, "tags"), *t;
  size_t i;
  json_array_foreach(want, i, t)
    if (!in_tags(mine, json_string_value(t)))
      json_array_append(mine, t);

  _cleanup_free_ char *name = xasprintf("templates/%s.json", id);
  int r = write_json(s, name, target, err);
  if (r == 0)
    r = untag(s, builds, want, id, NULL, err);
  json_decref(builds);
  return r;
}

/* hutch_images_tag's part under the store's lock. */
static int tag_locked(struct hutch_images *s, const char *owner, const char *ref, json_t *want,
                      struct hutch_err *err) {
  _cleanup_close_ int lock = hutch_images_lock(s, err);
  if (lock < 0)
    return -1;
  json_t *target = find_changeable(s, owner, ref, "tags", err);
  if (!target)
    return -1;

  int r = tag_build(s, target, want, err);
  json_decref(target);
  return r;
}

int hutch_images_tag(struct hutch_images *s, const char *owner, const char *ref, json_t *tags,
                     struct hutch_err *err) {
  json_t *rec = json_pack("{s:O}", "tags", tags), *want = tags_of(rec, err);
  json_decref(rec);
  if (!want)
    return -1;

  int r = tag_locked(s, owner, ref, want, err);
  json_decref(want);
  return r;
}

int hutch_images_untag(struct hutch_images *s, const char *owner, const char *name, json_t *tags,
                       struct hutch_err *err) {
  {
    _cleanup_close_ int lock = hutch_images_lock(s, err);
    if (lock < 0)
      return -1;
    json_t *builds = builds_of(s, owner ? owner : "", name);
    bool held = false;
    int r = untag(s, builds, tags, NULL, &held, err);
    json_decref(builds);
    if (r < 0)
      return -1;
    if (!held)
      return hutch_err_fail(err, HUTCH_ERR_NOT_FOUND, "template_not_found",
                            "no template '%s' with those tags", name);
  }
  return hutch_images_gc(s, err);
}
