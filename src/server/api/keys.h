/* API keys over HTTP (keys.c): the caller's key read from a request's
 * headers, and the admin's POST /v1/keys, GET /v1/keys and DELETE /v1/keys/{id}. */
#ifndef HUTCH_API_KEYS_H
#define HUTCH_API_KEYS_H

struct server;
struct http_conn;
struct http_req;
struct principal;

#include <stdbool.h>
#include <stddef.h>

/* 1 and *p filled when the request carries a valid key (X-API-Key or
 * Authorization), 0 otherwise. */
int api_keys_authenticate(struct server *srv, const struct http_req *req, struct principal *p);
/* The same, or the key a browser's WebSocket handshake offers as the
 * subprotocol hutch.key.KEY: for the terminal's WebSocket route only. */
int api_keys_authenticate_ws(struct server *srv, const struct http_req *req, struct principal *p);
/* Whether the subprotocol token (n bytes) is one that carries a key. */
bool api_keys_ws_protocol(const char *token, size_t n);

/* The native API's route handlers (routes.c). */
void api_keys_create(struct http_conn *c, const struct principal *p);
void api_keys_delete(struct http_conn *c, const struct principal *p);
void api_keys_list(struct http_conn *c, const struct principal *p);

#endif
