/* A sandbox's network namespace, made by a helper thread (netns.h).
 *
 * The helper is a thread: namespaces are per thread on Linux, so it
 * unshares its own network namespace, opens it and ends, and the thread's
 * creator holds the namespace by that fd. A thread shares the process's
 * memory and descriptor table: making it copies no page table, marks no
 * page copy-on-write and holds no other create's fds (hutch serve makes
 * several sandboxes at once; an earlier helper process did all three for
 * every create, on the server's whole address space).
 *
 * The sandbox's first process is cloned while the helper may run: what a
 * clone copies of another thread's state (a libc lock it held) stays as
 * it was in the clone, which therefore calls nothing that takes one
 * (sbx.c); the helper itself makes only system calls. Its namespace
 * belongs to the host's user namespace, like the sandbox's others
 * (spawn.c). */
#include "netns.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <string.h>
#include <unistd.h>

static void *make(void *arg) {
  struct hutch_netns *n = arg;
  n->fd = -1;
  if (unshare(CLONE_NEWNET) < 0) {
    n->errnum = errno;
    return NULL;
  }
  n->fd = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
  if (n->fd < 0)
    n->errnum = errno;
  return NULL;
}

int hutch_netns_begin(struct hutch_netns *n, struct hutch_err *err) {
  memset(n, 0, sizeof *n);
  n->fd = -1;
  int e = pthread_create(&n->thread, NULL, make, n);
  if (e)
    return hutch_err_set(err, e, "start the network namespace helper");
  n->started = true;
  return 0;
}

int hutch_netns_take(struct hutch_netns *n, struct hutch_err *err) {
  if (!n->started || n->joined)
    return hutch_err_set(err, 0, "no network namespace");
  pthread_join(n->thread, NULL);
  n->joined = true;
  if (n->fd < 0)
    return hutch_err_set(err, n->errnum, "make the network namespace");
  int fd = n->fd;
  n->fd = -1;
  return fd;
}

void hutch_netns_reap(struct hutch_netns *n) {
  if (n->started && !n->joined)
    pthread_join(n->thread, NULL);
  n->joined = true;
  if (n->fd >= 0)
    close(n->fd);
  n->fd = -1;
}
