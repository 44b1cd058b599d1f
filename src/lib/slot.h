/* Sandbox slots. A slot is a sandbox cgroup <root>/hutch/<slot> and the host
 * id range that goes with it: holding the cgroup is holding the ids, so two
 * sandboxes never share a uid and no separate registry can go stale. */
#ifndef HUTCH_SLOT_H
#define HUTCH_SLOT_H

#include "cgroup.h"
#include "err.h"

/* Host ids of slot N: HUTCH_UID_BASE + N * HUTCH_ID_RANGE, for HUTCH_ID_RANGE
 * ids. The range sits above systemd-nspawn's and below systemd's foreign-uid
 * range (0x7FFE0000), and clear of the usual /etc/subuid allocations. */
#define HUTCH_UID_BASE 0x70000000u
#define HUTCH_SLOTS 4000u

/* Create a free slot's cgroup under root, for the controllers in ctls, and
 * lock it. Returns the locked fd. */
int hutch_slot_claim(const struct hutch_cgroup *root, unsigned ctls, unsigned *slot,
                     struct hutch_cgroup *cg, struct hutch_err *err);
/* Remove the slot's cgroup and everything below it (all must be empty). */
int hutch_slot_remove(const struct hutch_cgroup *root, unsigned slot, struct hutch_err *err);

#endif
