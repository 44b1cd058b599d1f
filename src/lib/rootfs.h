/* Building a sandbox's filesystem view: runs in the sandbox's first process,
 * as host root, in its new (private) mount namespace, before the user
 * namespace is entered. Ends with the process inside its new root. */
#ifndef HUTCH_ROOTFS_H
#define HUTCH_ROOTFS_H

#include <sys/types.h>

#include "err.h"
#include "sandbox.h"

/* Where the sandbox's storage is mounted while it is being set up. The mount
 * exists only in the sandbox's own mount namespace; on the host the
 * directory stays empty. */
#define HUTCH_STAGING_DIR "/run/hutch/mnt"

struct hutch_rootfs {
  const struct hutch_sandbox_config *cfg;
  const char *template_dir; /* lower layer */
  const char *agent_path;   /* host path of hutch-agent */
  const char *hostname;
  uid_t uid_base;
  const int *bind_fds;  /* per bind i: [2i] a detached copy of its source's mount
                           * tree, [2i+1] the user namespace of its id map */
  const int *layer_fds; /* per cfg->layers[i], a detached copy of its mount */
  int range_userns;     /* the id map of layers and volumes: 0.. onto the sandbox's ids */
  int agent_fd;         /* out: the agent binary, on a read-only mount */
  int runsc_fd;         /* out: the gvisor tier's runsc, likewise; -1 in the ns tier */
  int storage_fd;       /* out: the storage tmpfs (O_PATH), for the agent to hold */
  int root_fd;          /* the new root, between prepare and enter */
};

/* Everything that does not depend on the network namespace: storage, the
 * template, /proc, /dev, the caller's binds. */
int hutch_rootfs_prepare(struct hutch_rootfs *r, struct hutch_err *err);
/* In the sandbox's network namespace: /sys, the pivot into the new root,
 * the hostname, loopback up. In the gvisor tier the pivot is into the
 * storage instead, which holds runsc's bundle (the new root is its "root"),
 * with a /proc and a /dev for runsc itself; gVisor makes the sandbox's. */
int hutch_rootfs_enter(struct hutch_rootfs *r, struct hutch_err *err);

#endif
