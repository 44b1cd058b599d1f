#include "seccomp_install.h"

#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "seccomp_filter.h"

static int install(const struct sock_filter *filter, unsigned short len) {
  /* no_new_privs is what lets an unprivileged process install a filter, and
   * it makes sure no setuid or file-capability binary can run with the
   * filter's restrictions and gain privilege at the same time. */
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
    return -1;
  struct sock_fprog prog = {
      .len = len,
      .filter = (struct sock_filter *)filter, /* the kernel only reads it */
  };
  if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) < 0)
    return -1;
  return 0;
}

int hutch_seccomp_install_sandbox(void) {
  return install(hutch_seccomp_filter, HUTCH_SECCOMP_FILTER_LEN);
}

int hutch_seccomp_install_workload(void) {
  return install(hutch_workload_seccomp_filter, HUTCH_WORKLOAD_SECCOMP_FILTER_LEN);
}
