/* The helper is a process, not a thread: the sandbox's first process is
 * cloned while the helper works, and a thread could hold a libc lock at that
 * moment that the clone would then keep locked forever. The helper itself
 * makes only system calls. Its namespace belongs to the host's user
 * namespace, like the sandbox's others (spawn.c). */
#include "netns.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

int hutch_netns_begin(struct hutch_netns *n, struct hutch_err *err) {
  int p[2];
  n->pid = 0;
  n->pidfd = n->done_fd = -1;
  if (pipe2(p, O_CLOEXEC) < 0)
    return hutch_err_set(err, errno, "pipe");
  struct clone_args args = {.flags = CLONE_PIDFD, .pidfd = (uint64_t)(uintptr_t)&n->pidfd,
                            .exit_signal = SIGCHLD};
  pid_t pid = (pid_t)syscall(SYS_clone3, &args, sizeof args);
  if (pid == 0) {
    /* Say when the namespace exists (or not), then wait to be killed. */
    char ok = unshare(CLONE_NEWNET) == 0;
    close(p[0]);
    (void)!write(p[1], &ok, 1);
    pause();
    _exit(0);
  }
  close(p[1]);
  if (pid < 0) {
    close(p[0]);
    return hutch_err_set(err, errno, "clone the network namespace helper");
  }
  n->pid = pid;
  n->done_fd = p[0];
  return 0;
}

int hutch_netns_take(struct hutch_netns *n, struct hutch_err *err) {
  if (n->pid <= 0 || n->done_fd < 0)
    return hutch_err_set(err, 0, "no network namespace");
  char ok = 0, path[64];
  int fd = -1;
  if (read(n->done_fd, &ok, 1) == 1 && ok) {
    snprintf(path, sizeof path, "/proc/%d/ns/net", (int)n->pid);
    fd = open(path, O_RDONLY | O_CLOEXEC); /* our unreaped child: its pid is stable */
  }
  int e = ok ? errno : EPERM;
  close(n->done_fd);
  n->done_fd = -1;
  syscall(SYS_pidfd_send_signal, n->pidfd, SIGKILL, NULL, 0);
  if (fd < 0)
    return hutch_err_set(err, e, "make the network namespace");
  return fd;
}

void hutch_netns_reap(struct hutch_netns *n) {
  if (n->pid <= 0)
    return;
  syscall(SYS_pidfd_send_signal, n->pidfd, SIGKILL, NULL, 0);
  waitpid(n->pid, NULL, 0);
  close(n->pidfd);
  if (n->done_fd >= 0)
    close(n->done_fd);
  n->pid = 0;
}
