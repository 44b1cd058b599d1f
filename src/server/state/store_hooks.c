/* Webhooks' rows and counters in the store (store_hooks.h). A webhook's
 * secret signs its deliveries: it is kept sealed under the state key,
 * bound to the webhook's id, so a copy of hutch.db forges no signature. */
#include "state/store_hooks.h"

#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "state/seal.h"
#include "state/store.h"

static void aad_of(const char *id, char aad[96]) {
  snprintf(aad, 96, "webhook:%s", id);
}

int store_webhook_put(struct store *st, const struct store_webhook *w, struct hutch_err *err) {
  char aad[96];
  aad_of(w->id, aad);
  char *sealed = seal_text(store_seal_key(st), aad, w->secret);
  sqlite3_stmt *s = store_prep(st,
                               "INSERT OR REPLACE INTO webhooks (id, tenant, spec, secret,"
                               " created_at) VALUES (?1, ?2, ?3, ?4, ?5)",
                               err);
  if (!s) {
    free(sealed);
    return -1;
  }
  sqlite3_bind_text(s, 1, w->id, -1, SQLITE_STATIC);
  sqlite3_bind_text(s, 2, w->tenant, -1, SQLITE_STATIC);
  sqlite3_bind_text(s, 3, w->spec, -1, SQLITE_STATIC);
  sqlite3_bind_text(s, 4, sealed, -1, SQLITE_STATIC);
  sqlite3_bind_int64(s, 5, w->created_ms);
  int r = store_step_done(st, s, err);
  free(sealed);
  return r;
}

int store_webhook_delete(struct store *st, const char *id, struct hutch_err *err) {
  sqlite3_stmt *s = store_prep(st, "DELETE FROM webhooks WHERE id = ?1", err);
  if (!s)
    return -1;
  sqlite3_bind_text(s, 1, id, -1, SQLITE_STATIC);
  return store_step_done(st, s, err);
}

int store_webhook_each(struct store *st, void (*fn)(const struct store_webhook *, void *),
                       void *arg, struct hutch_err *err) {
  sqlite3_stmt *s = store_prep(
      st, "SELECT id, tenant, spec, secret, created_at FROM webhooks ORDER BY created_at, rowid",
      err);
  if (!s)
    return -1;

  int r;
  while ((r = sqlite3_step(s)) == SQLITE_ROW) {
    const char *id = (const char *)sqlite3_column_text(s, 0);
    char aad[96];
    aad_of(id, aad);
    char *secret = seal_open(store_seal_key(st), aad, (const char *)sqlite3_column_text(s, 3));
    struct store_webhook w = {id, (const char *)sqlite3_column_text(s, 1),
                              (const char *)sqlite3_column_text(s, 2), secret,
                              sqlite3_column_int64(s, 4)};
    fn(&w, arg);
    if (secret) {
      explicit_bzero(secret, strlen(secret));
      free(secret);
    }
  }
  store_done(st, s);
  return r == SQLITE_DONE ? 0 : store_fail(st, err, "read webhooks");
}

int store_counter_get(struct store *st, const char *name, uint64_t *v, struct hutch_err *err) {
  sqlite3_stmt *s = store_prep(st, "SELECT value FROM counters WHERE name = ?1", err);
  if (!s)
    return -1;
  sqlite3_bind_text(s, 1, name, -1, SQLITE_STATIC);
  int r = sqlite3_step(s);
  *v = r == SQLITE_ROW ? (uint64_t)sqlite3_column_int64(s, 0) : 0;
  store_done(st, s);
  return r == SQLITE_ROW || r == SQLITE_DONE ? 0 : store_fail(st, err, "read a counter");
}

int store_counter_put(struct store *st, const char *name, uint64_t v, struct hutch_err *err) {
  sqlite3_stmt *s =
      store_prep(st, "INSERT OR REPLACE INTO counters (name, value) VALUES (?1, ?2)", err);
  if (!s)
    return -1;
  sqlite3_bind_text(s, 1, name, -1, SQLITE_STATIC);
  sqlite3_bind_int64(s, 2, (sqlite3_int64)v);
  return store_step_done(st, s, err);
}
