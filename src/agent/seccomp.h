/* Installing the seccomp profiles (docs/seccomp.md). The BPF comes
 * from the header seccomp_gen writes at build time, so the static agent does
 * not link libseccomp. */
#ifndef HUTCH_AGENT_SECCOMP_H
#define HUTCH_AGENT_SECCOMP_H

/* Sets no_new_privs and installs the filter on the calling thread. Call it
 * last before execve, in a single-threaded child: everything after it runs
 * under the filter. Returns 0, or -1 with errno set. */
int agent_seccomp_apply(void);

/* The agent's own, looser filter, installed once at its start. */
int agent_seccomp_self(void);

#endif
