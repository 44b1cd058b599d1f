/* hutch template pull: an image from a registry (registry.h), written as
 * an OCI image layout under the store's tmp/ and imported from there
 * (oci_import_layout), which verifies it again and unpacks its layers. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "image.h"
#include "layer.h"
#include "oci.h"
#include "registry.h"
#include "unpack.h"
#include "util.h"

/* Under 1 KiB/s this long, a download fails. A hidden variable shortens
 * it for the tests of a trickling registry. */
#define LOW_SPEED_SECONDS 30L

#define USAGE                                                                         \
  "usage: hutch template pull [--insecure] [--allow-private] [--user USER:PASSWORD] " \
  "[--name NAME] [--replace] [--max-bytes N] [--max-files N] REF"

struct blob_progress {
  struct image_ctx *ctx;
  const char *digest;
  size_t index, count;
};

static void on_progress(void *arg, uint64_t done, uint64_t total) {
  struct blob_progress *p = arg;
  json_t *ev = json_pack("{s:s,s:s,s:I,s:I,s:I,s:I}", "event", "pull_layer", "digest", p->digest,
                         "index", (json_int_t)p->index + 1, "count", (json_int_t)p->count, "done",
                         (json_int_t)done, "total", (json_int_t)total);
  if (done == total)
    json_object_set_new(ev, "message",
                        json_sprintf("layer %zu/%zu %.19s: %llu bytes", p->index + 1, p->count,
                                     p->digest, (unsigned long long)total));
  image_progress(p->ctx, ev);
}

static int write_at(int dirfd, const char *name, const char *buf, size_t n, struct hutch_err *err) {
  int fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0 || write_all(fd, buf, n) < 0) {
    int e = errno;
    if (fd >= 0)
      close(fd);
    return hutch_err_set(err, e, "writing %s", name);
  }
  return close(fd) < 0 ? hutch_err_set(err, errno, "writing %s", name) : 0;
}

/* Download the blob desc (a descriptor of the manifest) into blobs,
 * named by its hex, with progress events when p->count (a layer). The
 * same blob listed twice is fetched once. */
static int pull_blob(struct registry *r, int blobs, json_t *desc, struct blob_progress *p,
                     struct hutch_err *err) {
  const char *digest = json_string_value(json_object_get(desc, "digest"));
  json_t *jsize = json_object_get(desc, "size");
  char hex[65];
  if (!unpack_digest_hex(digest, hex) || !json_is_integer(jsize) || json_integer_value(jsize) < 0)
    return hutch_err_fail(err, HUTCH_ERR_INVALID, "bad_manifest",
                          "the manifest has a descriptor without a sha256 digest and a size");

  uint64_t size = (uint64_t)json_integer_value(jsize);
  if (size > p->ctx->max_bytes)
    return hutch_err_fail(err, HUTCH_ERR_TOO_LARGE, "too_large",
                          "blob %.19s is %llu bytes, more than a pull may take (%llu)", digest,
                          (unsigned long long)size, (unsigned long long)p->ctx->max_bytes);
  int fd = openat(blobs, hex, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0 && errno == EEXIST)
    return 0;
  if (fd < 0)
    return hutch_err_set(err, errno, "creating blob %.19s", digest);

  p->digest = digest;
  bool report = p->count && (p->ctx->ndjson || !p->ctx->quiet);
  int rc = registry_get_blob(r, digest, size, fd, report ? on_progress : NULL, p, err);
  if (close(fd) < 0 && rc == 0)
    rc = hutch_err_set(err, errno, "writing blob %.19s", digest);
  return rc;
}

/* What the manifest says its blobs weigh together must fit the cap, so a
 * pull too large fails before downloading anything. Each size counts at
 * most the cap (no overflow); a size that is no size fails later. */
static int check_total(struct image_ctx *ctx, json_t *m, size_t manifest_len,
                       struct hutch_err *err) {
  uint64_t total = manifest_len;
  json_t *d = json_object_get(m, "config");
  for (size_t i = 0; d; d = json_array_get(json_object_get(m, "layers"), i++)) {
    json_int_t n = json_integer_value(json_object_get(d, "size"));
    if (n > 0)
      total += (uint64_t)n < ctx->max_bytes ? (uint64_t)n : ctx->max_bytes;
  }
  if (total > ctx->max_bytes)
    return hutch_err_fail(err, HUTCH_ERR_TOO_LARGE, "too_large",
                          "the image's blobs are more than a pull may take (%llu bytes)",
                          (unsigned long long)ctx->max_bytes);
  return 0;
}

static int write_layout(int dirfd, const struct registry_ref *ref,
                        const struct registry_manifest *man, struct hutch_err *err) {
  json_t *desc = json_pack("{s:s,s:s,s:I}", "mediaType", man->media, "digest", man->digest, "size",
                           (json_int_t)man->len);
  if (ref->tag[0])
    json_object_set_new(desc, "annotations", json_pack("{s:s}", OCI_REF_NAME, ref->tag));
  json_t *index =
      json_pack("{s:i,s:s,s:[o]}", "schemaVersion", 2, "mediaType", OCI_INDEX, "manifests", desc);
  char *text = json_dumps(index, JSON_COMPACT);
  json_decref(index);
  static const char layout[] = "{\"imageLayoutVersion\":\"1.0.0\"}";
  int rc = write_at(dirfd, "index.json", text, strlen(text), err);
  free(text);
  if (rc < 0)
    return rc;
  return write_at(dirfd, "oci-layout", layout, sizeof layout - 1, err);
}

/* dir/blobs/sha256, made: its fd (dir's in *dirfd), or -1 with errno set. */
static int make_blobs_dir(const char *dir, int *dirfd) {
  *dirfd = open(dir, O_DIRECTORY | O_CLOEXEC);
  if (*dirfd < 0)
    return -1;
  if (mkdirat(*dirfd, "blobs", 0700) < 0)
    return -1;
  if (mkdirat(*dirfd, "blobs/sha256", 0700) < 0)
    return -1;
  return openat(*dirfd, "blobs/sha256", O_DIRECTORY | O_CLOEXEC);
}

/* The manifest m itself (man), its config and its layers, into blobs. */
static int pull_blobs(struct image_ctx *ctx, struct registry *r, int blobs, json_t *m,
                      const struct registry_manifest *man, struct hutch_err *err) {
  if (write_at(blobs, man->digest + 7, man->body, man->len, err) < 0)
    return -1;
  if (pull_blob(r, blobs, json_object_get(m, "config"), &(struct blob_progress){.ctx = ctx}, err) <
      0)
    return -1;

  json_t *layers = json_object_get(m, "layers"), *d;
  struct blob_progress p = {.ctx = ctx, .count = json_array_size(layers)};
  size_t i;
  json_array_foreach(layers, i, d) {
    p.index = i;
    if (pull_blob(r, blobs, d, &p, err) < 0)
      return -1;
  }
  return 0;
}

/* The image ref names, as an OCI layout in dir. */
static int pull_layout(struct image_ctx *ctx, struct registry *r, const struct registry_ref *ref,
                       const char *dir, struct hutch_err *err) {
  struct registry_manifest man = {0};
  json_t *m = registry_get_manifest(r, &man, err);
  int rc = -1, dirfd = -1, blobs = -1;
  json_t *layers = json_object_get(m, "layers");
  if (!m)
    goto out;
  if (!json_is_object(json_object_get(m, "config")) || !json_is_array(layers) ||
      json_array_size(layers) > HUTCH_IMAGE_MAX_LAYERS) {
    hutch_err_fail(err, HUTCH_ERR_INVALID, "bad_manifest",
                   "the manifest of %s has no config or layers, or more than %d layers",
                   ref->canonical, HUTCH_IMAGE_MAX_LAYERS);
    goto out;
  }
  if (check_total(ctx, m, man.len, err) < 0)
    goto out;

  blobs = make_blobs_dir(dir, &dirfd);
  if (blobs < 0) {
    hutch_err_set(err, errno, "making the layout in %s", dir);
    goto out;
  }
  if (pull_blobs(ctx, r, blobs, m, &man, err) == 0)
    rc = write_layout(dirfd, ref, &man, err);

out:
  if (blobs >= 0)
    close(blobs);
  if (dirfd >= 0)
    close(dirfd);
  free(man.body);
  json_decref(m);
  return rc;
}

/* The template's name when --name is not given: the repository's last
 * part ("library/busybox" → "busybox"). */
static int default_name(const struct registry_ref *ref, char *out, size_t size,
                        struct hutch_err *err) {
  const char *slash = strrchr(ref->name, '/');
  str_copy(out, size, slash ? slash + 1 : ref->name);
  if (!hutch_images_name_ok(out))
    return hutch_err_invalid(err, "'%s' is no template name: give one with --name", out);
  return 0;
}

/* The verb's options into o and ctx; the reference (*refs) and --name. */
static int parse_args(struct image_ctx *ctx, int argc, char **argv, struct registry_opts *o,
                      const char **name, const char **refs, struct hutch_err *err) {
  static const struct option opts[] = {
      {"insecure", no_argument, 0, 'k'},        {"allow-private", no_argument, 0, 'P'},
      {"user", required_argument, 0, 'u'},      {"name", required_argument, 0, 'n'},
      {"replace", no_argument, 0, 'r'},         {"max-bytes", required_argument, 0, 'b'},
      {"max-files", required_argument, 0, 'f'}, {0, 0, 0, 0}};
  int c;
  opterr = 0; /* the one line is image_fail's */
  while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
    switch (c) {
    case 'k':
      o->insecure = true;
      break;
    case 'P':
      o->allow_private = true;
      break;
    case 'u':
      o->user = optarg;
      break;
    case 'n':
      *name = optarg;
      break;
    case 'r':
      ctx->replace = true;
      break;
    case 'b':
    case 'f':
      if (!parse_u64(optarg, c == 'b' ? &ctx->max_bytes : &ctx->max_files))
        return hutch_err_invalid(err, "--max-%s takes a number", c == 'b' ? "bytes" : "files");
      break;
    default:
      return hutch_err_invalid(err, USAGE);
    }
  }

  if (optind != argc - 1)
    return hutch_err_invalid(err, USAGE);
  *refs = argv[optind];
  o->max_bytes = ctx->max_bytes;
  return 0;
}

/* The reference checked, and the template's name (--name's, else from the
 * reference into fallback) free to take, unless --replace. */
static int check_pull(struct image_ctx *ctx, const char *refs, struct registry_ref *ref,
                      const char **name, char *fallback, size_t size, struct hutch_err *err) {
  if (registry_ref_parse(refs, ref, err) < 0)
    return -1;
  if (!*name && default_name(ref, fallback, size, err) < 0)
    return -1;
  if (!*name)
    *name = fallback;

  if (ctx->public_registries && ref->loopback)
    return hutch_err_fail(err, HUTCH_ERR_FORBIDDEN, "forbidden",
                          "registry %s is on this host's loopback: not a registry to pull from "
                          "here",
                          ref->host);
  if (!hutch_images_name_ok(*name))
    return hutch_err_invalid(err, "--name: no template name (1..128 of [a-z0-9._-] and '/', not "
                                  "host)");
  if (!ctx->replace && image_name_free(ctx, *name, err) < 0)
    return -1;
  return 0;
}

/* ref pulled as the template name: as a layout in the store's work
 * directory, imported from there. */
static json_t *pull_template(struct image_ctx *ctx, const struct registry_ref *ref,
                             const struct registry_opts *o, const char *name,
                             struct hutch_err *err) {
  struct registry *r = registry_open(ref, o, err);
  if (!r)
    return NULL;
  char *tmp = hutch_images_tmpdir(&ctx->store, err);
  if (!tmp) {
    registry_close(r);
    return NULL;
  }

  image_progress(ctx, json_pack("{s:s,s:s,s:o}", "event", "pull", "ref", ref->canonical, "message",
                                json_sprintf("pulling %s", ref->canonical)));
  json_t *rec = NULL;
  if (pull_layout(ctx, r, ref, tmp, err) == 0)
    rec = oci_import_layout(ctx, tmp, name, "pull", ref->canonical, err);
  registry_close(r);
  struct hutch_err rm_err = {0};
  hutch_layer_remove(tmp, &rm_err);
  free(tmp);
  return rec;
}

int cmd_pull(struct image_ctx *ctx, int argc, char **argv) {
  struct registry_opts o = {.user = getenv("HUTCH_REGISTRY_AUTH"),
                            .low_speed_seconds = LOW_SPEED_SECONDS};
  const char *name = NULL, *refs = NULL;
  struct hutch_err err = {0};
  if (parse_args(ctx, argc, argv, &o, &name, &refs, &err) < 0)
    return image_fail(ctx, "pull", &err);
  const char *slow = getenv("HUTCH_REGISTRY_LOW_SPEED_SECONDS");
  uint64_t secs;
  if (slow && parse_u64(slow, &secs) && secs > 0 && secs < 3600)
    o.low_speed_seconds = (long)secs;

  struct registry_ref ref;
  char fallback[HUTCH_IMAGE_NAME_MAX + 1];
  if (check_pull(ctx, refs, &ref, &name, fallback, sizeof fallback, &err) < 0)
    return image_fail(ctx, "pull", &err);

  json_t *rec = pull_template(ctx, &ref, &o, name, &err);
  return rec ? image_done(ctx, "pulled", rec) : image_fail(ctx, "pull", &err);
}
