/* Actions on one sandbox (actions.h). */
#include "core/life/actions.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "core/sandbox/sbx.h"
#include "core/base/server.h"
#include "state/store.h"
#include "core/life/sbx_pause.h"
#include "util.h"

struct sbx *actions_find(struct server *srv, const struct principal *p, const char *id,
                         struct hutch_err *err) {
  struct sbx *sb = sbx_find_own(srv, p, id);
  if (!sb)
    hutch_err_fail(err, HUTCH_ERR_NOT_FOUND, "not_found", "no sandbox %s", id);
  return sb;
}

void actions_set_expiry(struct sbx *sb, int64_t expires_ms) {
  struct hutch_err err = {0};
  int64_t now = wall_ms();
  sb->timeout_ms = expires_ms > now ? expires_ms - now : 0;
  if (sb->paused) { /* the clock stands: what is left when it resumes */
    sb->left_ms = sb->timeout_ms;
    if (sbx_store(sb, false, &err) < 0)
      fprintf(stderr, "hutch serve: %s\n", err.msg);
    return;
  }
  sb->expires_ms = expires_ms;
  if (store_sandbox_expiry(sb->srv->store, sb->id, sb->expires_ms, &err) < 0)
    fprintf(stderr, "hutch serve: %s\n", err.msg);
}

void actions_set_timeout(struct sbx *sb, double seconds, bool extend_only) {
  int64_t until = wall_ms() + (int64_t)(seconds * 1000);
  int64_t now_ends = sb->paused ? wall_ms() + sb->left_ms : sb->expires_ms;
  if (!extend_only || until > now_ends)
    actions_set_expiry(sb, until);
}

int actions_pause_check(const struct sbx *sb, struct hutch_err *err) {
  if (sb->paused)
    return hutch_err_fail(err, HUTCH_ERR_CONFLICT, "already_paused", "sandbox %s is already paused",
                          sb->id);
  return 0;
}

int actions_pause_result(const struct sbx *sb, int r, const struct hutch_err *why,
                         struct hutch_err *err) {
  if (!sb)
    return hutch_err_fail(err, HUTCH_ERR_NOT_FOUND, "not_found",
                          "the sandbox was destroyed while it was being paused");
  if (r == 0)
    return 0;
  /* A process that would not freeze in time: the sandbox runs on, and
   * the same pause may work in a moment. */
  *err = *why;
  err->code = why->errnum == EBUSY ? "not_frozen" : "sandbox_error";
  return hutch_err_wrap(err, "pausing sandbox %s", sb->id);
}

int actions_resume(struct sbx *sb, double timeout_s, struct hutch_err *err) {
  if (!sb->paused)
    return hutch_err_fail(err, HUTCH_ERR_CONFLICT, "not_paused",
                          "sandbox %s is running, not paused", sb->id);
  char id[sizeof sb->id]; /* a resume whose agent is lost destroys the sandbox */
  memcpy(id, sb->id, sizeof id);
  if (sbx_resume(sb, timeout_s < 0 ? -1 : (int64_t)(timeout_s * 1000), err) < 0) {
    err->code = err->errnum == EBUSY ? "busy" : "sandbox_error";
    return hutch_err_wrap(err, "resuming sandbox %s", id);
  }
  return 0;
}

int actions_wake(struct sbx *sb, struct hutch_err *err) {
  if (!sb->paused)
    return 0;
  if (!sb->auto_resume)
    return hutch_err_fail(err, HUTCH_ERR_CONFLICT, "sandbox_paused",
                          "sandbox %s is paused (created with auto_resume false): resume it "
                          "first",
                          sb->id);
  return actions_resume(sb, -1, err);
}
