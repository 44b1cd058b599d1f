/* E2B's secrets' rows in the store (store.h): each value sealed under the
 * state key, bound to its secret's id, so a copy of hutch.db holds none in
 * the clear. */
#include "state/store_secrets.h"

#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "state/seal.h"
#include "state/store.h"

/* A secret's value is sealed to its id, as a sandbox's fields to its
 * row: a copy of hutch.db holds none in the clear. */
int store_secret_put(struct store *st, const struct store_secret *v, bool update,
                     struct hutch_err *err) {
  char aad[96];
  snprintf(aad, sizeof aad, "secret:%s", v->id);
  char *sealed = seal_text(store_seal_key(st), aad, v->value);

  sqlite3_stmt *s =
      store_prep(st,
                 update ? "UPDATE secrets SET version = ?4, metadata = ?5, value = ?6,"
                          " updated_at = ?8 WHERE id = ?1 AND tenant = ?2"
                        : "INSERT INTO secrets (id, tenant, name, version, metadata, value,"
                          " created_at, updated_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                 err);
  if (!s) {
    free(sealed);
    return -1;
  }

  sqlite3_bind_text(s, 1, v->id, -1, SQLITE_STATIC);
  sqlite3_bind_text(s, 2, v->tenant, -1, SQLITE_STATIC);
  sqlite3_bind_text(s, 3, v->name, -1, SQLITE_STATIC);
  sqlite3_bind_int64(s, 4, v->version);
  sqlite3_bind_text(s, 5, v->metadata, -1, SQLITE_STATIC);
  sqlite3_bind_text(s, 6, sealed, -1, SQLITE_STATIC);
  sqlite3_bind_int64(s, 7, v->created_ms);
  sqlite3_bind_int64(s, 8, v->updated_ms);

  int r = sqlite3_step(s);
  store_done(st, s);
  free(sealed);
  if (r == SQLITE_CONSTRAINT)
    return 1;
  return r == SQLITE_DONE ? 0 : store_fail(st, err, "write");
}

int store_secret_delete(struct store *st, const char *id, struct hutch_err *err) {
  sqlite3_stmt *s = store_prep(st, "DELETE FROM secrets WHERE id = ?", err);
  if (!s)
    return -1;
  sqlite3_bind_text(s, 1, id, -1, SQLITE_STATIC);
  return store_step_done(st, s, err);
}

int store_secret_each(struct store *st, const char *tenant,
                      void (*fn)(const struct store_secret *, void *), void *arg,
                      struct hutch_err *err) {
  sqlite3_stmt *s =
      store_prep(st,
                 "SELECT id, tenant, name, version, metadata, value, created_at,"
                 " updated_at FROM secrets WHERE tenant = ?1 ORDER BY created_at, rowid",
                 err);
  if (!s)
    return -1;
  sqlite3_bind_text(s, 1, tenant, -1, SQLITE_STATIC);

  int r;
  while ((r = sqlite3_step(s)) == SQLITE_ROW) {
    const char *id = (const char *)sqlite3_column_text(s, 0);
    char aad[96];
    snprintf(aad, sizeof aad, "secret:%s", id);
    char *value = seal_open(store_seal_key(st), aad, (const char *)sqlite3_column_text(s, 5));

    struct store_secret v = {id,
                             (const char *)sqlite3_column_text(s, 1),
                             (const char *)sqlite3_column_text(s, 2),
                             sqlite3_column_int64(s, 3),
                             (const char *)sqlite3_column_text(s, 4),
                             value,
                             sqlite3_column_int64(s, 6),
                             sqlite3_column_int64(s, 7)};
    /* One that cannot be opened (state.key replaced) is listed without
     * a value: it injects nothing. */
    fn(&v, arg);
    if (value) {
      explicit_bzero(value, strlen(value));
      free(value);
    }
  }

  store_done(st, s);
  return r == SQLITE_DONE ? 0 : store_fail(st, err, "read secrets");
}
