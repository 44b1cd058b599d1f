/* Unpacking one layer blob (a tar: plain, gzip or zstd, found by its
 * bytes) into the template store as a layer (images.h), and the safe path
 * walking the archive readers share. Archives are hostile: nothing is
 * written outside the directory being filled, and what a layer may not
 * hold is refused with HUTCH_ERR_INVALID (docs/templates.md, "Import and
 * export"). */
#ifndef HUTCH_IMAGE_UNPACK_H
#define HUTCH_IMAGE_UNPACK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "image.h"

/* What a template has unpacked so far: its layers together stay under
 * ctx->max_bytes (uncompressed tar bytes) and ctx->max_files (entries). */
struct unpack_budget {
  uint64_t bytes, files;
};

/* Read a layer blob from fd to its end, check it against expect_digest
 * ("sha256:<hex>" of the blob as stored; NULL: none), unpack it, and
 * commit it to the store as layers/<hex>, hex (out) being the sha256 of
 * the uncompressed tar (its diff_id). Counts against *used (NULL: this
 * layer alone against the caps). On failure nothing is left. */
int unpack_layer_counted(struct image_ctx *ctx, int fd, const char *expect_digest,
                         struct unpack_budget *used, char hex_out[65], struct hutch_err *err);
int unpack_layer(struct image_ctx *ctx, int fd, const char *expect_digest, char hex_out[65],
                 struct hutch_err *err);

/* An archive member's name as a path under the root, written to out:
 * leading '/' and "." parts dropped (absolute names are taken relative to
 * the root, as Docker does), "" for the root itself. A ".." part, or a
 * name longer than size or deeper than HUTCH_LAYER_MAX_DEPTH, is refused. */
int unpack_clean_path(const char *name, char *out, size_t size, struct hutch_err *err);

/* The directory holding the last part of path (a clean path, not ""),
 * under root, opened with each part's O_NOFOLLOW | O_DIRECTORY so that no
 * symlink is followed; missing directories are made (0755, root) when
 * create is set. *leaf points at the last part in path. */
int unpack_open_parent(int root, const char *path, bool create, const char **leaf,
                       struct hutch_err *err);

/* "sha256:<hex>": whether digest is one, and its hex. */
bool unpack_digest_hex(const char *digest, char hex[65]);

#endif
