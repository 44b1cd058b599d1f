/* The store's rows of the event stream (core/events/): each tenant's
 * webhooks, their secrets sealed, and named counters (the events'
 * reserved sequence numbers). */
#ifndef HUTCH_STORE_HOOKS_H
#define HUTCH_STORE_HOOKS_H

#include <stdint.h>

#include "err.h"

struct store;

struct store_webhook {
  const char *id, *tenant;
  const char *spec;   /* a JSON object's text: url, types, state */
  const char *secret; /* in the clear; NULL when it cannot be opened */
  int64_t created_ms;
};

/* Insert or replace the webhook's row (its secret sealed to its id). */
int store_webhook_put(struct store *st, const struct store_webhook *w, struct hutch_err *err);
int store_webhook_delete(struct store *st, const char *id, struct hutch_err *err);
/* Every webhook of every tenant, oldest first. */
int store_webhook_each(struct store *st, void (*fn)(const struct store_webhook *, void *),
                       void *arg, struct hutch_err *err);

/* A counter's value (0 when it has none yet), and a new one. */
int store_counter_get(struct store *st, const char *name, uint64_t *v, struct hutch_err *err);
int store_counter_put(struct store *st, const char *name, uint64_t v, struct hutch_err *err);

#endif
