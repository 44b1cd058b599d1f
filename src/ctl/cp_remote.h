/* `hutch cp`'s side in the sandbox: the native files routes (stat, list,
 * mkdir, and a file's bytes streamed both ways: a file of any size, never
 * whole in memory). Every path is resolved inside the sandbox by its
 * agent, as the sandbox's user: nothing here reaches the host's files. */
#ifndef HUTCH_CP_REMOTE_H
#define HUTCH_CP_REMOTE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ctl.h"

enum cp_type { CP_FILE, CP_DIR, CP_LINK, CP_OTHER };

struct cp_entry {
  char *name, *path, *target; /* target: a link's, else NULL */
  enum cp_type type;
  uint64_t size;
  unsigned mode;
  double mtime; /* seconds since the epoch */
};

void cp_entry_free(struct cp_entry *e);

/* Where the transfers are and what they report. */
struct cp_remote {
  struct ctl *ctl; /* its client set up (a call made already) */
  const char *sandbox;
  bool progress; /* a bar on stderr (a terminal) */
};

/* One entry, a final link not followed: 0, 1 when there is none, -1 when
 * the call failed (said on stderr). */
int cp_stat(const struct cp_remote *r, const char *path, struct cp_entry *e);

/* A directory's entries; -1 (said) on failure. */
int cp_list(const struct cp_remote *r, const char *path, struct cp_entry **es, size_t *n);

/* Make a directory (its parents too); -1 (said) on failure. */
int cp_mkdir(const struct cp_remote *r, const char *path);

/* A file's bytes to sink (false from it: stop, a local failure it said);
 * -1 (said) on failure. size: what stat said, for the bar. */
typedef bool cp_sink_fn(void *arg, const char *data, size_t n);
int cp_get(const struct cp_remote *r, const char *path, uint64_t size, cp_sink_fn *sink, void *arg);

/* A file written from source (its bytes, 0 at the end, (size_t)-1 on a
 * local failure it said), size bytes; -1 (said) on failure. */
typedef size_t cp_source_fn(void *arg, char *buf, size_t cap);
int cp_put(const struct cp_remote *r, const char *path, uint64_t size, cp_source_fn *source,
           void *arg);

#endif
