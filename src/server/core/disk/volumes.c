/* Volumes: storage that outlives sandboxes. A volume is an ext4 image of
 * its size in STATE/volumes/<id>.img, allocated in full when it is made (so
 * a full volume is ENOSPC inside it, never a full host disk) and made by
 * mkfs.ext4 with its root owned by the sandbox user. A sandbox mounts it
 * through a loop device: the server attaches one (auto-clearing: it goes
 * when its last mount does) or finds the one already attached for the
 * image, so that every sandbox mounting a volume shares one filesystem
 * instance. Volumes belong to a tenant; one in use cannot be deleted. */
#include "core/disk/volumes.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/loop.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cleanup.h"
#include "util.h"
#include "core/sandbox/sbx.h"
#include "core/disk/diskroom.h"
#include "core/base/server.h"
#include "core/sandbox/tally.h"
#include "state/store.h"

#define VOLUMES_PER_SANDBOX 16

static char *image_of(const struct server *srv, const char *id) {
  return xasprintf("%s/volumes/%s.img", srv->cfg.state_dir, id);
}

static json_t *row_json(const struct store_volume *v) {
  char created[32];
  iso8601(v->created_ms, created);
  return json_pack("{s:s,s:s,s:s,s:I,s:s}", "id", v->id, "tenant", v->tenant, "name", v->name,
                   "size_mb", (json_int_t)v->size_mb, "created_at", created);
}

static void collect(const struct store_volume *v, void *arg) {
  json_array_append_new(arg, row_json(v));
}

json_t *volumes_list(struct server *srv, const char *tenant) {
  struct hutch_err err = {0};
  json_t *a = json_array();
  if (store_volume_each(srv->store, tenant, collect, a, &err) < 0) {
    fprintf(stderr, "hutch serve: %s\n", err.msg);
    json_decref(a);
    return NULL;
  }
  return a;
}

json_t *volumes_find(struct server *srv, const char *tenant, const char *id_or_name) {
  json_t *a = volumes_list(srv, tenant), *v, *found = NULL;
  size_t i;
  json_array_foreach(a, i, v) {
    if (strcmp(json_string_value(json_object_get(v, "id")), id_or_name) == 0 ||
        strcmp(json_string_value(json_object_get(v, "name")), id_or_name) == 0)
      found = json_incref(v);
  }
  json_decref(a);
  return found;
}

/* A name is looked up beside ids: it may not look like one. */
static bool name_ok(const char *s) {
  size_t n = strlen(s);
  return n >= 1 && n <= 63 &&
         strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                   "0123456789._-") == n &&
         s[0] != '.' && strncmp(s, "vol_", 4) != 0;
}

/* mkfs.ext4 on the image: no reserved blocks, the root the sandbox user's
 * (1000, which each sandbox's id map turns into its own user), and no
 * discard, which on a file punches holes: the image stays allocated. */
static int make_fs(const char *image, struct hutch_err *err) {
  char *argv[] = {"mkfs.ext4",   "-q", "-F", "-m", "0", "-E", "root_owner=1000:1000,nodiscard",
                  (char *)image, NULL};
  pid_t pid = fork();
  if (pid == 0) {
    int null = open("/dev/null", O_RDWR);
    if (null < 0)
      _exit(126);
    if (dup2(null, 0) < 0)
      _exit(126);
    if (dup2(null, 1) < 0)
      _exit(126);
    execvp("mkfs.ext4", argv);
    _exit(127);
  }
  if (pid < 0)
    return hutch_err_set(err, errno, "fork for mkfs.ext4");

  int st;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
    ;

  if (WIFEXITED(st) && WEXITSTATUS(st) == 127)
    return hutch_err_set(err, ENOENT, "mkfs.ext4 is not installed (e2fsprogs)");
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
    return hutch_err_set(err, 0, "mkfs.ext4 failed (status %d)", st);
  return 0;
}

/* A volume being made: its image allocated in full and formatted off the
 * loop (a large one takes seconds). Its name and size count as the
 * tenant's meanwhile (volumes_pending_bytes, and a second volume of the
 * name is refused), so that creates fired at once cannot pass the quota
 * together. The row is stored once the image is whole. */
struct vol_making {
  struct offload o;
  struct vol_making *next; /* the server's list */
  char tenant[SERVE_TENANT_LEN + 1];
  char name[64];
  char id[21];
  char *image;
  uint64_t size_mb;
  volume_done_fn done;
  void *arg;
  struct hutch_err err;
  int r;
};

static void vol_run(struct offload *o) {
  struct vol_making *vm = OFFLOAD_JOB(o, struct vol_making);
  int fd = open(vm->image, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) {
    vm->r = hutch_err_set(&vm->err, errno, "volume image %s", vm->image);
  } else {
    int r = posix_fallocate(fd, 0, (off_t)(vm->size_mb << 20));
    close(fd);
    if (r != 0)
      vm->r = hutch_err_set(&vm->err, r, "volume image %s", vm->image);
    else
      vm->r = make_fs(vm->image, &vm->err);
  }

  /* There is never half an image. */
  if (vm->r < 0)
    unlink(vm->image);
}

static void vol_done(struct offload *o) {
  struct vol_making *vm = OFFLOAD_JOB(o, struct vol_making);
  struct server *srv = o->srv;
  struct hutch_err err = {0};
  json_t *j = NULL;
  for (struct vol_making **q = &srv->vol_making; *q; q = &(*q)->next)
    if (*q == vm) {
      *q = vm->next;
      break;
    }

  struct store_volume v = {vm->id, vm->tenant, vm->name, vm->size_mb, wall_ms()};
  int put = -1;
  if (vm->r == 0 && !srv->stopping)
    put = store_volume_put(srv->store, &v, &vm->err);
  if (put == 0) {
    j = row_json(&v);
  } else {
    /* The image is whole, but the server stops, or the store refused it. */
    if (vm->r == 0)
      offload_remove(srv, xstrdup(vm->image), false, NULL, NULL);
    if (put == 1)
      hutch_err_fail(&err, HUTCH_ERR_CONFLICT, "exists", "you have a volume named %s", vm->name);
    else
      hutch_err_fail(&err, vm->err.errnum == ENOSPC ? HUTCH_ERR_NO_SPACE : HUTCH_ERR_SYSTEM, NULL,
                     "%s", srv->stopping ? "the server is stopping" : vm->err.msg);
  }

  vm->done(j, j ? NULL : &err, vm->arg);
  json_decref(j);
  free(vm->image);
  free(vm);
}

uint64_t volumes_pending_bytes(const struct server *srv, const char *tenant) {
  uint64_t n = 0;
  for (const struct vol_making *vm = srv->vol_making; vm; vm = vm->next)
    if (!tenant || strcmp(vm->tenant, tenant) == 0)
      n += vm->size_mb << 20;
  return n;
}

int volumes_create(struct server *srv, const struct principal *p, const char *name,
                   uint64_t size_mb, volume_done_fn done, void *arg, struct hutch_err *err) {
  if (!name || !name_ok(name) || size_mb < VOLUME_MIN_MB || size_mb > VOLUME_MAX_MB)
    return hutch_err_fail(err, HUTCH_ERR_INVALID, "invalid_argument",
                          "name (1-63 of letters, digits, . _ -; not starting with . or vol_) "
                          "and size_mb (%d to %llu) are required",
                          VOLUME_MIN_MB, VOLUME_MAX_MB);

  json_t *existing = volumes_find(srv, p->tenant, name);
  bool making = false;
  for (const struct vol_making *vm = srv->vol_making; vm; vm = vm->next)
    making |= strcmp(vm->tenant, p->tenant) == 0 && strcmp(vm->name, name) == 0;
  if (existing || making) {
    json_decref(existing);
    return hutch_err_fail(err, HUTCH_ERR_CONFLICT, "exists", "you have a volume named %s", name);
  }

  _cleanup_free_ char *dir = xasprintf("%s/volumes", srv->cfg.state_dir);
  if (mkdir(dir, 0700) < 0 && errno != EEXIST)
    return hutch_err_fail(err, HUTCH_ERR_SYSTEM, "internal", "%s: %s", dir, strerror(errno));

  /* All of it now: the host's disk must hold every volume full, within
   * the tenant's quota and the filesystem's reserve (diskroom.c). */
  if (diskroom_check(srv, p, size_mb << 20, err) < 0)
    return -1;

  struct vol_making *vm = xcalloc(1, sizeof *vm);
  memcpy(vm->id, "vol_", 4);
  random_hex(vm->id + 4, 16);
  vm->image = image_of(srv, vm->id);
  str_copy(vm->tenant, sizeof vm->tenant, p->tenant);
  str_copy(vm->name, sizeof vm->name, name);
  vm->size_mb = size_mb;
  vm->done = done;
  vm->arg = arg;

  vm->next = srv->vol_making;
  srv->vol_making = vm;
  offload(srv, OFFLOAD_OTHER, &vm->o, vol_run, vol_done);
  return 0;
}

/* Its users: live sandboxes, and those being made (their loop device is
 * attached already, and their create may wait in its lane for a while). */
static bool mounts(const json_t *used, const char *id) {
  json_t *v;
  size_t i;
  json_array_foreach(used, i, v) {
    const char *s = json_string_value(json_object_get(v, "id"));
    if (s && strcmp(s, id) == 0)
      return true;
  }
  return false;
}

void volumes_creating(struct server *srv, struct volume_mounts *m, bool on) {
  if (on) {
    m->next_creating = srv->creating_mounts;
    srv->creating_mounts = m;
    return;
  }
  for (struct volume_mounts **p = &srv->creating_mounts; *p; p = &(*p)->next_creating)
    if (*p == m) {
      *p = m->next_creating;
      break;
    }
  m->next_creating = NULL;
}

static unsigned users_of(struct server *srv, const char *tenant, const char *id) {
  unsigned n = 0;
  for (const struct volume_mounts *m = srv->creating_mounts; m; m = m->next_creating)
    n += mounts(m->used, id);

  /* Only its tenant's sandboxes mount it (volumes_find is by tenant). */
  for (struct sbx *sb = tally_sandboxes(srv, tenant); sb; sb = sb->tenant_next) {
    json_t *m;
    size_t i;
    json_array_foreach(sb->volumes, i, m) {
      if (strcmp(json_string_value(json_object_get(m, "id")), id) == 0)
        n++;
    }
  }
  return n;
}

int volumes_delete(struct server *srv, const struct principal *p, const char *id_or_name,
                   offload_done_fn done, void *arg, struct hutch_err *err) {
  struct hutch_err e = {0};
  json_t *v = volumes_find(srv, p->tenant, id_or_name);
  if (!v)
    return hutch_err_fail(err, HUTCH_ERR_NOT_FOUND, "not_found", "no volume %s", id_or_name);

  const char *id = json_string_value(json_object_get(v, "id"));
  unsigned n = users_of(srv, p->tenant, id);
  int r = 0;
  if (n)
    r = hutch_err_fail(err, HUTCH_ERR_CONFLICT, "volume_in_use",
                       "volume %s is mounted by %u sandboxes", id, n);
  else if (store_volume_delete(srv->store, id, &e) < 0)
    r = hutch_err_fail(err, HUTCH_ERR_SYSTEM, "internal", "%s", e.msg);
  else
    offload_remove(srv, image_of(srv, id), false, done, arg);

  json_decref(v);
  return r;
}

/* The loop device already attached to image, if one is (a sandbox, maybe
 * of a server before this one, has it mounted): open, in dev. */
static int loop_attached(const struct stat *img, char dev[32]) {
  DIR *d = opendir("/sys/block");
  int fd = -1;
  for (struct dirent *e; d && fd < 0 && (e = readdir(d));) {
    if (strncmp(e->d_name, "loop", 4) != 0)
      continue;
    snprintf(dev, 32, "/dev/%.20s", e->d_name);
    int f = open(dev, O_RDONLY | O_CLOEXEC);
    struct loop_info64 info;
    if (f >= 0 && ioctl(f, LOOP_GET_STATUS64, &info) == 0 && info.lo_device == img->st_dev &&
        info.lo_inode == img->st_ino)
      fd = f;
    else if (f >= 0)
      close(f);
  }
  if (d)
    closedir(d);
  return fd;
}

/* A loop device for image: the one attached, else a new one. Returns its
 * open fd (hold it until the sandbox has mounted it), its path in dev. */
static int loop_for(const char *image, char dev[32], struct hutch_err *err) {
  struct stat st;
  _cleanup_close_ int img = open(image, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
  if (img < 0 || fstat(img, &st) < 0)
    return hutch_err_set(err, errno, "volume image %s", image);

  int fd = loop_attached(&st, dev);
  if (fd >= 0)
    return fd;

  _cleanup_close_ int ctl = open("/dev/loop-control", O_RDWR | O_CLOEXEC);
  if (ctl < 0)
    return hutch_err_set(err, errno, "/dev/loop-control (the loop module)");

  for (int tries = 0; tries < 8; tries++) {
    int n = ioctl(ctl, LOOP_CTL_GET_FREE);
    if (n < 0)
      return hutch_err_set(err, errno, "a free loop device");

    snprintf(dev, 32, "/dev/loop%d", n);
    fd = open(dev, O_RDWR | O_CLOEXEC);
    if (fd < 0)
      return hutch_err_set(err, errno, "%s", dev);

    struct loop_config cfg = {.fd = (unsigned)img, .info = {.lo_flags = LO_FLAGS_AUTOCLEAR}};
    if (ioctl(fd, LOOP_CONFIGURE, &cfg) == 0)
      return fd;
    int e = errno;
    close(fd);
    if (e != EBUSY) /* A device taken meanwhile means trying another. */
      return hutch_err_set(err, e, "attach %s to %s", image, dev);
  }
  return hutch_err_set(err, EBUSY, "no free loop device");
}

/* Where a volume goes, normalised ("//a/./b/" is "/a/b"), or NULL with why.
 * Mounting fails closed on the rest later (targets are resolved in the
 * sandbox's root with no symlink, magic link or crossing), but a path is
 * judged here, whole, so that no request reaches the mount with a target
 * that means something other than it says: "/" or "/." (the root itself),
 * ".." (never needed in an absolute path; its meaning depends on what is
 * below), a relative path (relative to nothing), or /proc, /sys and /dev,
 * which would hide the masks over /proc and /sys or put a writable,
 * sandbox-owned filesystem where devices and kernel files are expected. */
static char *mount_point(json_t *path, char *why, size_t whylen) {
  const char *s = json_string_value(path);
  size_t len = json_string_length(path);
  if (!s || len == 0 || len != strlen(s) || len >= PATH_MAX) {
    snprintf(why, whylen, "a path of 1 to %d bytes, without NUL", PATH_MAX - 1);
    return NULL;
  }
  if (s[0] != '/') {
    snprintf(why, whylen, "'%.64s' is relative: an absolute path is needed", s);
    return NULL;
  }

  /* The names between slashes, without "." and empty ones. */
  char *out = xmalloc(len + 1);
  size_t n = 0;
  for (const char *p = s; *p;) {
    size_t k = strcspn(p, "/");
    if (k > NAME_MAX || (k == 2 && p[0] == '.' && p[1] == '.')) {
      if (k > NAME_MAX)
        snprintf(why, whylen, "a name longer than %d bytes", NAME_MAX);
      else
        snprintf(why, whylen, "'..' is not allowed in a mount path");
      free(out);
      return NULL;
    }
    if (k && !(k == 1 && p[0] == '.')) {
      out[n++] = '/';
      memcpy(out + n, p, k);
      n += k;
    }
    p += k + (p[k] == '/');
  }
  out[n] = '\0';

  if (n == 0) {
    snprintf(why, whylen, "a volume cannot be mounted over the root");
    free(out);
    return NULL;
  }

  static const char *const kernel[] = {"/proc", "/sys", "/dev", NULL};
  for (const char *const *k = kernel; *k; k++) {
    size_t kl = strlen(*k);
    if (strncmp(out, *k, kl) == 0 && (out[kl] == '\0' || out[kl] == '/')) {
      snprintf(why, whylen, "%.64s is the kernel's: no volume goes under %s", out, *k);
      free(out);
      return NULL;
    }
  }
  return out;
}

int volumes_prepare(struct server *srv, const struct principal *p, json_t *mounts,
                    struct volume_mounts *out, struct hutch_err *err) {
  memset(out, 0, sizeof *out);
  out->used = json_array();
  if (!mounts)
    return 0;

  size_t n = json_array_size(mounts);
  if (!json_is_array(mounts) || n > VOLUMES_PER_SANDBOX) {
    return hutch_err_fail(err, HUTCH_ERR_INVALID, "invalid_argument",
                          "volumes: a list of at most %d {name, path, read_only}",
                          VOLUMES_PER_SANDBOX);
  }

  out->v = xcalloc(n, sizeof *out->v);
  out->fds = xcalloc(n, sizeof *out->fds);
  out->devs = xcalloc(n, sizeof *out->devs);
  for (size_t i = 0; i < n; i++) {
    json_t *m = json_array_get(mounts, i), *ro = json_object_get(m, "read_only");
    const char *name = json_string_value(json_object_get(m, "name"));
    const char *path = json_string_value(json_object_get(m, "path"));
    if (!json_is_object(m) || !name || !path || (ro && !json_is_boolean(ro)) ||
        json_object_size(m) != 2u + (ro != NULL)) {
      return hutch_err_fail(err, HUTCH_ERR_INVALID, "invalid_argument",
                            "volumes[%zu]: {name, path, read_only?}", i);
    }

    char why[160];
    _cleanup_free_ char *at = mount_point(json_object_get(m, "path"), why, sizeof why);
    if (!at) {
      return hutch_err_fail(err, HUTCH_ERR_INVALID, "invalid_argument", "volumes[%zu].path: %s", i,
                            why);
    }
    json_t *vol = volumes_find(srv, p->tenant, name);
    if (!vol) {
      return hutch_err_fail(err, HUTCH_ERR_NOT_FOUND, "volume_not_found", "no volume %s", name);
    }

    /* Its loop device, held open until the sandbox has mounted it. */
    _cleanup_free_ char *image = image_of(srv, json_string_value(json_object_get(vol, "id")));
    struct hutch_err e = {0};
    out->devs[i] = xmalloc(32);
    out->fds[i] = loop_for(image, out->devs[i], &e);
    out->n = i + 1;
    json_array_append_new(out->used, json_pack("{s:O,s:s,s:b}", "id", json_object_get(vol, "id"),
                                               "path", at, "read_only", json_is_true(ro)));
    json_decref(vol);
    if (out->fds[i] < 0)
      return hutch_err_fail(err, HUTCH_ERR_SYSTEM, "sandbox_error", "volume %s: %s", name, e.msg);

    /* The normalised path, as kept in used (which lives as long as v). */
    path = json_string_value(json_object_get(json_array_get(out->used, i), "path"));
    out->v[i] = (struct hutch_volume){out->devs[i], path, json_is_true(ro)};
  }
  return 0;
}

void volumes_release(struct volume_mounts *m) {
  for (size_t i = 0; i < m->n; i++) {
    if (m->fds[i] >= 0)
      close(m->fds[i]);
    free(m->devs[i]);
  }
  free(m->v);
  free(m->fds);
  free(m->devs);
  json_decref(m->used);
  memset(m, 0, sizeof *m);
}
