/* hutch serve: the server is its own program, hutch-serve, beside this one
 * (as hutch-agent is). It links the HTTP, WebSocket and database
 * libraries; hutch run stays a small static program that starts fast. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

int cmd_serve(int argc, char **argv) {
  char self[PATH_MAX], path[PATH_MAX + 16];
  (void)argc;
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n < 0) {
    fprintf(stderr, "hutch serve: readlink /proc/self/exe: %s\n", strerror(errno));
    return EXIT_HUTCH;
  }
  self[n] = '\0';
  *strrchr(self, '/') = '\0';
  snprintf(path, sizeof path, "%s/hutch-serve", self);
  argv[0] = path;
  execv(path, argv);
  fprintf(stderr, "hutch serve: %s: %s\n", path, strerror(errno));
  return EXIT_HUTCH;
}
