/* `hutch cp`'s parts: the walk of a tree in the sandbox, written out
 * through a cp_out (cp.c: host files; cp_tar.c: a tar on stdout), and
 * the tar read from stdin into the sandbox (cp_tar.c). */
#ifndef HUTCH_CP_H
#define HUTCH_CP_H

#include <stdbool.h>
#include <stddef.h>

#include "cp_remote.h"

#define CP_DEPTH_MAX 64 /* directories nested (and links followed, with -L) */

/* Where a walk of the sandbox's tree goes. dir is what enter gave for the
 * directory an entry is in (root's for the top); rel the entry's path
 * from the top, its name last. */
struct cp_out {
  /* A directory: what its entries go in, or NULL when it cannot be made
   * (said). */
  void *(*enter)(void *out, void *dir, const char *name, const char *rel, const struct cp_entry *e);
  void (*leave)(void *out, void *dir);
  /* A file: false when it cannot be made (said); then its bytes through
   * write, and end (ok: all of them came; false when it failed). */
  bool (*begin)(void *out, void *dir, const char *name, const char *rel, const struct cp_entry *e);
  cp_sink_fn *write; /* its arg is out */
  bool (*end)(void *out, bool ok);
};

/* The directories a copy went into, each copied once (cp.c says why). */
struct cp_seen {
  char **keys; /* open addressing, NULL: free */
  size_t n, cap;
};
void cp_seen_free(struct cp_seen *s);

struct cp_walk {
  const struct cp_remote *r;
  const struct cp_out *ops;
  void *out;
  bool follow; /* -L: links followed, inside the sandbox */
  bool failed; /* something was not copied */
  struct cp_seen seen; /* zeroed at the start; cp_seen_free at the end */
};

/* e (at rel under dir) and what it holds, written out. */
void cp_walk(struct cp_walk *w, void *dir, const char *name, const char *rel,
             const struct cp_entry *e, int depth);

/* A link's end (inside the sandbox), up to 40 links deep: 0 and *out,
 * else -1 (said). */
int cp_resolve(const struct cp_remote *r, const struct cp_entry *link, struct cp_entry *out);

/* The sandbox's tree at e written to stdout as a tar (pax); the CLI's
 * exit code. */
int cp_tar_out(const struct cp_remote *r, const struct cp_entry *e, const char *name, bool follow);

/* A tar read from stdin, its entries made under dir in the sandbox; the
 * CLI's exit code. */
int cp_tar_in(const struct cp_remote *r, const char *dir);

#endif
