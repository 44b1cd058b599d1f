/* Warm pools. */
#ifndef HUTCH_CORE_LIFE_POOL_H
#define HUTCH_CORE_LIFE_POOL_H

#include <stdio.h>
#include "err.h"
#include "sandbox.h"

struct server;
struct sbx;
struct hutch_err;

/* pool.c: warm pools, per template and limits (--pool SPEC=N[:MAX]). */
int pool_configure(struct server *srv, struct hutch_err *err);
/* A ready sandbox made with exactly cfg and template, or NULL. */
struct sbx *pool_take(struct server *srv, const struct hutch_sandbox_config *cfg,
                      const char *template);
void pool_unlink(struct sbx *sb);
/* Grown pools without demand for a while shrink back (the reaper's). */
void pool_shrink(struct server *srv);
/* A request came: push a pending refill back to a quieter moment. */
void pool_defer(struct server *srv);
/* At stop: the ready sandboxes go; pool_free after the loop has ended. */
void pool_destroy_all(struct server *srv);
void pool_free(struct server *srv);
void pool_metrics(FILE *f, const struct server *srv);

#endif
