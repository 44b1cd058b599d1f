/* SHA-256 digests in hex, with libcrypto (digest.h). */
#include "digest.h"

#include <openssl/evp.h>
#include <stdio.h>

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
