/* E2B's upload URLs (tpltokens.h).
 *
 * The attack this file stops: a tenant asking for upload URLs in a loop.
 * Kept in one list, 200 000 of them held 40 MB, and each request walked
 * them all on the event loop, so that another tenant's GET /v1/sandboxes
 * took 0.3-0.8 s instead of under 1 ms. Now a tenant holds at most
 * TPLTOKENS_TENANT (its count is in its tally, found by its name), a
 * token is found through a hash table keyed by the token itself, and
 * expired tokens leave from the old end of a queue: every token lives
 * TPLTOKENS_LIFE_MS, so the order they were issued in is the order they
 * expire in, and collecting costs only what is collected. The table's
 * index is the token's own first 64 bits: the server draws tokens from
 * getrandom, so no client can choose which bucket one lands in, and a
 * claimed value that is not a token only picks a bucket to look in. */
#include "core/disk/tpltokens.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

#include "util.h"
#include "core/base/server.h"
#include "core/sandbox/tally.h"
#include "core/disk/templates.h"

#define TOKEN_LEN 40
#define BUCKETS_MIN 64

struct tpltoken {
  struct tpltoken *chain;         /* its bucket's */
  struct tpltoken *older, *newer; /* the queue, oldest first */
  char token[TOKEN_LEN + 1], tenant[65], hash[65];
  uint64_t expires_ns;
};

struct tpltokens {
  struct tpltoken **buckets;
  size_t nbuckets, n; /* nbuckets: a power of two */
  struct tpltoken *oldest, *newest;
};

static struct tpltokens *tokens_of(struct server *srv) {
  struct templates *t = templates_state(srv);
  if (!t->tokens) {
    t->tokens = xcalloc(1, sizeof *t->tokens);
    t->tokens->nbuckets = BUCKETS_MIN;
    t->tokens->buckets = xcalloc(BUCKETS_MIN, sizeof *t->tokens->buckets);
  }
  return t->tokens;
}

/* token's bucket: it is 40 lowercase hex digits (checked by the caller). */
static size_t bucket(const struct tpltokens *t, const char *token) {
  uint64_t h = 0;
  for (int i = 0; i < 16; i++)
    h = h << 4 | (uint64_t)(token[i] <= '9' ? token[i] - '0' : token[i] - 'a' + 10);
  return (size_t)(h & (t->nbuckets - 1));
}

static bool is_token(const char *s) {
  return strlen(s) == TOKEN_LEN && strspn(s, "0123456789abcdef") == TOKEN_LEN;
}

/* Twice the buckets once they hold two tokens each on average. */
static void grow(struct tpltokens *t) {
  if (t->n <= 2 * t->nbuckets)
    return;
  struct tpltoken **old = t->buckets;
  size_t nold = t->nbuckets;
  t->nbuckets *= 2;
  t->buckets = xcalloc(t->nbuckets, sizeof *t->buckets);
  for (size_t i = 0; i < nold; i++)
    while (old[i]) {
      struct tpltoken *k = old[i];
      old[i] = k->chain;
      size_t b = bucket(t, k->token);
      k->chain = t->buckets[b];
      t->buckets[b] = k;
    }
  free(old);
}

/* Out of its bucket and the queue, off its tenant's count, freed. */
static void drop(struct server *srv, struct tpltokens *t, struct tpltoken *k) {
  struct tpltoken **pp = &t->buckets[bucket(t, k->token)];
  while (*pp != k)
    pp = &(*pp)->chain;
  *pp = k->chain;

  if (k->older)
    k->older->newer = k->newer;
  else
    t->oldest = k->newer;
  if (k->newer)
    k->newer->older = k->older;
  else
    t->newest = k->older;

  t->n--;
  tally_tokens(srv, k->tenant, false);
  free(k);
}

static void collect(struct server *srv, struct tpltokens *t, uint64_t now) {
  while (t->oldest && t->oldest->expires_ns < now)
    drop(srv, t, t->oldest);
}

int tpltokens_issue(struct server *srv, const char *tenant, const char *hash, char out[41],
                    struct hutch_err *err) {
  struct tpltokens *t = tokens_of(srv);
  uint64_t now = now_ns();
  collect(srv, t, now);

  const struct tally *held = tally_of(srv, tenant);
  if (held && held->tokens >= TPLTOKENS_TENANT)
    return hutch_err_fail(err, HUTCH_ERR_QUOTA, "quota_exceeded",
                          "you hold %d upload URLs not yet used, the most a tenant may; upload "
                          "to them or wait for them to expire (%d minutes)",
                          TPLTOKENS_TENANT, TPLTOKENS_LIFE_MS / 60000);

  struct tpltoken *k = xcalloc(1, sizeof *k);
  random_hex(k->token, TOKEN_LEN);
  str_copy(k->tenant, sizeof k->tenant, tenant);
  str_copy(k->hash, sizeof k->hash, hash);
  k->expires_ns = now + (uint64_t)TPLTOKENS_LIFE_MS * 1000000;

  size_t b = bucket(t, k->token);
  k->chain = t->buckets[b];
  t->buckets[b] = k;
  k->older = t->newest;
  if (t->newest)
    t->newest->newer = k;
  else
    t->oldest = k;
  t->newest = k;
  t->n++;
  tally_tokens(srv, tenant, true);
  grow(t);

  memcpy(out, k->token, TOKEN_LEN + 1);
  return 0;
}

int tpltokens_claim(struct server *srv, const char *token, char tenant[65], char hash[65]) {
  struct tpltokens *t = tokens_of(srv);
  collect(srv, t, now_ns());
  if (!is_token(token))
    return -1;

  for (struct tpltoken *k = t->buckets[bucket(t, token)]; k; k = k->chain) {
    if (CRYPTO_memcmp(k->token, token, TOKEN_LEN) != 0)
      continue;
    memcpy(tenant, k->tenant, 65);
    memcpy(hash, k->hash, 65);
    drop(srv, t, k);
    return 0;
  }
  return -1;
}

void tpltokens_free(struct tpltokens *t) {
  if (!t)
    return;
  while (t->oldest) {
    struct tpltoken *k = t->oldest;
    t->oldest = k->newer;
    free(k);
  }
  free(t->buckets);
  free(t);
}
