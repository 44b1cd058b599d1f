/* Actions on one sandbox, as every front end calls them (issue 17): each
 * takes the sandbox (or the caller and an id) and what the request asked,
 * and ends with its result or a struct hutch_err whose kind the front end
 * renders through its table (http/errors.c). Nothing here knows HTTP, so
 * the native API, E2B's and any later front end give the same answer to
 * the same case. The other domains' actions are in their own modules:
 * sbx_create.h (create), files.h, exec.h, procs.h, contexts.h,
 * snapshots.h, volumes.h, network.h, keys.h. */
#ifndef HUTCH_CORE_LIFE_ACTIONS_H
#define HUTCH_CORE_LIFE_ACTIONS_H

#include <stdbool.h>
#include <stdint.h>

#include "err.h"

struct server;
struct sbx;
struct principal;

/* The sandbox id names if it is the caller's (another tenant's is as
 * missing as one that never was); NULL and not_found else. */
struct sbx *actions_find(struct server *srv, const struct principal *p, const char *id,
                         struct hutch_err *err);
/* Its timeout ends at expires_ms (ms since the epoch). A paused sandbox's
 * clock stands: what it will have left when it resumes. */
void actions_set_expiry(struct sbx *sb, int64_t expires_ms);
/* A timeout of seconds from now, sooner or later than the last (E2B's
 * setTimeout); extend_only: never sooner (E2B's connect). */
void actions_set_timeout(struct sbx *sb, double seconds, bool extend_only);
/* Whether it may be paused now: conflict already_paused if not. */
int actions_pause_check(const struct sbx *sb, struct hutch_err *err);
/* How a pause ended (sbx_pause's then: sb NULL when it was destroyed
 * meanwhile, r and why from the freeze): 0, or -1 and the error. */
int actions_pause_result(const struct sbx *sb, int r, const struct hutch_err *why,
                         struct hutch_err *err);
/* A sandbox a request needs running: 0 when it runs (a paused one is
 * resumed if it was made to be by traffic); conflict sandbox_paused when
 * it may not be, busy while a freeze is under way. */
int actions_wake(struct sbx *sb, struct hutch_err *err);
/* Resume a paused sandbox with timeout_s from now (< 0: what was left):
 * conflict not_paused when it runs; busy while a freeze is under way. */
int actions_resume(struct sbx *sb, double timeout_s, struct hutch_err *err);

#endif
