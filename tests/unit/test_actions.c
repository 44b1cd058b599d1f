/* The sandbox actions (src/server/core/actions.c) driven directly, with no
 * socket and no HTTP: a server with a store of its own and sandboxes put
 * in its registry by hand. And the one error table (http/errors.c): what
 * each kind answers, the same for every front end. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/life/actions.h"
#include "core/tenancy/keys.h"
#include "core/life/sbx_create.h"
#include "core/sandbox/sbx.h"
#include "core/base/server.h"
#include "core/sandbox/tally.h"
#include "core/serve/server_open.h"
#include "http/errors.h"
#include "state/seal.h"
#include "state/store.h"
#include "util.h"
#include "tap.h"

static struct sbx *fake(struct server *srv, const char *id, const char *tenant) {
  struct sbx *sb = calloc(1, sizeof *sb);
  sb->srv = srv;
  snprintf(sb->id, sizeof sb->id, "%s", id);
  snprintf(sb->tenant, sizeof sb->tenant, "%s", tenant);
  sb->created_ms = wall_ms();
  sb->timeout_ms = 60000;
  sb->expires_ms = sb->created_ms + sb->timeout_ms;
  sbx_register(srv, sb);
  return sb;
}

int main(void) {
  char dir[] = "/tmp/hutch-test-actions-XXXXXX";
  if (!mkdtemp(dir))
    return 1;
  char db[sizeof dir + 16];
  snprintf(db, sizeof db, "%s/state.db", dir);
  unsigned char key[SEAL_KEY_LEN] = {1};
  struct hutch_err err = {0};
  struct server *srv = server_new();
  ok(store_open(db, key, &srv->store, &err) == 0, "a store: %s", err.msg);

  struct principal alice = {.tenant = "alice"}, bob = {.tenant = "bob"};
  struct sbx *a = fake(srv, "aaaaaaaaaaaaaaaa", "alice");
  fake(srv, "bbbbbbbbbbbbbbbb", "bob");

  ok(actions_find(srv, &alice, a->id, &err) == a, "the caller's own sandbox is found");
  ok(!actions_find(srv, &bob, a->id, &err), "another tenant's is not");
  is_int(err.kind, HUTCH_ERR_NOT_FOUND, "... and is as missing as one that never was");
  is_str(err.code, "not_found", "code not_found");
  ok(!actions_find(srv, &alice, "cccccccccccccccc", &err) && err.kind == HUTCH_ERR_NOT_FOUND,
     "an unknown id: not_found");

  int64_t before = a->expires_ms;
  actions_set_timeout(a, 10, true);
  ok(a->expires_ms == before, "extend_only never shortens the timeout");
  actions_set_timeout(a, 10, false);
  ok(a->expires_ms < before && a->expires_ms > wall_ms() + 9000, "a new timeout counts from now");
  actions_set_timeout(a, 3600, true);
  ok(a->expires_ms > wall_ms() + 3599000, "extend_only extends");

  ok(actions_resume(a, -1, &err) < 0 && err.kind == HUTCH_ERR_CONFLICT, "a running one: no resume");
  is_str(err.code, "not_paused", "code not_paused");
  ok(actions_pause_check(a, &err) == 0, "a running one may be paused");
  a->paused = true;
  a->left_ms = 5000;
  ok(actions_pause_check(a, &err) < 0 && err.kind == HUTCH_ERR_CONFLICT, "a paused one: no pause");
  is_str(err.code, "already_paused", "code already_paused");

  struct hutch_err why = {0};
  hutch_err_set(&why, 16 /* EBUSY */, "a process did not freeze");
  ok(actions_pause_result(a, -1, &why, &err) < 0 && hutch_err_class(&err) == HUTCH_ERR_BUSY,
     "a freeze that timed out: busy (%s)", err.msg);
  is_str(err.code, "not_frozen", "code not_frozen");
  ok(actions_pause_result(NULL, 0, &why, &err) < 0 && err.kind == HUTCH_ERR_NOT_FOUND,
     "destroyed while pausing: not_found");
  ok(actions_pause_result(a, 0, &why, &err) == 0, "a freeze that worked: paused");

  /* Room for more: the tenant's quota, then the server's capacity. */
  struct tenant_quota q = {.max_sandboxes = 1, .max_memory_mb = -1, .max_disk_mb = -1};
  ok(store_tenant_put(srv->store, "alice", &q, &err) == 0, "alice may run 1 sandbox");
  ok(tally_check_room(srv, &alice, 0, 1, &err) < 0 && err.kind == HUTCH_ERR_QUOTA,
     "alice, who runs 1 already: quota (%s)", err.msg);
  is_str(err.code, "quota_exceeded", "code quota_exceeded");
  ok(tally_check_room(srv, &bob, 0, 1, &err) == 0, "bob has room");
  srv->cfg.max_sandboxes = 2;
  unsigned listed = srv->nsandboxes;
  srv->nsandboxes = 2;
  ok(tally_check_room(srv, &bob, 0, 1, &err) < 0 && err.kind == HUTCH_ERR_UNAVAILABLE,
     "a full server: unavailable");
  is_str(err.code, "at_capacity", "code at_capacity");
  srv->nsandboxes = listed;

  /* Keys: made, let in, deleted, and not let in the next time. */
  struct key_request kr = {
      .tenant = "carol", .max_sandboxes = -1, .max_memory_mb = -1, .max_disk_mb = -1};
  struct key_made made;
  ok(keys_create(srv, &kr, &made, &err) == 0, "a key for carol: %s", err.msg);
  struct principal who;
  ok(keys_check(srv, made.key, NULL, &who) == 1 && strcmp(who.tenant, "carol") == 0,
     "its key lets carol in");
  char bearer[64];
  snprintf(bearer, sizeof bearer, "Bearer %s", made.key);
  ok(keys_check(srv, NULL, bearer, &who) == 1, "as a bearer token too");
  ok(keys_delete(srv, made.id, &err) == 0, "deleted");
  ok(keys_check(srv, made.key, NULL, &who) == 0, "and no longer lets anyone in");
  ok(keys_delete(srv, made.id, &err) < 0 && err.kind == HUTCH_ERR_NOT_FOUND,
     "deleting it again: not_found");
  kr.tenant = "admin";
  ok(keys_create(srv, &kr, &made, &err) < 0 && err.kind == HUTCH_ERR_INVALID,
     "no key for the tenant 'admin'");
  kr.tenant = "a b";
  ok(keys_create(srv, &kr, &made, &err) < 0 && err.kind == HUTCH_ERR_INVALID,
     "nor for a name with a space");

  /* The table: each kind's status, the same for the native and E2B
   * dialects (one column), and Connect's code. */
  static const struct {
    enum hutch_errkind kind;
    int status;
    const char *connect;
  } want[] = {
      {HUTCH_ERR_INVALID, 400, "invalid_argument"},
      {HUTCH_ERR_NOT_FOUND, 404, "not_found"},
      {HUTCH_ERR_CONFLICT, 409, "failed_precondition"},
      {HUTCH_ERR_BUSY, 409, "unavailable"},
      {HUTCH_ERR_QUOTA, 429, "resource_exhausted"},
      {HUTCH_ERR_NO_SPACE, 507, "resource_exhausted"},
      {HUTCH_ERR_UNSUPPORTED, 400, "unimplemented"},
      {HUTCH_ERR_UNAVAILABLE, 503, "unavailable"},
      {HUTCH_ERR_UPSTREAM, 502, "unavailable"},
      {HUTCH_ERR_SYSTEM, 500, "internal"},
      {HUTCH_ERR_UPSTREAM_TIMEOUT, 504, "deadline_exceeded"},
      {HUTCH_ERR_UNAUTHENTICATED, 401, "unauthenticated"},
  };
  for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
    is_int(http_error_status(want[i].kind), want[i].status, "kind %d answers %d", want[i].kind,
           want[i].status);
    is_str(http_connect_code(want[i].kind, NULL), want[i].connect, "kind %d is Connect's %s",
           want[i].kind, want[i].connect);
  }
  is_int(http_error_status((enum hutch_errkind)999), 500, "an unknown kind is internal");
  hutch_err_set(&err, 28 /* ENOSPC */, "writing");
  is_int(hutch_err_class(&err), HUTCH_ERR_NO_SPACE, "ENOSPC is no_space");
  hutch_err_set(&err, 24 /* EMFILE */, "accept");
  is_int(hutch_err_class(&err), HUTCH_ERR_UNAVAILABLE, "out of descriptors is unavailable");

  while (srv->sandboxes) {
    struct sbx *sb = srv->sandboxes;
    srv->sandboxes = sb->next;
    free(sb);
  }
  server_free(srv); /* the store too */
  unlink(db);
  char wal[sizeof db + 8];
  snprintf(wal, sizeof wal, "%s-wal", db);
  unlink(wal);
  snprintf(wal, sizeof wal, "%s-shm", db);
  unlink(wal);
  rmdir(dir);
  return done_testing();
}
