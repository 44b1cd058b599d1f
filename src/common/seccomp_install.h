/* Installing the seccomp profiles (docs/seccomp.md). The BPF comes from the
 * header seccomp_gen writes at build time, so neither the static agent nor
 * hutch links libseccomp. */
#ifndef HUTCH_SECCOMP_INSTALL_H
#define HUTCH_SECCOMP_INSTALL_H

/* Sets no_new_privs and installs the filter on the calling thread. Call it
 * last before execve, in a single-threaded child: everything after it runs
 * under the filter. Returns 0, or -1 with errno set. */
int hutch_seccomp_install_workload(void);

/* The agent's own, looser filter: installed on the sandbox's first process
 * before it execs the agent, and inherited by every workload under its own. */
int hutch_seccomp_install_agent(void);

#endif
