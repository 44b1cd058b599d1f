/* Adopting a sandbox another process made and left running (a server that
 * restarted): its agent's pid checked to be that sandbox's, its slot's
 * cgroup and lock taken, and its agent's socket connected to
 * (hutch_shell_adopt, shell.h). */
#include "shell.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include "slot.h"
#include "util.h"

/* Whether pid is in slot's cgroup: of the lines "ID:CONTROLLERS:PATH" of
 * its /proc/PID/cgroup, those of hutch's hierarchies (v1: the controllers
 * it uses; v2: the one) are in the slot's cgroup, and none is in another
 * sandbox's. */
static bool in_slot_cgroup(pid_t pid, unsigned slot) {
  char path[64], buf[4096], want[32];
  struct hutch_err ignored;
  snprintf(path, sizeof path, "/proc/%d/cgroup", pid);
  int wn = snprintf(want, sizeof want, "/hutch/%u", slot);
  if (read_file_at(AT_FDCWD, path, buf, sizeof buf, &ignored) <= 0)
    return false;

  bool found = false;
  for (char *line = buf, *end; *line; line = end + 1) {
    end = strchr(line, '\n');
    if (!end)
      break;
    *end = '\0';
    char *colon = strchr(line, ':');
    char *p = colon ? strchr(colon + 1, ':') : NULL;
    if (!p || strncmp(p + 1, "/hutch/", 7) != 0)
      continue; /* a hierarchy hutch does not use */
    if (strncmp(p + 1, want, (size_t)wn) != 0 || (p[1 + wn] && p[1 + wn] != '/'))
      return false;
    found = true;
  }
  return found;
}

/* Whether pid is the agent of the sandbox in slot: PID 1 of its own pid
 * namespace, running as the slot's host id, in the slot's cgroup. */
static bool is_agent_of(pid_t pid, unsigned slot, uid_t base) {
  char path[64], buf[4096];
  struct hutch_err ignored;
  snprintf(path, sizeof path, "/proc/%d/status", pid);
  ssize_t n = read_file_at(AT_FDCWD, path, buf, sizeof buf, &ignored);
  if (n <= 0)
    return false;
  const char *uid = strstr(buf, "\nUid:\t"), *nspid = strstr(buf, "\nNSpid:\t");
  if (!uid || strtoul(uid + 6, NULL, 10) != base || !nspid)
    return false;
  /* Exactly two pids: ours, and 1 in the sandbox's own namespace. */
  char *after;
  strtol(nspid + 8, &after, 10);
  if (*after != '\t' || strtol(after + 1, &after, 10) != 1 || *after != '\n')
    return false;

  return in_slot_cgroup(pid, slot);
}

/* The agent's listening socket, at LISTEN_DIR/<id>.sock, connected to:
 * sb->conn_fd. */
static int connect_agent(struct hutch_sandbox *sb, const char *id, const char *listen_dir,
                         struct hutch_err *err) {
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  if (snprintf(sb->listen_path, sizeof sb->listen_path, "%s/%s.sock", listen_dir, id) >=
      (int)sizeof sa.sun_path)
    return hutch_err_invalid(err, "agent socket directory %s: path too long", listen_dir);

  sb->conn_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (sb->conn_fd < 0)
    return hutch_err_set(err, errno, "socket");
  memcpy(sa.sun_path, sb->listen_path, strlen(sb->listen_path) + 1);
  if (connect(sb->conn_fd, (struct sockaddr *)&sa, sizeof sa) < 0)
    return hutch_err_set(err, errno, "sandbox %s: connecting to its agent", id);
  if (fcntl(sb->conn_fd, F_SETFL, O_NONBLOCK) < 0)
    return hutch_err_set(err, errno, "agent connection");
  return 0;
}

/* What adopting the agent pid of slot takes, in order: its pidfd first,
 * then the checks (a pid checked and then opened could be another process
 * by the time it is opened), the slot's cgroup and its lock, and with
 * listen_dir the agent's socket. */
static int adopt_agent(struct hutch_sandbox *sb, const char *id, unsigned slot, pid_t pid,
                       const char *listen_dir, struct hutch_err *err) {
  char name[16];
  snprintf(name, sizeof name, "%u", slot);

  sb->pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
  if (sb->pidfd < 0 || !is_agent_of(pid, slot, sb->uid_base))
    return hutch_err_not_found(err, "sandbox %s: its agent (pid %d) is gone", id, pid);

  if (hutch_cgroup_open_root(&sb->root, err) < 0)
    return hutch_err_wrap(err, "sandbox %s", id);
  if (sb->root.ops->open(&sb->root, name, &sb->cg, err) < 0)
    return hutch_err_wrap(err, "sandbox %s", id);

  sb->lock_fd = openat(hutch_cg_fd(&sb->cg, CG_MEMORY), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (sb->lock_fd < 0 || flock(sb->lock_fd, LOCK_EX | LOCK_NB) < 0)
    return hutch_err_set(err, errno, "sandbox %s: its cgroup is someone else's", id);

  if (!listen_dir)
    return 0;
  return connect_agent(sb, id, listen_dir, err);
}

int hutch_shell_adopt(const char *id, unsigned slot, pid_t pid, const char *listen_dir,
                      struct hutch_sandbox **out, struct hutch_err *err) {
  if (strlen(id) != 16 || strspn(id, "0123456789abcdef") != 16 || slot >= HUTCH_SLOTS)
    return hutch_err_invalid(err, "not a sandbox: %s in slot %u", id, slot);

  struct hutch_sandbox *sb = xcalloc(1, sizeof *sb);
  sb->lock_fd = sb->pidfd = sb->conn_fd = sb->storage_fd = -1;
  memcpy(sb->id, id, sizeof sb->id);
  sb->slot = slot;
  sb->uid_base = hutch_slot_uid_base(slot);
  sb->pid = pid;
  if (adopt_agent(sb, id, slot, pid, listen_dir, err) < 0) {
    /* Not ours after all: leave it as it is (gone, or someone else's). */
    sb->listen_path[0] = '\0';
    if (sb->pidfd >= 0)
      close(sb->pidfd);
    sb->pidfd = -1;
    if (sb->cg.ops)
      hutch_cgroup_close(&sb->cg);
    memset(&sb->cg, 0, sizeof sb->cg);
    struct hutch_err ignored;
    hutch_shell_destroy(sb, &ignored);
    return -1;
  }

  sb->storage_fd = hutch_shell_storage_of(sb->pidfd);
  hutch_shell_close_root(sb);
  *out = sb;
  return 0;
}
