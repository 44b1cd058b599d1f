/* A volume's files without a sandbox of the tenant's that mounts it: what
 * E2B's volume content API needs. The host never reads a volume's
 * filesystem (docs/lifecycle.md), so a worker does: a sandbox of the
 * tenant's own, on the host template, with that volume alone mounted at
 * VOLWORKER_MOUNT, no network and the default limits, made on first use
 * and kept VOLWORKER_IDLE_S after its last, then ended by its timeout as
 * any sandbox is. Its files are acted on as its user, whose the volume's
 * root is, as in every sandbox that mounts it. The tenant sees it in its
 * list, with metadata hutch.volume. */
#ifndef HUTCH_CORE_LIFE_VOLWORKER_H
#define HUTCH_CORE_LIFE_VOLWORKER_H

#include <stdbool.h>

#include "err.h"

struct server;
struct sbx;
struct principal;

#define VOLWORKER_MOUNT "/volume"
#define VOLWORKER_IDLE_S 60
#define VOLWORKER_TOKEN_LEN 64

/* The secret that opens a tenant's volume's content (E2B's volume token),
 * as hex: a MAC of the tenant and the volume's id under the server's
 * state key, so it needs no row and is the same after a restart. */
void volworker_token(const struct server *srv, const char *tenant, const char *volume_id,
                     char out[VOLWORKER_TOKEN_LEN + 1]);
/* Whether token is the volume's (constant time). */
bool volworker_token_ok(const struct server *srv, const char *tenant, const char *volume_id,
                        const char *token);

/* The tenant of the volume (its id) that token opens, as a principal of
 * its own (key id "volume"): 0, or -1 when token opens no volume of that
 * id. */
int volworker_open(struct server *srv, const char *volume_id, const char *token,
                   struct principal *p);

/* How the wait for a worker ended: its sandbox, held (volworker_release
 * once done with it), or NULL and why. */
typedef void (*volworker_fn)(struct sbx *sb, const struct hutch_err *err, void *arg);
/* The worker of p's volume (its id), held for one action: 1 and *out when
 * one is up; 0 when one is being made (by this call or an earlier one),
 * and ready is called once, on the loop; -1 and err when none can be
 * (volume_not_found, quota...). While any action holds it, its timeout
 * stands off; VOLWORKER_IDLE_S after the last, it ends. */
int volworker_get(struct server *srv, const struct principal *p, const char *volume_id,
                  struct sbx **out, volworker_fn ready, void *arg, struct hutch_err *err);
/* An action on the volume's worker is over. */
void volworker_release(struct server *srv, const char *volume_id);
/* End p's volume's worker, if one is up or being made: 1, and then(arg)
 * once it is gone; 0 when there is none (then is not called). Before the
 * volume is deleted, by either front end. */
int volworker_end(struct server *srv, const struct principal *p, const char *volume_id,
                  void (*then)(void *arg), void *arg);
void volworker_free_all(struct server *srv);

#endif
