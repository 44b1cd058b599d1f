/* The seccomp profile applied to every workload (docs/seccomp.md), as two
 * filters: the sandbox's, which the agent runs under too, and the one each
 * workload stacks on it.
 *
 * Only the build-time generator (seccomp_gen.c) links libseccomp: it builds
 * these filters and emits their BPF as a C header, which hutch and the static
 * agent install. */
#ifndef HUTCH_SECCOMP_PROFILE_H
#define HUTCH_SECCOMP_PROFILE_H

#include <seccomp.h>
#include <stdbool.h>
#include <stddef.h>

#include "err.h"

/* The sandbox's filter: the profile for the x86_64 and i386 ABIs, plus
 * the agent's own calls on x86_64, in one libseccomp context that the
 * caller releases with seccomp_release(). With notify, each refused call
 * asks the filter's listener (the agent) instead of failing at once. */
scmp_filter_ctx hutch_seccomp_sandbox_profile(bool notify, struct hutch_err *err);

/* The syscalls the sandbox filter refuses, by name, for the notify
 * listener's table (seccomp_gen.c): stores up to max in out, returns how
 * many there are. */
size_t hutch_seccomp_refused_names(const char **out, size_t max);

/* The workload filter, which takes the agent's calls back (see the .c file). */
scmp_filter_ctx hutch_seccomp_workload_profile(struct hutch_err *err);

/* The syscall names the profile lists but this libseccomp does not know:
 * they get the default action (ENOSYS). Stores up to max names in out and
 * returns how many there are. */
size_t hutch_seccomp_profile_unknown(const char **out, size_t max);

#endif
