/* Pausing and resuming a sandbox (sbx_pause.c). */
#ifndef HUTCH_CORE_LIFE_SBX_PAUSE_H
#define HUTCH_CORE_LIFE_SBX_PAUSE_H

#include <stdint.h>
#include "err.h"

struct sbx;

/* A freeze runs off the loop; then hears how it went (sb NULL when the
 * sandbox was destroyed meanwhile). */
typedef void (*sbx_frozen_fn)(struct sbx *sb, int r, struct hutch_err *err, void *arg);
void sbx_freeze(struct sbx *sb, sbx_frozen_fn then, void *arg);
/* A sandbox going: its freeze under way, if any, will not touch it. */
void sbx_freeze_forget(struct sbx *sb);
/* Freeze it (unless a snapshot's copy has), then mark it paused. */
typedef void (*sbx_paused_fn)(struct sbx *sb, int r, struct hutch_err *err, void *arg);
void sbx_pause(struct sbx *sb, sbx_paused_fn then, void *arg);
/* timeout_ms < 0: what was left of its timeout when it was paused. */
int sbx_resume(struct sbx *sb, int64_t timeout_ms, struct hutch_err *err);

#endif
