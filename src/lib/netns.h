/* A sandbox's network namespace, made on another CPU while the rest of the
 * sandbox is being prepared: making one is the costliest single step of a
 * sandbox's start (0.15-0.25 ms, mostly in the kernel). */
#ifndef HUTCH_NETNS_H
#define HUTCH_NETNS_H

#include <sys/types.h>

#include "err.h"

struct hutch_netns {
  pid_t pid;     /* the helper that makes it, 0 when none */
  int pidfd, done_fd;
};

int hutch_netns_begin(struct hutch_netns *n, struct hutch_err *err);
/* Wait for it: an fd of the namespace (the caller's to close), or -1. The
 * helper is told to go; hutch_netns_reap waits for it, off the hot path. */
int hutch_netns_take(struct hutch_netns *n, struct hutch_err *err);
void hutch_netns_reap(struct hutch_netns *n);

#endif
