/* The OCI reader of hutch-template (oci.h): OCI image layouts and
 * docker-archives imported as templates, and an image's config turned into
 * a template record's and back. The directory read may come from a hostile archive: its members are
 * opened part by part without following symlinks, JSON documents are read
 * up to a cap, and nothing in them is trusted until its digest matches. */
#include "oci.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cleanup.h"
#include "digest.h"
#include "unpack.h"
#include "util.h"

/* Manifests, indexes and configs are small; a bigger one is no image's. */
#define OCI_JSON_MAX (4 << 20)

#define bad(err, ...) hutch_err_fail(err, HUTCH_ERR_INVALID, "bad_image", __VA_ARGS__)

/* A member of the directory, a regular file, following no symlink. */
static int open_member(int dirfd, const char *name, struct stat *st, struct hutch_err *err) {
  char path[PATH_MAX];
  const char *leaf;
  if (unpack_clean_path(name, path, sizeof path, err) < 0)
    return -1;
  if (!*path)
    return bad(err, "member '%.200s' is no file", name);
  _cleanup_close_ int dir = unpack_open_parent(dirfd, path, false, &leaf, err);
  if (dir < 0)
    return -1;
  int fd = openat(dir, leaf, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0 && (errno == ENOENT || errno == ELOOP))
    return bad(err, "the image has no file '%.200s'", name);
  if (fd < 0 || fstat(fd, st) < 0) {
    hutch_err_set(err, errno, "%.200s", name);
    if (fd >= 0)
      close(fd);
    return -1;
  }
  if (!S_ISREG(st->st_mode)) {
    close(fd);
    return bad(err, "'%.200s' is not a regular file", name);
  }
  return fd;
}

/* Whether buf[0..n)'s sha256 is digest ("sha256:<hex>"). */
static bool digest_matches(const char *buf, size_t n, const char *digest) {
  char hex[65], want[65];
  if (!unpack_digest_hex(digest, want))
    return false;
  if (!digest_sha256_hex(buf, n, hex))
    return false;
  return strcmp(hex, want) == 0;
}

/* A JSON object from member name: checked against digest ("sha256:...")
 * and size when given (NULL, -1: not). what names it in errors. */
static json_t *read_json(int dirfd, const char *name, const char *digest, json_int_t size,
                         const char *what, struct hutch_err *err) {
  struct stat st;
  _cleanup_close_ int fd = open_member(dirfd, name, &st, err);
  if (fd < 0)
    return hutch_err_wrap(err, "%s", what), NULL;
  if (st.st_size > OCI_JSON_MAX)
    return bad(err, "%s is larger than 4 MiB", what), NULL;
  if (size >= 0 && st.st_size != size) {
    hutch_err_fail(err, HUTCH_ERR_INVALID, "digest_mismatch",
                   "%s has %lld bytes, not %lld as its descriptor says", what,
                   (long long)st.st_size, (long long)size);
    return NULL;
  }

  _cleanup_free_ char *buf = xmalloc((size_t)st.st_size + 1);
  ssize_t n = read_all(fd, buf, (size_t)st.st_size);
  if (n != st.st_size) {
    hutch_err_set(err, n < 0 ? errno : EIO, "read %s", what);
    return NULL;
  }
  if (digest && !digest_matches(buf, (size_t)n, digest)) {
    hutch_err_fail(err, HUTCH_ERR_INVALID, "digest_mismatch", "%s does not match its digest %.80s",
                   what, digest);
    return NULL;
  }

  json_error_t jerr;
  json_t *doc = json_loadb(buf, (size_t)n, JSON_REJECT_DUPLICATES, &jerr);
  if (!doc || !json_is_object(doc)) {
    hutch_err_fail(err, HUTCH_ERR_INVALID, "bad_image", "%s is not a JSON object: %s", what,
                   doc ? "another type" : jerr.text);
    json_decref(doc);
    return NULL;
  }
  return doc;
}

/* A descriptor's digest and size, checked for form. */
static int descriptor(json_t *d, const char **digest, json_int_t *size, const char *what,
                      struct hutch_err *err) {
  char hex[65];
  json_t *s = json_object_get(d, "size");
  *digest = json_string_value(json_object_get(d, "digest"));
  if (!json_is_object(d) || !*digest || !unpack_digest_hex(*digest, hex) || !json_is_integer(s) ||
      json_integer_value(s) < 0)
    return bad(err, "%s is not a descriptor with a sha256 digest and a size", what);
  *size = json_integer_value(s);
  return 0;
}

static json_t *read_blob(int dirfd, json_t *desc, const char *what, struct hutch_err *err) {
  const char *digest;
  json_int_t size;
  if (descriptor(desc, &digest, &size, what, err) < 0)
    return NULL;
  char path[128];
  snprintf(path, sizeof path, "blobs/sha256/%s", digest + 7);
  return read_json(dirfd, path, digest, size, what, err);
}

static bool is_index(json_t *desc, json_t *doc) {
  const char *mt = json_string_value(json_object_get(desc, "mediaType"));
  if (!mt && doc)
    mt = json_string_value(json_object_get(doc, "mediaType"));
  if (mt)
    return strcmp(mt, OCI_INDEX) == 0 ||
           strcmp(mt, "application/vnd.docker.distribution.manifest.list.v2+json") == 0;
  return doc && json_object_get(doc, "manifests");
}

/* The one descriptor of an index to import: for linux/amd64 (or saying
 * no platform), the one tagged ref when ref names a tag it has. */
static json_t *pick(json_t *index, const char *tag, struct hutch_err *err) {
  json_t *list = json_object_get(index, "manifests"), *d, *first = NULL;
  size_t i;
  if (!json_is_array(list) || !json_array_size(list))
    return bad(err, "the image index lists no manifests"), NULL;
  json_array_foreach(list, i, d) {
    json_t *p = json_object_get(d, "platform");
    const char *os = json_string_value(json_object_get(p, "os"));
    const char *arch = json_string_value(json_object_get(p, "architecture"));
    if (p && (!os || strcmp(os, "linux") != 0 || !arch || strcmp(arch, "amd64") != 0))
      continue;
    const char *name =
        json_string_value(json_object_get(json_object_get(d, "annotations"), OCI_REF_NAME));
    if (tag && name && strcmp(name, tag) == 0)
      return d;
    if (!first)
      first = d;
  }
  if (!first)
    bad(err, "the image index has no image for linux/amd64");
  return first;
}

/* The manifest for linux/amd64 below index (image indexes may nest). */
static json_t *find_manifest(int dirfd, json_t *index, const char *tag, struct hutch_err *err) {
  json_t *cur = json_incref(index);
  for (int depth = 0; depth < 4; depth++) {
    json_t *d = pick(cur, tag, err);
    json_t *doc = d ? read_blob(dirfd, d, "the image manifest", err) : NULL;
    json_decref(cur);
    if (!doc)
      return NULL;
    if (!is_index(d, doc))
      return doc;
    cur = doc;
  }
  json_decref(cur);
  return bad(err, "image indexes nest too deep"), NULL;
}

static int string_list(json_t *v, const char *what, struct hutch_err *err) {
  json_t *s;
  size_t i;
  if (!json_is_array(v))
    return bad(err, "image config: %s is not a list of strings", what);
  json_array_foreach(v, i, s)
    if (!json_is_string(s))
      return bad(err, "image config: %s is not a list of strings", what);
  return 0;
}

/* A list of strings, or null (absent) as an empty list. */
static json_t *strings_or_empty(json_t *c, const char *key, struct hutch_err *err) {
  json_t *v = json_object_get(c, key);
  if (!v || json_is_null(v))
    return json_array();
  return string_list(v, key, err) < 0 ? NULL : json_incref(v);
}

/* The fields of an image config's "config" (c) that a record takes,
 * checked for type. */
static int check_config(json_t *c, struct hutch_err *err) {
  json_t *wd = json_object_get(c, "WorkingDir"), *user = json_object_get(c, "User");
  json_t *labels = json_object_get(c, "Labels"), *ports = json_object_get(c, "ExposedPorts");
  if ((wd && !json_is_string(wd)) || (user && !json_is_string(user)) ||
      (labels && !json_is_null(labels) && !json_is_object(labels)) ||
      (ports && !json_is_null(ports) && !json_is_object(ports)))
    return bad(err, "image config: WorkingDir, User, Labels or ExposedPorts has the wrong "
                    "type");
  const char *k;
  json_t *v;
  json_object_foreach(labels, k, v)
    if (!json_is_string(v))
      return bad(err, "image config: label '%.100s' is no string", k);
  return 0;
}

json_t *oci_record_config(json_t *image_config, struct hutch_err *err) {
  json_t *c = json_object_get(image_config, "config");
  if (c && !json_is_null(c) && !json_is_object(c))
    return bad(err, "image config: config is not an object"), NULL;
  if (check_config(c, err) < 0)
    return NULL;
  json_t *wd = json_object_get(c, "WorkingDir"), *user = json_object_get(c, "User");
  json_t *labels = json_object_get(c, "Labels"), *ports = json_object_get(c, "ExposedPorts");

  json_t *out = json_object();
  const char *lists[][2] = {{"Env", "env"}, {"Entrypoint", "entrypoint"}, {"Cmd", "cmd"}};
  for (size_t i = 0; i < ARRAY_SIZE(lists); i++) {
    json_t *l = strings_or_empty(c, lists[i][0], err);
    if (!l)
      return json_decref(out), NULL;
    json_object_set_new(out, lists[i][1], l);
  }

  json_t *shell = strings_or_empty(c, "Shell", err);
  if (!shell)
    return json_decref(out), NULL;
  if (!json_array_size(shell)) {
    json_array_append_new(shell, json_string("/bin/sh"));
    json_array_append_new(shell, json_string("-c"));
  }

  json_t *exposed = json_array();
  const char *k;
  json_t *v;
  json_object_foreach(ports, k, v)
    json_array_append_new(exposed, json_string(k));
  const char *workdir = json_string_value(wd);
  json_t *rest =
      json_pack("{s:s,s:s,s:o,s:o,s:s,s:s,s:o}", "workdir", workdir && *workdir ? workdir : "/",
                "user", user ? json_string_value(user) : "", "labels",
                json_is_object(labels) ? json_incref(labels) : json_object(), "exposed_ports",
                exposed, "start_cmd", "", "ready_cmd", "", "shell", shell);
  json_object_update(out, rest);
  json_decref(rest);
  return out;
}

json_t *oci_image_config(json_t *rc) {
  json_t *ports = json_object(), *p;
  size_t i;
  json_array_foreach(json_object_get(rc, "exposed_ports"), i, p)
    json_object_set_new(ports, json_string_value(p), json_object());
  json_t *c = json_object();
  const char *keys[][2] = {
      {"env", "Env"},   {"entrypoint", "Entrypoint"}, {"cmd", "Cmd"},    {"workdir", "WorkingDir"},
      {"user", "User"}, {"labels", "Labels"},         {"shell", "Shell"}};
  for (size_t k = 0; k < ARRAY_SIZE(keys); k++) {
    json_t *v = json_object_get(rc, keys[k][0]);
    if (v && !(json_is_array(v) && !json_array_size(v)))
      json_object_set(c, keys[k][1], v);
  }
  json_object_set_new(c, "ExposedPorts", ports);
  return c;
}

/* The image's own architecture: a template runs on this host's. */
static int check_platform(json_t *config, struct hutch_err *err) {
  const char *os = json_string_value(json_object_get(config, "os"));
  const char *arch = json_string_value(json_object_get(config, "architecture"));
  if ((os && strcmp(os, "linux") != 0) || (arch && strcmp(arch, "amd64") != 0))
    return hutch_err_fail(err, HUTCH_ERR_UNSUPPORTED, "wrong_platform",
                          "the image is for %.40s/%.40s, not linux/amd64", os ? os : "?",
                          arch ? arch : "?");
  return 0;
}

/* A layer to unpack: its member, and (OCI) its descriptor's digest and size. */
struct layer_src {
  const char *path, *digest;
  json_int_t size;
};

/* The layers with each one only at its topmost place: overlayfs refuses
 * a directory twice among its lowers (images repeat the empty layer),
 * and a layer again higher up hides all that its lower copy shows. */
static json_t *topmost(json_t *hexes) {
  json_t *out = json_array(), *h;
  size_t i, n = json_array_size(hexes);
  json_array_foreach(hexes, i, h) {
    bool again = false;
    for (size_t j = i + 1; j < n && !again; j++)
      again = json_equal(h, json_array_get(hexes, j));
    if (!again)
      json_array_append(out, h);
  }
  json_decref(hexes);
  return out;
}

/* Layer i of n unpacked into the store and checked against its diff_id:
 * its hex out. */
static int import_layer(struct image_ctx *ctx, int dirfd, const struct layer_src *l, size_t i,
                        size_t n, json_t *diff_ids, struct unpack_budget *used, char hex[65],
                        struct hutch_err *err) {
  struct stat st;
  char what[64];
  snprintf(what, sizeof what, "layer %zu of %zu", i + 1, n);
  _cleanup_close_ int fd = open_member(dirfd, l->path, &st, err);
  if (fd < 0)
    return -1;
  if (l->digest && st.st_size != l->size)
    return hutch_err_fail(err, HUTCH_ERR_INVALID, "digest_mismatch",
                          "%s has %lld bytes, not %lld as its descriptor says", what,
                          (long long)st.st_size, (long long)l->size);

  image_progress(ctx, json_pack("{s:s,s:I,s:I,s:I,s:s+}", "event", "layer", "index",
                                (json_int_t)i + 1, "count", (json_int_t)n, "bytes",
                                (json_int_t)st.st_size, "message", what, ": unpacking"));
  if (unpack_layer_counted(ctx, fd, l->digest, used, hex, err) < 0)
    return hutch_err_wrap(err, "%s", what);

  const char *want = json_string_value(json_array_get(diff_ids, i));
  if (!want || strncmp(want, "sha256:", 7) != 0 || strcmp(want + 7, hex) != 0)
    return hutch_err_fail(err, HUTCH_ERR_INVALID, "digest_mismatch",
                          "%s unpacks to diff_id sha256:%s, not %.80s as the image config says",
                          what, hex, want ? want : "(none)");
  return 0;
}

static json_t *import_image(struct image_ctx *ctx, int dirfd, json_t *config,
                            const struct layer_src *layers, size_t n, const char *name,
                            const char *source, const char *ref, struct hutch_err *err) {
  json_t *diff_ids = json_object_get(json_object_get(config, "rootfs"), "diff_ids");
  if (check_platform(config, err) < 0)
    return NULL;
  if (!json_is_array(diff_ids) || json_array_size(diff_ids) != n)
    return bad(err, "image config: rootfs.diff_ids does not list the image's %zu layers", n), NULL;
  if (n > HUTCH_IMAGE_MAX_LAYERS)
    return bad(err, "the image has more than %d layers", HUTCH_IMAGE_MAX_LAYERS), NULL;
  json_t *rconfig = oci_record_config(config, err);
  if (!rconfig)
    return NULL;

  json_t *hexes = json_array();
  struct unpack_budget used = {0};
  for (size_t i = 0; i < n; i++) {
    char hex[65];
    if (import_layer(ctx, dirfd, &layers[i], i, n, diff_ids, &used, hex, err) < 0) {
      json_decref(hexes);
      json_decref(rconfig);
      /* Layers committed already stay for the next gc: each is whole, and
       * another import under way may be about to use it. */
      return NULL;
    }
    json_array_append_new(hexes, json_string(hex));
  }

  json_t *record =
      json_pack("{s:s,s:s,s:s,s:s,s:o,s:o}", "name", name, "owner", ctx->owner, "source", source,
                "ref", ref, "layers", topmost(hexes), "config", rconfig);
  json_t *stored = hutch_images_add(&ctx->store, record, ctx->replace, err);
  json_decref(record);
  return stored;
}

static int open_dir(const char *dir, struct hutch_err *err) {
  int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    hutch_err_fail(err, errno == ENOENT || errno == ENOTDIR ? HUTCH_ERR_INVALID : HUTCH_ERR_SYSTEM,
                   "bad_image", "%.200s: %s", dir, strerror(errno));
  return fd;
}

/* The tag of an image reference ("name:tag", "reg:5000/name:tag"). */
static const char *tag_of(const char *ref) {
  const char *slash = ref ? strrchr(ref, '/') : NULL, *colon = ref ? strrchr(ref, ':') : NULL;
  return colon && (!slash || colon > slash) ? colon + 1 : NULL;
}

/* The manifest's layer descriptors (list) as sources, their paths in
 * paths. */
static int layout_layers(json_t *list, struct layer_src *layers, char (*paths)[128],
                         struct hutch_err *err) {
  json_t *d;
  size_t i;
  json_array_foreach(list, i, d) {
    char what[64];
    snprintf(what, sizeof what, "the manifest's layer %zu", i + 1);
    if (descriptor(d, &layers[i].digest, &layers[i].size, what, err) < 0)
      return -1;
    snprintf(paths[i], sizeof paths[i], "blobs/sha256/%s", layers[i].digest + 7);
    layers[i].path = paths[i];
  }
  return 0;
}

/* The image a layout's manifest (and its config) describes, imported. */
static json_t *import_manifest(struct image_ctx *ctx, int dirfd, json_t *manifest, json_t *config,
                               const char *name, const char *source, const char *ref,
                               struct hutch_err *err) {
  json_t *list = json_object_get(manifest, "layers");
  if (!json_is_array(list))
    return bad(err, "the image manifest lists no layers"), NULL;

  size_t n = json_array_size(list);
  struct layer_src *layers = xcalloc(n + 1, sizeof *layers);
  char(*paths)[128] = xcalloc(n + 1, sizeof *paths);
  json_t *record = NULL;
  if (layout_layers(list, layers, paths, err) == 0)
    record = import_image(ctx, dirfd, config, layers, n, name, source, ref, err);
  free(layers);
  free(paths);
  return record;
}

json_t *oci_import_layout(struct image_ctx *ctx, const char *layout_dir, const char *name,
                          const char *source, const char *ref, struct hutch_err *err) {
  _cleanup_close_ int dirfd = open_dir(layout_dir, err);
  if (dirfd < 0)
    return NULL;
  json_t *index = read_json(dirfd, "index.json", NULL, -1, "index.json", err);
  json_t *manifest = index ? find_manifest(dirfd, index, tag_of(ref), err) : NULL;
  json_decref(index);
  if (!manifest)
    return NULL;

  json_t *record = NULL;
  json_t *config = read_blob(dirfd, json_object_get(manifest, "config"), "the image config", err);
  if (config)
    record = import_manifest(ctx, dirfd, manifest, config, name, source, ref, err);
  json_decref(config);
  json_decref(manifest);
  return record;
}

/* The config file's digest, when its name carries one ("<hex>.json",
 * "blobs/sha256/<hex>"). */
static const char *config_digest(const char *path, char buf[72]) {
  const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
  size_t n = strlen(base);
  if (n == 64 + 5 && strcmp(base + 64, ".json") == 0)
    n = 64;
  if (n != 64)
    return NULL;
  snprintf(buf, 72, "sha256:%.64s", base);
  char hex[65];
  return unpack_digest_hex(buf, hex) ? buf : NULL;
}

/* A docker-archive's manifest.json: a list of {Config, Layers}, checked.
 * It is an array, which read_json does not take. */
static json_t *docker_manifest(int dirfd, struct hutch_err *err) {
  struct stat st;
  _cleanup_close_ int fd = open_member(dirfd, "manifest.json", &st, err);
  if (fd < 0)
    return NULL;
  if (st.st_size > OCI_JSON_MAX)
    return bad(err, "manifest.json is larger than 4 MiB"), NULL;
  _cleanup_free_ char *buf = xmalloc((size_t)st.st_size + 1);
  if (read_all(fd, buf, (size_t)st.st_size) != st.st_size)
    return hutch_err_set(err, errno, "read manifest.json"), NULL;

  json_error_t jerr;
  json_t *list = json_loadb(buf, (size_t)st.st_size, 0, &jerr);
  json_t *m = json_array_get(list, 0);
  json_t *files = json_object_get(m, "Layers");
  const char *cpath = json_string_value(json_object_get(m, "Config"));
  if (!json_is_array(list) || !cpath || !json_is_array(files)) {
    bad(err, "manifest.json is not a docker-archive manifest (a list of {Config, Layers})%s%s",
        list ? "" : ": ", list ? "" : jerr.text);
    json_decref(list);
    return NULL;
  }
  return list;
}

json_t *oci_import_docker(struct image_ctx *ctx, const char *dir, const char *name,
                          const char *source, const char *ref, struct hutch_err *err) {
  _cleanup_close_ int dirfd = open_dir(dir, err);
  if (dirfd < 0)
    return NULL;
  json_t *list = docker_manifest(dirfd, err);
  if (!list)
    return NULL;

  json_t *m = json_array_get(list, 0);
  json_t *files = json_object_get(m, "Layers");
  const char *cpath = json_string_value(json_object_get(m, "Config"));
  char dbuf[72];
  json_t *config = read_json(dirfd, cpath, config_digest(cpath, dbuf), -1, "the image config", err);
  json_t *record = NULL;
  size_t n = json_array_size(files), i;
  struct layer_src *layers = xcalloc(n + 1, sizeof *layers);
  json_t *f;
  bool ok = config != NULL;
  json_array_foreach(files, i, f) {
    layers[i] = (struct layer_src){json_string_value(f), NULL, -1};
    if (!layers[i].path) {
      if (ok)
        bad(err, "manifest.json: a layer is not a file name");
      ok = false;
      break;
    }
  }

  if (ok)
    record = import_image(ctx, dirfd, config, layers, n, name, source, ref, err);
  free(layers);
  json_decref(config);
  json_decref(list);
  return record;
}
