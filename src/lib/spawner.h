/* A small process that clones sandboxes' first processes for a long-lived,
 * threaded caller (hutch serve): see spawner.c. */
#ifndef HUTCH_SPAWNER_H
#define HUTCH_SPAWNER_H

#include "err.h"

struct hutch_spawn;
struct hutch_spawner;

/* Fork the spawner. Call it early, while the process is small and has one
 * thread, after its RLIMIT_NOFILE is final. */
struct hutch_spawner *hutch_spawner_start(struct hutch_err *err);
/* End it (it also ends with the process that started it). */
void hutch_spawner_free(struct hutch_spawner *sp);

/* spawn.c's: have the spawner clone s's first process, as the caller's
 * child, holding sync at the caller's number. 0 with s->pid and s->pidfd
 * set; 1 when the spawner cannot take this one (gone, or more descriptors
 * or data than a request carries): clone it directly; -1 with err set. */
int hutch_spawner_clone(struct hutch_spawner *sp, struct hutch_spawn *s, int sync,
                        struct hutch_err *err);

#endif
