/* Sandbox slots. A slot is a sandbox cgroup <root>/hutch/<slot> and the host
 * id range that goes with it: holding the cgroup is holding the ids, so two
 * sandboxes never share a uid and no separate registry can go stale. */
#ifndef HUTCH_SLOT_H
#define HUTCH_SLOT_H

#include <stdint.h>

#include "cgroup.h"
#include "err.h"
#include "layout.h"

/* Host ids of a slot: HUTCH_ID_RANGE of them from hutch_slot_uid_base().
 * Slots 0..4093 sit from 0x70000000, above systemd-nspawn's range and below
 * systemd's foreign-uid range (0x7FFE0000..0x7FFEFFFF); the rest from
 * 0x80000000, up to 0xFFFEFFFF, clear of (uid_t)-1 and -2 (nobody on some
 * systems). Usual /etc/subuid allocations lie far below. */
#define HUTCH_UID_BASE 0x70000000u
#define HUTCH_UID_HIGH 0x80000000u
#define HUTCH_SLOTS_LOW 4094u
#define HUTCH_SLOTS (HUTCH_SLOTS_LOW + 32767u)

static inline uint32_t hutch_slot_uid_base(unsigned slot) {
  return slot < HUTCH_SLOTS_LOW
             ? HUTCH_UID_BASE + slot * (uint32_t)HUTCH_ID_RANGE
             : HUTCH_UID_HIGH + (slot - HUTCH_SLOTS_LOW) * (uint32_t)HUTCH_ID_RANGE;
}

/* Create a free slot's cgroup under root, for the controllers in ctls, and
 * lock it. Returns the locked fd. */
int hutch_slot_claim(const struct hutch_cgroup *root, unsigned ctls, unsigned *slot,
                     struct hutch_cgroup *cg, struct hutch_err *err);
/* Remove the slot's cgroup and everything below it (all must be empty). */
int hutch_slot_remove(const struct hutch_cgroup *root, unsigned slot, struct hutch_err *err);
/* Remove what crashed hutch processes left behind: sandbox cgroups nobody
 * holds that have no process left. */
void hutch_slot_gc(const struct hutch_cgroup *root);

#endif
