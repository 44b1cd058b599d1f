/* Layers: a sandbox's writable layer captured as a read-only directory on
 * the host (a snapshot), for other sandboxes to stack under their own. A
 * layer stores the sandbox's ids shifted to 0..HUTCH_ID_RANGE-1 (ids it
 * did not own as HUTCH_ID_RANGE, which no sandbox maps), and each sandbox
 * that uses it sees it through an id-mapped mount onto its own range. */
#ifndef HUTCH_LAYER_H
#define HUTCH_LAYER_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "err.h"

/* The most layers a sandbox stacks: a template's (images.h), and one
 * for each snapshot of a sandbox made from a snapshot. */
#define HUTCH_MAX_LAYERS 128
/* The deepest directory a layer holds. */
#define HUTCH_LAYER_MAX_DEPTH 256

struct hutch_layer_stats {
  uint64_t bytes, files;
};

/* Copy the upper layer under storage_fd (a sandbox's storage, frozen or
 * stopped by the caller) to dest, a directory that must not exist yet. On
 * failure nothing is left at dest. */
int hutch_layer_capture(int storage_fd, uid_t uid_base, const char *dest,
                        struct hutch_layer_stats *stats, struct hutch_err *err);

/* Whether dir's filesystem can be id-mapped, as sandboxes need to stack
 * layers stored there (tmpfs can from Linux 6.3, ext4, xfs and btrfs since
 * 5.12-5.15). */
bool hutch_layer_dir_usable(const char *dir);

/* Remove a layer directory and everything in it, following no link. */
int hutch_layer_remove(const char *dir, struct hutch_err *err);

#endif
