/* The gvisor tier (docs/isolation.md): the same sandbox shell as the ns
 * tier (slot, host id range, cgroup, storage, overlay root, loopback-only
 * network namespace), with runsc in it instead of the agent, and the agent
 * as PID 1 of gVisor's kernel. */
#ifndef HUTCH_GVISOR_H
#define HUTCH_GVISOR_H

#include <stdint.h>

#include "err.h"

/* runsc as found on this host, probed once by whoever makes sandboxes. */
struct hutch_gvisor {
  char runsc[256];   /* absolute path */
  char version[64];  /* what `runsc --version` said first */
  char platform[16]; /* ptrace or kvm */
};

/* Find runsc ($HUTCH_RUNSC, else in the PATH), check it answers, and settle the platform: "ptrace" (everywhere)
 * unless want is "kvm", which needs /dev/kvm open for reading and writing.
 * HUTCH_ERR_UNSUPPORTED when runsc is missing, with the way to install it. */
int hutch_gvisor_probe(struct hutch_gvisor *g, const char *want, struct hutch_err *err);

/* The same without asking runsc its version (version stays ""): a Go
 * program takes about 20 ms to say it, a sixth of a gvisor create, which
 * a one-shot `hutch run` does not pay (bench/tiers, docs/isolation.md). */
int hutch_gvisor_find(struct hutch_gvisor *g, const char *want, struct hutch_err *err);

/* The bundle's config.json, written at dirfd (the sandbox's storage):
 * hutch-agent (bound from "agent") as the container's only process, with
 * its capabilities in gVisor's kernel under a uid no workload has, and the
 * root filesystem "root", and RLIMIT_NPROC at pids. Runs in the sandbox's
 * first process: no allocation. */
int hutch_gvisor_bundle(int dirfd, const char *hostname, uint64_t memory_bytes, uint64_t pids,
                        struct hutch_err *err);

/* The sandbox cgroup's pids limit for a gvisor sandbox whose workloads may
 * run `pids` processes (each uid: gVisor counts RLIMIT_NPROC per uid). */
uint64_t hutch_gvisor_host_pids(uint64_t pids);

/* Exec runsc (the binary bound at "runsc" in the sandbox's storage, which
 * is the process's root), running the bundle at "/" as container id.
 * Returns only on failure. */
int hutch_gvisor_exec(int runsc_fd, const struct hutch_gvisor *g, const char *id,
                      struct hutch_err *err);

#endif
