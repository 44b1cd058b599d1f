/* Connect RPC framing over hutch's HTTP connections (connect.h), and the
 * base64 in which its JSON messages carry bytes. */

#include "http/connect.h"

#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"
#include "http/body.h"
#include "http/errors.h"
#include "http/http.h"

#define CONNECT_MESSAGE_MAX (1u << 20) /* one request message */

char *http_connect_envelope(uint8_t flags, json_t *j, size_t *len) {
  char *s = json_dumps(j, SERVE_JSON_FLAGS);
  json_decref(j);
  if (!s)
    abort(); /* out of memory: the values are ours */
  size_t n = strlen(s);
  char *e = xmalloc(n + 5);
  e[0] = (char)flags;
  e[1] = (char)(n >> 24);
  e[2] = (char)(n >> 16);
  e[3] = (char)(n >> 8);
  e[4] = (char)n;
  memcpy(e + 5, s, n);
  free(s);
  *len = n + 5;
  return e;
}

json_t *http_connect_message(const char *body, size_t n, int stream, char *why, size_t whylen) {
  if (stream) {
    /* Exactly one uncompressed envelope: what a client that offered no
     * compression sends. */
    const unsigned char *b = (const unsigned char *)body;
    size_t len = n >= 5 ? (size_t)b[1] << 24 | (size_t)b[2] << 16 | (size_t)b[3] << 8 | b[4] : 0;
    if (n < 5 || b[0] != 0 || len != n - 5 || len > CONNECT_MESSAGE_MAX) {
      snprintf(why, whylen,
               "a stream request is one uncompressed envelope (flags 0, a 4-byte length, JSON)");
      return NULL;
    }
    body += 5;
    n = len;
  }
  json_error_t e;
  json_t *j = json_loadb(body, n, 0, &e);
  if (!json_is_object(j)) {
    json_decref(j);
    snprintf(why, whylen, "the request message is not a JSON object: %s",
             j ? "another JSON value" : e.text);
    return NULL;
  }
  return j;
}

json_t *http_connect_request(struct http_conn *c, int stream) {
  struct http_req *r = &c->req;
  char why[256];
  json_t *j = http_connect_message(r->body ? r->body : "", r->body_len, stream, why, sizeof why);
  if (!j)
    http_error(c, HUTCH_ERR_INVALID, "bad_request", "%s", why);
  return j;
}

void http_connect_stream_start(struct http_conn *c, const struct http_stream_ops *ops, void *ctx) {
  http_stream_start(c, 200, "application/connect+json", ops, ctx);
}

void http_connect_send(struct http_conn *c, json_t *j) {
  size_t n;
  char *e = http_connect_envelope(0, j, &n);
  http_stream_send(c, e, n);
  free(e);
}

void http_connect_end(struct http_conn *c, const struct hutch_err *err) {
  size_t n;
  /* Its code from the one table (errors.c), as every other error's. */
  json_t *j = err ? json_pack("{s:{s:s,s:o}}", "error", "code",
                              http_connect_code(hutch_err_class(err), err->code), "message",
                              http_json_text(err->msg))
                  : json_object();
  char *e = http_connect_envelope(CONNECT_END_STREAM, j, &n);
  http_stream_send(c, e, n);
  free(e);
  http_stream_end(c);
}

char *http_b64_encode(const void *data, size_t n) {
  char *out = xmalloc(4 * ((n + 2) / 3) + 1);
  EVP_EncodeBlock((unsigned char *)out, data, (int)n);
  return out;
}

/* A character of the URL-safe alphabet in the standard one. */
static char b64_standard(char ch) {
  if (ch == '-')
    return '+';
  if (ch == '_')
    return '/';
  return ch;
}

int http_b64_decode(const char *s, uint8_t **out, size_t *n) {
  size_t len = strlen(s);
  while (len && s[len - 1] == '=')
    len--;
  /* Padding only at the end: EVP_DecodeBlock would take an '=' inside as
   * zero bits, so "Zm9v====Zg" would decode to "foo\0\0\0f". */
  if (len % 4 == 1 || memchr(s, '=', len))
    return -1;

  /* To the standard alphabet, padded, as EVP_DecodeBlock wants it. */
  size_t padded = (len + 3) / 4 * 4;
  char *std = xmalloc(padded + 1);
  for (size_t i = 0; i < len; i++)
    std[i] = b64_standard(s[i]);
  memset(std + len, '=', padded - len);
  std[padded] = '\0';

  *out = xmalloc(padded / 4 * 3 + 1);
  int r = EVP_DecodeBlock(*out, (unsigned char *)std, (int)padded);
  free(std);
  bool stray = padded && strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                   "0123456789+/-_=") != strlen(s);
  if (r < 0 || stray) {
    free(*out);
    *out = NULL;
    return -1;
  }
  *n = (size_t)r - (padded - len); /* EVP counts the padding as zero bytes */
  return 0;
}
