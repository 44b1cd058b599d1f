/* A sandbox's network namespace, made on another CPU while the rest of the
 * sandbox is being prepared: making one is the costliest single step of a
 * sandbox's start (0.15-0.25 ms, mostly in the kernel). */
#ifndef HUTCH_NETNS_H
#define HUTCH_NETNS_H

#include <pthread.h>
#include <stdbool.h>

#include "err.h"

struct hutch_netns {
  pthread_t thread; /* the helper that makes it */
  bool started, joined;
  int fd, errnum; /* what it made: an fd of the namespace, or -1 and why */
};

int hutch_netns_begin(struct hutch_netns *n, struct hutch_err *err);
/* Wait for it: an fd of the namespace (the caller's to close), or -1. */
int hutch_netns_take(struct hutch_netns *n, struct hutch_err *err);
/* After take, or instead of it: the helper is gone, nothing is held. */
void hutch_netns_reap(struct hutch_netns *n);

#endif
