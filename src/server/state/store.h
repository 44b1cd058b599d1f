/* The server's state in SQLite (state_dir/hutch.db): tenants, hashed API
 * keys, and the sandboxes the server runs. */
#ifndef HUTCH_STORE_H
#define HUTCH_STORE_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "err.h"

struct store;

#define SERVE_TENANT_LEN 64
#define SERVE_KEY_ID_LEN 16

/* Who a request speaks for: the tenant and key that a valid key is. */
struct principal {
  char tenant[SERVE_TENANT_LEN + 1];
  char key_id[SERVE_KEY_ID_LEN + 1];
  bool admin;
};

/* key: SEAL_KEY_LEN bytes (seal.h), which seal each sandbox's tokens and
 * secrets in its row. */
int store_open(const char *path, const unsigned char *key, struct store **out,
               struct hutch_err *err);
void store_close(struct store *st);

/* Commits append to the WAL and wait for no disk (journal_mode=WAL,
 * synchronous=NORMAL); a checkpoint, which copies the WAL into the
 * database, fsyncs both. So commits never run one (no autocheckpoint):
 * the server calls store_checkpoint, on a connection of its own, from a
 * thread off the loop, once store_wal_pages has grown. A PASSIVE
 * checkpoint takes no lock writers wait for: the loop's connection goes on
 * committing meanwhile, and reads see every commit as before. But the WAL
 * starts over only once a checkpoint has caught up with every commit,
 * which commits closer together than a checkpoint takes put off: when the
 * WAL holds more than truncate_pages, a TRUNCATE checkpoint follows, which
 * holds writers off for the rest and empties the file. 0, or 1 when a
 * reader kept the WAL from being emptied (it will be once the reader is
 * done), or -1 with err. */
int store_wal_pages(const struct store *st);
int store_checkpoint(const char *path, int truncate_pages, struct hutch_err *err);

/* Give the connection's page cache back (SQLite keeps up to 2 MiB of
 * pages read, which a crowd of sandboxes' rows fills): the reaper calls it
 * beside malloc_trim once sandboxes have ended. The pages are read again,
 * from the OS's cache, when next needed. */
void store_release_memory(struct store *st);

/* A key by the hash of its secret: 1 found (tenant, id, admin filled),
 * 0 not found, -1 error. */
int store_key_find(struct store *st, const char *hash, struct principal *p, struct hutch_err *err);
int store_key_add(struct store *st, const char *id, const char *tenant, const char *hash,
                  bool admin, struct hutch_err *err);
/* 1 removed, 0 no such key (or it is an admin key, which stays), -1 error. */
int store_key_delete(struct store *st, const char *id, struct hutch_err *err);
/* Every key, oldest first, as {id, tenant, admin, created_at (seconds),
 * max_sandboxes, max_memory_mb, max_disk_mb (null: the server's
 * default)}: never its secret nor its hash. NULL with err. */
json_t *store_keys_list(struct store *st, struct hutch_err *err);
/* Remove every admin key but the one with this hash. */
int store_admin_keep_only(struct store *st, const char *hash, struct hutch_err *err);

struct tenant_quota {
  int64_t max_sandboxes, max_memory_mb, max_disk_mb; /* -1: the server's default */
};
int store_tenant_put(struct store *st, const char *tenant, const struct tenant_quota *q,
                     struct hutch_err *err);
/* 1 found, 0 none (q set to defaults), -1 error. */
int store_tenant_get(struct store *st, const char *tenant, struct tenant_quota *q,
                     struct hutch_err *err);

/* A sandbox's row: its columns and its spec (what the next server needs to
 * take it over, core/sbx.c's sbx_spec), whose token, traffic_token and
 * secrets the store seals. */
struct store_row {
  const char *id, *tenant, *template;
  int64_t created_ms, expires_ms;
  int pid;
  json_t *spec;
  const char *isolation; /* its tier: "ns" or "gvisor" */
};
int store_sandbox_put(struct store *st, const struct store_row *row, struct hutch_err *err);
/* Its spec (pause state included) and expiry again. */
int store_sandbox_respec(struct store *st, const struct store_row *row, struct hutch_err *err);
int store_sandbox_delete(struct store *st, const char *id, struct hutch_err *err);
int store_sandbox_expiry(struct store *st, const char *id, int64_t expires_ms,
                         struct hutch_err *err);
/* What a tenant's sandboxes used while they ran (usage.c). */
struct usage_delta {
  double cpu_s, memory_gb_s, sandbox_s;
};
int store_usage_add(struct store *st, const char *tenant, const struct usage_delta *d,
                    struct hutch_err *err);
/* Zeros for a tenant with none. */
int store_usage_get(struct store *st, const char *tenant, struct usage_delta *d,
                    struct hutch_err *err);

/* Snapshots (snapshots.c): a sandbox's files as layers on disk. */
struct store_snapshot {
  const char *id, *tenant, *name, *source;
  json_t *layers; /* ids of the layers it stacks, its own first */
  int64_t created_ms;
  uint64_t bytes, files;
  bool ephemeral;        /* made for a fork: it goes when its last fork does */
  const char *isolation; /* the tier of the sandbox it was taken from */
};
int store_snapshot_put(struct store *st, const struct store_snapshot *s, struct hutch_err *err);
int store_snapshot_delete(struct store *st, const char *id, struct hutch_err *err);
/* Call fn for each snapshot (of tenant; NULL: every tenant's). */
int store_snapshot_each(struct store *st, const char *tenant,
                        void (*fn)(const struct store_snapshot *, void *), void *arg,
                        struct hutch_err *err);

/* Volumes (volumes.c): ext4 images in STATE/volumes, per tenant. */
struct store_volume {
  const char *id, *tenant, *name;
  uint64_t size_mb;
  int64_t created_ms;
};
/* 0, 1 when the tenant has a volume of that name already, -1 error. */
int store_volume_put(struct store *st, const struct store_volume *v, struct hutch_err *err);
int store_volume_delete(struct store *st, const char *id, struct hutch_err *err);
int store_volume_each(struct store *st, const char *tenant,
                      void (*fn)(const struct store_volume *, void *), void *arg,
                      struct hutch_err *err);

/* E2B's secrets (e2b/secrets.c), per tenant: the value sealed. */
struct store_secret {
  const char *id, *tenant, *name;
  int64_t version;
  const char *metadata; /* a JSON object's text */
  const char *value;    /* in the clear; NULL when it cannot be opened */
  int64_t created_ms, updated_ms;
};
/* Insert (or, update, replace version, metadata, value and updated_ms of
 * the tenant's secret id): 0, 1 when the tenant has one of that name
 * already, -1 error. */
int store_secret_put(struct store *st, const struct store_secret *v, bool update,
                     struct hutch_err *err);
int store_secret_delete(struct store *st, const char *id, struct hutch_err *err);
int store_secret_each(struct store *st, const char *tenant,
                      void (*fn)(const struct store_secret *, void *), void *arg,
                      struct hutch_err *err);

struct store_sandbox {
  const char *id, *tenant, *template;
  json_t *spec; /* metadata, env, limits, slot, token, lifecycle */
  int64_t created_ms, expires_ms, pid;
  const char *isolation; /* "ns", "gvisor" */
};
/* Call fn for every sandbox recorded (fn may delete rows). */
int store_sandbox_each(struct store *st, void (*fn)(const struct store_sandbox *, void *),
                       void *arg, struct hutch_err *err);

#endif
