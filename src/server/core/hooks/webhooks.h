/* Webhooks (docs/events.md): each tenant's URLs that the event stream is
 * POSTed to, signed (hooksign.h), in order per webhook, retried with a
 * backoff, refused by the egress deny floor at create time and again at
 * every connect (hookwire.h), disabled after failing event after event.
 * Kept in the store (state/store_hooks.h), the secret sealed.
 *
 * A webhook is a cursor into the event ring, like a follower of
 * /v1/events: its next event, attempted until it is delivered or its
 * tries are spent, then the next. What the ring drops before a webhook
 * reached it (a receiver down for longer than the ring's retention) is
 * counted as skipped in its delivery log, never queued without bound.
 * A webhook made by the admin key hears every tenant's events; any other
 * only its own tenant's. */
#ifndef HUTCH_CORE_HOOKS_WEBHOOKS_H
#define HUTCH_CORE_HOOKS_WEBHOOKS_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "err.h"

struct server;
struct principal;

#define WEBHOOKS_TENANT_MAX 16 /* webhooks of one tenant */
#define WEBHOOK_URL_MAX 2048
#define WEBHOOK_LOG_MAX 20        /* attempts kept in a webhook's delivery log */
#define WEBHOOK_TRIES 6           /* attempts of one event: backoff, 2x, 4x ... between */
#define WEBHOOK_DISABLE_AFTER 5   /* events failed in a row before it is disabled */
#define WEBHOOK_TIMEOUT_MS 10000  /* one attempt's, unless --webhook-timeout-ms */
#define WEBHOOK_BACKOFF_MS 1000   /* the first retry's wait, unless --webhook-backoff-ms */

/* Load the store's webhooks and start the delivery thread. */
int webhooks_open(struct server *srv, struct hutch_err *err);
/* Stop deliveries (at the server's stop, before its handles close). */
void webhooks_stop(struct server *srv);

/* What a create asks: url, types (an array of strings, or NULL: all),
 * secret (NULL: one is made). done hears the new webhook's view (with
 * its secret, shown this once) or why not; it may be called before
 * webhooks_create returns. -1 and err when refused at once. */
typedef void (*webhook_made_fn)(json_t *view, const struct hutch_err *err, void *arg);
int webhooks_create(struct server *srv, const struct principal *p, const char *url, json_t *types,
                    const char *secret, webhook_made_fn done, void *arg, struct hutch_err *err);

/* The tenant's webhooks (every tenant's for the admin), without secrets. */
json_t *webhooks_list(struct server *srv, const struct principal *p);
/* One, with its delivery log; NULL and err (not_found) when it is not p's. */
json_t *webhooks_get(struct server *srv, const struct principal *p, const char *id,
                     struct hutch_err *err);
int webhooks_delete(struct server *srv, const struct principal *p, const char *id,
                    struct hutch_err *err);

#endif
