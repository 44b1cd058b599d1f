/* API keys and tenants. */
#ifndef HUTCH_CORE_KEYS_H
#define HUTCH_CORE_KEYS_H

#include <stdbool.h>
#include <stddef.h>
#include "err.h"
#include "http/http.h"

struct server;
struct http_req;
struct principal;
struct hutch_err;

/* keys.c: API keys and tenants. */
/* nhex random hex digits and a NUL. */
void serve_random_hex(char *out, size_t nhex);
int keys_bootstrap(struct server *srv, struct hutch_err *err);
/* The key that seals the state store's tokens and secrets (SEAL_KEY_LEN
 * bytes, seal.h): STATE_DIR/state.key, made on first start. */
int keys_state_key(const char *state_dir, unsigned char *key, struct hutch_err *err);
/* 1 and *p filled when the request carries a valid key, 0 otherwise. */
int keys_authenticate(struct server *srv, const struct http_req *req, struct principal *p);
/* Whether an Authorization value carries something shaped as a key of
 * this server's (valid or not). */
bool keys_in_authorization(const char *value);

#endif
