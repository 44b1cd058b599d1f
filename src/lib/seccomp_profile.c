/* The workload seccomp profile as libseccomp rules (docs/seccomp.md).
 *
 * An allowlist, with Docker's default profile for a container without extra
 * capabilities as the floor. A syscall the profile does not name fails with
 * ENOSYS, which libc reads as "this kernel is too old" and falls back from;
 * the syscalls refused on purpose fail with EPERM, so a test (or a puzzled
 * user) can tell policy from age.
 *
 * It comes as two filters. The sandbox's filter is the profile plus the two
 * calls only the agent makes; the sandbox's first process installs it before
 * it execs the agent, so the agent runs under it and every process of the
 * sandbox inherits it, compiled once. Each workload stacks the workload
 * filter on it, a few dozen instructions that take the agent's calls back. */
#include "seccomp_profile.h"

#include <errno.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/ioctl.h>
#include <sys/personality.h>
#include <linux/netlink.h>
#include <sys/socket.h>

#include "util.h"

#define DEFAULT_ACTION SCMP_ACT_ERRNO(ENOSYS)
#define REFUSE SCMP_ACT_ERRNO(EPERM)
/* The sandbox filter's answer to a refused call when the agent counts them
 * (docs/seccomp.md, "Escape attempts"): the kernel stops the caller and
 * asks the agent, which answers EPERM, the answer REFUSE gives. Only the
 * sandbox's own filter can use it: a notification goes to the listener of
 * the filter that asked for it, and only the first process's has one. */
#define REFUSE_NOTIFY SCMP_ACT_NOTIFY

/* What ordinary programs (shells, coreutils, compilers, git, python, node)
 * use: Docker's unconditional allowlist, grouped. Names that do not exist on
 * an ABI (stat64 on x86_64, arch_prctl on i386) are skipped for that ABI. */
/* clang-format off */
static const char *const allowed[] = {
    /* processes, threads, their own state */
    "exit", "exit_group", "fork", "vfork", "execve", "execveat", "wait4", "waitid",
    "waitpid", "getpid", "getppid", "gettid", "getpgid", "setpgid", "getpgrp",
    "getsid", "setsid", "set_tid_address", "set_robust_list", "get_robust_list",
    "rseq", "restart_syscall", "prctl", "arch_prctl", "set_thread_area",
    "get_thread_area", "modify_ldt", "capget", "capset", "uname", "sysinfo",
    "getcpu", "getrusage", "times",
    /* sandboxing oneself further only takes privilege away */
    "seccomp", "landlock_create_ruleset", "landlock_add_rule", "landlock_restrict_self",
    /* Debuggers and tracers. ptrace reaches only processes of the same uid
     * that the caller could already control (the agent runs as another
     * uid), and since Linux 4.8 a tracer cannot use it to skip this filter.
     * process_vm_readv/writev pass the same access check as PTRACE_ATTACH,
     * so they grant nothing ptrace does not; Docker allows all three. */
    "ptrace", "process_vm_readv", "process_vm_writev",
    /* signals and process handles */
    "kill", "tkill", "tgkill", "pidfd_open", "pidfd_send_signal", "process_mrelease",
    "rt_sigaction", "rt_sigprocmask", "rt_sigreturn", "rt_sigsuspend", "rt_sigpending",
    "rt_sigtimedwait", "rt_sigtimedwait_time64", "rt_sigqueueinfo",
    "rt_tgsigqueueinfo", "sigaltstack", "sigreturn", "sigprocmask", "signalfd",
    "signalfd4", "pause", "alarm",
    /* credentials (a user namespace bounds what the set* calls can reach) */
    "getuid", "geteuid", "getgid", "getegid", "getresuid", "getresgid", "getgroups",
    "setuid", "setgid", "setreuid", "setregid", "setresuid", "setresgid", "setfsuid",
    "setfsgid", "setgroups", "getuid32", "geteuid32", "getgid32", "getegid32",
    "getresuid32", "getresgid32", "getgroups32", "setuid32", "setgid32", "setreuid32",
    "setregid32", "setresuid32", "setresgid32", "setfsuid32", "setfsgid32",
    "setgroups32",
    /* memory */
    "brk", "mmap", "mmap2", "munmap", "mremap", "mprotect", "madvise", "mincore",
    "msync", "mlock", "mlock2", "munlock", "mlockall", "munlockall",
    "remap_file_pages", "membarrier", "memfd_create", "memfd_secret", "pkey_alloc",
    "pkey_free", "pkey_mprotect", "map_shadow_stack", "mseal",
    /* Clocks and timers. adjtimex and clock_adjtime only read the clock
     * unless the caller holds CAP_SYS_TIME in the initial user namespace,
     * which a workload never does (glibc's ntp_gettime reads through them). */
    "time", "gettimeofday", "clock_gettime", "clock_gettime64", "clock_getres",
    "clock_getres_time64", "clock_nanosleep", "clock_nanosleep_time64", "nanosleep",
    "getitimer", "setitimer", "timer_create", "timer_delete", "timer_settime",
    "timer_settime64", "timer_gettime", "timer_gettime64", "timer_getoverrun",
    "timerfd_create", "timerfd_settime", "timerfd_settime64", "timerfd_gettime",
    "timerfd_gettime64", "adjtimex", "clock_adjtime", "clock_adjtime64",
    /* scheduling and limits (the cgroup bounds what they can reach) */
    "sched_yield", "sched_getaffinity", "sched_setaffinity", "sched_getparam",
    "sched_setparam", "sched_getscheduler", "sched_setscheduler",
    "sched_get_priority_max", "sched_get_priority_min", "sched_rr_get_interval",
    "sched_rr_get_interval_time64", "sched_getattr", "sched_setattr", "getpriority",
    "setpriority", "ioprio_get", "ioprio_set", "getrlimit", "setrlimit",
    "ugetrlimit",
    /* file descriptors and I/O */
    "read", "write", "readv", "writev", "pread64", "pwrite64", "preadv", "pwritev",
    "preadv2", "pwritev2", "open", "openat", "openat2", "creat", "close",
    "close_range", "dup", "dup2", "dup3", "lseek", "_llseek", "fcntl", "fcntl64",
    "flock", "fsync", "fdatasync", "sync", "syncfs", "sync_file_range", "fallocate",
    "ftruncate", "ftruncate64", "truncate", "truncate64", "fadvise64", "fadvise64_64",
    "readahead", "sendfile", "sendfile64", "splice", "tee", "vmsplice",
    "copy_file_range", "cachestat", "pipe", "pipe2",
    /* paths and metadata */
    "stat", "fstat", "lstat", "stat64", "fstat64", "lstat64", "fstatat64",
    "newfstatat", "statx", "statfs", "statfs64", "fstatfs", "fstatfs64", "access",
    "faccessat", "faccessat2", "readlink", "readlinkat", "getcwd", "chdir", "fchdir",
    "getdents", "getdents64", "chmod", "fchmod", "fchmodat", "fchmodat2", "chown",
    "fchown", "lchown", "fchownat", "chown32", "fchown32", "lchown32", "umask",
    "utime", "utimes", "utimensat", "utimensat_time64", "futimesat", "mkdir",
    "mkdirat", "mknod", "mknodat", "rmdir", "rename", "renameat", "renameat2", "link",
    "linkat", "symlink", "symlinkat", "unlink", "unlinkat", "statmount", "listmount",
    "getxattr", "lgetxattr", "fgetxattr", "setxattr", "lsetxattr", "fsetxattr",
    "listxattr", "llistxattr", "flistxattr", "removexattr", "lremovexattr",
    "fremovexattr", "getxattrat", "setxattrat", "listxattrat", "removexattrat",
    /* waiting for events */
    "poll", "ppoll", "ppoll_time64", "select", "_newselect", "pselect6",
    "pselect6_time64", "epoll_create", "epoll_create1", "epoll_ctl", "epoll_wait",
    "epoll_pwait", "epoll_pwait2", "epoll_ctl_old", "epoll_wait_old", "eventfd",
    "eventfd2", "inotify_init", "inotify_init1", "inotify_add_watch",
    "inotify_rm_watch", "fanotify_mark", "futex", "futex_time64", "futex_waitv",
    "futex_wake", "futex_wait", "futex_requeue",
    /* POSIX AIO (io_uring is refused below) */
    "io_setup", "io_destroy", "io_submit", "io_cancel", "io_getevents",
    "io_pgetevents", "io_pgetevents_time64",
    /* System V and POSIX IPC, private to the sandbox's IPC namespace */
    "ipc", "semget", "semop", "semtimedop", "semtimedop_time64", "semctl", "msgget",
    "msgsnd", "msgrcv", "msgctl", "shmget", "shmat", "shmdt", "shmctl", "mq_open",
    "mq_unlink", "mq_timedsend", "mq_timedsend_time64", "mq_timedreceive",
    "mq_timedreceive_time64", "mq_notify", "mq_getsetattr",
    /* sockets that already exist; socket() and socketpair() are below */
    "accept", "accept4", "bind", "connect", "listen", "getsockname", "getpeername",
    "getsockopt", "setsockopt", "send", "sendto", "sendmsg", "sendmmsg", "recv",
    "recvfrom", "recvmsg", "recvmmsg", "recvmmsg_time64", "shutdown",
    /* randomness; the trampoline the kernel itself calls for uretprobes */
    "getrandom", "uretprobe",
};

/* Refused with EPERM: each group is kernel attack surface or host-wide state
 * that no workload needs. Docker refuses all of these to a container without
 * extra capabilities, except name_to_handle_at (see below). */
static const char *const refused[] = {
    /* The key retention service is not namespaced: keys and quotas are per
     * uid across the host, and it has a long record of kernel bugs. */
    "keyctl", "add_key", "request_key",
    /* Programs loaded into the kernel, and performance counters that watch
     * the whole machine: the richest sources of kernel exploits and of
     * side channels into other sandboxes. */
    "bpf", "perf_event_open",
    /* userfaultfd lets a process stall the kernel mid-copy_from_user, the
     * standard tool for widening race windows in exploits. */
    "userfaultfd",
    /* io_uring runs syscalls from a kernel worker, out of this filter's
     * sight, and has been a steady source of privilege escalations. */
    "io_uring_setup", "io_uring_enter", "io_uring_register",
    /* The file system layout is hutch's to decide; mount namespaces, even
     * nested in the sandbox's user namespace, expand kernel attack surface
     * (overlayfs and fuse bugs) and could hide files from the agent. */
    "mount", "umount", "umount2", "pivot_root", "chroot", "fsopen", "fsconfig",
    "fsmount", "fspick", "move_mount", "open_tree", "mount_setattr",
    /* Joining other namespaces. New ones (a user namespace hands back every
     * capability inside it): unshare below, clone's namespace flags too.
     * clone3 keeps its flags in memory, out of a filter's reach, so it gets
     * the default ENOSYS, on which glibc falls back to clone. */
    "setns",
    /* Replacing the kernel, or loading code into it. */
    "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module",
    "create_module", "query_module", "get_kernel_syms",
    /* Opening a file by handle skips every path and mount check (the
     * "shocker" container escape). Docker still allows name_to_handle_at,
     * but without its partner it only leaks inode and mount identities. */
    "open_by_handle_at", "name_to_handle_at",
    /* Host-wide administration: accounting, swap, power, clocks, the kernel
     * log, quotas, host and domain names, terminal hang-up. The kernel would
     * refuse most of these for lack of a capability; refusing them here keeps
     * that answer independent of how the sandbox was set up. */
    "acct", "swapon", "swapoff", "reboot", "settimeofday", "stime", "clock_settime",
    "clock_settime64", "syslog", "quotactl", "quotactl_fd", "nfsservctl",
    "sethostname", "setdomainname", "vhangup", "lookup_dcookie",
    /* Raw hardware access and obsolete interfaces nothing current uses. */
    "iopl", "ioperm", "vm86", "vm86old", "uselib", "ustat", "sysfs", "_sysctl",
    /* fanotify can watch whole mounts; its marks are useless without it. */
    "fanotify_init",
    /* Cross-process reach beyond ptrace's: kcmp compares kernel object
     * identities (an information leak), pidfd_getfd takes another process's
     * descriptors, process_madvise changes another process's memory.
     * Docker allows them only with CAP_SYS_PTRACE. */
    "kcmp", "pidfd_getfd", "process_madvise",
};
/* clang-format on */

/* Not named anywhere, so ENOSYS like any syscall newer than the profile:
 * clone3 (see above), the NUMA policy calls (mbind, get_mempolicy,
 * set_mempolicy, migrate_pages, move_pages: Docker requires CAP_SYS_NICE,
 * and callers already treat failure as "no NUMA"), the lsm_* calls, and
 * i386's pre-2.0 interfaces (signal, sigaction, olduname...). */

/* The kernel reads an int or unsigned int argument from the low 32 bits of
 * a 64-bit register and ignores the rest, while a plain libseccomp
 * comparison looks at all 64: an "== AF_ALG" rule lets socket(AF_ALG |
 * 1ULL << 32, ...) through, and the kernel still creates an AF_ALG socket
 * (flatpak's CVE-2019-10063 was this, for TIOCSTI). So every argument value
 * the profile singles out is matched on the low 32 bits only. */
#define ARG_IS(i, v) SCMP_CMP((i), SCMP_CMP_MASKED_EQ, 0xffffffffULL, (scmp_datum_t)(v))
/* Always true. An argument-free rule would replace every other rule of the
 * same syscall (libseccomp keeps the most general one), so "the rest" is
 * written as a comparison. */
#define ARG_ANY(i) SCMP_CMP((i), SCMP_CMP_GE, 0)

/* Whether name could be a syscall of ctx. libseccomp gives a syscall missing
 * on x86_64 (chown32) a pseudo number there and still emits a branch for it:
 * dead code, and each loaded instruction costs every workload's start (the
 * kernel JITs the filter and runs it for every syscall number to fill its
 * cache). On i386 pseudo numbers also stand for the socketcall-multiplexed
 * calls, which libseccomp does turn into real rules: those stay. */
static bool exists_in(scmp_filter_ctx ctx, const char *name) {
  if (seccomp_arch_exist(ctx, SCMP_ARCH_X86) == 0)
    return true;
  return seccomp_syscall_resolve_name_arch(SCMP_ARCH_X86_64, name) >= 0;
}

static int add_rule(scmp_filter_ctx ctx, uint32_t action, const char *name, unsigned int ncmp,
                    const struct scmp_arg_cmp *cmp, struct hutch_err *err) {
  int nr = seccomp_syscall_resolve_name(name);
  if (nr == __NR_SCMP_ERROR || !exists_in(ctx, name))
    return 0; /* unknown to this libseccomp (seccomp_gen says so), or not on these ABIs */
  int rc = seccomp_rule_add_array(ctx, action, nr, ncmp, cmp);
  if (rc < 0)
    return hutch_err_set(err, -rc, "seccomp rule for %s", name);
  return 0;
}

static int add_names(scmp_filter_ctx ctx, uint32_t action, const char *const *names, size_t n,
                     struct hutch_err *err) {
  for (size_t i = 0; i < n; i++)
    if (add_rule(ctx, action, names[i], 0, NULL, err) < 0)
      return -1;
  return 0;
}

/* One argument of one syscall: `action` for each listed value, `rest` for
 * every other value. The two kinds of rules overlap (the catch-all matches
 * the listed values too) and libseccomp's API defines no precedence, but it
 * orders the tests on one argument by operator, equalities first (db.c,
 * _db_chain_lt), so a listed value never reaches the catch-all. The probe
 * test (tests/unit/test_seccomp.c) checks this in the kernel, high bits
 * included, so a libseccomp that changes the order fails it. */
static int add_split(scmp_filter_ctx ctx, const char *name, unsigned int arg,
                     const uint32_t *values, size_t n, uint32_t action, uint32_t rest,
                     struct hutch_err *err) {
  for (size_t i = 0; i < n; i++) {
    struct scmp_arg_cmp is = ARG_IS(arg, values[i]);
    if (add_rule(ctx, action, name, 1, &is, err) < 0)
      return -1;
  }
  struct scmp_arg_cmp any = ARG_ANY(arg);
  return add_rule(ctx, rest, name, 1, &any, err);
}

/* clone with any namespace flag would hand the child a fresh user namespace
 * (every capability inside it) or its own view of mounts, pids or network.
 * The test is on the low 32 bits, which is all that clone() reads for its
 * flags. CLONE_NEWTIME shares its bit with the exit signal in clone()'s
 * flags word, so the kernel could not see it there anyway; it is in the mask
 * so that the rule does not rest on that detail (no valid signal has that
 * bit set). The refusals and the allow rule are disjoint. */
static const uint32_t ns_flags[] = {CLONE_NEWNS,  CLONE_NEWUTS, CLONE_NEWIPC,    CLONE_NEWUSER,
                                    CLONE_NEWPID, CLONE_NEWNET, CLONE_NEWCGROUP, CLONE_NEWTIME};

/* Refuse name() when argument 0 has any namespace flag. */
static int refuse_ns_flags(scmp_filter_ctx ctx, uint32_t refuse, const char *name,
                           struct hutch_err *err) {
  for (size_t i = 0; i < ARRAY_SIZE(ns_flags); i++) {
    struct scmp_arg_cmp set = SCMP_A0(SCMP_CMP_MASKED_EQ, ns_flags[i], ns_flags[i]);
    if (add_rule(ctx, refuse, name, 1, &set, err) < 0)
      return -1;
  }
  return 0;
}

static int add_clone(scmp_filter_ctx ctx, uint32_t refuse, struct hutch_err *err) {
  uint32_t mask = 0;
  for (size_t i = 0; i < ARRAY_SIZE(ns_flags); i++)
    mask |= ns_flags[i];
  struct scmp_arg_cmp none = SCMP_A0(SCMP_CMP_MASKED_EQ, mask, 0);
  if (refuse_ns_flags(ctx, refuse, "clone", err) < 0)
    return -1;
  return add_rule(ctx, SCMP_ACT_ALLOW, "clone", 1, &none, err);
}

/* TIOCSTI pushes bytes into a terminal's input queue: a workload that shares
 * a terminal with a shell outside (hutch run in a terminal) could type
 * commands into it (Linux 6.2+ refuses it without CAP_SYS_ADMIN unless the
 * host sets dev.tty.legacy_tiocsti; this does not depend on that). TIOCLINUX
 * can read the screen of a virtual console and paste into it. Every other
 * ioctl is the driver's business. */
static int add_ioctl(scmp_filter_ctx ctx, uint32_t refuse, struct hutch_err *err) {
  static const uint32_t cmds[] = {TIOCSTI, TIOCLINUX};
  return add_split(ctx, "ioctl", 1, cmds, ARRAY_SIZE(cmds), refuse, SCMP_ACT_ALLOW, err);
}

/* Only the personalities Docker allows: plain Linux, linux32 (PER_LINUX32),
 * the uname-2.6 flag, and the query 0xffffffff. Other values include flags
 * that weaken memory protections for this process and what it executes:
 * READ_IMPLIES_EXEC makes readable mappings executable, ADDR_NO_RANDOMIZE
 * turns ASLR off, MMAP_PAGE_ZERO maps page 0. The value is an unsigned int,
 * hence the 32-bit comparison (glibc passes the query as 0xffffffff, a raw
 * syscall may pass it sign-extended). */
static int add_personality(scmp_filter_ctx ctx, uint32_t refuse, struct hutch_err *err) {
  static const uint32_t ok[] = {PER_LINUX, PER_LINUX32, UNAME26, UNAME26 | PER_LINUX32,
                                0xffffffffu};
  return add_split(ctx, "personality", 0, ok, ARRAY_SIZE(ok), SCMP_ACT_ALLOW, refuse, err);
}

/* AF_ALG exposes the kernel crypto API and AF_VSOCK talks to the
 * hypervisor; both have had exploitable bugs reachable without privilege,
 * and no workload needs them. socketpair is filtered too, because it runs
 * the family's socket constructor (and module autoloading) before it finds
 * that the family has no pairs. Netlink stays: the sandbox's network
 * namespace holds only its own loopback. */
static int add_sockets(scmp_filter_ctx ctx, uint32_t refuse, struct hutch_err *err) {
  static const uint32_t families[] = {AF_ALG, AF_VSOCK};
  if (add_split(ctx, "socket", 0, families, ARRAY_SIZE(families), refuse, SCMP_ACT_ALLOW, err) < 0)
    return -1;
  return add_split(ctx, "socketpair", 0, families, ARRAY_SIZE(families), refuse, SCMP_ACT_ALLOW,
                   err);
}

/* On i386, socket() and socketpair() also exist as socketcall(SYS_SOCKET,
 * args) and socketcall(SYS_SOCKETPAIR, args), whose arguments are in memory
 * where no filter can read them. Any process can use that ABI (int 0x80
 * works from 64-bit code), so allowing either form would reopen AF_ALG and
 * AF_VSOCK. libseccomp ties the two forms together (a rule for socket on
 * i386 also becomes a rule for socketcall(SYS_SOCKET)), so the direct call
 * cannot be allowed alone either: both are refused. i386 glibc built for
 * kernels older than 4.3 (Debian's is) creates sockets only through
 * socketcall, with no fallback, so this costs 32-bit programs their sockets
 * whatever the errno; the other socketcall operations stay allowed, one call
 * number at a time. */
static int add_sockets_i386(scmp_filter_ctx ctx, uint32_t refuse, struct hutch_err *err) {
  if (add_rule(ctx, refuse, "socket", 0, NULL, err) < 0)
    return -1;
  return add_rule(ctx, refuse, "socketpair", 0, NULL, err);
}

/* prlimit64 on the calling process only (pid 0, which is what glibc's
 * getrlimit and setrlimit pass). A workload running as the sandbox's root
 * has the agent's uid, and the kernel lets a process set the limits of any
 * process of its own uid: lowering the agent's open-file limit would leave
 * it unable to enforce a timeout. The pid is an int, hence the 32-bit test. */
static int add_prlimit(scmp_filter_ctx ctx, uint32_t refuse, struct hutch_err *err) {
  static const uint32_t self[] = {0};
  return add_split(ctx, "prlimit64", 0, self, ARRAY_SIZE(self), SCMP_ACT_ALLOW, refuse, err);
}

static scmp_filter_ctx new_ctx(uint32_t def_action, const uint32_t *arches, size_t n,
                               struct hutch_err *err) {
  scmp_filter_ctx ctx = seccomp_init(def_action);
  if (!ctx) {
    hutch_err_set(err, ENOMEM, "seccomp_init");
    return NULL;
  }
  /* An ABI that is not listed, x32 among them, has not been reviewed: its
   * syscalls kill the process. */
  int rc = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
  if (rc == 0) /* a binary tree of syscall numbers instead of a linear scan */
    rc = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2);
  if (rc == 0)
    rc = seccomp_arch_remove(ctx, SCMP_ARCH_NATIVE);
  for (size_t i = 0; rc == 0 && i < n; i++)
    rc = seccomp_arch_add(ctx, arches[i]);
  if (rc < 0) {
    hutch_err_set(err, -rc, "seccomp context setup");
    seccomp_release(ctx);
    return NULL;
  }
  return ctx;
}

/* The calls only the agent makes, allowed on x86_64 in the sandbox's filter
 * and refused again by the filter each workload stacks on it: clone3, with
 * which it clones workloads into their cgroup on v2 (its flags are in
 * memory, out of a filter's reach), and unshare of a cgroup namespace, which
 * each workload gets. Any other unshare stays refused. */
static int add_agent_calls(scmp_filter_ctx ctx, uint32_t refuse, struct hutch_err *err) {
  static const uint32_t cgroup_ns[] = {CLONE_NEWCGROUP};
  if (add_rule(ctx, SCMP_ACT_ALLOW, "clone3", 0, NULL, err) < 0)
    return -1;
  return add_split(ctx, "unshare", 0, cgroup_ns, ARRAY_SIZE(cgroup_ns), SCMP_ACT_ALLOW, refuse,
                   err);
}

/* The sandbox filter's rules, for one of its two contexts (i386 or not). */
static int add_sandbox_rules(scmp_filter_ctx ctx, bool i386, uint32_t refuse,
                             struct hutch_err *err) {
  if (add_names(ctx, SCMP_ACT_ALLOW, allowed, ARRAY_SIZE(allowed), err) < 0)
    return -1;
  if (add_names(ctx, refuse, refused, ARRAY_SIZE(refused), err) < 0)
    return -1;
  if (add_clone(ctx, refuse, err) < 0)
    return -1;
  if (add_ioctl(ctx, refuse, err) < 0)
    return -1;
  if (add_personality(ctx, refuse, err) < 0)
    return -1;
  if (add_prlimit(ctx, refuse, err) < 0)
    return -1;

  /* The agent's own calls are 64-bit ones: on i386 every unshare stays
   * refused. */
  if (i386) {
    if (add_sockets_i386(ctx, refuse, err) < 0)
      return -1;
    return add_rule(ctx, refuse, "unshare", 0, NULL, err);
  }
  if (add_sockets(ctx, refuse, err) < 0)
    return -1;
  return add_agent_calls(ctx, refuse, err);
}

/* Every refusal of the sandbox filter answers `refuse`: REFUSE, or
 * REFUSE_NOTIFY when they are counted. */
static scmp_filter_ctx build(const uint32_t *arches, size_t n, bool i386, uint32_t refuse,
                             struct hutch_err *err) {
  scmp_filter_ctx ctx = new_ctx(DEFAULT_ACTION, arches, n, err);
  if (!ctx)
    return NULL;
  if (add_sandbox_rules(ctx, i386, refuse, err) < 0) {
    seccomp_release(ctx);
    return NULL;
  }
  return ctx;
}

/* The i386 rules are built in their own context and merged, so that its
 * socket rules (above) can differ from the 64-bit ones, and the agent's own
 * calls stay refused there (the agent is a 64-bit program). x32 (64-bit
 * registers, 32-bit pointers) is left out: disabled in most kernels, used
 * by next to nothing, and a third of the filter's size. */
scmp_filter_ctx hutch_seccomp_sandbox_profile(bool notify, struct hutch_err *err) {
  static const uint32_t native[] = {SCMP_ARCH_X86_64};
  static const uint32_t i386[] = {SCMP_ARCH_X86};
  uint32_t refuse = notify ? REFUSE_NOTIFY : REFUSE;
  scmp_filter_ctx ctx = build(native, ARRAY_SIZE(native), false, refuse, err);
  if (!ctx)
    return NULL;

  scmp_filter_ctx ctx32 = build(i386, ARRAY_SIZE(i386), true, refuse, err);
  if (!ctx32) {
    seccomp_release(ctx);
    return NULL;
  }

  int rc = seccomp_merge(ctx, ctx32); /* releases ctx32 on success */
  if (rc < 0) {
    hutch_err_set(err, -rc, "merge the i386 seccomp rules");
    seccomp_release(ctx32);
    seccomp_release(ctx);
    return NULL;
  }
  return ctx;
}

/* The kernel sends its device events (uevents) to every network namespace
 * owned by the host's user namespace, which a sandbox's is (spawn.c): a
 * NETLINK_KOBJECT_UEVENT socket would tell a workload about the host's
 * disks, USB devices and network interfaces coming and going. Nothing in a
 * sandbox manages devices. (On i386, whose sockets are made through
 * socketcall with the arguments in memory, the sandbox filter refuses
 * socket creation outright.) */
static int refuse_uevents(scmp_filter_ctx ctx, struct hutch_err *err) {
  struct scmp_arg_cmp uevent[] = {ARG_IS(0, AF_NETLINK), ARG_IS(2, NETLINK_KOBJECT_UEVENT)};
  return add_rule(ctx, REFUSE, "socket", ARRAY_SIZE(uevent), uevent, err);
}

/* What each workload stacks on the sandbox's filter: it takes back the
 * agent's own calls (add_agent_calls), with the answers the profile gives
 * everywhere else (clone3 ENOSYS, so that glibc falls back to clone;
 * unshare of a cgroup namespace EPERM), and refuses uevent sockets. Every
 * other unshare it lets through to the sandbox's filter, which refuses it:
 * the kernel takes an error answer over a notification whatever filter
 * gives it, so refusing them here would hide them from the count.
 * Everything else it allows: the sandbox's filter below it has already
 * decided. The strictest answer of
 * the two filters wins, so a workload gets exactly the profile. It is
 * small on purpose: the kernel compiles a filter for every process that
 * installs one, and the sandbox's is compiled once, by its first process. */
static int add_workload_rules(scmp_filter_ctx ctx, struct hutch_err *err) {
  struct scmp_arg_cmp cgroup_ns = ARG_IS(0, CLONE_NEWCGROUP);
  if (add_rule(ctx, DEFAULT_ACTION, "clone3", 0, NULL, err) < 0)
    return -1;
  if (add_rule(ctx, REFUSE, "unshare", 1, &cgroup_ns, err) < 0)
    return -1;
  return refuse_uevents(ctx, err);
}

scmp_filter_ctx hutch_seccomp_workload_profile(struct hutch_err *err) {
  static const uint32_t arches[] = {SCMP_ARCH_X86_64, SCMP_ARCH_X86};
  scmp_filter_ctx ctx = new_ctx(SCMP_ACT_ALLOW, arches, ARRAY_SIZE(arches), err);
  if (!ctx)
    return NULL;
  if (add_workload_rules(ctx, err) < 0) {
    seccomp_release(ctx);
    return NULL;
  }
  return ctx;
}

size_t hutch_seccomp_profile_unknown(const char **out, size_t max) {
  static const char *const *const lists[] = {allowed, refused};
  static const size_t sizes[] = {ARRAY_SIZE(allowed), ARRAY_SIZE(refused)};
  size_t found = 0;
  for (size_t l = 0; l < ARRAY_SIZE(lists); l++)
    for (size_t i = 0; i < sizes[l]; i++)
      if (seccomp_syscall_resolve_name(lists[l][i]) == __NR_SCMP_ERROR) {
        if (found < max)
          out[found] = lists[l][i];
        found++;
      }
  return found;
}

size_t hutch_seccomp_refused_names(const char **out, size_t max) {
  /* The calls refused for some of their arguments (add_clone and the other
   * add_* above), and i386's socketcall, which carries its socket rules. */
  static const char *const split[] = {"clone",      "ioctl",     "personality", "socket",
                                      "socketpair", "prlimit64", "unshare",     "socketcall"};
  size_t n = 0;
  for (size_t i = 0; i < ARRAY_SIZE(refused); i++, n++)
    if (n < max)
      out[n] = refused[i];
  for (size_t i = 0; i < ARRAY_SIZE(split); i++, n++)
    if (n < max)
      out[n] = split[i];
  return n;
}
