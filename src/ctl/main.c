/* hutch-ctl: `hutch VERB ...` for the verbs a server answers; hutch
 * (src/cli/main.c) runs it with its own arguments, the verb first. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ctl.h"

int main(int argc, char **argv) {
  /* A reader of our output that goes away (hutch ps | head) is a write
   * error, not a signal that ends us mid-request. */
  signal(SIGPIPE, SIG_IGN);
  /* Ctrl-C ends a verb (an exec streaming, logs -f), and with it what the
   * verb holds on the server, even when whatever started us ignored
   * SIGINT (a shell's background job, a CI runner): an operator who sends
   * it means it. The verbs that read it themselves (shell, top) block it
   * for their signalfd. */
  signal(SIGINT, SIG_DFL);

  const char *no_color = getenv("NO_COLOR");
  struct ctl ctl = {.color = isatty(STDOUT_FILENO) && !(no_color && *no_color)};
  if (argc < 2) {
    fprintf(stderr, "hutch: no command given (see hutch help)\n");
    return CTL_EXIT_FAILED;
  }

  const char *name = argv[1];
  if (strcmp(name, "--help") == 0 || strcmp(name, "-h") == 0)
    name = "help";
  else if (strcmp(name, "--version") == 0)
    name = "version";
  ctl.verb = ctl_verb_find(name);
  if (!ctl.verb || !ctl.verb->run) {
    ctl.verb = NULL;
    return ctl_fail(&ctl, CTL_EXIT_FAILED, "unknown command '%s' (see hutch help)", argv[1]);
  }
  return ctl.verb->run(&ctl, argc - 1, argv + 1);
}
