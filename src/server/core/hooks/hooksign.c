/* A webhook delivery's signature (hooksign.h), with libcrypto's HMAC. */
#include "core/hooks/hooksign.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "util.h"

void hooksign(const char *secret, int64_t timestamp, const char *body, size_t len,
              char hex[65]) {
  char ts[24];
  size_t n = (size_t)snprintf(ts, sizeof ts, "%lld.", (long long)timestamp);
  unsigned char *msg = xmalloc(n + len + 1);
  memcpy(msg, ts, n);
  memcpy(msg + n, body, len);

  unsigned char mac[32];
  unsigned mlen = 0;
  HMAC(EVP_sha256(), secret, (int)strlen(secret), msg, n + len, mac, &mlen);
  free(msg);

  for (unsigned i = 0; i < 32; i++)
    snprintf(hex + 2 * i, 3, "%02x", mac[i]);
}
