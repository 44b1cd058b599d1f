/* What the host has, read when asked (never cached: the QEMU guest the
 * suite reruns in and the development host differ), and the limits hutch
 * derives from it (docs/security.md, "Resources"). */
#ifndef HUTCH_HOSTLIMITS_H
#define HUTCH_HOSTLIMITS_H

#include <stdint.h>

/* Physical memory in bytes (UINT64_MAX when unknown). */
uint64_t hutch_host_memory(void);
/* What hutch keeps for the host itself: max(512 MiB, RAM / 8). */
uint64_t hutch_host_memory_reserve(uint64_t ram);
/* The most memory all of hutch's sandboxes together, or one of them, may
 * hold: RAM − reserve. */
uint64_t hutch_memory_ceiling(void);

/* A tenant's default quota of sandbox memory: the sum of its sandboxes'
 * limits, 4 × the ceiling. Limits are ceilings, not use (an idle sandbox
 * holds a megabyte or two), and the subtree's own ceiling is what keeps
 * the host alive when tenants do use them; a quota of the ceiling itself
 * would let a tenant hold two default sandboxes on a 3 GiB machine. */
uint64_t hutch_tenant_memory_default(void);

/* The kernel's process limit: min(kernel.pid_max, kernel.threads-max). */
uint64_t hutch_host_pid_max(void);
/* All sandboxes' processes together: pid_max − max(1024, pid_max / 8). */
uint64_t hutch_pids_ceiling(void);
/* One sandbox's processes: min(65536, pid_max / 2). */
uint64_t hutch_pids_max(void);

/* The kernel's terminal pool (/proc/sys/kernel/pty): ptys in devpts
 * instances other than the host's may number max − reserve in all. */
struct hutch_host_ptys {
  uint64_t max, reserve, nr;
};
int hutch_host_ptys(struct hutch_host_ptys *p);
/* What every devpts instance other than the host's may share. */
uint64_t hutch_ptys_shared(const struct hutch_host_ptys *p);

#endif
