/* hutch: the command. Each verb lives in its own file. */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "frame.h"

#define HUTCH_VERSION "0.1.0"

static const char usage[] =
    "usage: hutch COMMAND [ARGS...]\n\n"
    "  run [OPTIONS] -- CMD [ARGS...]   run CMD in a fresh sandbox (see hutch run --help)\n"
    "  serve [OPTIONS]                  serve the HTTP API (see hutch serve --help)\n"
    "  template VERB ...                import, pull, build and list templates (hutch template "
    "--help)\n"
    "  mcp [--url URL] [--key KEY]      serve MCP over stdio for an agent (docs/mcp.md)\n"
    "  doctor [--json]                  check what hutch needs of this host\n"
    "  version                          print the version\n";

int main(int argc, char **argv) {
  /* A reader of our output that goes away is an EPIPE to handle (the
   * sandbox must still be torn down), not a signal that ends us. */
  signal(SIGPIPE, SIG_IGN);

  if (argc < 2) {
    fprintf(stderr, "hutch: no command given (see hutch --help)\n");
    return EXIT_HUTCH;
  }

  const char *verb = argv[1];
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

  if (strcmp(verb, "version") == 0 || strcmp(verb, "--version") == 0) {
    printf("hutch %s (agent protocol %d)\n", HUTCH_VERSION, HUTCH_PROTOCOL_VERSION);
    return 0;
  }
  if (strcmp(verb, "help") == 0 || strcmp(verb, "--help") == 0 || strcmp(verb, "-h") == 0) {
    fputs(usage, stdout);
    return 0;
  }

  fprintf(stderr, "hutch: unknown command '%s' (see hutch --help)\n", verb);
  return EXIT_HUTCH;
}
