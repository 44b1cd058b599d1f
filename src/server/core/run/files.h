/* The file actions on a sandbox, as every front end calls them (issue
 * 17): stat, list, mkdir, move, remove, read, write and watch. Every path
 * is resolved by the sandbox's agent, inside the sandbox and as the user
 * named ("user" or "root", docs/protocol.md): the server never touches a
 * sandbox's files. Nothing here knows HTTP: an action ends with its result
 * or a struct hutch_err, and the agent's error codes become kinds here
 * alone.
 *
 * Each action starts at once or fails at once (-1 or NULL and *err, and
 * done is never called). Once started, the unary ones call done exactly
 * once, on the loop; the streams (read, write, watch) call their sink
 * until its end, unless the front end cancels first. */
#ifndef HUTCH_CORE_RUN_FILES_H
#define HUTCH_CORE_RUN_FILES_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"

struct sbx;
struct files_op;

#define FILES_PATH_MAX 4095

/* A path an agent request can carry: given, UTF-8 (the agent's requests
 * are JSON), at most FILES_PATH_MAX bytes; invalid_argument else. */
int files_path_check(const char *path, struct hutch_err *err);

/* What a unary action found. */
struct files_result {
  json_t *done;     /* the agent's done event: stat's entry, mkdir's {created}, write's {size} */
  json_t *entries;  /* list: the entries, an array */
  const char *path; /* the path acted on (move: its destination) */
};
/* r is NULL when err is set; both are valid only during the call. */
typedef void (*files_done_fn)(const struct files_result *r, const struct hutch_err *err, void *arg);

int files_stat(struct sbx *sb, const char *path, const char *user, files_done_fn done, void *arg,
               struct hutch_err *err);
/* Entries down to depth levels (1 to 64); a listing over 16 MiB fails
 * (ask for less depth). */
int files_list(struct sbx *sb, const char *path, const char *user, unsigned depth,
               files_done_fn done, void *arg, struct hutch_err *err);
int files_mkdir(struct sbx *sb, const char *path, const char *user, bool parents,
                files_done_fn done, void *arg, struct hutch_err *err);
/* envd's MakeDir: with parents, the missing ones (and path itself) made
 * by the sandbox's root and given to the user, as files_write's
 * owned_parents. */
int files_mkdir_owned(struct sbx *sb, const char *path, const char *user, files_done_fn done,
                      void *arg, struct hutch_err *err);
int files_move(struct sbx *sb, const char *path, const char *to, const char *user,
               files_done_fn done, void *arg, struct hutch_err *err);
int files_remove(struct sbx *sb, const char *path, const char *user, bool recursive,
                 files_done_fn done, void *arg, struct hutch_err *err);
/* The regular files under path, the user's home and /tmp whose inode
 * changed at or after since_ns (the sandbox's realtime clock): done's
 * r->done holds "files", [{path, size}] by path, at most 100. */
int files_changed(struct sbx *sb, const char *path, const char *user, int64_t since_ns,
                  files_done_fn done, void *arg, struct hutch_err *err);

/* A stream's consumer. data: the next bytes (read) or event (watch, one
 * JSON object, the agent's {"type",…} line, valid during the call);
 * it returns whether it takes more now, and when it did not, the front end
 * calls files_resume once it does. end: the stream is over (err NULL: the
 * whole file came; a watch always ends with an error), after which op is
 * gone. */
struct files_sink {
  bool (*data)(void *arg, const void *p, size_t n);
  bool (*event)(void *arg, json_t *ev);
  void (*end)(void *arg, const struct hutch_err *err);
  void *arg;
};

/* The bytes of the file at path, as fast as the sink takes them. */
struct files_op *files_read(struct sbx *sb, const char *path, const char *user,
                            const struct files_sink *sink, struct hutch_err *err);
/* Changes under the directory at path, until the front end cancels: the
 * agent's events ({"type":"ready"} first, then create, write, remove,
 * rename, chmod and overflow; docs/protocol.md), with entries: each with
 * the "entry" at its path when there is one. */
struct files_op *files_watch(struct sbx *sb, const char *path, const char *user, bool recursive,
                             bool entries, const struct files_sink *sink, struct hutch_err *err);
/* How a write goes, beyond its bytes (NULL: as the user, nothing more).
 * metadata, when not NULL, replaces the file's (an object of strings,
 * envd's user.e2b. extended attributes). owned_parents: missing parents
 * are made by the sandbox's root and given to the user, as envd does (the
 * file itself is still written as the user). */
struct files_write_opts {
  json_t *metadata;
  bool owned_parents;
  bool exclusive; /* only where nothing is: else it fails, "exists" (conflict) */
};
/* Write the file at path (making its parents) from what the front end
 * feeds: files_write_data, then files_write_end; done tells how it ended
 * (r->done's "size"). files_write_data returns false when the agent has
 * not taken enough of what came: the front end stops reading until
 * resume(arg) is called. done may come before the end (the write failed),
 * after which op is gone. */
struct files_op *files_write(struct sbx *sb, const char *path, const char *user,
                             const struct files_write_opts *o, void (*resume)(void *arg),
                             files_done_fn done, void *arg, struct hutch_err *err);
bool files_write_data(struct files_op *op, const void *p, size_t n);
void files_write_end(struct files_op *op);

/* The sink took what it was given: let the agent send more. */
void files_resume(struct files_op *op);
/* The front end is gone: the agent ends the operation, no callback comes
 * again and op is freed. Not after the end or done. */
void files_cancel(struct files_op *op);

#endif
