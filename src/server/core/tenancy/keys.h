/* API keys and tenants. */
#ifndef HUTCH_CORE_TENANCY_KEYS_H
#define HUTCH_CORE_TENANCY_KEYS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "core/base/server.h"

struct server;
struct principal;
struct hutch_err;

/* keys.c: API keys and tenants. */
int keys_bootstrap(struct server *srv, struct hutch_err *err);
/* The key that seals the state store's tokens and secrets (SEAL_KEY_LEN
 * bytes, seal.h): STATE_DIR/state.key, made on first start. */
int keys_state_key(const char *state_dir, unsigned char *key, struct hutch_err *err);
/* 1 and *p filled when key (X-API-Key) or auth (Authorization: Bearer)
 * carries a valid key, 0 otherwise. */
int keys_check(struct server *srv, const char *key, const char *auth, struct principal *p);
/* A new key for a tenant, made with its quotas (each < 0: as they were). */
struct key_request {
  const char *tenant;
  int64_t max_sandboxes, max_memory_mb, max_disk_mb;
};
struct key_made {
  char id[SERVE_KEY_ID_LEN + 1];
  char key[44]; /* "hk_" and 40 hex digits */
};
int keys_create(struct server *srv, const struct key_request *r, struct key_made *out,
                struct hutch_err *err);
/* Every key as the admin may see it: id, tenant, admin, created_at and
 * the tenant's quotas (null: the server's default); never a secret. NULL
 * with err. */
json_t *keys_list(struct server *srv, struct hutch_err *err);
/* Key id no longer lets anyone in (the admin key cannot go: not_found). */
int keys_delete(struct server *srv, const char *id, struct hutch_err *err);
/* Whether an Authorization value carries something shaped as a key of
 * this server's (valid or not). */
bool keys_in_authorization(const char *value);

#endif
