/* AES-256-GCM sealing of the state store's secrets (seal.h): a value sealed
 * under the state key, and opened again. */

#include "state/seal.h"

#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "util.h"

#define PREFIX "s1:"
#define NONCE 12
#define TAG 16

static void to_hex(const unsigned char *in, size_t n, char *out) {
  for (size_t i = 0; i < n; i++) {
    out[2 * i] = "0123456789abcdef"[in[i] >> 4];
    out[2 * i + 1] = "0123456789abcdef"[in[i] & 15];
  }
  out[2 * n] = '\0';
}

static int nibble(char c) {
  if (c >= '0' && c <= '9')
    return c - '0';
  return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* n bytes from 2n hex digits; -1 when one is not a digit. */
static int from_hex(const char *in, size_t n, unsigned char *out) {
  for (size_t i = 0; i < n; i++) {
    int hi = nibble(in[2 * i]), lo = nibble(in[2 * i + 1]);
    if (hi < 0 || lo < 0)
      return -1;
    out[i] = (unsigned char)(hi << 4 | lo);
  }
  return 0;
}

/* gcm's steps on ctx, in order: 0, or -1 at the first that fails. */
static int gcm_steps(EVP_CIPHER_CTX *ctx, int enc, const unsigned char *key,
                     const unsigned char nonce[NONCE], const char *aad, const unsigned char *in,
                     int n, unsigned char *out, unsigned char tag[TAG]) {
  int len = 0;
  if (!EVP_CipherInit_ex(ctx, EVP_aes_256_gcm(), NULL, key, nonce, enc))
    return -1;
  if (!EVP_CipherUpdate(ctx, NULL, &len, (const unsigned char *)aad, (int)strlen(aad)))
    return -1;
  if (n != 0 && !EVP_CipherUpdate(ctx, out, &len, in, n))
    return -1;
  /* Decrypting, the tag is given before the final step, which checks it;
   * encrypting, it is taken after. */
  if (!enc && !EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_TAG, TAG, tag))
    return -1;
  if (!EVP_CipherFinal_ex(ctx, out + (n ? len : 0), &len))
    return -1;
  if (enc && !EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, TAG, tag))
    return -1;
  return 0;
}

/* Encrypt (enc 1) or decrypt n bytes of in to out with tag; 0 or -1 (a
 * wrong key, aad or tag). */
static int gcm(int enc, const unsigned char *key, const unsigned char nonce[NONCE], const char *aad,
               const unsigned char *in, int n, unsigned char *out, unsigned char tag[TAG]) {
  EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();
  int r = ctx ? gcm_steps(ctx, enc, key, nonce, aad, in, n, out, tag) : -1;
  EVP_CIPHER_CTX_free(ctx);
  return r;
}

char *seal_text(const unsigned char key[SEAL_KEY_LEN], const char *aad, const char *plain) {
  size_t n = strlen(plain);
  unsigned char *raw = xmalloc(NONCE + n + TAG);

  /* A random 96-bit nonce for each value: far fewer values are ever sealed
   * under one key than would make two nonces meet. Without randomness or
   * AES nothing can be stored safely. */
  if (getrandom(raw, NONCE, 0) != NONCE)
    abort();
  const unsigned char *in = (const unsigned char *)plain;
  if (gcm(1, key, raw, aad, in, (int)n, raw + NONCE, raw + NONCE + n) < 0)
    abort();

  char *out = xmalloc(sizeof PREFIX + 2 * (NONCE + n + TAG));
  memcpy(out, PREFIX, sizeof PREFIX - 1);
  to_hex(raw, NONCE + n + TAG, out + sizeof PREFIX - 1);
  free(raw);
  return out;
}

/* The hex of total bytes (nonce, ciphertext, tag) into raw, and their
 * text into plain: 0, or -1 when it is no hex, was not sealed under key
 * for aad, or holds a NUL. */
static int unseal(const unsigned char *key, const char *aad, const char *hex, size_t total,
                  unsigned char *raw, char *plain) {
  size_t n = total - NONCE - TAG;
  if (from_hex(hex, total, raw) < 0)
    return -1;
  if (gcm(0, key, raw, aad, raw + NONCE, (int)n, (unsigned char *)plain, raw + NONCE + n) < 0)
    return -1;
  if (memchr(plain, '\0', n))
    return -1;
  return 0;
}

char *seal_open(const unsigned char key[SEAL_KEY_LEN], const char *aad, const char *sealed) {
  size_t hex = strlen(sealed);
  if (strncmp(sealed, PREFIX, sizeof PREFIX - 1) != 0)
    return NULL;
  hex -= sizeof PREFIX - 1;
  if (hex % 2 || hex / 2 < NONCE + TAG || hex / 2 > (1u << 24))
    return NULL;
  size_t total = hex / 2, n = total - NONCE - TAG;

  unsigned char *raw = xmalloc(total);
  char *plain = xmalloc(n + 1);
  int r = unseal(key, aad, sealed + sizeof PREFIX - 1, total, raw, plain);
  free(raw);
  if (r < 0) {
    free(plain);
    return NULL;
  }
  plain[n] = '\0';
  return plain;
}
