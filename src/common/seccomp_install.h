/* Installing the seccomp profiles (docs/seccomp.md). The BPF comes from the
 * header seccomp_gen writes at build time, so neither the static agent nor
 * hutch links libseccomp. */
#ifndef HUTCH_SECCOMP_INSTALL_H
#define HUTCH_SECCOMP_INSTALL_H

/* Each sets no_new_privs and installs a filter on the calling thread, in a
 * single-threaded process: everything after it runs under the filter.
 * Returns 0, or -1 with errno set. */

/* The sandbox's filter: the profile, plus the agent's own calls. Installed
 * on the sandbox's first process before it execs the agent; the agent and
 * every workload inherit it. */
int hutch_seccomp_install_sandbox(void);

/* The workload filter, stacked on the sandbox's: installed last before a
 * workload's execve, it takes the agent's calls back. */
int hutch_seccomp_install_workload(void);

#endif
