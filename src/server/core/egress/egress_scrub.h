/* What a host that got a secret answers, kept from handing the secret
 * back to the sandbox (docs/network.md, "What a host can hand back").
 *
 * The egress proxy adds a secret to a request the sandbox wrote; a host
 * that reflects request headers (an echo service, a debugging endpoint,
 * a proxy that copies them into its answer) would give the value to the
 * very workload it was kept from. So the heads of the answer to that
 * request (any 1xx, and the final one), and a chunked body's trailers,
 * go through here before the sandbox sees a byte of them: they are
 * parsed and written anew, and a
 * header whose name or value carries a secret — as it was sent, any
 * word of it of 8 bytes or more, or either of those in base64 or
 * base64url, in any case — is left out, as is a status text that carries
 * one (the standard text is sent instead). Writing the head anew means
 * the sandbox's client reads exactly the headers checked, not its own
 * reading of odd bytes (folded lines, bare LFs) that the check read
 * otherwise. The body (chunk sizes and extensions too), and what
 * follows the answer, go on as they are.
 *
 * Pure: no I/O, so tests/unit/test_scrub.c drives it with hostile heads. */
#ifndef HUTCH_CORE_EGRESS_EGRESS_SCRUB_H
#define HUTCH_CORE_EGRESS_EGRESS_SCRUB_H

#include <stdbool.h>
#include <stddef.h>

#define SCRUB_HEAD_MAX (64u << 10) /* one answer head, as the host sends it */

struct scrub;

/* A scrubber for the secret values given (copied; n may be 0: then it
 * still rewrites the heads, and strips nothing). */
struct scrub *egress_scrub_new(const char *const *values, size_t n);
void egress_scrub_free(struct scrub *s);

/* Feed n bytes the host sent. What may go on to the sandbox is appended
 * to *out (malloc'd, *nout bytes, maybe none; the caller frees it). 1:
 * the answer's heads and trailers have gone by, and *out holds what
 * followed them (from now on the host's bytes go as they are); 0: not
 * yet; -1: no HTTP answer, or a head over SCRUB_HEAD_MAX (nothing of
 * that answer has gone on: the client may be told); -2: a chunked body
 * the parser cannot follow to its trailers, after its head went on (the
 * connection is to be cut). */
int egress_scrub_feed(struct scrub *s, const char *data, size_t n, char **out, size_t *nout);

/* Whether text carries one of the secrets (as egress_scrub_feed judges a
 * header). */
bool egress_scrub_carries(const struct scrub *s, const char *text, size_t len);

#endif
