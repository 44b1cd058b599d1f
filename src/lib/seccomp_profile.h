/* The seccomp profile applied to every workload (docs/seccomp.md).
 *
 * Only the build-time generator (seccomp_gen.c) links libseccomp: it builds
 * this profile and emits the BPF as a C header, which the static agent
 * installs just before execve. */
#ifndef HUTCH_SECCOMP_PROFILE_H
#define HUTCH_SECCOMP_PROFILE_H

#include <seccomp.h>
#include <stddef.h>

#include "err.h"

/* The profile for the x86_64, x32 and i386 ABIs, in one libseccomp context
 * that the caller releases with seccomp_release(). */
scmp_filter_ctx hutch_seccomp_profile(struct hutch_err *err);

/* The agent's own, looser filter (see the .c file). */
scmp_filter_ctx hutch_seccomp_agent_profile(struct hutch_err *err);

/* The syscall names the profile lists but this libseccomp does not know:
 * they get the default action (ENOSYS). Stores up to max names in out and
 * returns how many there are. */
size_t hutch_seccomp_profile_unknown(const char **out, size_t max);

#endif
