/* SHA-256 digests in hex, and the WebSocket accept value, with libcrypto
 * (digest.h). */
#include "digest.h"

#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

#define WS_GUID "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

void digest_hex(const unsigned char sum[32], char hex[65]) {
  for (unsigned i = 0; i < 32; i++)
    snprintf(hex + 2 * i, 3, "%02x", sum[i]);
}

bool digest_sha256_hex(const void *data, size_t n, char hex[65]) {
  unsigned char sum[EVP_MAX_MD_SIZE];
  unsigned len = 0;
  if (!EVP_Digest(data, n, sum, &len, EVP_sha256(), NULL)) {
    hex[0] = '\0';
    return false;
  }
  digest_hex(sum, hex);
  return true;
}

bool digest_sha256_final_hex(EVP_MD_CTX *md, char hex[65]) {
  unsigned char sum[EVP_MAX_MD_SIZE];
  unsigned len = 0;
  if (!EVP_DigestFinal_ex(md, sum, &len)) {
    hex[0] = '\0';
    return false;
  }
  digest_hex(sum, hex);
  return true;
}

void digest_ws_accept(const char *key, char accept[32]) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned mdlen = 0;
  char *both = xasprintf("%s%s", key, WS_GUID);
  if (!EVP_Digest(both, strlen(both), md, &mdlen, EVP_sha1(), NULL))
    abort();
  free(both);
  EVP_EncodeBlock((unsigned char *)accept, md, (int)mdlen);
}
