/* A webhook delivery's signature (docs/events.md, "Verifying a
 * delivery"): HMAC-SHA256 under the webhook's secret over
 * "TIMESTAMP.BODY", as Stripe and Standard Webhooks sign theirs, sent as
 * X-Hutch-Signature: sha256=HEX beside X-Hutch-Timestamp. The timestamp
 * inside the MAC lets a receiver refuse a replayed old delivery. */
#ifndef HUTCH_CORE_HOOKS_HOOKSIGN_H
#define HUTCH_CORE_HOOKS_HOOKSIGN_H

#include <stddef.h>
#include <stdint.h>

/* The 64 lowercase hex digits of the MAC, into hex (65 bytes with its
 * NUL). */
void hooksign(const char *secret, int64_t timestamp, const char *body, size_t len,
              char hex[65]);

#endif
