/* SHA-256 digests written as 64 lowercase hex digits, and the one SHA-1
 * a WebSocket's handshake asks for. It needs OpenSSL's libcrypto, so only
 * the programs that link it build digest.c (hutch serve, hutch-template and
 * hutch-ctl: meson.build), never the static agent. */
#ifndef HUTCH_DIGEST_H
#define HUTCH_DIGEST_H

#include <openssl/types.h>
#include <stdbool.h>
#include <stddef.h>

/* The 32 bytes of a SHA-256 sum as hex, NUL-terminated. */
void digest_hex(const unsigned char sum[32], char hex[65]);

/* The SHA-256 of data[0..n) as hex. False when OpenSSL fails, hex then
 * empty. */
bool digest_sha256_hex(const void *data, size_t n, char hex[65]);

/* Finish md, a SHA-256 context fed by the caller, and write its sum as
 * hex. False when OpenSSL fails, hex then empty. md is not freed. */
bool digest_sha256_final_hex(EVP_MD_CTX *md, char hex[65]);

/* The Sec-WebSocket-Accept a Sec-WebSocket-Key asks for (RFC 6455
 * section 4.2.2: base64 of the SHA-1 of the key and the protocol's GUID):
 * 28 characters and the NUL. */
void digest_ws_accept(const char *key, char accept[32]);

#endif
