/* Pausing and resuming a sandbox. A paused sandbox has every process
 * frozen in its cgroup (the agent too), its memory and files kept, and uses
 * no CPU; its timeout's clock stops, and it is kept for --paused-retention.
 * A resumed one goes on where it stopped. Memory stays the host's: pausing
 * frees no RAM, it frees the CPU (see docs/lifecycle.md). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "serve.h"
#include "store.h"
#include "util.h"

static void save(struct sbx *sb) {
  struct hutch_err err = {0};
  if (store_sandbox_update(sb->srv->store, sb, &err) < 0)
    fprintf(stderr, "hutch serve: %s\n", err.msg);
}

int sbx_pause(struct sbx *sb, struct hutch_err *err) {
  usage_sample(sb); /* its running time is counted up to now */
  if (!sb->captures && hutch_sandbox_freeze(sb->hs, true, err) < 0)
    return -1;
  int64_t now = wall_ms();
  sb->paused = true;
  sb->paused_ms = now;
  /* Paused by its timeout, it has none left: it gets its timeout's length
   * again when it resumes. */
  sb->left_ms = sb->expires_ms > now ? sb->expires_ms - now : sb->timeout_ms;
  save(sb);
  return 0;
}

int sbx_resume(struct sbx *sb, int64_t timeout_ms, struct hutch_err *err) {
  /* Taken over paused, its agent answers only once thawed, which a copy
   * under way does not allow yet. */
  if (sb->agent_pending && sb->captures)
    return hutch_err_set(err, EBUSY, "a snapshot of it is being copied: resume it in a moment");
  usage_sample(sb); /* the paused time is not */
  /* A snapshot being copied keeps it frozen: its end thaws it. */
  if (!sb->captures && hutch_sandbox_freeze(sb->hs, false, err) < 0)
    return -1;
  /* Taken over while paused: its agent can answer only now. */
  if (sb->agent_pending && sbx_connect_agent(sb) < 0) {
    hutch_err_set(err, 0, "its agent did not answer after the resume");
    sbx_destroy(sb);
    return -1;
  }
  sb->paused = false;
  sb->expires_ms = wall_ms() + (timeout_ms >= 0 ? timeout_ms : sb->left_ms);
  save(sb);
  return 0;
}

bool sbx_wake(struct http_conn *c, struct sbx *sb) {
  if (!sb->paused)
    return true;
  if (!sb->auto_resume) {
    http_error(c, 409, "sandbox_paused",
               "sandbox %s is paused (created with auto_resume false): resume it first", sb->id);
    return false;
  }
  struct hutch_err err = {0};
  if (sbx_resume(sb, -1, &err) < 0) {
    http_error(c, err.errnum == EBUSY ? 409 : 500, err.errnum == EBUSY ? "busy" : "sandbox_error",
               "resuming sandbox %s: %s", sb->id, err.msg);
    return false;
  }
  return true;
}

struct sbx *sbx_lookup_live(struct http_conn *c, const struct principal *p) {
  struct sbx *sb = sbx_lookup(c, p);
  return sb && sbx_wake(c, sb) ? sb : NULL;
}

void api_sandboxes_pause(struct http_conn *c, const struct principal *p) {
  struct sbx *sb = sbx_lookup(c, p);
  if (!sb)
    return;
  struct hutch_err err = {0};
  if (sb->paused)
    http_error(c, 409, "already_paused", "sandbox %s is already paused", sb->id);
  else if (sbx_pause(sb, &err) < 0)
    http_error(c, err.errnum == EBUSY ? 409 : 500, err.errnum == EBUSY ? "not_frozen" : "sandbox_error",
               "pausing sandbox %s: %s", sb->id, err.msg);
  else
    http_json(c, 200, sbx_json(sb));
}

/* {timeout_s}: optional, a new timeout counted from now; else what was
 * left of the old one. */
void api_sandboxes_resume(struct http_conn *c, const struct principal *p) {
  double t;
  struct hutch_err err = {0};
  struct sbx *sb = sandboxes_timeout_body(c, p, &t);
  if (!sb)
    return;
  if (!sb->paused)
    http_error(c, 409, "not_paused", "sandbox %s is running, not paused", sb->id);
  else if (sbx_resume(sb, t < 0 ? -1 : (int64_t)(t * 1000), &err) < 0)
    http_error(c, err.errnum == EBUSY ? 409 : 500, err.errnum == EBUSY ? "busy" : "sandbox_error",
               "resuming sandbox %s: %s", sb->id, err.msg);
  else
    http_json(c, 200, sbx_json(sb));
}
