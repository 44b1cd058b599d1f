/* The sandbox a request names, for the caller (and running, for requests
 * that need it so), and POST /v1/sandboxes/{id}/pause and /resume: each
 * parses, calls the action (core/actions.h, core/lifecycle.c) and renders. */
#include "api/lifecycle.h"

#include <stdlib.h>
#include <string.h>

#include "util.h"
#include "api/sandboxes.h"
#include "core/life/actions.h"
#include "core/sandbox/sbx.h"
#include "core/base/server.h"
#include "core/life/sbx_pause.h"
#include "http/errors.h"
#include "http/http.h"

struct sbx *api_sbx_lookup(struct http_conn *c, const struct principal *p) {
  struct hutch_err err = {0};
  struct sbx *sb = actions_find(c->srv, p, c->req.params[0], &err);
  /* For the audit line: an id, never the cut-off start of something else
   * (whose cut could split a character the line's JSON refuses). */
  if (strlen(c->req.params[0]) < sizeof c->sandbox)
    str_copy(c->sandbox, sizeof c->sandbox, c->req.params[0]);
  if (!sb)
    http_fail(c, &err);
  return sb;
}

bool api_sbx_wake(struct http_conn *c, struct sbx *sb) {
  struct hutch_err err = {0};
  if (actions_wake(sb, &err) < 0) {
    http_fail(c, &err);
    return false;
  }
  return true;
}

struct sbx *api_sbx_lookup_live(struct http_conn *c, const struct principal *p) {
  struct sbx *sb = api_sbx_lookup(c, p);
  return sb && api_sbx_wake(c, sb) ? sb : NULL;
}

static void answer_pause(struct sbx *sb, int r, struct hutch_err *why, void *arg) {
  struct http_wait *w = arg;
  struct http_conn *c = http_wait_end(w);
  struct hutch_err err = {0};
  free(w);
  if (!c)
    return; /* the client left: paused (or not) all the same */
  if (actions_pause_result(sb, r, why, &err) < 0)
    http_fail(c, &err);
  else
    http_json(c, 200, sbx_json(sb));
}

void api_sandboxes_pause(struct http_conn *c, const struct principal *p) {
  struct sbx *sb = api_sbx_lookup(c, p);
  if (!sb)
    return;
  struct hutch_err err = {0};
  if (actions_pause_check(sb, &err) < 0) {
    http_fail(c, &err);
    return;
  }
  struct http_wait *w = xcalloc(1, sizeof *w);
  http_wait_begin(w, c);
  sbx_pause(sb, answer_pause, w);
}

/* {timeout_s}: optional, a new timeout counted from now; else what was
 * left of the old one. */
void api_sandboxes_resume(struct http_conn *c, const struct principal *p) {
  double t;
  struct hutch_err err = {0};
  struct sbx *sb = api_sandboxes_timeout_body(c, p, &t);
  if (!sb)
    return;
  if (actions_resume(sb, t, &err) < 0)
    http_fail(c, &err);
  else
    http_json(c, 200, sbx_json(sb));
}
