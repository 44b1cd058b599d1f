/* A stored layer directory as the tar it stands for (OCI's layer
 * changeset): one canonical byte stream per tree (pax), so that its sha256
 * names a layer the builder made (the diff_id) and an export writes the
 * very bytes hashed. Entries in name order, depth first, each directory
 * before what it holds; owners numeric, no names; `user.*` xattrs; hard
 * links as links to the first name; overlay whiteouts written back as
 * OCI's: a char device 0:0 as `.wh.NAME`, an opaque directory's xattr as
 * `.wh..wh..opq` inside it. Nothing is followed: links are entries. */
#ifndef HUTCH_LAYERTAR_H
#define HUTCH_LAYERTAR_H

#include <archive.h>
#include <stdint.h>

#include "image.h"

struct layer_sum {
  char hex[65];
  uint64_t bytes, files;
  /* In: the most file bytes the tar may hold (a sparse file counts its
   * whole size: the tar holds it whole); 0: no cap. */
  uint64_t max_bytes;
};

/* Write the tree under dirfd as tar entries to a (opened by the caller,
 * any format it set; hutch's own digests use pax restricted). */
int layertar_write(int dirfd, struct archive *a, struct layer_sum *sum, struct hutch_err *err);
/* The sha256 of the tree's canonical tar, with its size and file count. */
int layertar_digest(int dirfd, struct layer_sum *sum, struct hutch_err *err);
/* Digest staged (a finished layer tree under the store's tmp/; at most
 * sum->max_bytes of files) and commit it as layers/<hex> (removing staged
 * when that layer is already stored). *existed tells which. */
int layertar_commit_staged(struct image_ctx *ctx, const char *staged, struct layer_sum *sum,
                           bool *existed, struct hutch_err *err);

#endif
