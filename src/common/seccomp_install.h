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

/* The same filter, with every refusal handed to a listener that counts it
 * and answers EPERM (src/agent/monitor.c). Returns the listener's fd (close
 * on exec), or -1 with errno set and no filter installed: the kernel allows
 * one listener per chain of filters (EBUSY when hutch itself runs under a
 * filter with one) and has them since Linux 5.0; the caller then installs
 * the plain filter. */
int hutch_seccomp_install_sandbox_notify(void);

/* The name of a syscall the sandbox filter refuses, by the AUDIT_ARCH_*
 * value and number a notification carries; NULL for any other. */
const char *hutch_seccomp_refused_name(unsigned arch, int nr);

/* The workload filter, stacked on the sandbox's: installed last before a
 * workload's execve, it takes the agent's calls back. */
int hutch_seccomp_install_workload(void);

#endif
