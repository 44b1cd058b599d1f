/* envd's signed file URLs: what an SDK's downloadUrl and uploadUrl make,
 * GET or POST /files?path=&username=&signature=v1_…[&signature_expiration=T],
 * usable without the access token. The signature is
 *
 *   "v1_" + base64(sha256("PATH:OP:USER:TOKEN[:T]")) without its "=" padding
 *
 * (OP "read" for GET, "write" for POST; PATH and USER as the query has
 * them, "" when absent; T unix seconds). Only a holder of the sandbox's
 * access token can make one, so a signature authenticates as the token
 * does. A URL made with E2B_SANDBOX_URL names no sandbox at all (the SDKs
 * put it in the host, here the server's own): the sandbox is then the one
 * whose token the signature was made with. */
#include "e2b/signing.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/sha.h>

#include "util.h"
#include "api/lifecycle.h"
#include "core/sandbox/sbx.h"
#include "core/base/server.h"
#include "core/run/files.h"
#include "http/errors.h"
#include "http/http.h"
#include "http/request.h"

#define SIGNATURE_MAX 64 /* "v1_" and 43 characters of base64 */

/* The signature sb's token makes for this request, into out. */
static void expected(const struct http_req *req, const struct sbx *sb, const char *path,
                     const char *user, const char *exp, char out[SIGNATURE_MAX]) {
  char *raw = xasprintf("%s:%s:%s:%s%s%s", path, req->method == HTTP_POST ? "write" : "read", user,
                        sb->token, exp ? ":" : "", exp ? exp : "");
  unsigned char hash[SHA256_DIGEST_LENGTH];
  SHA256((const unsigned char *)raw, strlen(raw), hash);
  free(raw);
  memcpy(out, "v1_", 3);
  int n = EVP_EncodeBlock((unsigned char *)out + 3, hash, sizeof hash);
  while (n > 0 && out[3 + n - 1] == '=')
    n--;
  out[3 + n] = '\0';
}

/* Whether the request's signature is sb's: compared in constant time. */
static bool matches(const struct http_req *req, const struct sbx *sb, const char *sig,
                    const char *path, const char *user, const char *exp) {
  char want[SIGNATURE_MAX];
  expected(req, sb, path, user, exp, want);
  size_t n = strlen(want);
  return strlen(sig) == n && CRYPTO_memcmp(sig, want, n) == 0;
}

/* What the query carries; false when there is no signature. */
struct signed_query {
  char *sig, *path, *user, *exp;
};

static bool signed_query(const struct http_req *req, struct signed_query *q) {
  q->sig = http_query(req, "signature");
  q->path = http_query(req, "path");
  q->user = http_query(req, "username");
  q->exp = http_query(req, "signature_expiration");
  return q->sig != NULL;
}

/* Whether it can be a signature at all, before one hash a live sandbox is
 * spent on it (the request carries no key): "v1_" and 43 characters, a
 * path a file action takes, a user's name, an expiry of digits. */
static bool plausible(const struct signed_query *q) {
  return strlen(q->sig) == 46 && strncmp(q->sig, "v1_", 3) == 0 &&
         (!q->path || strlen(q->path) <= FILES_PATH_MAX) && (!q->user || strlen(q->user) <= 64) &&
         (!q->exp || (strlen(q->exp) <= 20 && strspn(q->exp, "0123456789") == strlen(q->exp)));
}

static void signed_query_free(struct signed_query *q) {
  free(q->sig);
  free(q->path);
  free(q->user);
  free(q->exp);
}

/* A matched signature that is still good: true, or false after a 401. */
static bool in_time(struct http_conn *c, const struct signed_query *q) {
  if (!q->exp)
    return true;
  char *end;
  long long t = strtoll(q->exp, &end, 10);
  if (*end || end == q->exp) {
    http_error(c, HUTCH_ERR_UNAUTHENTICATED, "unauthorized", "signature_expiration is not a time");
    return false;
  }
  if (t < (long long)time(NULL)) {
    http_error(c, HUTCH_ERR_UNAUTHENTICATED, "unauthorized", "signature is already expired");
    return false;
  }
  return true;
}

int e2b_signature_check(struct http_conn *c, const struct sbx *sb) {
  struct signed_query q;
  int r = 0;
  if (signed_query(&c->req, &q)) {
    r = matches(&c->req, sb, q.sig, q.path ? q.path : "", q.user ? q.user : "", q.exp) ? 1 : -1;
    if (r < 0)
      http_error(c, HUTCH_ERR_UNAUTHENTICATED, "unauthorized", "invalid signature");
    else if (!in_time(c, &q))
      r = -1;
  }
  signed_query_free(&q);
  return r;
}

struct sbx *e2b_signed_sandbox(struct http_conn *c) {
  struct signed_query q;
  struct sbx *found = NULL;
  if (signed_query(&c->req, &q) && plausible(&q)) {
    const char *path = q.path ? q.path : "", *user = q.user ? q.user : "";
    for (struct sbx *s = c->srv->sandboxes; s && !found; s = s->next)
      if (!s->dying && matches(&c->req, s, q.sig, path, user, q.exp))
        found = s;
  }

  if (!found)
    http_error(c, HUTCH_ERR_UNAUTHENTICATED, "unauthorized",
               q.sig ? "invalid signature"
                     : "a signature (signature=) or the sandbox's headers are required");
  else if (!in_time(c, &q))
    found = NULL;
  else if (!api_sbx_wake(c, found))
    found = NULL;
  signed_query_free(&q);
  return found;
}
