/* hutch: the command. Each verb lives in its own file. */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"

int main(int argc, char **argv) {
  /* A reader of our output that goes away is an EPIPE to handle (the
   * sandbox must still be torn down), not a signal that ends us. */
  signal(SIGPIPE, SIG_IGN);

  /* The verbs hutch runs itself; every other one, help and version too,
   * is the operator's CLI, a client of a server (src/ctl/). */
  const char *verb = argc > 1 ? argv[1] : "";
  if (strcmp(verb, "run") == 0)
    return cli_run(argc - 1, argv + 1);
  if (strcmp(verb, "serve") == 0)
    return cli_serve(argc - 1, argv + 1);
  if (strcmp(verb, "template") == 0)
    return cli_template(argc - 1, argv + 1);
  if (strcmp(verb, "mcp") == 0)
    return cli_mcp(argc - 1, argv + 1);
  if (strcmp(verb, "doctor") == 0)
    return cli_doctor(argc - 1, argv + 1);
  return cli_ctl(argc, argv);
}
