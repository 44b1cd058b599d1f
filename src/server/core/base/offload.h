/* Work that may block (a sandbox made or torn down, a volume's image
 * allocated and formatted, a snapshot's files removed, the audit log
 * written) runs on libuv's thread pool, never on the event loop; its end
 * comes back to the loop. What runs on a thread touches only what its job
 * holds: never the server, a sandbox, a connection or the store.
 *
 * Jobs go in lanes, each running at most so many at once, the rest
 * waiting in order:
 *  - OFFLOAD_CREATE, --create-lanes at once (default: one per CPU, at
 *    least 2). Making a sandbox clones helpers (spawn.c's id-map helpers,
 *    netns.c's) and the sandbox's first process; each holds copies of
 *    every fd the process has at that moment, other creates' pipes
 *    included, since none of them execs at once. Each closes every fd
 *    but its own as its first act (hutch_close_others), so no create
 *    ever waits on an end of stream another's helper holds, and what runs
 *    in them before the exec allocates nothing (sbx_make.c says why that
 *    matters on a thread). Pool refills (offload_background) run in the
 *    same lane, behind every waiting create.
 *  - OFFLOAD_OTHER: teardowns, volumes, removals, the audit log, store
 *    checkpoints, collecting crashed runs' cgroups; no clone
 *    whose end depends on a pipe (mkfs.ext4 is forked and execs at once).
 * The caps also keep a burst from taking every thread of the pool from
 * egress name lookups and snapshot copies (main.c sizes libuv's pool for
 * SERVE_LOOKUPS, the copies and both lanes). The loop
 * does not end while a job runs or waits: a stopping server finishes them. */
#ifndef HUTCH_CORE_BASE_OFFLOAD_H
#define HUTCH_CORE_BASE_OFFLOAD_H

#include <stdbool.h>
#include <stddef.h>
#include <uv.h>

enum offload_lane { OFFLOAD_CREATE, OFFLOAD_OTHER, OFFLOAD_LANES };
#define OFFLOAD_OTHER_MAX 7   /* OFFLOAD_OTHER's jobs running at once */
#define OFFLOAD_CREATE_MAX 16 /* the most --create-lanes may ask */

struct server;
struct hutch_err;

struct offload {
  uv_work_t work;
  struct offload *next; /* waiting */
  const char *owner;    /* whose (a tenant), for turns; NULL: none */
  uint64_t turn;        /* its place among waiting jobs (offload.c) */
  struct server *srv;
  enum offload_lane lane;
  void (*run)(struct offload *o);  /* on a thread of the pool */
  void (*done)(struct offload *o); /* on the loop, after run; may free o */
};

struct offload_queue {
  unsigned max; /* running at once (offload_init) */
  unsigned running, waiting;
  struct offload *head, *tail;       /* waiting, in order of turn */
  uint64_t turn;                     /* the turn of the last started */
  struct offload *bg_head, *bg_tail; /* background jobs waiting, after those */
};

/* The lanes' widths: create_lanes creates at once. */
void offload_init(struct server *srv, unsigned create_lanes);

/* Run o->run off the loop, then o->done on it. o is embedded in the job
 * (OFFLOAD_JOB) and must live until done. */
void offload(struct server *srv, enum offload_lane lane, struct offload *o,
             void (*run)(struct offload *o), void (*done)(struct offload *o));
/* The same for owner's job (a tenant's create): owners waiting take
 * turns, one job each, whatever order their jobs came in. owner must live
 * until the job starts. */
void offload_owned(struct server *srv, enum offload_lane lane, const char *owner, struct offload *o,
                   void (*run)(struct offload *o), void (*done)(struct offload *o));
/* How many jobs a job of owner offered now would wait behind (those
 * running included). */
unsigned offload_ahead(const struct server *srv, enum offload_lane lane, const char *owner);
/* The same, behind every job of the lane that is not background: work
 * ahead of demand (pool refills) never delays a request's. */
void offload_background(struct server *srv, enum offload_lane lane, struct offload *o,
                        void (*run)(struct offload *o), void (*done)(struct offload *o));

/* How an action that waits for work off the loop ended: err NULL when
 * it is done, else why not (called on the loop). */
typedef void (*offload_done_fn)(const struct hutch_err *err, void *arg);

/* Remove path (taken): a directory tree (hutch_layer_remove) with tree,
 * else a file. done, if given, hears once it is gone (or an internal
 * error if it could not be); without it a failure is said on stderr.
 * Freeing a large file's blocks or GiBs in many files takes the
 * filesystem a while. */
void offload_remove(struct server *srv, char *path, bool tree, offload_done_fn done, void *arg);

#define OFFLOAD_JOB(ptr, type) ((type *)((char *)(ptr)-offsetof(type, o)))

#endif
