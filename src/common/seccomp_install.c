/* Installing the seccomp filters compiled into the program (the header
 * seccomp_gen writes at build time): the sandbox's, with or without a
 * listener for its refused calls, and the workload's; and the name of a
 * syscall the filters refuse, by its number. */
#include "seccomp_install.h"

#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "seccomp_filter.h"

static int install(const struct sock_filter *filter, unsigned short len, unsigned flags) {
  /* no_new_privs is what lets an unprivileged process install a filter, and
   * it makes sure no setuid or file-capability binary can run with the
   * filter's restrictions and gain privilege at the same time. */
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
    return -1;
  struct sock_fprog prog = {
      .len = len, .filter = (struct sock_filter *)filter, /* the kernel only reads it */
  };
  /* With SECCOMP_FILTER_FLAG_NEW_LISTENER the result is the listener. */
  return (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, flags, &prog);
}

int hutch_seccomp_install_sandbox(void) {
  return install(hutch_seccomp_filter, HUTCH_SECCOMP_FILTER_LEN, 0) < 0 ? -1 : 0;
}

int hutch_seccomp_install_sandbox_notify(void) {
  return install(hutch_seccomp_notify_filter, HUTCH_SECCOMP_NOTIFY_FILTER_LEN,
                 SECCOMP_FILTER_FLAG_NEW_LISTENER);
}

int hutch_seccomp_install_workload(void) {
  return install(hutch_workload_seccomp_filter, HUTCH_WORKLOAD_SECCOMP_FILTER_LEN, 0) < 0 ? -1 : 0;
}

const char *hutch_seccomp_refused_name(unsigned arch, int nr) {
  for (size_t i = 0; i < HUTCH_SECCOMP_REFUSED_LEN; i++)
    if (hutch_seccomp_refused[i].arch == arch && hutch_seccomp_refused[i].nr == nr)
      return hutch_seccomp_refused[i].name;
  return NULL;
}
