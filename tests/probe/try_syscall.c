/* try-syscall: makes the syscalls the workload seccomp profile refuses, and a
 * few it must allow, and prints one line per call: "NAME RESULT", RESULT
 * being OK, an errno name (EPERM), a number for value probes, or NA when the
 * syscall does not exist on the ABI this was built for.
 *
 *   try-syscall all | NAME...
 *
 * Every argument is chosen so that a call the filter lets through fails
 * harmlessly (bad pointer: EFAULT, bad fd: EBADF, invalid flags: EINVAL)
 * before it does anything, even as root outside any sandbox: the unit test
 * runs it unfiltered as a control. A refused call returns the filter's errno
 * instead. Build it static, as is (x86_64), with -m32 (i386, where
 * syscall() enters through the i386 ABI), and 64-bit with -DTRY_INT80: the
 * i386 ABI again, from a 64-bit program, through int $0x80 with i386
 * numbers. The kernel reports such a call to seccomp as AUDIT_ARCH_I386, so
 * it meets the filter's i386 half even where 32-bit programs cannot run.
 * Exits 77 when the kernel has no i386 ABI at all. */
#include <errno.h>
#include <limits.h>
#include <linux/keyctl.h>
#include <linux/net.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/wait.h>
#ifdef TRY_INT80
/* SYS_* from the i386 numbers: <sys/syscall.h> takes the numbers from
 * whichever <asm/unistd_*.h> came first. */
#define _ASM_UNISTD_64_H
#include <asm/unistd_32.h>
#endif
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define BAD_PTR ((void *)1)
/* Not a valid socket() type flag: socket() and socketpair() return EINVAL on
 * it before they look at the family, so an allowed call never reaches the
 * family's code (nor loads its module). */
#define BAD_SOCK_FLAG 0x10
/* Returned by a probe whose syscall this ABI lacks. */
#define NA LONG_MIN

#define PROBE(fn, expr)                                                                            \
  static long fn(void) { return (long)(expr); }

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* The ABI under test passes 64-bit arguments (not i386, nor int $0x80). */
#if defined(__LP64__) && !defined(TRY_INT80)
#define ABI64 1
#endif

/* Memory an i386 call can point to (below 4 GiB): its arguments are 32 bits
 * wide, so a pointer into this program's stack would arrive cut off. */
static void *low;

#ifdef TRY_INT80
#include <sys/mman.h>

/* An i386 syscall from 64-bit code. Arguments go in ebx, ecx, edx, esi,
 * edi, ebp (saved in r12, which the kernel keeps); the kernel clears r8-r11
 * before Linux 4.17. Returns as syscall() does. */
static long int80(long nr, long a0, long a1, long a2, long a3, long a4, long a5) {
  register long r12 __asm__("r12") = a5;
  long r = nr;
  __asm__ volatile("xchg %%r12, %%rbp\n\tint $0x80\n\txchg %%r12, %%rbp"
                   : "+a"(r), "+r"(r12)
                   : "b"(a0), "c"(a1), "d"(a2), "S"(a3), "D"(a4)
                   : "r8", "r9", "r10", "r11", "memory", "cc");
  r = (int)r;
  if (r < 0 && r >= -4095) {
    errno = (int)-r;
    return -1;
  }
  return r;
}
#define INT80_(nr, a0, a1, a2, a3, a4, a5, ...)                                                   \
  int80(nr, (long)(a0), (long)(a1), (long)(a2), (long)(a3), (long)(a4), (long)(a5))
#define syscall(...) INT80_(__VA_ARGS__, 0, 0, 0, 0, 0, 0, 0)

/* Whether int $0x80 reaches the i386 ABI: without IA32 emulation it faults
 * (tried in a child, which the fault kills). */
static int have_i386_abi(void) {
  pid_t pid = fork();
  if (pid == 0)
    _exit(syscall(SYS_getpid) == getpid() ? 0 : 1);
  int status;
  return pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
         WEXITSTATUS(status) == 0;
}

static int setup(void) {
  low = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_32BIT, -1, 0);
  if (low == MAP_FAILED) {
    perror("mmap MAP_32BIT");
    return 1;
  }
  if (!have_i386_abi()) {
    fprintf(stderr, "int $0x80 does not reach an i386 ABI on this kernel\n");
    return 77;
  }
  return 0;
}
#else
static int setup(void) {
  static long mem[512];
  low = mem;
  return 0;
}
#endif

PROBE(p_getpid, syscall(SYS_getpid))
PROBE(p_seccomp_mode, prctl(PR_GET_SECCOMP, 0, 0, 0, 0))

PROBE(p_keyctl, syscall(SYS_keyctl, KEYCTL_JOIN_SESSION_KEYRING, BAD_PTR))
PROBE(p_add_key, syscall(SYS_add_key, BAD_PTR, BAD_PTR, NULL, 0, KEY_SPEC_PROCESS_KEYRING))
PROBE(p_request_key, syscall(SYS_request_key, BAD_PTR, BAD_PTR, NULL, 0))
PROBE(p_bpf, syscall(SYS_bpf, 0 /* BPF_MAP_CREATE */, BAD_PTR, 64))
PROBE(p_perf_event_open, syscall(SYS_perf_event_open, BAD_PTR, 0, -1, -1, 0))
/* UFFD_USER_MODE_ONLY (bit 0) passes the privilege check; the rest is invalid. */
PROBE(p_userfaultfd, syscall(SYS_userfaultfd, 0x7fffffff))
PROBE(p_io_uring_setup, syscall(SYS_io_uring_setup, 1, BAD_PTR))
PROBE(p_io_uring_enter, syscall(SYS_io_uring_enter, -1, 0, 0, 0, NULL, 0))
PROBE(p_io_uring_register, syscall(SYS_io_uring_register, -1, 0, NULL, 0))

PROBE(p_mount, syscall(SYS_mount, BAD_PTR, BAD_PTR, BAD_PTR, 0, NULL))
#ifdef SYS_umount
PROBE(p_umount, syscall(SYS_umount, BAD_PTR))
#else
PROBE(p_umount, NA)
#endif
PROBE(p_umount2, syscall(SYS_umount2, BAD_PTR, 0x80000000u))
PROBE(p_pivot_root, syscall(SYS_pivot_root, BAD_PTR, BAD_PTR))
PROBE(p_chroot, syscall(SYS_chroot, BAD_PTR))
PROBE(p_fsopen, syscall(SYS_fsopen, BAD_PTR, 0xffffffffu))
PROBE(p_fsconfig, syscall(SYS_fsconfig, -1, 0xffffffffu, NULL, NULL, 0))
PROBE(p_fsmount, syscall(SYS_fsmount, -1, 0xffffffffu, 0))
PROBE(p_fspick, syscall(SYS_fspick, -1, BAD_PTR, 0xffffffffu))
PROBE(p_move_mount, syscall(SYS_move_mount, -1, BAD_PTR, -1, BAD_PTR, 0xffffffffu))
PROBE(p_open_tree, syscall(SYS_open_tree, -1, BAD_PTR, 0xffffffffu))
PROBE(p_mount_setattr, syscall(SYS_mount_setattr, -1, BAD_PTR, 0, BAD_PTR, 0))

/* Bit 0 is an exit-signal bit, never a valid unshare() flag: EINVAL. */
PROBE(p_unshare, syscall(SYS_unshare, CLONE_NEWUSER | 0x1))
/* Exactly the call the sandbox's filter allows the agent and the workload
 * filter takes back; unfiltered, it succeeds for root. */
PROBE(p_unshare_newcgroup, syscall(SYS_unshare, CLONE_NEWCGROUP))
PROBE(p_setns, syscall(SYS_setns, -1, 0))
/* CLONE_THREAD without CLONE_SIGHAND is EINVAL, so an allowed clone never
 * makes a child. */
#define CLONE_PROBE(fn, flag)                                                                      \
  PROBE(fn, syscall(SYS_clone, (flag) | CLONE_THREAD, NULL, NULL, NULL, NULL))
CLONE_PROBE(p_clone_newuser, CLONE_NEWUSER)
CLONE_PROBE(p_clone_newns, CLONE_NEWNS)
CLONE_PROBE(p_clone_newpid, CLONE_NEWPID)
CLONE_PROBE(p_clone_newnet, CLONE_NEWNET)
CLONE_PROBE(p_clone_newipc, CLONE_NEWIPC)
CLONE_PROBE(p_clone_newuts, CLONE_NEWUTS)
CLONE_PROBE(p_clone_newcgroup, CLONE_NEWCGROUP)
CLONE_PROBE(p_clone_newtime, CLONE_NEWTIME)
CLONE_PROBE(p_clone_thread, 0)
PROBE(p_clone3, syscall(SYS_clone3, BAD_PTR, 88 /* sizeof(struct clone_args) */))

/* An arch field that is not this machine's: EINVAL once permitted. */
PROBE(p_kexec_load, syscall(SYS_kexec_load, 0, 0, NULL, 0xffff0000u))
#ifdef SYS_kexec_file_load
PROBE(p_kexec_file_load, syscall(SYS_kexec_file_load, -1, -1, 0, NULL, 0xffffffffu))
#else
PROBE(p_kexec_file_load, NA)
#endif
PROBE(p_init_module, syscall(SYS_init_module, BAD_PTR, 0, BAD_PTR))
PROBE(p_finit_module, syscall(SYS_finit_module, -1, BAD_PTR, 0))
PROBE(p_delete_module, syscall(SYS_delete_module, BAD_PTR, 0))
PROBE(p_open_by_handle_at, syscall(SYS_open_by_handle_at, -1, BAD_PTR, 0))
PROBE(p_name_to_handle_at, syscall(SYS_name_to_handle_at, -1, BAD_PTR, BAD_PTR, BAD_PTR, 0))

PROBE(p_ioctl_tiocsti, syscall(SYS_ioctl, -1, TIOCSTI, BAD_PTR))
PROBE(p_ioctl_tioclinux, syscall(SYS_ioctl, -1, TIOCLINUX, BAD_PTR))
PROBE(p_ioctl_tcgets, syscall(SYS_ioctl, -1, TCGETS, BAD_PTR))
#ifdef ABI64
/* The kernel ignores the high half of ioctl's command (CVE-2019-10063). */
PROBE(p_ioctl_tiocsti_hi, syscall(SYS_ioctl, -1, (0x123UL << 32) | TIOCSTI, BAD_PTR))
#else
PROBE(p_ioctl_tiocsti_hi, NA)
#endif

static long p_socket_unix(void) {
  long fd = syscall(SYS_socket, AF_UNIX, SOCK_STREAM, 0);
  if (fd >= 0)
    close((int)fd);
  return fd;
}
static long p_socketpair_unix(void) {
  int *sv = low;
  long r = syscall(SYS_socketpair, AF_UNIX, SOCK_STREAM, 0, sv);
  if (r == 0) {
    close(sv[0]);
    close(sv[1]);
  }
  return r;
}
PROBE(p_socket_alg, syscall(SYS_socket, AF_ALG, SOCK_SEQPACKET | BAD_SOCK_FLAG, 0))
PROBE(p_socket_vsock, syscall(SYS_socket, AF_VSOCK, SOCK_STREAM | BAD_SOCK_FLAG, 0))
PROBE(p_socketpair_alg, syscall(SYS_socketpair, AF_ALG, SOCK_SEQPACKET | BAD_SOCK_FLAG, 0, BAD_PTR))
#ifdef ABI64
/* The kernel reads the family as an int: this is AF_ALG to it. */
PROBE(p_socket_alg_hi, syscall(SYS_socket, (1UL << 32) | AF_ALG, SOCK_SEQPACKET | BAD_SOCK_FLAG, 0))
#else
PROBE(p_socket_alg_hi, NA)
#endif
PROBE(p_listen, syscall(SYS_listen, -1, 0))

#ifdef SYS_socketcall
static long socketcall(int call, unsigned long a0, unsigned long a1, unsigned long a2,
                       unsigned long a3) {
  /* i386's socketcall reads 32-bit arguments, from below 4 GiB */
  unsigned int *args = low;
  args[0] = (unsigned int)a0, args[1] = (unsigned int)a1;
  args[2] = (unsigned int)a2, args[3] = (unsigned int)a3;
  return syscall(SYS_socketcall, call, args);
}
PROBE(p_socketcall_socket, socketcall(SYS_SOCKET, AF_UNIX, SOCK_STREAM | BAD_SOCK_FLAG, 0, 0))
PROBE(p_socketcall_socketpair,
      socketcall(SYS_SOCKETPAIR, AF_UNIX, SOCK_STREAM | BAD_SOCK_FLAG, 0, (unsigned long)BAD_PTR))
PROBE(p_socketcall_listen, socketcall(SYS_LISTEN, (unsigned long)-1, 0, 0, 0))
#else
PROBE(p_socketcall_socket, NA)
PROBE(p_socketcall_socketpair, NA)
PROBE(p_socketcall_listen, NA)
#endif

/* No process has pid INT_MAX (pid_max is at most 2^22): ESRCH. */
PROBE(p_ptrace, syscall(SYS_ptrace, PTRACE_ATTACH, INT_MAX, NULL, NULL))
PROBE(p_process_vm_readv, syscall(SYS_process_vm_readv, getpid(), NULL, 0, NULL, 0, 1))
PROBE(p_kcmp, syscall(SYS_kcmp, INT_MAX, INT_MAX, 99, 0, 0))
PROBE(p_pidfd_getfd, syscall(SYS_pidfd_getfd, -1, 0, 0))
PROBE(p_process_madvise, syscall(SYS_process_madvise, -1, NULL, 0, 0, 1))

PROBE(p_personality_query, syscall(SYS_personality, 0xffffffffu))
#ifdef ABI64
/* -1 sign-extended: the kernel reads the low 32 bits, a query. */
PROBE(p_personality_query_sx, syscall(SYS_personality, -1L))
#else
PROBE(p_personality_query_sx, NA)
#endif
static long p_personality_aslr(void) {
  long old = syscall(SYS_personality, ADDR_NO_RANDOMIZE);
  if (old >= 0)
    syscall(SYS_personality, (unsigned long)old);
  return old;
}

PROBE(p_acct, syscall(SYS_acct, BAD_PTR))
PROBE(p_swapon, syscall(SYS_swapon, BAD_PTR, 0xffffffffu))
PROBE(p_swapoff, syscall(SYS_swapoff, BAD_PTR))
/* Wrong magic numbers: EINVAL before the command is looked at. */
PROBE(p_reboot, syscall(SYS_reboot, 0, 0, 0, NULL))
PROBE(p_settimeofday, syscall(SYS_settimeofday, BAD_PTR, NULL))
PROBE(p_clock_settime, syscall(SYS_clock_settime, CLOCK_REALTIME, BAD_PTR))
#ifdef SYS_stime
PROBE(p_stime, syscall(SYS_stime, BAD_PTR))
#else
PROBE(p_stime, NA)
#endif
PROBE(p_adjtimex, syscall(SYS_adjtimex, BAD_PTR))
PROBE(p_syslog, syscall(SYS_syslog, 100, NULL, 0))
PROBE(p_lookup_dcookie, syscall(SYS_lookup_dcookie, 0, BAD_PTR, 0))
/* Quota type 0xff does not exist: EINVAL first thing. */
PROBE(p_quotactl, syscall(SYS_quotactl, 0xff, NULL, 0, NULL))
PROBE(p_nfsservctl, syscall(SYS_nfsservctl, 0, NULL, NULL))
PROBE(p_sethostname, syscall(SYS_sethostname, BAD_PTR, 1))
PROBE(p_setdomainname, syscall(SYS_setdomainname, BAD_PTR, 1))
PROBE(p_iopl, syscall(SYS_iopl, 4))
PROBE(p_ioperm, syscall(SYS_ioperm, 0, 0, 0))
#ifdef SYS_vm86
PROBE(p_vm86, syscall(SYS_vm86, 0, BAD_PTR))
PROBE(p_vm86old, syscall(SYS_vm86old, BAD_PTR))
#else
PROBE(p_vm86, NA)
PROBE(p_vm86old, NA)
#endif
PROBE(p_uselib, syscall(SYS_uselib, BAD_PTR))
PROBE(p_ustat, syscall(SYS_ustat, 0, BAD_PTR))
PROBE(p_sysfs, syscall(SYS_sysfs, 99))
PROBE(p_sysctl, syscall(SYS__sysctl, BAD_PTR))
PROBE(p_fanotify_init, syscall(SYS_fanotify_init, 0x80000000u, 0))
/* Not in the profile at all: the default action. */
PROBE(p_get_mempolicy, syscall(SYS_get_mempolicy, NULL, NULL, 0, NULL, 0xffffu))

struct probe {
  const char *name;
  long (*fn)(void);
  int value; /* print the result itself, not OK */
};

static const struct probe probes[] = {
    {"getpid", p_getpid, 0},
    {"seccomp-mode", p_seccomp_mode, 1},
    {"keyctl", p_keyctl, 0},
    {"add_key", p_add_key, 0},
    {"request_key", p_request_key, 0},
    {"bpf", p_bpf, 0},
    {"perf_event_open", p_perf_event_open, 0},
    {"userfaultfd", p_userfaultfd, 0},
    {"io_uring_setup", p_io_uring_setup, 0},
    {"io_uring_enter", p_io_uring_enter, 0},
    {"io_uring_register", p_io_uring_register, 0},
    {"mount", p_mount, 0},
    {"umount", p_umount, 0},
    {"umount2", p_umount2, 0},
    {"pivot_root", p_pivot_root, 0},
    {"chroot", p_chroot, 0},
    {"fsopen", p_fsopen, 0},
    {"fsconfig", p_fsconfig, 0},
    {"fsmount", p_fsmount, 0},
    {"fspick", p_fspick, 0},
    {"move_mount", p_move_mount, 0},
    {"open_tree", p_open_tree, 0},
    {"mount_setattr", p_mount_setattr, 0},
    {"unshare", p_unshare, 0},
    {"unshare-newcgroup", p_unshare_newcgroup, 0},
    {"setns", p_setns, 0},
    {"clone-newuser", p_clone_newuser, 0},
    {"clone-newns", p_clone_newns, 0},
    {"clone-newpid", p_clone_newpid, 0},
    {"clone-newnet", p_clone_newnet, 0},
    {"clone-newipc", p_clone_newipc, 0},
    {"clone-newuts", p_clone_newuts, 0},
    {"clone-newcgroup", p_clone_newcgroup, 0},
    {"clone-newtime", p_clone_newtime, 0},
    {"clone-thread", p_clone_thread, 0},
    {"clone3", p_clone3, 0},
    {"kexec_load", p_kexec_load, 0},
    {"kexec_file_load", p_kexec_file_load, 0},
    {"init_module", p_init_module, 0},
    {"finit_module", p_finit_module, 0},
    {"delete_module", p_delete_module, 0},
    {"open_by_handle_at", p_open_by_handle_at, 0},
    {"name_to_handle_at", p_name_to_handle_at, 0},
    {"ioctl-tiocsti", p_ioctl_tiocsti, 0},
    {"ioctl-tiocsti-hi", p_ioctl_tiocsti_hi, 0},
    {"ioctl-tioclinux", p_ioctl_tioclinux, 0},
    {"ioctl-tcgets", p_ioctl_tcgets, 0},
    {"socket-unix", p_socket_unix, 0},
    {"socket-alg", p_socket_alg, 0},
    {"socket-alg-hi", p_socket_alg_hi, 0},
    {"socket-vsock", p_socket_vsock, 0},
    {"socketpair-unix", p_socketpair_unix, 0},
    {"socketpair-alg", p_socketpair_alg, 0},
    {"socketcall-socket", p_socketcall_socket, 0},
    {"socketcall-socketpair", p_socketcall_socketpair, 0},
    {"socketcall-listen", p_socketcall_listen, 0},
    {"listen", p_listen, 0},
    {"ptrace", p_ptrace, 0},
    {"process_vm_readv", p_process_vm_readv, 0},
    {"kcmp", p_kcmp, 0},
    {"pidfd_getfd", p_pidfd_getfd, 0},
    {"process_madvise", p_process_madvise, 0},
    {"personality-query", p_personality_query, 0},
    {"personality-query-sx", p_personality_query_sx, 0},
    {"personality-aslr", p_personality_aslr, 0},
    {"acct", p_acct, 0},
    {"swapon", p_swapon, 0},
    {"swapoff", p_swapoff, 0},
    {"reboot", p_reboot, 0},
    {"settimeofday", p_settimeofday, 0},
    {"clock_settime", p_clock_settime, 0},
    {"stime", p_stime, 0},
    {"adjtimex", p_adjtimex, 0},
    {"syslog", p_syslog, 0},
    {"lookup_dcookie", p_lookup_dcookie, 0},
    {"quotactl", p_quotactl, 0},
    {"nfsservctl", p_nfsservctl, 0},
    {"sethostname", p_sethostname, 0},
    {"setdomainname", p_setdomainname, 0},
    {"iopl", p_iopl, 0},
    {"ioperm", p_ioperm, 0},
    {"vm86", p_vm86, 0},
    {"vm86old", p_vm86old, 0},
    {"uselib", p_uselib, 0},
    {"ustat", p_ustat, 0},
    {"sysfs", p_sysfs, 0},
    {"_sysctl", p_sysctl, 0},
    {"fanotify_init", p_fanotify_init, 0},
    {"get_mempolicy", p_get_mempolicy, 0},
};

static void run(const struct probe *p) {
  errno = 0;
  long r = p->fn();
  int e = errno;
  if (r == NA)
    printf("%s NA\n", p->name);
  else if (r >= 0 && p->value)
    printf("%s %ld\n", p->name, r);
  else if (r >= 0)
    printf("%s OK\n", p->name);
  else {
    const char *name = strerrorname_np(e);
    if (name)
      printf("%s %s\n", p->name, name);
    else
      printf("%s E%d\n", p->name, e);
  }
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s all | NAME...\n", argv[0]);
    return 2;
  }
  /* one line at a time, so a crash cannot swallow the lines before it */
  setvbuf(stdout, NULL, _IOLBF, 0);
  int rc = setup();
  if (rc != 0)
    return rc;
  for (int i = 1; i < argc; i++) {
    int all = strcmp(argv[i], "all") == 0, found = 0;
    for (size_t j = 0; j < ARRAY_SIZE(probes); j++)
      if (all || strcmp(argv[i], probes[j].name) == 0) {
        run(&probes[j]);
        found = 1;
      }
    if (!found) {
      printf("%s UNKNOWN\n", argv[i]);
      rc = 2;
    }
  }
  return rc;
}
