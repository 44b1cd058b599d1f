/* hutch template export NAME FILE: the template as an oci-archive (a tar
 * of an OCI image layout), its image layers re-tarred from the store
 * (hutch's own top layer is not the image's: an import makes it again),
 * overlay's whiteouts back as OCI's .wh. files, ids as stored, the config
 * from the record. FILE appears whole or not at all (a temporary file
 * beside it, renamed). */
#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "cleanup.h"
#include "digest.h"
#include "image.h"
#include "layertar.h"
#include "layer.h"
#include "oci.h"
#include "util.h"

/* A file being written and hashed: a blob of the layout. */
struct sink {
  int fd;
  EVP_MD_CTX *md;
  uint64_t size;
  int errnum;
};

static int sink_bytes(struct sink *s, const void *buf, size_t n) {
  if (write_all(s->fd, buf, n) < 0) {
    s->errnum = errno;
    return -1;
  }
  EVP_DigestUpdate(s->md, buf, n);
  s->size += n;
  return 0;
}

static la_ssize_t sink_write(struct archive *a, void *p, const void *buf, size_t n) {
  if (sink_bytes(p, buf, n) < 0) {
    archive_set_error(a, errno, "write");
    return -1;
  }
  return (la_ssize_t)n;
}

/* Start writing a blob: a temporary file under dir, hashed as written. */
static int sink_open(struct sink *s, int dir, struct hutch_err *err) {
  *s = (struct sink){.fd = openat(dir, "blob.tmp", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644),
                     .md = EVP_MD_CTX_new()};
  if (s->fd < 0)
    return hutch_err_set(err, errno, "blob");
  if (!s->md || !EVP_DigestInit_ex(s->md, EVP_sha256(), NULL))
    return hutch_err_set(err, ENOMEM, "blob");
  return 0;
}

/* Finish a blob: blobs/sha256/<hex>, and its descriptor. */
static json_t *sink_close(struct sink *s, int dir, const char *media_type, struct hutch_err *err) {
  unsigned char sum[EVP_MAX_MD_SIZE];
  unsigned len = 0;
  char name[128] = "blobs/sha256/", digest[72] = "sha256:";
  bool ok = false;
  if (s->fd >= 0 && close(s->fd) == 0)
    ok = EVP_DigestFinal_ex(s->md, sum, &len);
  s->fd = -1;
  EVP_MD_CTX_free(s->md);
  s->md = NULL;

  digest_hex(sum, digest + 7);
  strcat(name, digest + 7);
  if (!ok || renameat(dir, "blob.tmp", dir, name) < 0) {
    hutch_err_set(err, errno, "blob");
    return NULL;
  }
  return json_pack("{s:s,s:s,s:I}", "mediaType", media_type, "digest", digest, "size",
                   (json_int_t)s->size);
}

static void sink_free(struct sink *s) {
  if (s->fd >= 0)
    close(s->fd);
  EVP_MD_CTX_free(s->md);
}

/* A JSON document as a blob. */
static json_t *json_blob(int dir, json_t *doc, const char *media_type, struct hutch_err *err) {
  struct sink s;
  _cleanup_free_ char *text = json_dumps(doc, JSON_COMPACT | JSON_SORT_KEYS);
  json_t *desc = NULL;
  if (sink_open(&s, dir, err) == 0) {
    if (sink_bytes(&s, text, strlen(text)) < 0)
      hutch_err_set(err, s.errnum, "blob");
    else
      desc = sink_close(&s, dir, media_type, err);
  }
  sink_free(&s);
  json_decref(doc);
  return desc;
}

/* A tree as a tar written to s (a layer from the store, or the layout). */
static int tar_tree(int root, struct sink *s, struct hutch_err *err) {
  struct archive *a = archive_write_new();
  struct layer_sum sum = {0};
  archive_write_set_format_pax_restricted(a);
  int rc = -1;
  if (archive_write_open(a, s, NULL, sink_write, NULL) != ARCHIVE_OK) {
    hutch_err_set(err, EIO, "tar: %s", archive_error_string(a));
  } else if (layertar_write(root, a, &sum, err) == 0) {
    rc = 0;
    if (archive_write_close(a) != ARCHIVE_OK)
      rc = hutch_err_set(err, s->errnum ? s->errnum : EIO, "tar: %s", archive_error_string(a));
  }
  archive_write_free(a);
  return rc;
}

static json_t *layer_blob(struct image_ctx *ctx, int dir, const char *hex, struct hutch_err *err) {
  _cleanup_free_ char *path = hutch_images_layer_path(&ctx->store, hex);
  _cleanup_close_ int root = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (root < 0) {
    hutch_err_set(err, errno, "layer %.12s", hex);
    return NULL;
  }

  struct sink s = {.fd = -1};
  json_t *desc = NULL;
  int r = sink_open(&s, dir, err);
  if (r == 0)
    r = tar_tree(root, &s, err);
  if (r == 0)
    desc = sink_close(&s, dir, OCI_LAYER, err);
  sink_free(&s);
  return desc;
}

static int write_text(int dir, const char *name, json_t *doc, struct hutch_err *err) {
  _cleanup_free_ char *text = json_dumps(doc, JSON_COMPACT | JSON_SORT_KEYS);
  json_decref(doc);
  _cleanup_close_ int fd = openat(dir, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0 || write_all(fd, text, strlen(text)) < 0)
    return hutch_err_set(err, errno, "%s", name);
  return 0;
}

/* Each of the record's layers as a blob in dir: their descriptors in
 * layers, their digests in diff_ids. */
static int layer_blobs(struct image_ctx *ctx, json_t *record, int dir, json_t *layers,
                       json_t *diff_ids, struct hutch_err *err) {
  json_t *hexes = json_object_get(record, "layers"), *h;
  size_t i, n = json_array_size(hexes);
  json_array_foreach(hexes, i, h) {
    image_progress(ctx, json_pack("{s:s,s:I,s:I,s:s+}", "event", "layer", "index",
                                  (json_int_t)i + 1, "count", (json_int_t)n, "message",
                                  "writing layer ", json_string_value(h)));
    json_t *desc = layer_blob(ctx, dir, json_string_value(h), err);
    if (!desc)
      return -1;
    json_array_append(diff_ids, json_object_get(desc, "digest"));
    json_array_append_new(layers, desc);
  }
  return 0;
}

/* The record as an OCI image layout in dir. */
static int write_layout(struct image_ctx *ctx, json_t *record, int dir, struct hutch_err *err) {
  if (mkdirat(dir, "blobs", 0755) < 0)
    return hutch_err_set(err, errno, "blobs");
  if (mkdirat(dir, "blobs/sha256", 0755) < 0)
    return hutch_err_set(err, errno, "blobs");

  json_t *layers = json_array(), *diff_ids = json_array();
  if (layer_blobs(ctx, record, dir, layers, diff_ids, err) < 0) {
    json_decref(layers);
    json_decref(diff_ids);
    return -1;
  }

  json_t *config = json_pack("{s:s,s:s,s:o,s:{s:s,s:o}}", "architecture", "amd64", "os", "linux",
                             "config", oci_image_config(json_object_get(record, "config")),
                             "rootfs", "type", "layers", "diff_ids", diff_ids);
  json_t *cdesc = json_blob(dir, config, OCI_CONFIG, err);
  if (!cdesc) {
    json_decref(layers);
    return -1;
  }

  json_t *mdesc = json_blob(dir,
                            json_pack("{s:i,s:s,s:o,s:o}", "schemaVersion", 2, "mediaType",
                                      OCI_MANIFEST, "config", cdesc, "layers", layers),
                            OCI_MANIFEST, err);
  if (!mdesc)
    return -1;

  const char *tag = json_string_value(json_array_get(json_object_get(record, "tags"), 0));
  json_object_set_new(mdesc, "annotations", json_pack("{s:s}", OCI_REF_NAME, tag ? tag : "latest"));
  json_t *index =
      json_pack("{s:i,s:s,s:[o]}", "schemaVersion", 2, "mediaType", OCI_INDEX, "manifests", mdesc);
  if (write_text(dir, "index.json", index, err) < 0)
    return -1;
  return write_text(dir, "oci-layout", json_pack("{s:s}", "imageLayoutVersion", "1.0.0"), err);
}

/* The archive written at fd (the file tmp) made file: 0644, synced,
 * renamed. 0, or -1 with errno set. */
static int publish(int fd, const char *tmp, const char *file) {
  if (fchmod(fd, 0644) < 0)
    return -1;
  if (fsync(fd) < 0)
    return -1;
  return rename(tmp, file);
}

/* The layout in dir as a tar at file, whole or not at all. */
static int write_archive(int dir, const char *file, struct hutch_err *err) {
  _cleanup_free_ char *tmp = xasprintf("%s.tmp-XXXXXX", file);
  struct sink s = {.fd = mkostemp(tmp, O_CLOEXEC), .md = EVP_MD_CTX_new()};
  if (s.fd < 0) {
    sink_free(&s);
    return hutch_err_fail(err, HUTCH_ERR_INVALID, "bad_path", "%.200s: %s", file, strerror(errno));
  }

  int rc = -1;
  if (EVP_DigestInit_ex(s.md, EVP_sha256(), NULL))
    rc = tar_tree(dir, &s, err);
  if (rc == 0 && publish(s.fd, tmp, file) < 0)
    rc = hutch_err_set(err, errno, "%.200s", file);
  if (rc < 0)
    unlink(tmp);
  sink_free(&s);
  return rc;
}

/* record exported to file, through a layout written in tmp. */
static int export_to(struct image_ctx *ctx, json_t *record, const char *tmp, const char *file,
                     struct hutch_err *err) {
  _cleanup_close_ int dir = open(tmp, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0)
    return hutch_err_set(err, errno, "%s", tmp);
  if (write_layout(ctx, record, dir, err) < 0)
    return -1;
  return write_archive(dir, file, err);
}

int cmd_export(struct image_ctx *ctx, int argc, char **argv) {
  struct hutch_err err = {0};
  if (argc != 3) {
    hutch_err_invalid(&err, "usage: hutch template export NAME FILE");
    return image_fail(ctx, "export", &err);
  }
  json_t *record = hutch_images_find(&ctx->store, ctx->owner[0] ? ctx->owner : NULL, argv[1], &err);
  if (!record)
    return image_fail(ctx, "export", &err);

  _cleanup_free_ char *tmp = hutch_images_tmpdir(&ctx->store, &err);
  int rc = -1;
  if (tmp)
    rc = export_to(ctx, record, tmp, argv[2], &err);
  struct hutch_err ignored = {0};
  if (tmp)
    hutch_layer_remove(tmp, &ignored);
  json_decref(record);
  if (rc < 0)
    return image_fail(ctx, "export", &err);

  image_progress(ctx, json_pack("{s:s,s:s,s:s+}", "event", "done", "file", argv[2], "message",
                                "exported ", argv[2]));
  return 0;
}
