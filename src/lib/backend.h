/* Isolation tiers behind one table of operations (crun's handlers): the
 * public hutch_sandbox_* calls (sandbox.h) go through the table of the
 * sandbox's tier, and what a tier cannot do is a bit it lacks: adoption
 * and builds the caller refuses as `unsupported`; escape counts and
 * per-exec memory verdicts come back unknown (null) from such a tier's
 * agent (docs/isolation.md has the matrix).
 * Snapshot, fork and restore are built from these: a frozen sandbox's
 * storage is captured as a layer (storage), and a copy is a create with
 * layers above its template. */
#ifndef HUTCH_BACKEND_H
#define HUTCH_BACKEND_H

#include "sandbox.h"

enum hutch_can {
  HUTCH_CAN_ADOPT = 1u << 0,       /* a restarted server takes its sandboxes over */
  HUTCH_CAN_ESCAPES = 1u << 1,     /* refused system calls are counted per exec */
  HUTCH_CAN_EXEC_MEMORY = 1u << 2, /* per-exec memory peak and oom verdicts */
  HUTCH_CAN_BUILD = 1u << 3,       /* template build steps run in it */
  HUTCH_CAN_HOST_KERNEL = 1u << 4, /* workloads call the host's kernel directly */
};

struct hutch_backend {
  const char *name; /* the API's `isolation` */
  enum hutch_isolation isolation;
  unsigned can; /* HUTCH_CAN_* */
  int (*create)(const struct hutch_sandbox_config *cfg, struct hutch_sandbox **out,
                struct hutch_err *err);
  int (*adopt)(const char *id, unsigned slot, pid_t pid, const char *listen_dir,
               struct hutch_sandbox **out, struct hutch_err *err);
  int (*freeze)(struct hutch_sandbox *sb, bool frozen, struct hutch_err *err); /* pause, resume */
  int (*usage)(const struct hutch_sandbox *sb, bool disk, struct hutch_sandbox_usage *u,
               struct hutch_err *err);
  /* A socket in the sandbox's network: the egress proxy's listener, port routes. */
  int (*socket)(const struct hutch_sandbox *sb, int own_netns, int domain, int type,
                struct hutch_err *err);
  int (*storage)(const struct hutch_sandbox *sb); /* what a snapshot captures */
  int (*destroy)(struct hutch_sandbox *sb, struct hutch_err *err);
  void (*release)(struct hutch_sandbox *sb);
};

const struct hutch_backend *hutch_backend_of(enum hutch_isolation i);

#endif
