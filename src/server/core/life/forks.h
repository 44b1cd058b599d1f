/* Forks of a sandbox (forks.c). */
#ifndef HUTCH_CORE_LIFE_FORKS_H
#define HUTCH_CORE_LIFE_FORKS_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include "err.h"

struct server;
struct principal;
struct sbx;

/* Fork sb: a capture of its files (ephemeral: it goes with the last
 * sandbox that stacks it), then count sandboxes made from it one after
 * the other, each with sb's limits, env, metadata and life, timeout_s from
 * now (<= 0: sb's timeout). -1 and err at once (invalid_argument unless
 * count is 1 to SNAPSHOTS_MAX_FORKS; the tenant's quota; a capture that
 * cannot start); else ops->done later, once: the snapshot's id and the
 * forks' ids, or an error, with every fork made so far gone. ops->wanted
 * is asked before each step: false (the caller left) ends it so. */
struct fork_ops {
  bool (*wanted)(void *arg);
  void (*done)(json_t *snapshot_id, json_t *ids, const struct hutch_err *err, void *arg);
};
int forks_start(struct server *srv, const struct principal *p, struct sbx *sb, uint64_t count,
                double timeout_s, const struct fork_ops *ops, void *arg, struct hutch_err *err);

#endif
