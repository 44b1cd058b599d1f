/* Scope-bound ownership, as in crun and bubblewrap: a variable declared with
 * one of these attributes is released when it goes out of scope, and
 * steal_pointer()/steal_fd() hand ownership on. */
#ifndef HUTCH_CLEANUP_H
#define HUTCH_CLEANUP_H

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static inline void cleanup_freep(void *p) {
  free(*(void **)p);
}
static inline void cleanup_closep(int *fd) {
  if (*fd >= 0)
    close(*fd);
}
static inline void cleanup_fclosep(FILE **f) {
  if (*f)
    fclose(*f);
}

#define _cleanup_free_ __attribute__((cleanup(cleanup_freep)))
#define _cleanup_close_ __attribute__((cleanup(cleanup_closep)))
#define _cleanup_fclose_ __attribute__((cleanup(cleanup_fclosep)))

static inline void *steal_pointer_impl(void *pp) {
  void **p = pp, *v = *p;
  *p = NULL;
  return v;
}
#define steal_pointer(pp) ((__typeof__(*(pp)))steal_pointer_impl(pp))

static inline int steal_fd(int *fd) {
  int v = *fd;
  *fd = -1;
  return v;
}

#endif
