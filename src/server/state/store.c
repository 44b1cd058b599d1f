/* The SQLite state of hutch serve (store.h): the schema and its upgrades,
 * the cache of prepared statements, and each table's reads and writes.
 * Every statement is prepared with bound parameters: no value is ever
 * pasted into SQL. */

#include "state/store.h"

#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"
#include "state/seal.h"

/* Statements are prepared once and kept (a request that reads a key or
 * writes a sandbox would otherwise compile its SQL each time, tens of
 * microseconds). One in use (between prep and done) is not handed out
 * again: a second user gets a statement of its own. */
#define STORE_CACHE 48

struct store {
  sqlite3 *db;
  int wal_pages;                   /* in the WAL after the last commit (wal_hook) */
  unsigned char key[SEAL_KEY_LEN]; /* seals each sandbox's tokens and secrets */
  struct {
    const char *sql;
    sqlite3_stmt *s;
    bool busy;
  } cache[STORE_CACHE];
};

static const char schema[] =
    "PRAGMA journal_mode=WAL;"
    "PRAGMA synchronous=NORMAL;"
    /* A WAL that a crowd's commits grew is cut back to this when it starts
     * over after a checkpoint, instead of staying at its largest. */
    "PRAGMA journal_size_limit=4194304;"
    /* What is deleted or overwritten is zeroed, not left in free pages. */
    "PRAGMA secure_delete=ON;"
    "CREATE TABLE IF NOT EXISTS tenants ("
    "  name TEXT PRIMARY KEY, max_sandboxes INTEGER, max_memory_mb INTEGER,"
    "  max_disk_mb INTEGER DEFAULT -1);"
    "CREATE TABLE IF NOT EXISTS keys ("
    "  id TEXT PRIMARY KEY, tenant TEXT NOT NULL, hash TEXT NOT NULL UNIQUE,"
    "  admin INTEGER NOT NULL, created_at INTEGER NOT NULL);"
    "CREATE TABLE IF NOT EXISTS sandboxes ("
    "  id TEXT PRIMARY KEY, tenant TEXT NOT NULL, template TEXT NOT NULL,"
    "  spec TEXT NOT NULL, created_at INTEGER NOT NULL, expires_at INTEGER NOT NULL,"
    "  pid INTEGER NOT NULL, isolation TEXT NOT NULL DEFAULT 'ns');"
    "CREATE TABLE IF NOT EXISTS usage ("
    "  tenant TEXT PRIMARY KEY, cpu_s REAL NOT NULL, memory_gb_s REAL NOT NULL,"
    "  sandbox_s REAL NOT NULL);"
    "CREATE TABLE IF NOT EXISTS snapshots ("
    "  id TEXT PRIMARY KEY, tenant TEXT NOT NULL, name TEXT NOT NULL, source TEXT NOT NULL,"
    "  layers TEXT NOT NULL, created_at INTEGER NOT NULL, bytes INTEGER NOT NULL,"
    "  files INTEGER NOT NULL, ephemeral INTEGER NOT NULL, isolation TEXT NOT NULL DEFAULT 'ns');"
    /* A tenant's rows are found through an index, not by reading every
     * tenant's (volumes and secrets have theirs in UNIQUE (tenant, name)). */
    "CREATE INDEX IF NOT EXISTS snapshots_by_tenant ON snapshots (tenant);"
    "CREATE TABLE IF NOT EXISTS volumes ("
    "  id TEXT PRIMARY KEY, tenant TEXT NOT NULL, name TEXT NOT NULL,"
    "  size_mb INTEGER NOT NULL, created_at INTEGER NOT NULL, UNIQUE (tenant, name));"
    "CREATE TABLE IF NOT EXISTS secrets ("
    "  id TEXT PRIMARY KEY, tenant TEXT NOT NULL, name TEXT NOT NULL, version INTEGER NOT NULL,"
    "  metadata TEXT NOT NULL, value TEXT NOT NULL, created_at INTEGER NOT NULL,"
    "  updated_at INTEGER NOT NULL, UNIQUE (tenant, name));";

static int fail(struct store *st, struct hutch_err *err, const char *what) {
  return hutch_err_set(err, 0, "state store: %s: %s", what, sqlite3_errmsg(st->db));
}

/* The fields of a sandbox's spec that open its doors (its envd access token,
 * its traffic token) or that the egress proxy adds to its requests (its
 * secrets): kept only sealed, under "sealed", so a copy of hutch.db (a
 * backup, a file left readable) opens no sandbox and tells no secret. The
 * key is in STATE_DIR/state.key, beside admin.key, which opens everything
 * anyway. */
static const char *const sealed_fields[] = {"token", "traffic_token", "secrets", NULL};

static char *row_aad(const char *id) {
  return xasprintf("hutch sandbox %s", id);
}

/* Move spec's sealed fields, if it has any in the clear, into "sealed".
 * Returns whether it changed spec. */
static bool seal_spec(struct store *st, const char *id, json_t *spec) {
  json_t *inner = json_object();
  for (const char *const *f = sealed_fields; *f; f++)
    if (json_object_get(spec, *f)) {
      json_object_set(inner, *f, json_object_get(spec, *f));
      json_object_del(spec, *f);
    }
  bool any = json_object_size(inner) > 0;
  char *text = any ? json_dumps(inner, JSON_COMPACT) : NULL;
  json_decref(inner);
  if (text) {
    char *aad = row_aad(id);
    char *sealed = seal_text(st->key, aad, text);
    json_object_set_new(spec, "sealed", json_string(sealed));
    explicit_bzero(text, strlen(text));
    free(text);
    free(sealed);
    free(aad);
  }
  return any;
}

/* The sealed fields of a row's spec, back in the clear for the server.
 * A row that cannot be opened (state.key replaced) loses them: its
 * sandbox gets new tokens and no secrets, never someone else's. */
static void open_spec(struct store *st, const char *id, json_t *spec) {
  const char *sealed = json_string_value(json_object_get(spec, "sealed"));
  if (!sealed)
    return; /* an older hutch's row, not migrated: in the clear */
  char *aad = row_aad(id);
  char *text = seal_open(st->key, aad, sealed);
  json_t *inner = text ? json_loads(text, 0, NULL) : NULL;
  free(aad);
  if (text) {
    explicit_bzero(text, strlen(text));
    free(text);
  }
  if (json_is_object(inner))
    json_object_update(spec, inner);
  else
    fprintf(stderr,
            "hutch serve: sandbox %s: its sealed tokens and secrets cannot be opened "
            "(state.key replaced?): it gets new tokens and no secrets\n",
            id);
  json_decref(inner);
  json_object_del(spec, "sealed");
}

/* A database of an older hutch (user_version 0) kept tokens and secrets in
 * the clear: each row is sealed, and the file rewritten (VACUUM, then the
 * log truncated) so that no copy of them is left in free pages. */
static int migrate(struct store *st, struct hutch_err *err) {
  sqlite3_stmt *s = NULL;
  int r = sqlite3_prepare_v2(st->db, "PRAGMA user_version", -1, &s, NULL);
  int version = -1;
  if (r == SQLITE_OK && sqlite3_step(s) == SQLITE_ROW)
    version = sqlite3_column_int(s, 0);
  sqlite3_finalize(s);
  if (version < 0)
    return fail(st, err, "user_version");
  if (version >= 1)
    return 0;

  if (sqlite3_prepare_v2(st->db, "SELECT id, spec FROM sandboxes", -1, &s, NULL) != SQLITE_OK)
    return fail(st, err, "migrate");
  sqlite3_stmt *up = NULL;
  if (sqlite3_prepare_v2(st->db, "UPDATE sandboxes SET spec = ? WHERE id = ?", -1, &up, NULL) !=
      SQLITE_OK) {
    sqlite3_finalize(s);
    return fail(st, err, "migrate");
  }

  sqlite3_exec(st->db, "BEGIN", NULL, NULL, NULL);
  while ((r = sqlite3_step(s)) == SQLITE_ROW) {
    const char *id = (const char *)sqlite3_column_text(s, 0);
    json_t *spec = json_loads((const char *)sqlite3_column_text(s, 1), 0, NULL);
    char *text = spec && seal_spec(st, id, spec) ? json_dumps(spec, JSON_COMPACT) : NULL;
    if (text) {
      sqlite3_bind_text(up, 1, text, -1, SQLITE_TRANSIENT);
      sqlite3_bind_text(up, 2, id, -1, SQLITE_TRANSIENT);
      if (sqlite3_step(up) != SQLITE_DONE)
        r = SQLITE_ERROR;
      sqlite3_reset(up);
      free(text);
    }
    json_decref(spec);
    if (r != SQLITE_ROW)
      break;
  }
  sqlite3_finalize(s);
  sqlite3_finalize(up);

  if (r != SQLITE_DONE) {
    sqlite3_exec(st->db, "ROLLBACK", NULL, NULL, NULL);
    return fail(st, err, "migrate");
  }
  if (sqlite3_exec(st->db,
                   "PRAGMA user_version = 1; COMMIT; VACUUM;"
                   " PRAGMA wal_checkpoint(TRUNCATE);",
                   NULL, NULL, NULL) != SQLITE_OK)
    return fail(st, err, "migrate");
  return 0;
}

/* Columns an older hutch's tables lack, added with their defaults: a
 * tenant's max_disk_mb (-1, the server's default), a sandbox's and a
 * snapshot's isolation tier ('ns', the only one it had). */
static int add_column(struct store *st, const char *table, const char *column, const char *decl,
                      struct hutch_err *err) {
  sqlite3_stmt *s = NULL;
  if (sqlite3_prepare_v2(st->db, "SELECT 1 FROM pragma_table_info(?) WHERE name = ?", -1, &s,
                         NULL) != SQLITE_OK)
    return fail(st, err, "migrate");
  sqlite3_bind_text(s, 1, table, -1, SQLITE_STATIC);
  sqlite3_bind_text(s, 2, column, -1, SQLITE_STATIC);
  int r = sqlite3_step(s);
  sqlite3_finalize(s);
  if (r == SQLITE_ROW)
    return 0;

  char *sql = sqlite3_mprintf("ALTER TABLE %s ADD COLUMN %s %s", table, column, decl);
  int e = r == SQLITE_DONE && sql ? sqlite3_exec(st->db, sql, NULL, NULL, NULL) : SQLITE_ERROR;
  sqlite3_free(sql);
  return e == SQLITE_OK ? 0 : fail(st, err, "migrate");
}

/* An older hutch's database made this one's: its rows sealed, the columns
 * it lacks added. */
static int upgrade(struct store *st, struct hutch_err *err) {
  if (migrate(st, err) < 0)
    return -1;
  if (add_column(st, "tenants", "max_disk_mb", "INTEGER DEFAULT -1", err) < 0)
    return -1;
  if (add_column(st, "sandboxes", "isolation", "TEXT NOT NULL DEFAULT 'ns'", err) < 0)
    return -1;
  if (add_column(st, "snapshots", "isolation", "TEXT NOT NULL DEFAULT 'ns'", err) < 0)
    return -1;
  return 0;
}

static int wal_grew(void *arg, sqlite3 *db, const char *name, int pages) {
  (void)db, (void)name;
  ((struct store *)arg)->wal_pages = pages;
  return SQLITE_OK;
}

int store_open(const char *path, const unsigned char *key, struct store **out,
               struct hutch_err *err) {
  struct store *st = xcalloc(1, sizeof *st);
  memcpy(st->key, key, SEAL_KEY_LEN);
  if (sqlite3_open_v2(path, &st->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL) !=
      SQLITE_OK) {
    hutch_err_set(err, 0, "state store %s: %s", path,
                  st->db ? sqlite3_errmsg(st->db) : "out of memory");
    store_close(st);
    return -1;
  }
  sqlite3_busy_timeout(st->db, 2000);
  /* No commit checkpoints (store_checkpoint does, off the loop). */
  sqlite3_wal_hook(st->db, wal_grew, st);

  char *msg = NULL;
  if (sqlite3_exec(st->db, schema, NULL, NULL, &msg) != SQLITE_OK) {
    hutch_err_set(err, 0, "state store %s: %s", path, msg ? msg : "schema");
    sqlite3_free(msg);
    store_close(st);
    return -1;
  }
  if (upgrade(st, err) < 0) {
    hutch_err_wrap(err, "%s", path);
    store_close(st);
    return -1;
  }

  *out = st;
  return 0;
}

void store_close(struct store *st) {
  if (!st)
    return;
  for (size_t i = 0; i < STORE_CACHE && st->cache[i].s; i++)
    sqlite3_finalize(st->cache[i].s);
  sqlite3_close(st->db);
  explicit_bzero(st->key, sizeof st->key);
  free(st);
}

/* A prepared statement, or NULL with err set. */
static sqlite3_stmt *prep(struct store *st, const char *sql, struct hutch_err *err) {
  size_t i = 0;
  for (; i < STORE_CACHE && st->cache[i].s; i++)
    if (!st->cache[i].busy && strcmp(st->cache[i].sql, sql) == 0) {
      st->cache[i].busy = true;
      return st->cache[i].s;
    }
  sqlite3_stmt *s = NULL;
  if (sqlite3_prepare_v3(st->db, sql, -1, SQLITE_PREPARE_PERSISTENT, &s, NULL) != SQLITE_OK) {
    fail(st, err, "prepare");
    return NULL;
  }
  if (i < STORE_CACHE) { /* else, full: it is finalized after use */
    st->cache[i].sql = sql;
    st->cache[i].s = s;
    st->cache[i].busy = true;
  }
  return s;
}

/* The statement's use has ended: kept for the next, or finalized. */
static void done(struct store *st, sqlite3_stmt *s) {
  for (size_t i = 0; i < STORE_CACHE && st->cache[i].s; i++)
    if (st->cache[i].s == s) {
      sqlite3_reset(s);
      sqlite3_clear_bindings(s);
      st->cache[i].busy = false;
      return;
    }
  sqlite3_finalize(s);
}

static int step_done(struct store *st, sqlite3_stmt *s, struct hutch_err *err) {
  int r = sqlite3_step(s);
  done(st, s);
  return r == SQLITE_DONE ? 0 : fail(st, err, "write");
}

/* A statement with one text parameter (NULL: SQL's NULL), prepared. */
static sqlite3_stmt *prep_text(struct store *st, const char *sql, const char *text,
                               struct hutch_err *err) {
  sqlite3_stmt *s = prep(st, sql, err);
  if (s)
    sqlite3_bind_text(s, 1, text, -1, SQLITE_STATIC);
  return s;
}

/* Run a write with one text parameter. */
static int with_text(struct store *st, const char *sql, const char *text, struct hutch_err *err) {
  sqlite3_stmt *s = prep_text(st, sql, text, err);
  return s ? step_done(st, s, err) : -1;
}

int store_key_find(struct store *st, const char *hash, struct principal *p, struct hutch_err *err) {
  sqlite3_stmt *s = prep(st, "SELECT id, tenant, admin FROM keys WHERE hash = ?", err);
  if (!s)
    return -1;
  sqlite3_bind_text(s, 1, hash, -1, SQLITE_STATIC);
  int r = sqlite3_step(s);
  if (r == SQLITE_ROW) {
    str_copy(p->key_id, sizeof p->key_id, (const char *)sqlite3_column_text(s, 0));
    str_copy(p->tenant, sizeof p->tenant, (const char *)sqlite3_column_text(s, 1));
    p->admin = sqlite3_column_int(s, 2) != 0;
  }
  done(st, s);
  if (r == SQLITE_ROW)
    return 1;
  return r == SQLITE_DONE ? 0 : fail(st, err, "read key");
}

int store_key_add(struct store *st, const char *id, const char *tenant, const char *hash,
                  bool admin, struct hutch_err *err) {
  sqlite3_stmt *s = prep(st,
                         "INSERT INTO keys (id, tenant, hash, admin, created_at) "
                         "VALUES (?, ?, ?, ?, strftime('%s','now'))",
                         err);
  if (!s)
    return -1;
  sqlite3_bind_text(s, 1, id, -1, SQLITE_STATIC);
  sqlite3_bind_text(s, 2, tenant, -1, SQLITE_STATIC);
  sqlite3_bind_text(s, 3, hash, -1, SQLITE_STATIC);
  sqlite3_bind_int(s, 4, admin);
  return step_done(st, s, err);
}

int store_key_delete(struct store *st, const char *id, struct hutch_err *err) {
  sqlite3_stmt *s = prep(st, "DELETE FROM keys WHERE id = ? AND admin = 0", err);
  if (!s)
    return -1;
  sqlite3_bind_text(s, 1, id, -1, SQLITE_STATIC);
  if (step_done(st, s, err) < 0)
    return -1;
  return sqlite3_changes(st->db) > 0;
}

json_t *store_keys_list(struct store *st, struct hutch_err *err) {
  sqlite3_stmt *s = prep(st,
                         "SELECT k.id, k.tenant, k.admin, k.created_at, t.max_sandboxes,"
                         " t.max_memory_mb, t.max_disk_mb FROM keys k"
                         " LEFT JOIN tenants t ON t.name = k.tenant ORDER BY k.created_at, k.rowid",
                         err);
  if (!s)
    return NULL;
  json_t *a = json_array();
  int r;
  while ((r = sqlite3_step(s)) == SQLITE_ROW) {
    json_t *k = json_pack("{s:s,s:s,s:b,s:I}", "id", sqlite3_column_text(s, 0), "tenant",
                          sqlite3_column_text(s, 1), "admin", sqlite3_column_int(s, 2),
                          "created_at", (json_int_t)sqlite3_column_int64(s, 3));
    static const char *const quota[] = {"max_sandboxes", "max_memory_mb", "max_disk_mb"};
    for (int i = 0; i < 3; i++) {
      bool set =
          sqlite3_column_type(s, 4 + i) != SQLITE_NULL && sqlite3_column_int64(s, 4 + i) >= 0;
      json_object_set_new(k, quota[i],
                          set ? json_integer(sqlite3_column_int64(s, 4 + i)) : json_null());
    }
    json_array_append_new(a, k);
  }
  done(st, s);
  if (r == SQLITE_DONE)
    return a;
  json_decref(a);
  fail(st, err, "list keys");
  return NULL;
}

int store_admin_keep_only(struct store *st, const char *hash, struct hutch_err *err) {
  sqlite3_stmt *s = prep(st, "DELETE FROM keys WHERE admin = 1 AND hash != ?", err);
  if (!s)
    return -1;
  sqlite3_bind_text(s, 1, hash, -1, SQLITE_STATIC);
  return step_done(st, s, err);
}

int store_tenant_put(struct store *st, const char *tenant, const struct tenant_quota *q,
                     struct hutch_err *err) {
  sqlite3_stmt *s = prep(st,
                         "INSERT INTO tenants (name, max_sandboxes, max_memory_mb, max_disk_mb)"
                         " VALUES (?, ?, ?, ?) ON CONFLICT(name) DO UPDATE SET"
                         " max_sandboxes = excluded.max_sandboxes,"
                         " max_memory_mb = excluded.max_memory_mb,"
                         " max_disk_mb = excluded.max_disk_mb",
                         err);
  if (!s)
    return -1;
  sqlite3_bind_text(s, 1, tenant, -1, SQLITE_STATIC);
  sqlite3_bind_int64(s, 2, q->max_sandboxes);
  sqlite3_bind_int64(s, 3, q->max_memory_mb);
  sqlite3_bind_int64(s, 4, q->max_disk_mb);
  return step_done(st, s, err);
}

int store_tenant_get(struct store *st, const char *tenant, struct tenant_quota *q,
                     struct hutch_err *err) {
  q->max_sandboxes = q->max_memory_mb = q->max_disk_mb = -1;
  sqlite3_stmt *s =
      prep(st, "SELECT max_sandboxes, max_memory_mb, max_disk_mb FROM tenants WHERE name = ?", err);
  if (!s)
    return -1;
  sqlite3_bind_text(s, 1, tenant, -1, SQLITE_STATIC);
  int r = sqlite3_step(s);
  if (r == SQLITE_ROW) {
    q->max_sandboxes = sqlite3_column_int64(s, 0);
    q->max_memory_mb = sqlite3_column_int64(s, 1);
    q->max_disk_mb = sqlite3_column_int64(s, 2);
  }
  done(st, s);
  if (r == SQLITE_ROW)
    return 1;
  return r == SQLITE_DONE ? 0 : fail(st, err, "read tenant");
}

/* A sandbox's spec as JSON text (malloc'd), its tokens and secrets
 * sealed to its row. */
static char *spec_text(struct store *st, const char *id, json_t *spec) {
  json_t *copy = json_deep_copy(spec);
  if (!copy)
    return NULL;
  seal_spec(st, id, copy);
  char *text = json_dumps(copy, JSON_COMPACT);
  json_decref(copy);
  return text;
}

int store_sandbox_put(struct store *st, const struct store_row *row, struct hutch_err *err) {
  char *text = spec_text(st, row->id, row->spec);
  sqlite3_stmt *s = text ? prep(st,
                                "INSERT INTO sandboxes (id, tenant, template, spec, created_at,"
                                " expires_at, pid, isolation) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                                err)
                         : NULL;
  if (!s) {
    free(text);
    return text ? -1 : hutch_err_set(err, 0, "state store: encoding a sandbox");
  }
  sqlite3_bind_text(s, 1, row->id, -1, SQLITE_STATIC);
  sqlite3_bind_text(s, 2, row->tenant, -1, SQLITE_STATIC);
  sqlite3_bind_text(s, 3, row->template, -1, SQLITE_STATIC);
  sqlite3_bind_text(s, 4, text, -1, SQLITE_STATIC);
  sqlite3_bind_int64(s, 5, row->created_ms);
  sqlite3_bind_int64(s, 6, row->expires_ms);
  sqlite3_bind_int64(s, 7, row->pid);
  sqlite3_bind_text(s, 8, row->isolation, -1, SQLITE_STATIC);
  int r = step_done(st, s, err);
  free(text);
  return r;
}

int store_sandbox_respec(struct store *st, const struct store_row *row, struct hutch_err *err) {
  char *text = spec_text(st, row->id, row->spec);
  sqlite3_stmt *s =
      text ? prep(st, "UPDATE sandboxes SET spec = ?, expires_at = ? WHERE id = ?", err) : NULL;
  if (!s) {
    free(text);
    return text ? -1 : hutch_err_set(err, 0, "state store: encoding a sandbox");
  }
  sqlite3_bind_text(s, 1, text, -1, SQLITE_STATIC);
  sqlite3_bind_int64(s, 2, row->expires_ms);
  sqlite3_bind_text(s, 3, row->id, -1, SQLITE_STATIC);
  int r = step_done(st, s, err);
  free(text);
  return r;
}

int store_usage_add(struct store *st, const char *tenant, const struct usage_delta *d,
                    struct hutch_err *err) {
  sqlite3_stmt *s = prep(st,
                         "INSERT INTO usage (tenant, cpu_s, memory_gb_s, sandbox_s)"
                         " VALUES (?1, ?2, ?3, ?4) ON CONFLICT(tenant) DO UPDATE SET"
                         " cpu_s = cpu_s + ?2, memory_gb_s = memory_gb_s + ?3,"
                         " sandbox_s = sandbox_s + ?4",
                         err);
  if (!s)
    return -1;
  sqlite3_bind_text(s, 1, tenant, -1, SQLITE_STATIC);
  sqlite3_bind_double(s, 2, d->cpu_s);
  sqlite3_bind_double(s, 3, d->memory_gb_s);
  sqlite3_bind_double(s, 4, d->sandbox_s);
  return step_done(st, s, err);
}

int store_usage_get(struct store *st, const char *tenant, struct usage_delta *d,
                    struct hutch_err *err) {
  sqlite3_stmt *s =
      prep(st, "SELECT cpu_s, memory_gb_s, sandbox_s FROM usage WHERE tenant = ?", err);
  if (!s)
    return -1;
  sqlite3_bind_text(s, 1, tenant, -1, SQLITE_STATIC);
  memset(d, 0, sizeof *d);
  int r = sqlite3_step(s);
  if (r == SQLITE_ROW) {
    d->cpu_s = sqlite3_column_double(s, 0);
    d->memory_gb_s = sqlite3_column_double(s, 1);
    d->sandbox_s = sqlite3_column_double(s, 2);
  }
  done(st, s);
  return r == SQLITE_ROW || r == SQLITE_DONE ? 0 : fail(st, err, "read usage");
}

int store_sandbox_delete(struct store *st, const char *id, struct hutch_err *err) {
  return with_text(st, "DELETE FROM sandboxes WHERE id = ?", id, err);
}

int store_sandbox_expiry(struct store *st, const char *id, int64_t expires_ms,
                         struct hutch_err *err) {
  sqlite3_stmt *s = prep(st, "UPDATE sandboxes SET expires_at = ? WHERE id = ?", err);
  if (!s)
    return -1;
  sqlite3_bind_int64(s, 1, expires_ms);
  sqlite3_bind_text(s, 2, id, -1, SQLITE_STATIC);
  return step_done(st, s, err);
}

int store_sandbox_each(struct store *st, void (*fn)(const struct store_sandbox *, void *),
                       void *arg, struct hutch_err *err) {
  sqlite3_stmt *s = prep(st,
                         "SELECT id, tenant, template, spec, created_at, expires_at, pid,"
                         " isolation FROM sandboxes",
                         err);
  if (!s)
    return -1;

  /* Read them all first: fn may write to the table. */
  struct row {
    char *id, *tenant, *template;
    json_t *spec;
    int64_t created, expires, pid;
    char *isolation;
  } *rows = NULL;
  size_t n = 0;
  int r;
  while ((r = sqlite3_step(s)) == SQLITE_ROW) {
    rows = xrealloc(rows, (n + 1) * sizeof *rows);
    rows[n++] = (struct row){xstrdup((const char *)sqlite3_column_text(s, 0)),
                             xstrdup((const char *)sqlite3_column_text(s, 1)),
                             xstrdup((const char *)sqlite3_column_text(s, 2)),
                             json_loads((const char *)sqlite3_column_text(s, 3), 0, NULL),
                             sqlite3_column_int64(s, 4),
                             sqlite3_column_int64(s, 5),
                             sqlite3_column_int64(s, 6),
                             xstrdup((const char *)sqlite3_column_text(s, 7))};
  }
  done(st, s);
  int ret = r == SQLITE_DONE ? 0 : fail(st, err, "read sandboxes");

  for (size_t i = 0; i < n; i++) {
    if (ret == 0) {
      if (rows[i].spec)
        open_spec(st, rows[i].id, rows[i].spec);
      struct store_sandbox row = {rows[i].id,   rows[i].tenant,   rows[i].template,
                                  rows[i].spec, rows[i].created,  rows[i].expires,
                                  rows[i].pid,  rows[i].isolation};
      fn(&row, arg);
    }
    free(rows[i].id);
    free(rows[i].tenant);
    free(rows[i].template);
    free(rows[i].isolation);
    json_decref(rows[i].spec);
  }
  free(rows);
  return ret;
}

int store_snapshot_put(struct store *st, const struct store_snapshot *sn, struct hutch_err *err) {
  char *layers = json_dumps(sn->layers, JSON_COMPACT);
  sqlite3_stmt *s = layers ? prep(st,
                                  "INSERT INTO snapshots (id, tenant, name, source, layers,"
                                  " created_at, bytes, files, ephemeral, isolation)"
                                  " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                                  err)
                           : NULL;
  if (!s) {
    free(layers);
    return layers ? -1 : hutch_err_set(err, 0, "state store: encoding a snapshot");
  }

  sqlite3_bind_text(s, 1, sn->id, -1, SQLITE_STATIC);
  sqlite3_bind_text(s, 2, sn->tenant, -1, SQLITE_STATIC);
  sqlite3_bind_text(s, 3, sn->name, -1, SQLITE_STATIC);
  sqlite3_bind_text(s, 4, sn->source, -1, SQLITE_STATIC);
  sqlite3_bind_text(s, 5, layers, -1, SQLITE_STATIC);
  sqlite3_bind_int64(s, 6, sn->created_ms);
  sqlite3_bind_int64(s, 7, (sqlite3_int64)sn->bytes);
  sqlite3_bind_int64(s, 8, (sqlite3_int64)sn->files);
  sqlite3_bind_int(s, 9, sn->ephemeral);
  sqlite3_bind_text(s, 10, sn->isolation, -1, SQLITE_STATIC);

  int r = step_done(st, s, err);
  free(layers);
  return r;
}

int store_snapshot_delete(struct store *st, const char *id, struct hutch_err *err) {
  return with_text(st, "DELETE FROM snapshots WHERE id = ?", id, err);
}

int store_snapshot_each(struct store *st, const char *tenant,
                        void (*fn)(const struct store_snapshot *, void *), void *arg,
                        struct hutch_err *err) {
  /* Two statements, not "?1 IS NULL OR tenant = ?1", which SQLite
   * answers by reading every tenant's rows. */
  sqlite3_stmt *s = prep_text(st,
                              tenant ? "SELECT id, tenant, name, source, layers, created_at, bytes,"
                                       " files, ephemeral, isolation FROM snapshots"
                                       " WHERE tenant = ?1 ORDER BY created_at, id"
                                     : "SELECT id, tenant, name, source, layers, created_at, bytes,"
                                       " files, ephemeral, isolation FROM snapshots"
                                       " WHERE ?1 IS NULL ORDER BY created_at, id",
                              tenant, err);
  if (!s)
    return -1;

  int r;
  while ((r = sqlite3_step(s)) == SQLITE_ROW) {
    json_t *layers = json_loads((const char *)sqlite3_column_text(s, 4), 0, NULL);
    struct store_snapshot sn = {
        (const char *)sqlite3_column_text(s, 0), (const char *)sqlite3_column_text(s, 1),
        (const char *)sqlite3_column_text(s, 2), (const char *)sqlite3_column_text(s, 3),
        json_is_array(layers) ? layers : NULL,   sqlite3_column_int64(s, 5),
        (uint64_t)sqlite3_column_int64(s, 6),    (uint64_t)sqlite3_column_int64(s, 7),
        sqlite3_column_int(s, 8) != 0,           (const char *)sqlite3_column_text(s, 9)};
    if (sn.layers)
      fn(&sn, arg);
    json_decref(layers);
  }

  done(st, s);
  return r == SQLITE_DONE ? 0 : fail(st, err, "read snapshots");
}

int store_volume_put(struct store *st, const struct store_volume *v, struct hutch_err *err) {
  sqlite3_stmt *s = prep(st,
                         "INSERT INTO volumes (id, tenant, name, size_mb, created_at)"
                         " VALUES (?, ?, ?, ?, ?)",
                         err);
  if (!s)
    return -1;
  sqlite3_bind_text(s, 1, v->id, -1, SQLITE_STATIC);
  sqlite3_bind_text(s, 2, v->tenant, -1, SQLITE_STATIC);
  sqlite3_bind_text(s, 3, v->name, -1, SQLITE_STATIC);
  sqlite3_bind_int64(s, 4, (sqlite3_int64)v->size_mb);
  sqlite3_bind_int64(s, 5, v->created_ms);
  int r = sqlite3_step(s);
  done(st, s);
  if (r == SQLITE_CONSTRAINT)
    return 1;
  return r == SQLITE_DONE ? 0 : fail(st, err, "write");
}

int store_volume_delete(struct store *st, const char *id, struct hutch_err *err) {
  return with_text(st, "DELETE FROM volumes WHERE id = ?", id, err);
}

int store_volume_each(struct store *st, const char *tenant,
                      void (*fn)(const struct store_volume *, void *), void *arg,
                      struct hutch_err *err) {
  sqlite3_stmt *s = prep_text(st,
                              tenant ? "SELECT id, tenant, name, size_mb, created_at FROM volumes"
                                       " WHERE tenant = ?1 ORDER BY created_at, id"
                                     : "SELECT id, tenant, name, size_mb, created_at FROM volumes"
                                       " WHERE ?1 IS NULL ORDER BY created_at, id",
                              tenant, err);
  if (!s)
    return -1;
  int r;
  while ((r = sqlite3_step(s)) == SQLITE_ROW) {
    struct store_volume v = {(const char *)sqlite3_column_text(s, 0),
                             (const char *)sqlite3_column_text(s, 1),
                             (const char *)sqlite3_column_text(s, 2),
                             (uint64_t)sqlite3_column_int64(s, 3), sqlite3_column_int64(s, 4)};
    fn(&v, arg);
  }
  done(st, s);
  return r == SQLITE_DONE ? 0 : fail(st, err, "read volumes");
}

/* A secret's value is sealed to its id, as a sandbox's fields to its
 * row: a copy of hutch.db holds none in the clear. */
int store_secret_put(struct store *st, const struct store_secret *v, bool update,
                     struct hutch_err *err) {
  char aad[96];
  snprintf(aad, sizeof aad, "secret:%s", v->id);
  char *sealed = seal_text(st->key, aad, v->value);

  sqlite3_stmt *s =
      prep(st,
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
  done(st, s);
  free(sealed);
  if (r == SQLITE_CONSTRAINT)
    return 1;
  return r == SQLITE_DONE ? 0 : fail(st, err, "write");
}

int store_secret_delete(struct store *st, const char *id, struct hutch_err *err) {
  return with_text(st, "DELETE FROM secrets WHERE id = ?", id, err);
}

int store_secret_each(struct store *st, const char *tenant,
                      void (*fn)(const struct store_secret *, void *), void *arg,
                      struct hutch_err *err) {
  sqlite3_stmt *s =
      prep_text(st,
                "SELECT id, tenant, name, version, metadata, value, created_at,"
                " updated_at FROM secrets WHERE tenant = ?1 ORDER BY created_at, rowid",
                tenant, err);
  if (!s)
    return -1;

  int r;
  while ((r = sqlite3_step(s)) == SQLITE_ROW) {
    const char *id = (const char *)sqlite3_column_text(s, 0);
    char aad[96];
    snprintf(aad, sizeof aad, "secret:%s", id);
    char *value = seal_open(st->key, aad, (const char *)sqlite3_column_text(s, 5));

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

  done(st, s);
  return r == SQLITE_DONE ? 0 : fail(st, err, "read secrets");
}

int store_wal_pages(const struct store *st) {
  return st->wal_pages;
}

void store_release_memory(struct store *st) {
  sqlite3_db_release_memory(st->db);
}

int store_checkpoint(const char *path, int truncate_pages, struct hutch_err *err) {
  sqlite3 *db = NULL;
  int r = sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, NULL);
  if (r == SQLITE_OK) {
    sqlite3_busy_timeout(db, 1000);
    /* A connection learns that the file is in WAL mode only once it has
     * read it: until then a checkpoint finds no WAL and does nothing,
     * successfully (so the WAL grew without end, by every commit). */
    r = sqlite3_exec(db, "PRAGMA schema_version", NULL, NULL, NULL);
  }

  int frames = 0; /* in the WAL, copied or not */
  if (r == SQLITE_OK)
    r = sqlite3_wal_checkpoint_v2(db, NULL, SQLITE_CHECKPOINT_PASSIVE, &frames, NULL);

  /* A passive checkpoint catches up only when no commit comes while it
   * runs, and the WAL starts over only after one has: under commits closer
   * together than a checkpoint takes it grew until a lull. Past
   * truncate_pages, a TRUNCATE checkpoint takes the writers' lock, copies
   * what is left and empties the file; the loop's commits wait meanwhile
   * (its busy timeout): the last frames and two fsyncs. It also waits for
   * readers still on the WAL (an operator's sqlite3 shell, a backup) while
   * it holds that lock: 20 ms at most, then SQLITE_BUSY, and the server
   * leaves the WAL alone for a while. */
  bool busy = false;
  if (r == SQLITE_OK && frames > truncate_pages) {
    sqlite3_busy_timeout(db, 20);
    r = sqlite3_wal_checkpoint_v2(db, NULL, SQLITE_CHECKPOINT_TRUNCATE, NULL, NULL);
    busy = r == SQLITE_BUSY;
    if (busy)
      r = SQLITE_OK;
  }

  if (r != SQLITE_OK)
    hutch_err_set(err, 0, "state store %s: checkpoint: %s", path,
                  db ? sqlite3_errmsg(db) : "out of memory");
  sqlite3_close(db);
  if (r != SQLITE_OK)
    return -1;
  return busy ? 1 : 0;
}
