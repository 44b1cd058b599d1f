/* The template store, the side every program reads (images.h): finding
 * and listing templates, the layers a sandbox stacks, pins, work
 * directories. What changes the store is images_write.c (with
 * images_top.c and images_gc.c), linked by the programs that import and
 * remove (hutch-template, hutch-serve). */
#include "images.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cleanup.h"
#include "layer.h"
#include "util.h"

/* The directory under every template's layers: mount points only, so
 * that a sandbox's /proc, /sys, /dev and /tmp have somewhere to go
 * whatever the image holds. Owned by the host's root: nothing in a
 * sandbox can change it, and the layers above give the names their
 * owners where an image has them. */
static const struct {
  const char *name;
  mode_t mode;
} skel_dirs[] = {{"proc", 0555}, {"sys", 0555}, {"dev", 0755}, {"tmp", 01777}};

static int skel_make(int dirfd, struct hutch_err *err) {
  if (mkdirat(dirfd, "skel", 0755) < 0 && errno != EEXIST)
    return hutch_err_set(err, errno, "images: mkdir skel");
  _cleanup_close_ int skel = openat(dirfd, "skel", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (skel < 0)
    return hutch_err_set(err, errno, "images: open skel");
  for (size_t i = 0; i < ARRAY_SIZE(skel_dirs); i++) {
    const char *name = skel_dirs[i].name;
    if (mkdirat(skel, name, skel_dirs[i].mode) < 0 && errno != EEXIST)
      return hutch_err_set(err, errno, "images: skel/%s", name);
    if (fchmodat(skel, name, skel_dirs[i].mode, 0) < 0)
      return hutch_err_set(err, errno, "images: skel/%s", name);
  }
  return 0;
}

/* tmp/<pid>-<suffix>: work of a process that is gone is removed. */
static void sweep_tmp(int dirfd, const char *dir) {
  _cleanup_close_ int fd = openat(dirfd, "tmp", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  DIR *d = fd < 0 ? NULL : fdopendir(fd);
  if (!d)
    return;
  fd = -1;
  struct dirent *e;
  while ((e = readdir(d))) {
    char *end;
    long pid = strtol(e->d_name, &end, 10);
    if (e->d_name[0] == '.' || *end != '-' || pid <= 0 || kill((pid_t)pid, 0) == 0 ||
        errno != ESRCH)
      continue;
    _cleanup_free_ char *path = xasprintf("%s/tmp/%s", dir, e->d_name);
    struct hutch_err ignored = {0};
    hutch_layer_remove(path, &ignored);
  }
  closedir(d);
}

int hutch_images_open(struct hutch_images *s, const char *state_dir, struct hutch_err *err) {
  static const char *const subdirs[] = {"layers", "templates", "cache", "tmp"};
  *s = (struct hutch_images){.dirfd = -1, .work_lock = -1};
  if (mkdir(state_dir, 0755) < 0 && errno != EEXIST)
    return hutch_err_set(err, errno, "state directory %s", state_dir);

  s->dir = xasprintf("%s/images", state_dir);
  /* Only root enters: the layers hold files of every id, and a host user
   * must not run or read what a tenant imported. */
  if (mkdir(s->dir, 0700) < 0 && errno != EEXIST) {
    hutch_err_set(err, errno, "template store %s", s->dir);
    goto fail;
  }
  s->dirfd = open(s->dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (s->dirfd < 0) {
    hutch_err_set(err, errno, "template store %s", s->dir);
    goto fail;
  }

  for (size_t i = 0; i < ARRAY_SIZE(subdirs); i++)
    if (mkdirat(s->dirfd, subdirs[i], 0700) < 0 && errno != EEXIST) {
      hutch_err_set(err, errno, "template store: %s", subdirs[i]);
      goto fail;
    }
  if (skel_make(s->dirfd, err) < 0)
    goto fail;
  sweep_tmp(s->dirfd, s->dir);
  return 0;

fail:
  hutch_images_close(s);
  return -1;
}

void hutch_images_close(struct hutch_images *s) {
  if (s->dirfd >= 0)
    close(s->dirfd);
  if (s->work_lock >= 0)
    close(s->work_lock);
  free(s->dir);
  *s = (struct hutch_images){.dirfd = -1, .work_lock = -1};
}

static bool name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
}

bool hutch_images_name_ok(const char *name) {
  size_t n = strlen(name);
  if (n == 0 || n > HUTCH_IMAGE_NAME_MAX || strcmp(name, "host") == 0)
    return false;
  /* Parts between '/' start with a letter or digit: no "..", no empty
   * part, nothing that reads as an option or a hidden file. */
  bool start = true;
  for (size_t i = 0; i < n; i++) {
    if (name[i] == '/') {
      if (start || i + 1 == n)
        return false;
      start = true;
    } else if (!name_char(name[i]) || (start && !((name[i] >= 'a' && name[i] <= 'z') ||
                                                  (name[i] >= '0' && name[i] <= '9')))) {
      return false;
    } else {
      start = false;
    }
  }
  return true;
}

bool hutch_images_tag_ok(const char *tag) {
  size_t n = strlen(tag);
  if (n == 0 || n > HUTCH_IMAGE_NAME_MAX || tag[0] == '.' || tag[0] == '-')
    return false;
  for (size_t i = 0; i < n; i++)
    if (!name_char(tag[i]) && !(tag[i] >= 'A' && tag[i] <= 'Z'))
      return false;
  return true;
}

/* Read whole, then parsed: jansson's json_loadfd reads one byte a
 * read(2), a thousand system calls a record, and records are read on
 * hutch serve's loop at every create from a template. */
json_t *hutch_images_load_fd(int fd) {
  struct stat st;
  if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size > (16 << 20))
    return NULL;
  _cleanup_free_ char *buf = xmalloc((size_t)st.st_size + 1);
  ssize_t n = read_all(fd, buf, (size_t)st.st_size);
  return n < 0 ? NULL : json_loadb(buf, (size_t)n, 0, NULL);
}

DIR *hutch_images_opendir(const struct hutch_images *s, const char *sub) {
  int fd = openat(s->dirfd, sub, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  DIR *d = fd < 0 ? NULL : fdopendir(fd);
  if (!d && fd >= 0)
    close(fd);
  return d;
}

/* Each record in templates/ whose name ends in suffix (".json": the
 * templates; ".gone": removed ones still kept), parsed; fn returns false
 * to stop. Records that do not parse are skipped: the store writes them
 * whole. */
static void each_record(const struct hutch_images *s, const char *suffix,
                        bool (*fn)(json_t *, void *), void *arg) {
  DIR *d = hutch_images_opendir(s, "templates");
  if (!d)
    return;

  struct dirent *e;
  bool more = true;
  while (more && (e = readdir(d))) {
    size_t n = strlen(e->d_name);
    size_t k = strlen(suffix);
    if (n <= k || strcmp(e->d_name + n - k, suffix) != 0 || e->d_name[0] == '.')
      continue;
    _cleanup_close_ int rfd = openat(dirfd(d), e->d_name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    json_t *rec = hutch_images_load_fd(rfd);
    if (!json_is_object(rec)) {
      json_decref(rec);
      continue;
    }
    more = fn(rec, arg);
    json_decref(rec);
  }
  closedir(d);
}

static const char *str_of(json_t *rec, const char *key) {
  const char *v = json_string_value(json_object_get(rec, key));
  return v ? v : "";
}

static bool has_tag(json_t *rec, const char *tag) {
  json_t *tags = json_object_get(rec, "tags"), *v;
  size_t i;
  json_array_foreach(tags, i, v)
    if (json_is_string(v) && strcmp(json_string_value(v), tag) == 0)
      return true;
  return false;
}

struct finding {
  const char *owner, *name, *tag, *ref;
  json_t *own, *public;
  int own_score, public_score;
};

/* How well rec answers a lookup: 3 its id, 2 its name and the tag asked
 * for (latest when none is), 1 its name alone when no tag was asked for
 * (a template built only as NAME:v1 is still NAME), 0 not at all. */
static int score(const struct finding *f, json_t *rec) {
  if (strcmp(str_of(rec, "id"), f->ref) == 0)
    return 3;
  if (strcmp(str_of(rec, "name"), f->name) != 0)
    return 0;
  if (has_tag(rec, f->tag ? f->tag : "latest"))
    return 2;
  return f->tag ? 0 : 1;
}

/* Whether rec was built after other (NULL: before everything). */
static bool built_after(json_t *rec, json_t *other) {
  return json_integer_value(json_object_get(rec, "created_at")) >
         json_integer_value(json_object_get(other, "created_at"));
}

static bool find_one(json_t *rec, void *arg) {
  struct finding *f = arg;
  const char *owner = str_of(rec, "owner");
  /* With no owner given (the CLI, an admin), a public template comes
   * first, then anyone's. */
  bool mine = f->owner ? strcmp(owner, f->owner) == 0 : !owner[0];
  if (!mine && owner[0] && f->owner)
    return true;
  int sc = score(f, rec);
  json_t **slot = mine ? &f->own : &f->public;
  int *best = mine ? &f->own_score : &f->public_score;
  /* The best answer; of equals, the newest build. */
  if (sc > 0 && (sc > *best || (sc == *best && built_after(rec, *slot)))) {
    json_decref(*slot);
    *slot = json_incref(rec);
    *best = sc;
  }
  return true;
}

json_t *hutch_images_find(const struct hutch_images *s, const char *owner, const char *ref,
                          struct hutch_err *err) {
  char name[HUTCH_IMAGE_NAME_MAX * 2 + 2];
  if (strlen(ref) >= sizeof name) {
    hutch_err_fail(err, HUTCH_ERR_NOT_FOUND, "template_not_found", "no template '%.64s...'", ref);
    return NULL;
  }
  str_copy(name, sizeof name, ref);
  const char *tag = hutch_images_split_tag(name);
  struct finding f = {.owner = owner, .name = name, .tag = tag, .ref = ref};
  each_record(s, ".json", find_one, &f);
  if (f.own) {
    json_decref(f.public);
    return f.own;
  }
  if (!f.public)
    hutch_err_fail(err, HUTCH_ERR_NOT_FOUND, "template_not_found", "no template '%s'", ref);
  return f.public;
}

char *hutch_images_split_tag(char *ref) {
  /* NAME:TAG; a ':' before the last '/' is a registry's port, not a tag. */
  char *colon = strrchr(ref, ':'), *slash = strrchr(ref, '/');
  if (!colon || (slash && colon < slash))
    return NULL;
  *colon = '\0';
  return colon + 1;
}

json_t *hutch_images_get(const struct hutch_images *s, const char *id, struct hutch_err *err) {
  static const char *const suffixes[] = {"json", "gone"};
  bool ok = id[0] && strlen(id) <= 64;
  for (size_t i = 0; ok && id[i]; i++)
    ok = (id[i] >= '0' && id[i] <= '9') || (id[i] >= 'a' && id[i] <= 'f');
  for (size_t i = 0; ok && i < ARRAY_SIZE(suffixes); i++) {
    _cleanup_free_ char *name = xasprintf("templates/%s.%s", id, suffixes[i]);
    _cleanup_close_ int fd = openat(s->dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    json_t *rec = hutch_images_load_fd(fd);
    if (json_is_object(rec))
      return rec;
    json_decref(rec);
  }
  hutch_err_fail(err, HUTCH_ERR_NOT_FOUND, "template_not_found", "no template with id '%.64s'", id);
  return NULL;
}

struct listing {
  const char *owner;
  json_t *all;
};

static bool list_one(json_t *rec, void *arg) {
  struct listing *l = arg;
  const char *owner = str_of(rec, "owner");
  if (!l->owner || !owner[0] || strcmp(owner, l->owner) == 0)
    json_array_append(l->all, rec);
  return true;
}

static int by_name(const void *a, const void *b) {
  json_t *x = *(json_t *const *)a, *y = *(json_t *const *)b;
  int c = strcmp(str_of(x, "name"), str_of(y, "name"));
  return c ? c : strcmp(str_of(x, "owner"), str_of(y, "owner"));
}

json_t *hutch_images_list(const struct hutch_images *s, const char *owner) {
  struct listing l = {owner, json_array()};
  each_record(s, ".json", list_one, &l);
  size_t n = json_array_size(l.all);
  json_t **v = xcalloc(n ? n : 1, sizeof *v);
  for (size_t i = 0; i < n; i++)
    v[i] = json_incref(json_array_get(l.all, i));
  qsort(v, n, sizeof *v, by_name);
  json_t *sorted = json_array();
  for (size_t i = 0; i < n; i++)
    json_array_append_new(sorted, v[i]);
  free(v);
  json_decref(l.all);
  return sorted;
}

static bool kept_one(json_t *rec, void *arg) {
  struct listing *l = arg;
  if (strcmp(str_of(rec, "owner"), l->owner) == 0)
    json_array_append(l->all, rec);
  return true;
}

json_t *hutch_images_kept(const struct hutch_images *s, const char *owner) {
  struct listing l = {owner, json_array()};
  each_record(s, ".gone", kept_one, &l);
  return l.all;
}

static char *make_tmpdir(struct hutch_images *s, struct hutch_err *err) {
  char *path = xasprintf("%s/tmp/%ld-XXXXXX", s->dir, (long)getpid());
  if (!mkdtemp(path)) {
    hutch_err_set(err, errno, "template store: a work directory");
    free(path);
    return NULL;
  }
  return path;
}

char *hutch_images_scratchdir(struct hutch_images *s, struct hutch_err *err) {
  return make_tmpdir(s, err);
}

char *hutch_images_tmpdir(struct hutch_images *s, struct hutch_err *err) {
  /* Work under way holds the work lock shared: a collection of unused
   * layers (images_gc.c) leaves layers alone while any is held, as a
   * layer committed for a template not yet added is in no record. */
  if (s->work_lock < 0) {
    s->work_lock = openat(s->dirfd, "work.lock", O_RDONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (s->work_lock < 0 || flock(s->work_lock, LOCK_SH) < 0) {
      hutch_err_set(err, errno, "template store: work.lock");
      return NULL;
    }
  }
  return make_tmpdir(s, err);
}

char *hutch_images_layer_path(const struct hutch_images *s, const char *hex) {
  return xasprintf("%s/layers/%s", s->dir, hex);
}

bool hutch_images_hex_ok(const char *hex) {
  if (strlen(hex) != 64)
    return false;
  for (size_t i = 0; i < 64; i++)
    if (!((hex[i] >= '0' && hex[i] <= '9') || (hex[i] >= 'a' && hex[i] <= 'f')))
      return false;
  return true;
}

bool hutch_images_layer_exists(const struct hutch_images *s, const char *hex) {
  struct stat st;
  _cleanup_free_ char *name = xasprintf("layers/%s", hex);
  return hutch_images_hex_ok(hex) && fstatat(s->dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
         S_ISDIR(st.st_mode);
}

int hutch_images_stack(const struct hutch_images *s, json_t *record, char **rootfs, char ***layers,
                       size_t *nlayers, struct hutch_err *err) {
  json_t *ls = json_object_get(record, "layers");
  const char *top = json_string_value(json_object_get(record, "top"));
  size_t n = json_array_size(ls);
  if (!json_is_array(ls) || n > HUTCH_IMAGE_MAX_LAYERS || !top)
    return hutch_err_fail(err, HUTCH_ERR_SYSTEM, NULL, "template %s: a damaged record",
                          str_of(record, "name"));

  char **v = xcalloc(n + 1, sizeof *v);
  /* Topmost first: hutch's own layer, then the image's from its last. */
  v[0] = xstrdup(top);
  for (size_t i = 0; i < n; i++) {
    const char *hex = json_string_value(json_array_get(ls, n - 1 - i));
    v[i + 1] = xstrdup(hex ? hex : "");
  }

  for (size_t i = 0; i <= n; i++) {
    if (!hutch_images_layer_exists(s, v[i])) {
      hutch_err_fail(err, HUTCH_ERR_SYSTEM, NULL, "template %s: layer %.12s is missing",
                     str_of(record, "name"), v[i]);
      hutch_images_stack_free(NULL, v, n + 1);
      return -1;
    }
    char *path = hutch_images_layer_path(s, v[i]);
    free(v[i]);
    v[i] = path;
  }

  *rootfs = xasprintf("%s/skel", s->dir);
  *layers = v;
  *nlayers = n + 1;
  return 0;
}

void hutch_images_stack_free(char *rootfs, char **layers, size_t nlayers) {
  free(rootfs);
  for (size_t i = 0; layers && i < nlayers; i++)
    free(layers[i]);
  free(layers);
}

int hutch_images_pin(const struct hutch_images *s, json_t *record, struct hutch_err *err) {
  const char *id = str_of(record, "id");
  if (!id[0] || strchr(id, '/') || id[0] == '.')
    return hutch_err_fail(err, HUTCH_ERR_SYSTEM, NULL, "template: a damaged record");

  _cleanup_free_ char *name = xasprintf("templates/%s.pin", id);
  int fd = openat(s->dirfd, name, O_RDONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0 || flock(fd, LOCK_SH) < 0) {
    hutch_err_set(err, errno, "template %s: pin", str_of(record, "name"));
    if (fd >= 0)
      close(fd);
    return -1;
  }

  /* Removed since the record was read: a removal that found it unused
   * unlinked the pin file (under its lock, which this one waited for), or
   * had removed the record before this file was made. */
  struct stat st = {0};
  struct hutch_err none = {0};
  json_t *still = NULL;
  if (fstat(fd, &st) == 0 && st.st_nlink > 0)
    still = hutch_images_get(s, id, &none);
  if (!still) {
    if (st.st_nlink > 0)
      unlinkat(s->dirfd, name, 0);
    close(fd);
    hutch_err_fail(err, HUTCH_ERR_NOT_FOUND, "template_not_found", "template %s was removed",
                   str_of(record, "name"));
    return -1;
  }
  json_decref(still);
  return fd;
}

void hutch_images_config(json_t *record, struct hutch_image_config *out) {
  json_t *cfg = json_object_get(record, "config");
  const char *wd = json_string_value(json_object_get(cfg, "workdir"));
  const char *user = json_string_value(json_object_get(cfg, "user"));
  json_t *env = json_object_get(cfg, "env");
  out->workdir = wd && wd[0] == '/' ? wd : NULL;
  out->user = user && user[0] ? user : NULL;
  out->env = json_is_array(env) ? env : NULL;
  out->isolation =
      json_string_value(json_object_get(json_object_get(cfg, "labels"), "hutch.isolation"));
}
