/* Connect RPC (connectrpc.com/docs/protocol) with the JSON codec, as E2B's
 * envd speaks it: a unary call is a JSON body each way; a server stream
 * is one enveloped request and, back, enveloped messages ending with an
 * end-of-stream envelope. An envelope is a flags byte, a 4-byte big-endian
 * length and that many bytes of JSON. */
#ifndef HUTCH_CONNECT_H
#define HUTCH_CONNECT_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#define CONNECT_END_STREAM 0x02
#define CONNECT_COMPRESSED 0x01

struct http_conn;
struct hutch_err;
struct http_stream_ops;

/* j as one envelope (malloc'd, *len set); takes j's reference. */
char *http_connect_envelope(uint8_t flags, json_t *j, size_t *len);

/* The request message of a call: the body (unary), or the one envelope
 * it holds (stream). NULL after an error answer. */
json_t *http_connect_request(struct http_conn *c, int stream);
/* http_connect_request's parsing, without the connection: the JSON object in
 * body[0..n), or NULL with why (whylen bytes) set to the reason. A stream's
 * body must be exactly one envelope with flags 0 (no compression). */
json_t *http_connect_message(const char *body, size_t n, int stream, char *why, size_t whylen);

/* A server stream: the 200 head, messages (each takes j), then the end
 * (err NULL: success; else Connect's code for its kind), which ends the
 * response. */
void http_connect_stream_start(struct http_conn *c, const struct http_stream_ops *ops, void *ctx);
void http_connect_send(struct http_conn *c, json_t *j);
void http_connect_end(struct http_conn *c, const struct hutch_err *err);

/* Standard base64 with padding (malloc'd). */
char *http_b64_encode(const void *data, size_t n);
/* Decode standard or URL-safe base64, padded or not; -1 when malformed.
 * *out is malloc'd. */
int http_b64_decode(const char *s, uint8_t **out, size_t *n);

#endif
