/* hutch serve, hutch template, hutch mcp and the operator's verbs: each
 * is its own program beside this one (as hutch-agent is), hutch-serve,
 * hutch-template, hutch-mcp and hutch-ctl. They link the HTTP, database,
 * archive and HTTP-client libraries; hutch run stays a small static
 * program that starts fast. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

/* Run the program hutch-VERB from beside this one with our arguments. */
static int exec_beside(const char *verb, char **argv) {
  char self[PATH_MAX], path[PATH_MAX + 32];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n < 0) {
    fprintf(stderr, "hutch %s: readlink /proc/self/exe: %s\n", verb, strerror(errno));
    return EXIT_HUTCH;
  }
  self[n] = '\0';
  *strrchr(self, '/') = '\0';
  snprintf(path, sizeof path, "%s/hutch-%s", self, verb);
  argv[0] = path;
  execv(path, argv);
  fprintf(stderr, "hutch %s: %s: %s\n", verb, path, strerror(errno));
  return EXIT_HUTCH;
}

int cli_serve(int argc, char **argv) {
  (void)argc;
  return exec_beside("serve", argv);
}

int cli_mcp(int argc, char **argv) {
  (void)argc;
  return exec_beside("mcp", argv);
}

/* hutch template is the API's (hutch-ctl) unless it names a store of its
 * own: --local (the default store, taken off) or --state-dir DIR. */
int cli_template(int argc, char **argv) {
  bool local = false;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--") == 0)
      break;
    if (strcmp(argv[i], "--local") == 0) {
      memmove(&argv[i], &argv[i + 1], (size_t)(argc - i) * sizeof *argv);
      argc--;
      i--;
      local = true;
    } else if (strcmp(argv[i], "--state-dir") == 0 || strncmp(argv[i], "--state-dir=", 12) == 0) {
      local = true;
    }
  }
  if (local)
    return exec_beside("template", argv);
  return exec_beside("ctl", argv - 1); /* hutch's own argv: "template" is its verb */
}

int cli_ctl(int argc, char **argv) {
  (void)argc;
  return exec_beside("ctl", argv);
}
