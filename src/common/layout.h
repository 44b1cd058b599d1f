/* What host and agent agree on about the inside of a sandbox. */
#ifndef HUTCH_LAYOUT_H
#define HUTCH_LAYOUT_H

/* Ids inside the sandbox's user namespace. Root (0) is the agent; workloads
 * run as the user, as in E2B's sandboxes. */
#define HUTCH_USER_UID 1000
#define HUTCH_USER_GID 1000
#define HUTCH_USER_NAME "user"
#define HUTCH_USER_HOME "/home/user"
#define HUTCH_TTY_GID 5
/* Each sandbox maps this many ids onto its own host range. */
#define HUTCH_ID_RANGE 65536

/* Descriptors the agent is started with. */
#define HUTCH_AGENT_CONN_FD 3 /* under gVisor (--cgroup none) it comes as stdin */
#define HUTCH_AGENT_CG_FD 4   /* first of the sandbox cgroup's fds */
/* The sandbox's storage (the tmpfs under its root's upper layer), which the
 * agent holds and never uses: the one way to it after the pivot, for the
 * host (pidfd_getfd) to measure and snapshot it. Above the others. */
#define HUTCH_AGENT_STORAGE_FD 16
/* The listener of the sandbox's seccomp filter, through which the agent
 * counts refused calls (src/agent/monitor.c); not open when the kernel
 * gave none. */
#define HUTCH_AGENT_NOTIFY_FD 17

/* What root of a template build's RUN step keeps (hutch-agent --build):
 * the capabilities a package manager uses (dpkg chowns what it unpacks,
 * adduser sets ids), from Docker's default set, without NET_RAW, MKNOD,
 * AUDIT_WRITE, SETFCAP, SETPCAP and SYS_CHROOT (the seccomp filter refuses
 * chroot anyway). Capabilities of the sandbox's own user
 * namespace: they reach only what the sandbox owns (docs/security.md). */
#define HUTCH_BUILD_CAPS                                                                 \
  ((1ull << 0 /* CHOWN */) | (1ull << 1 /* DAC_OVERRIDE */) | (1ull << 3 /* FOWNER */) | \
   (1ull << 4 /* FSETID */) | (1ull << 5 /* KILL */) | (1ull << 6 /* SETGID */) |        \
   (1ull << 7 /* SETUID */) | (1ull << 10 /* NET_BIND_SERVICE */))

#define HUTCH_DEFAULT_PATH "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

#endif
