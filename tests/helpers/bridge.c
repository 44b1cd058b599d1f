/* Test helper: create a sandbox and relay its agent connection over
 * stdin/stdout, so a test can speak the protocol itself. The sandbox is
 * destroyed when stdin ends. Usage: bridge --agent PATH [--memory MB]
 * [--pids N] [--disk MB]. Prints nothing but the agent's bytes; errors on
 * stderr. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sandbox.h"
#include "util.h"

static int relay(int from, int to) {
  char buf[65536];
  ssize_t n = read(from, buf, sizeof buf);
  if (n < 0 && (errno == EAGAIN || errno == EINTR))
    return 0;
  if (n <= 0)
    return -1;
  return write_all(to, buf, (size_t)n);
}

int main(int argc, char **argv) {
  struct hutch_sandbox_config cfg = {.die_with_parent = true};
  for (int i = 1; i + 1 < argc; i += 2) {
    uint64_t v;
    if (strcmp(argv[i], "--agent") == 0) {
      cfg.agent = argv[i + 1];
      continue;
    }
    if (!parse_u64(argv[i + 1], &v)) {
      fprintf(stderr, "bridge: bad value %s\n", argv[i + 1]);
      return 2;
    }
    if (strcmp(argv[i], "--memory") == 0)
      cfg.memory_bytes = v << 20;
    else if (strcmp(argv[i], "--pids") == 0)
      cfg.pids = v;
    else if (strcmp(argv[i], "--disk") == 0)
      cfg.disk_bytes = v << 20;
  }
  struct hutch_err err = {0};
  struct hutch_sandbox *sb;
  if (hutch_config_check(&cfg, &err) < 0 || hutch_sandbox_create(&cfg, &sb, &err) < 0) {
    fprintf(stderr, "bridge: %s\n", err.msg);
    return 1;
  }
  /* Plain blocking relay: the test reads what we write. */
  fcntl(sb->conn_fd, F_SETFL, fcntl(sb->conn_fd, F_GETFL) & ~O_NONBLOCK);
  for (;;) {
    struct pollfd p[2] = {{0, POLLIN, 0}, {sb->conn_fd, POLLIN, 0}};
    if (poll(p, 2, -1) < 0 && errno != EINTR)
      break;
    if (p[0].revents && relay(0, sb->conn_fd) < 0)
      break;
    if (p[1].revents && relay(sb->conn_fd, 1) < 0)
      break;
  }
  int r = hutch_sandbox_destroy(sb, &err);
  if (r < 0)
    fprintf(stderr, "bridge: %s\n", err.msg);
  return r < 0 ? 1 : 0;
}
