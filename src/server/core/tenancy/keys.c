/* API keys and tenants. A key is "hk_" and 40 random hex digits; only its
 * SHA-256 is stored, so the database alone lets no one in. E2B's SDKs may
 * check for their own prefix: "e2b_" and the same digits is the same key. The admin key
 * is written to STATE_DIR/admin.key (0600) on first start and kept there;
 * so is the state key (state.key), which seals what the database keeps of
 * sandboxes' tokens and secrets (seal.h, store.c). */
#include "core/tenancy/keys.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cleanup.h"
#include "digest.h"
#include "util.h"
#include "core/base/server.h"
#include "state/seal.h"
#include "state/store.h"

#define KEY_PREFIX "hk_"
#define KEY_HEX 40
#define KEY_LEN (sizeof KEY_PREFIX - 1 + KEY_HEX)
#define HASH_HEX 64
#define HEX "0123456789abcdef"

static void hash_key(const char *key, char out[HASH_HEX + 1]) {
  if (!digest_sha256_hex(key, strlen(key), out))
    abort();
}

static bool well_formed(const char *key) {
  if (strlen(key) != KEY_LEN || strncmp(key, KEY_PREFIX, sizeof KEY_PREFIX - 1) != 0)
    return false;
  return strspn(key + sizeof KEY_PREFIX - 1, "0123456789abcdef") == KEY_HEX;
}

static void new_key(char key[KEY_LEN + 1]) {
  memcpy(key, KEY_PREFIX, sizeof KEY_PREFIX - 1);
  random_hex(key + sizeof KEY_PREFIX - 1, KEY_HEX);
}

/* The first line of a secret file of the state dir ("" when there is
 * none), at most size - 2 bytes of it. */
static int read_secret(const char *path, char *buf, size_t size, struct hutch_err *err) {
  buf[0] = '\0';
  _cleanup_close_ int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return errno == ENOENT ? 0 : hutch_err_set(err, errno, "%s", path);
  /* Left readable to others by a copy or an older hutch: not any more. */
  if (fchmod(fd, 0600) < 0)
    return hutch_err_set(err, errno, "chmod %s", path);
  ssize_t n = read_all(fd, buf, size - 1);
  buf[n > 0 ? n : 0] = '\0';
  buf[strcspn(buf, "\n")] = '\0';
  return 0;
}

/* Written to a temporary name and renamed: a crash leaves the old secret or
 * the new one, never half of one. */
static int write_secret(const char *path, const char *text, struct hutch_err *err) {
  _cleanup_free_ char *tmp = xasprintf("%s.tmp", path);
  unlink(tmp);
  _cleanup_close_ int out = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (out < 0)
    return hutch_err_set(err, errno, "writing %s", path);
  if (write_all(out, text, strlen(text)) < 0)
    return hutch_err_set(err, errno, "writing %s", path);
  if (write_all(out, "\n", 1) < 0)
    return hutch_err_set(err, errno, "writing %s", path);
  if (fsync(out) < 0)
    return hutch_err_set(err, errno, "writing %s", path);
  if (rename(tmp, path) < 0)
    return hutch_err_set(err, errno, "writing %s", path);
  return 0;
}

/* The cache of keys found (server.h), in front of the store's lookup.
 * Only keys the store found are kept: an unknown key is looked up every
 * time. Caching refusals would let anyone with random keys evict the
 * keys in use, and would have to be forgotten when a key is made; a
 * refusal costing one lookup is fine. What a cached key speaks for
 * (tenant, key id, admin) never changes while the key exists, so the
 * one thing that must reach the cache is a key going away: every path
 * that deletes keys calls cache_forget or cache_clear, and a deleted key
 * is refused from the very next request. */
static struct key_cache_slot *cache_slot(struct server *srv, const char *hash) {
  if (!srv->key_cache)
    srv->key_cache = xcalloc(KEY_CACHE_SLOTS, sizeof *srv->key_cache);
  /* A SHA-256's leading digits are as good an index as any. */
  char lead[9];
  memcpy(lead, hash, 8);
  lead[8] = '\0';
  return &srv->key_cache[strtoul(lead, NULL, 16) % KEY_CACHE_SLOTS];
}

static bool cache_find(struct server *srv, const char *hash, struct principal *p) {
  struct key_cache_slot *s = cache_slot(srv, hash);
  if (s->hash[0] == '\0' || memcmp(s->hash, hash, HASH_HEX) != 0)
    return false;
  *p = s->p;
  return true;
}

static void cache_put(struct server *srv, const char *hash, const struct principal *p) {
  struct key_cache_slot *s = cache_slot(srv, hash);
  memcpy(s->hash, hash, HASH_HEX + 1);
  s->p = *p;
}

static void cache_forget(struct server *srv, const char *key_id) {
  for (size_t i = 0; srv->key_cache && i < KEY_CACHE_SLOTS; i++)
    if (srv->key_cache[i].hash[0] != '\0' && strcmp(srv->key_cache[i].p.key_id, key_id) == 0)
      memset(&srv->key_cache[i], 0, sizeof srv->key_cache[i]);
}

static void cache_clear(struct server *srv) {
  if (srv->key_cache)
    memset(srv->key_cache, 0, KEY_CACHE_SLOTS * sizeof *srv->key_cache);
}

/* The admin key in admin.key if it is there and well formed, else a new
 * one written there. Either way it becomes the only admin key. */
int keys_bootstrap(struct server *srv, struct hutch_err *err) {
  _cleanup_free_ char *path = xasprintf("%s/admin.key", srv->cfg.state_dir);
  char key[KEY_LEN + 2];
  if (read_secret(path, key, sizeof key, err) < 0)
    return -1;

  char hash[HASH_HEX + 1];
  struct principal p;
  if (well_formed(key)) {
    hash_key(key, hash);
    int r = store_key_find(srv->store, hash, &p, err);
    if (r < 0)
      return -1;
    if (r == 1 && p.admin) {
      cache_clear(srv);
      return store_admin_keep_only(srv->store, hash, err);
    }
  } else {
    new_key(key);
    hash_key(key, hash);
  }

  char id[SERVE_KEY_ID_LEN + 1];
  random_hex(id, SERVE_KEY_ID_LEN);
  cache_clear(srv);
  if (store_key_add(srv->store, id, "admin", hash, true, err) < 0)
    return -1;
  if (store_admin_keep_only(srv->store, hash, err) < 0)
    return -1;

  return write_secret(path, key, err);
}

int keys_state_key(const char *state_dir, unsigned char *key, struct hutch_err *err) {
  _cleanup_free_ char *path = xasprintf("%s/state.key", state_dir);
  char hex[2 * SEAL_KEY_LEN + 2];
  if (read_secret(path, hex, sizeof hex, err) < 0)
    return -1;
  if (strlen(hex) != 2 * SEAL_KEY_LEN || strspn(hex, HEX) != 2 * SEAL_KEY_LEN) {
    /* None yet (or unusable: what it sealed cannot be opened either way). */
    random_hex(hex, 2 * SEAL_KEY_LEN);
    if (write_secret(path, hex, err) < 0)
      return -1;
  }
  for (size_t i = 0; i < SEAL_KEY_LEN; i++)
    key[i] =
        (unsigned char)((strchr(HEX, hex[2 * i]) - HEX) << 4 | (strchr(HEX, hex[2 * i + 1]) - HEX));
  explicit_bzero(hex, sizeof hex);
  return 0;
}

bool keys_in_authorization(const char *value) {
  if (strncasecmp(value, "Bearer ", 7) != 0)
    return false;
  const char *key = value + 7;
  char as_hutch[KEY_LEN + 1];
  if (strncmp(key, "e2b_", 4) == 0 && strlen(key) == KEY_LEN + 1) {
    snprintf(as_hutch, sizeof as_hutch, "%s%s", KEY_PREFIX, key + 4);
    key = as_hutch;
  }
  return well_formed(key);
}

int keys_check(struct server *srv, const char *key, const char *auth, struct principal *p) {
  if (!key && auth && strncasecmp(auth, "Bearer ", 7) == 0)
    key = auth + 7;
  char as_hutch[KEY_LEN + 1];
  if (key && strncmp(key, "e2b_", 4) == 0 && strlen(key) == KEY_LEN + 1) {
    snprintf(as_hutch, sizeof as_hutch, "%s%s", KEY_PREFIX, key + 4);
    key = as_hutch;
  }
  if (!key || !well_formed(key))
    return 0;

  char hash[HASH_HEX + 1];
  hash_key(key, hash);
  if (cache_find(srv, hash, p))
    return 1;

  struct hutch_err err = {0};
  int r = store_key_find(srv->store, hash, p, &err);
  if (r < 0)
    fprintf(stderr, "hutch serve: %s\n", err.msg);
  if (r == 1)
    cache_put(srv, hash, p);
  return r == 1;
}

/* A tenant name: letters, digits, '-', '_', '.', 1 to 64 of them. */
static bool tenant_name_ok(const char *t) {
  size_t n = strlen(t);
  return n >= 1 && n <= SERVE_TENANT_LEN &&
         strspn(t, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.") == n;
}

int keys_create(struct server *srv, const struct key_request *r, struct key_made *out,
                struct hutch_err *err) {
  if (!r->tenant || !tenant_name_ok(r->tenant))
    return hutch_err_fail(err, HUTCH_ERR_INVALID, "invalid_argument",
                          "tenant must be 1 to %d letters, digits, '-', '_' or '.'",
                          SERVE_TENANT_LEN);
  if (strcmp(r->tenant, "admin") == 0)
    return hutch_err_fail(err, HUTCH_ERR_INVALID, "invalid_argument",
                          "tenant 'admin' is the admin key's own");

  struct tenant_quota q;
  if (store_tenant_get(srv->store, r->tenant, &q, err) < 0)
    return -1;
  if (r->max_sandboxes >= 0)
    q.max_sandboxes = r->max_sandboxes;
  if (r->max_memory_mb >= 0)
    q.max_memory_mb = r->max_memory_mb;
  if (r->max_disk_mb >= 0)
    q.max_disk_mb = r->max_disk_mb;

  char hash[HASH_HEX + 1];
  new_key(out->key);
  hash_key(out->key, hash);
  random_hex(out->id, SERVE_KEY_ID_LEN);

  if (store_tenant_put(srv->store, r->tenant, &q, err) < 0)
    return -1;
  if (store_key_add(srv->store, out->id, r->tenant, hash, false, err) < 0)
    return -1;
  return 0;
}

int keys_delete(struct server *srv, const char *id, struct hutch_err *err) {
  int r = store_key_delete(srv->store, id, err);
  /* Forgotten on an error too: the row may be gone all the same. */
  if (r != 0)
    cache_forget(srv, id);
  if (r == 0)
    return hutch_err_fail(err, HUTCH_ERR_NOT_FOUND, "not_found",
                          "no key %s (the admin key cannot be deleted)", id);
  return r < 0 ? -1 : 0;
}

json_t *keys_list(struct server *srv, struct hutch_err *err) {
  json_t *a = store_keys_list(srv->store, err), *k;
  size_t i;
  json_array_foreach(a, i, k) {
    char when[32];
    iso8601(json_integer_value(json_object_get(k, "created_at")) * 1000, when);
    json_object_set_new(k, "created_at", json_string(when));
  }
  return a;
}
