/* The workload seccomp profile, checked in the kernel (TAP).
 *
 *   test_seccomp PROBE64 PROBE32 PROBEINT80   (PROBE32 "-": no i386 toolchain)
 *
 * Runs the try-syscall probes (tests/probe/try_syscall.c, built static for
 * x86_64, for i386, and for x86_64 entering the i386 ABI through int $0x80)
 * twice: under the filters a workload has (the sandbox's,
 * then the workload's stacked on it, each installed by the code hutch and
 * the agent use), and without them as a control. Under the filters every
 * refused call must return exactly the policy's errno and every allowed
 * control its harmless kernel answer; without it, the calls whose unfiltered
 * answer does not depend on privileges must answer something else, which
 * shows that the errno comes from the filter. The i386 ABI is checked
 * twice: through int $0x80, which every kernel with IA32 emulation takes
 * from a 64-bit program and shows seccomp as AUDIT_ARCH_I386, and from a
 * 32-bit program. Where the kernel will not exec that program (ENOEXEC:
 * seen under a PVM hypervisor), it is skipped; under HUTCH_MUST_WORK only
 * if int $0x80 passed, since that is then the i386 ABI's one way in, or if
 * int $0x80 does not reach an i386 ABI either (seen under another): a
 * kernel with no way into its i386 ABI leaves no i386 call to filter.
 * x32, refused wholesale (and absent from most kernels, this one included),
 * and what each filter alone decides (the agent runs under the sandbox's
 * only) are checked by running the filters' BPF here on made-up syscalls. */
#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/netlink.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cleanup.h"
#include "seccomp_install.h"
#include "seccomp_filter.h"

struct expect {
  const char *name;
  const char *abi64; /* the result under the filter, x86_64 */
  const char *abi32; /* on i386; NULL when the same */
  bool control;      /* the unfiltered result differs whatever the privileges */
};

static const struct expect expects[] = {
    {"seccomp-mode", "2", NULL, true},
    {"getpid", "OK", NULL, false},
    {"keyctl", "EPERM", NULL, true},
    {"add_key", "EPERM", NULL, true},
    {"request_key", "EPERM", NULL, true},
    {"bpf", "EPERM", NULL, false},
    {"perf_event_open", "EPERM", NULL, true},
    {"userfaultfd", "EPERM", NULL, true},
    {"io_uring_setup", "EPERM", NULL, false},
    {"io_uring_enter", "EPERM", NULL, true},
    {"io_uring_register", "EPERM", NULL, true},
    {"mount", "EPERM", NULL, true},
    {"umount", "NA", "EPERM", false},
    {"umount2", "EPERM", NULL, true},
    {"pivot_root", "EPERM", NULL, false},
    {"chroot", "EPERM", NULL, true},
    {"fsopen", "EPERM", NULL, false},
    {"fsconfig", "EPERM", NULL, false},
    {"fsmount", "EPERM", NULL, false},
    {"fspick", "EPERM", NULL, false},
    {"move_mount", "EPERM", NULL, false},
    {"open_tree", "EPERM", NULL, false},
    {"mount_setattr", "EPERM", NULL, false},
    {"unshare", "EPERM", NULL, true},
    {"unshare-newcgroup", "EPERM", NULL, false},
    {"setns", "EPERM", NULL, true},
    {"clone-newuser", "EPERM", NULL, true},
    {"clone-newns", "EPERM", NULL, true},
    {"clone-newpid", "EPERM", NULL, true},
    {"clone-newnet", "EPERM", NULL, true},
    {"clone-newipc", "EPERM", NULL, true},
    {"clone-newuts", "EPERM", NULL, true},
    {"clone-newcgroup", "EPERM", NULL, true},
    {"clone-newtime", "EPERM", NULL, true},
    {"clone-thread", "EINVAL", NULL, false},
    {"clone3", "ENOSYS", NULL, true},
    {"kexec_load", "EPERM", NULL, false},
    {"kexec_file_load", "EPERM", "NA", false},
    {"init_module", "EPERM", NULL, false},
    {"finit_module", "EPERM", NULL, false},
    {"delete_module", "EPERM", NULL, false},
    {"open_by_handle_at", "EPERM", NULL, false},
    {"name_to_handle_at", "EPERM", NULL, true},
    {"ioctl-tiocsti", "EPERM", NULL, true},
    {"ioctl-tiocsti-hi", "EPERM", "NA", true},
    {"ioctl-tioclinux", "EPERM", NULL, true},
    {"ioctl-tcgets", "EBADF", NULL, false},
    {"socket-unix", "OK", "EPERM", false},
    {"socket-alg", "EPERM", NULL, true},
    {"socket-alg-hi", "EPERM", "NA", true},
    {"socket-vsock", "EPERM", NULL, true},
    {"socketpair-unix", "OK", "EPERM", false},
    {"socketpair-alg", "EPERM", NULL, true},
    {"socketcall-socket", "NA", "EPERM", true},
    {"socketcall-socketpair", "NA", "EPERM", true},
    {"socketcall-listen", "NA", "EBADF", false},
    {"listen", "EBADF", NULL, false},
    {"ptrace", "ESRCH", NULL, false},
    {"process_vm_readv", "EINVAL", NULL, false},
    {"kcmp", "EPERM", NULL, false},
    {"pidfd_getfd", "EPERM", NULL, true},
    {"process_madvise", "EPERM", NULL, true},
    {"personality-query", "OK", NULL, false},
    {"personality-query-sx", "OK", "NA", false},
    {"personality-aslr", "EPERM", NULL, true},
    {"acct", "EPERM", NULL, false},
    {"swapon", "EPERM", NULL, true},
    {"swapoff", "EPERM", NULL, false},
    {"reboot", "EPERM", NULL, false},
    {"settimeofday", "EPERM", NULL, true},
    {"clock_settime", "EPERM", NULL, true},
    {"stime", "NA", "EPERM", true},
    {"adjtimex", "EFAULT", NULL, false},
    {"syslog", "EPERM", NULL, false},
    {"lookup_dcookie", "EPERM", NULL, false},
    {"quotactl", "EPERM", NULL, true},
    {"nfsservctl", "EPERM", NULL, true},
    {"sethostname", "EPERM", NULL, false},
    {"setdomainname", "EPERM", NULL, false},
    {"iopl", "EPERM", NULL, true},
    {"ioperm", "EPERM", NULL, true},
    {"vm86", "NA", "EPERM", true},
    {"vm86old", "NA", "EPERM", true},
    {"uselib", "EPERM", NULL, true},
    {"ustat", "EPERM", NULL, true},
    {"sysfs", "EPERM", NULL, true},
    {"_sysctl", "EPERM", NULL, true},
    {"fanotify_init", "EPERM", NULL, false},
    {"get_mempolicy", "ENOSYS", NULL, true},
};

#define NEXPECT (sizeof expects / sizeof expects[0])

static int test_num, failures;

static void tap(bool ok, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void tap(bool ok, const char *fmt, ...) {
  va_list ap;
  printf("%s %d - ", ok ? "ok" : "not ok", ++test_num);
  va_start(ap, fmt);
  vprintf(fmt, ap);
  va_end(ap);
  printf("\n");
  if (!ok)
    failures++;
}

static const char *want(const struct expect *e, bool i386) {
  return i386 && e->abi32 ? e->abi32 : e->abi64;
}

/* The probe's result for name, or NULL. out holds "NAME RESULT\n" lines. */
static const char *lookup(const char *out, const char *name, char *buf, size_t size) {
  size_t n = strlen(name);
  for (const char *p = out; *p;) {
    size_t len = strcspn(p, "\n");
    if (len > n && strncmp(p, name, n) == 0 && p[n] == ' ') {
      if (len - n - 1 >= size)
        return NULL;
      memcpy(buf, p + n + 1, len - n - 1);
      buf[len - n - 1] = '\0';
      return buf;
    }
    p += len + (p[len] == '\n');
  }
  return NULL;
}

/* The child: stdout to the pipe, the filter if asked, exec the probe. A
 * failure before the exec goes to the parent as an errno on errfd. */
static void __attribute__((noreturn))
child(const char *probe, bool filtered, int outfd, int errfd) {
  int e = 0;
  if (dup2(outfd, STDOUT_FILENO) < 0)
    e = errno;
  else if (filtered &&
           (hutch_seccomp_install_sandbox() < 0 || hutch_seccomp_install_workload() < 0))
    e = errno;
  else {
    execl(probe, "try-syscall", "all", (char *)NULL);
    e = errno;
  }
  (void)!write(errfd, &e, sizeof e);
  _exit(127);
}

/* The probe's exit status when the kernel has no i386 ABI for int $0x80. */
#define PROBE_NO_ABI 77

/* Runs "probe all", under the filter if filtered, and reads its output into
 * out. Returns 0; -1 when the probe did not run (*why: the errno) or did
 * not exit 0 (*why: 0, or -PROBE_NO_ABI). */
static int run_probe(const char *probe, bool filtered, char *out, size_t size, int *why) {
  _cleanup_close_ int out_r = -1, out_w = -1, err_r = -1, err_w = -1;
  int p[2];
  if (pipe2(p, O_CLOEXEC) < 0)
    return *why = errno, -1;
  out_r = p[0], out_w = p[1];
  if (pipe2(p, O_CLOEXEC) < 0)
    return *why = errno, -1;
  err_r = p[0], err_w = p[1];
  fflush(stdout);
  pid_t pid = fork();
  if (pid < 0)
    return *why = errno, -1;
  if (pid == 0)
    child(probe, filtered, out_w, err_w);
  close(steal_fd(&out_w));
  close(steal_fd(&err_w));
  size_t got = 0;
  ssize_t r;
  while ((r = read(out_r, out + got, size - 1 - got)) > 0 || (r < 0 && errno == EINTR))
    got += r > 0 ? (size_t)r : 0;
  out[got] = '\0';
  int e = 0;
  bool failed = read(err_r, &e, sizeof e) == (ssize_t)sizeof e;
  int status;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
    ;
  if (failed)
    return *why = e, -1;
  if (WIFEXITED(status) && WEXITSTATUS(status) == PROBE_NO_ABI)
    return *why = -PROBE_NO_ABI, -1;
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    return *why = 0, -1;
  return 0;
}

static size_t tests_per_abi(bool i386, bool control) {
  size_t n = 1;
  for (size_t i = 0; i < NEXPECT; i++)
    n += 1 + (control && expects[i].control && strcmp(want(&expects[i], i386), "NA") != 0);
  return n;
}

static void skip_abi(const char *abi, bool i386, bool control, const char *reason) {
  for (size_t i = tests_per_abi(i386, control); i > 0; i--)
    printf("ok %d - %s # SKIP %s\n", ++test_num, abi, reason);
}

static void check_abi(const char *abi, bool i386, bool control, const char *filtered,
                      const char *plain) {
  char got[64], base[64];
  tap(true, "%s: the probe ran under the filter", abi);
  for (size_t i = 0; i < NEXPECT; i++) {
    const struct expect *e = &expects[i];
    const char *w = want(e, i386);
    const char *g = lookup(filtered, e->name, got, sizeof got);
    tap(g && strcmp(g, w) == 0, "%s: %s is %s under the filter (got %s)", abi, e->name, w,
        g ? g : "nothing");
    if (!control || !e->control || strcmp(w, "NA") == 0)
      continue;
    const char *b = lookup(plain, e->name, base, sizeof base);
    tap(b && strcmp(b, w) != 0, "%s: %s is not %s without the filter (got %s)", abi, e->name, w,
        b ? b : "nothing");
  }
}

/* Whether the kernel has no i386 ABI at all, unfiltered: int $0x80 does
 * not reach one and the 32-bit probe will not exec. */
static bool i386_absent(const char *probe32, const char *probe_int80) {
  static char out[16384];
  int why = 0;
  if (strcmp(probe32, "-") == 0 || run_probe(probe_int80, false, out, sizeof out, &why) == 0 ||
      why != -PROBE_NO_ABI)
    return false;
  return run_probe(probe32, false, out, sizeof out, &why) < 0 && why == ENOEXEC;
}

/* Both runs of one ABI's probe, then its assertions. Returns whether they
 * all ran and passed. covered: the i386 ABI passed through int $0x80;
 * absent: the kernel has no i386 ABI at all. */
static bool test_abi(const char *abi, const char *probe, bool i386, bool control, bool covered,
                     bool absent) {
  static char filtered[16384], plain[16384];
  bool must = getenv("HUTCH_MUST_WORK") != NULL;
  int why = 0;
  if (i386 && absent) {
    skip_abi(abi, i386, control, "the kernel has no i386 ABI: int $0x80 and 32-bit exec both fail");
    return false;
  }
  if (strcmp(probe, "-") == 0 && !must) {
    skip_abi(abi, i386, control, "no probe built for this ABI");
    return false;
  }
  if (run_probe(probe, false, plain, sizeof plain, &why) < 0 ||
      run_probe(probe, true, filtered, sizeof filtered, &why) < 0) {
    if (why == ENOEXEC && i386 && (covered || !must)) {
      skip_abi(abi, i386, control,
               covered ? "the kernel will not exec i386 programs; int $0x80 reached its i386 ABI"
                       : "the kernel cannot run i386 binaries");
      return false;
    }
    if (why == -PROBE_NO_ABI && !must) {
      skip_abi(abi, i386, control, "the kernel has no i386 ABI");
      return false;
    }
    tap(false, "%s: run %s: %s", abi, probe,
        why > 0 ? strerror(why)
        : why   ? "the kernel has no i386 ABI"
                : "it failed");
    for (size_t i = tests_per_abi(i386, control) - 1; i > 0; i--)
      tap(false, "%s: not run", abi);
    return false;
  }
  int before = failures;
  check_abi(abi, i386, control, filtered, plain);
  return failures == before;
}

/* A classic BPF interpreter for the instructions libseccomp emits; anything
 * else makes the check fail rather than guess. */
static uint32_t bpf_run(const struct sock_filter *prog, size_t len, const struct seccomp_data *d) {
  uint32_t a = 0;
  for (size_t pc = 0; pc < len; pc++) {
    const struct sock_filter *in = &prog[pc];
    switch (in->code) {
    case BPF_LD | BPF_W | BPF_ABS:
      if (in->k % 4 != 0 || in->k + 4 > sizeof *d)
        return 0xffffffff;
      memcpy(&a, (const char *)d + in->k, sizeof a);
      break;
    case BPF_ALU | BPF_AND | BPF_K:
      a &= in->k;
      break;
    case BPF_JMP | BPF_JA:
      pc += in->k;
      break;
    case BPF_JMP | BPF_JEQ | BPF_K:
      pc += a == in->k ? in->jt : in->jf;
      break;
    case BPF_JMP | BPF_JGT | BPF_K:
      pc += a > in->k ? in->jt : in->jf;
      break;
    case BPF_JMP | BPF_JGE | BPF_K:
      pc += a >= in->k ? in->jt : in->jf;
      break;
    case BPF_JMP | BPF_JSET | BPF_K:
      pc += a & in->k ? in->jt : in->jf;
      break;
    case BPF_RET | BPF_K:
      return in->k;
    default:
      return 0xffffffff;
    }
  }
  return 0xffffffff;
}

#define X32(nr) (0x40000000 | (nr)) /* numbers from <asm/unistd_x32.h> */
#define ERRNO(e) (SECCOMP_RET_ERRNO | (e))
#define I386_UNSHARE 310 /* from <asm/unistd_32.h> */
#define I386_CLONE3 435

enum filter { SANDBOX, WORKLOAD };

static const struct {
  enum filter filter;
  const char *what;
  uint32_t arch;
  int nr;
  uint64_t a0, a1, a2;
  uint32_t want;
} simulated[] = {
    /* x32 is not a reviewed ABI: any of its calls kills the process. */
    {SANDBOX, "x32 read", AUDIT_ARCH_X86_64, X32(0), 0, 0, 0, SECCOMP_RET_KILL_PROCESS},
    {SANDBOX, "x32 keyctl", AUDIT_ARCH_X86_64, X32(250), 0, 0, 0, SECCOMP_RET_KILL_PROCESS},
    {SANDBOX, "x32 socket(AF_UNIX)", AUDIT_ARCH_X86_64, X32(41), AF_UNIX, 0, 0,
     SECCOMP_RET_KILL_PROCESS},
    {SANDBOX, "x32 ioctl(TIOCSTI)", AUDIT_ARCH_X86_64, X32(514), 0, TIOCSTI, 0,
     SECCOMP_RET_KILL_PROCESS},
    {SANDBOX, "x32 clone(CLONE_NEWUSER)", AUDIT_ARCH_X86_64, X32(56), CLONE_NEWUSER, 0, 0,
     SECCOMP_RET_KILL_PROCESS},
    {SANDBOX, "x32 syscall 999", AUDIT_ARCH_X86_64, X32(999), 0, 0, 0, SECCOMP_RET_KILL_PROCESS},
    {SANDBOX, "aarch64 read", AUDIT_ARCH_AARCH64, 63, 0, 0, 0, SECCOMP_RET_KILL_PROCESS},
    /* The agent's own calls, and no more than them. */
    {SANDBOX, "clone3", AUDIT_ARCH_X86_64, SYS_clone3, 0, 0, 0, SECCOMP_RET_ALLOW},
    {SANDBOX, "unshare(CLONE_NEWCGROUP)", AUDIT_ARCH_X86_64, SYS_unshare, CLONE_NEWCGROUP, 0, 0,
     SECCOMP_RET_ALLOW},
    {SANDBOX, "unshare(CLONE_NEWCGROUP|CLONE_NEWUSER)", AUDIT_ARCH_X86_64, SYS_unshare,
     CLONE_NEWCGROUP | CLONE_NEWUSER, 0, 0, ERRNO(EPERM)},
    {SANDBOX, "unshare(CLONE_NEWNS)", AUDIT_ARCH_X86_64, SYS_unshare, CLONE_NEWNS, 0, 0,
     ERRNO(EPERM)},
    {SANDBOX, "unshare(0)", AUDIT_ARCH_X86_64, SYS_unshare, 0, 0, 0, ERRNO(EPERM)},
    {SANDBOX, "i386 unshare(CLONE_NEWCGROUP)", AUDIT_ARCH_I386, I386_UNSHARE, CLONE_NEWCGROUP, 0, 0,
     ERRNO(EPERM)},
    {SANDBOX, "i386 clone3", AUDIT_ARCH_I386, I386_CLONE3, 0, 0, 0, ERRNO(ENOSYS)},
    {SANDBOX, "keyctl", AUDIT_ARCH_X86_64, SYS_keyctl, 0, 0, 0, ERRNO(EPERM)},
    {SANDBOX, "socket(AF_NETLINK, NETLINK_ROUTE)", AUDIT_ARCH_X86_64, SYS_socket, AF_NETLINK, 0, 0,
     SECCOMP_RET_ALLOW},
    /* The workload's filter takes them back, and refuses uevents. */
    {WORKLOAD, "clone3", AUDIT_ARCH_X86_64, SYS_clone3, 0, 0, 0, ERRNO(ENOSYS)},
    {WORKLOAD, "unshare(CLONE_NEWCGROUP)", AUDIT_ARCH_X86_64, SYS_unshare, CLONE_NEWCGROUP, 0, 0,
     ERRNO(EPERM)},
    {WORKLOAD, "socket(AF_NETLINK, NETLINK_KOBJECT_UEVENT)", AUDIT_ARCH_X86_64, SYS_socket,
     AF_NETLINK, SOCK_RAW, NETLINK_KOBJECT_UEVENT, ERRNO(EPERM)},
    {WORKLOAD, "socket(AF_NETLINK, NETLINK_ROUTE)", AUDIT_ARCH_X86_64, SYS_socket, AF_NETLINK,
     SOCK_RAW, NETLINK_ROUTE, SECCOMP_RET_ALLOW},
    {WORKLOAD, "keyctl (the sandbox's to refuse)", AUDIT_ARCH_X86_64, SYS_keyctl, 0, 0, 0,
     SECCOMP_RET_ALLOW},
    {WORKLOAD, "i386 read", AUDIT_ARCH_I386, 3, 0, 0, 0, SECCOMP_RET_ALLOW},
    {WORKLOAD, "x32 read", AUDIT_ARCH_X86_64, X32(0), 0, 0, 0, SECCOMP_RET_KILL_PROCESS},
};

#define NSIMULATED (sizeof simulated / sizeof simulated[0])

static void test_simulated(void) {
  static const struct {
    const char *name;
    const struct sock_filter *prog;
    size_t len;
  } filters[] = {
      [SANDBOX] = {"sandbox", hutch_seccomp_filter, HUTCH_SECCOMP_FILTER_LEN},
      [WORKLOAD] = {"workload", hutch_workload_seccomp_filter, HUTCH_WORKLOAD_SECCOMP_FILTER_LEN},
  };
  for (size_t i = 0; i < NSIMULATED; i++) {
    struct seccomp_data d = {.nr = simulated[i].nr, .arch = simulated[i].arch};
    d.args[0] = simulated[i].a0;
    d.args[1] = simulated[i].a1;
    d.args[2] = simulated[i].a2;
    const typeof(filters[0]) *f = &filters[simulated[i].filter];
    uint32_t got = bpf_run(f->prog, f->len, &d);
    tap(got == simulated[i].want, "simulated, %s filter: %s gives 0x%08x (got 0x%08x)", f->name,
        simulated[i].what, simulated[i].want, got);
  }
}

/* The counting filter (docs/seccomp.md, "Escape attempts") is the plain
 * one with every EPERM a notification, and nothing else changed; the
 * agent can name every call it can be asked about. */
#define NOTIFY_TESTS 4
static void test_notify_filter(void) {
  bool same = HUTCH_SECCOMP_NOTIFY_FILTER_LEN == HUTCH_SECCOMP_FILTER_LEN;
  size_t notifies = 0;
  for (size_t i = 0; same && i < HUTCH_SECCOMP_FILTER_LEN; i++) {
    struct sock_filter p = hutch_seccomp_filter[i], n = hutch_seccomp_notify_filter[i];
    if (p.code == (BPF_RET | BPF_K) && p.k == ERRNO(EPERM)) {
      same = n.code == p.code && n.k == SECCOMP_RET_USER_NOTIF;
      notifies++;
    } else {
      same = memcmp(&p, &n, sizeof p) == 0;
    }
  }
  tap(same && notifies > 0,
      "the notify filter is the sandbox filter with its %zu EPERM "
      "answers made notifications",
      notifies);
  size_t unnamed = 0;
  static const uint32_t arches[] = {AUDIT_ARCH_X86_64, AUDIT_ARCH_I386};
  for (size_t a = 0; a < 2; a++)
    for (int nr = 0; nr < 512; nr++) {
      struct seccomp_data d = {.nr = nr, .arch = arches[a]};
      if (bpf_run(hutch_seccomp_notify_filter, HUTCH_SECCOMP_NOTIFY_FILTER_LEN, &d) ==
              SECCOMP_RET_USER_NOTIF &&
          !hutch_seccomp_refused_name(arches[a], nr)) {
        printf("# unnamed: arch 0x%08x nr %d\n", arches[a], nr);
        unnamed++;
      }
    }
  tap(unnamed == 0, "every refused call has a name for the agent (%zu without)", unnamed);
  const char *m = hutch_seccomp_refused_name(AUDIT_ARCH_X86_64, SYS_mount);
  tap(m && strcmp(m, "mount") == 0, "x86_64 mount is named mount");
  const char *sc = hutch_seccomp_refused_name(AUDIT_ARCH_I386, 102);
  tap(sc && strcmp(sc, "socketcall") == 0 && !hutch_seccomp_refused_name(AUDIT_ARCH_X86_64, 0),
      "i386 socketcall is named, x86_64 read is not");
}

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: %s PROBE64 PROBE32 PROBEINT80\n", argv[0]);
    return 2;
  }
  /* Under someone else's filter (a CI container) the unfiltered run is no
   * control: skip those assertions rather than blame this profile. */
  bool control = prctl(PR_GET_SECCOMP, 0, 0, 0, 0) == 0;
  printf("1..%zu\n", tests_per_abi(false, control) + 2 * tests_per_abi(true, control) + NSIMULATED +
                         NOTIFY_TESTS);
  if (!control)
    printf("# already under a seccomp filter: no control run assertions\n");
  bool absent = i386_absent(argv[2], argv[3]);
  test_abi("x86_64", argv[1], false, control, false, false);
  bool covered = test_abi("i386 (int $0x80)", argv[3], true, control, false, absent);
  test_abi("i386", argv[2], true, control, covered, absent);
  test_simulated();
  test_notify_filter();
  return failures ? 1 : 0;
}
