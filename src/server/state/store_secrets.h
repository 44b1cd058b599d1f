/* E2B's secrets' rows in the store (store_secrets.c). */
#ifndef HUTCH_STORE_SECRETS_H
#define HUTCH_STORE_SECRETS_H

#include <stdbool.h>
#include <stdint.h>

#include "err.h"

struct store;

/* E2B's secrets (e2b/secrets.c), per tenant: the value sealed. */
struct store_secret {
  const char *id, *tenant, *name;
  int64_t version;
  const char *metadata; /* a JSON object's text */
  const char *value;    /* in the clear; NULL when it cannot be opened */
  int64_t created_ms, updated_ms;
};
/* Insert (or, update, replace version, metadata, value and updated_ms of
 * the tenant's secret id): 0, 1 when the tenant has one of that name
 * already, -1 error. */
int store_secret_put(struct store *st, const struct store_secret *v, bool update,
                     struct hutch_err *err);
int store_secret_delete(struct store *st, const char *id, struct hutch_err *err);
int store_secret_each(struct store *st, const char *tenant,
                      void (*fn)(const struct store_secret *, void *), void *arg,
                      struct hutch_err *err);

#endif
