/* hutch mcp: hutch as an MCP server for an agent's client (Claude Code,
 * Cursor, VS Code), over stdio, reaching a hutch serve by its native API
 * (docs/mcp.md). The same tools are on hutch serve's /mcp over HTTP. */
#include <getopt.h>
#include <stdio.h>

#include "client.h"
#include "serve_stdio.h"

#define EXIT_USAGE 2
#define EXIT_CONFIG 78

static const char usage[] =
    "usage: hutch mcp [--url URL] [--key KEY]\n"
    "  Serve MCP over stdin and stdout for an agent's client; logs go to stderr.\n"
    "  --url URL   the hutch serve to reach (default $HUTCH_URL, else http://127.0.0.1:7420)\n"
    "  --key KEY   its API key (default $HUTCH_API_KEY, else the admin key in\n"
    "              $HUTCH_STATE_DIR/admin.key or /var/lib/hutch/admin.key when readable)\n";

int main(int argc, char **argv) {
  struct hc_client n = {0};
  const char *url = NULL, *key = NULL;
  static const struct option opts[] = {
      {"url", required_argument, NULL, 'u'},
      {"key", required_argument, NULL, 'k'},
      {"help", no_argument, NULL, 'h'},
      {0},
  };
  int c;
  while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
    if (c == 'u')
      url = optarg;
    else if (c == 'k')
      key = optarg;
    else if (c == 'h') {
      fputs(usage, stdout);
      return 0;
    } else {
      fputs(usage, stderr);
      return EXIT_USAGE;
    }
  }
  if (optind < argc) {
    fprintf(stderr, "hutch mcp: unexpected argument '%s'\n", argv[optind]);
    return EXIT_USAGE;
  }

  char why[512];
  int rc = hc_client_setup(&n, url, key, why, sizeof why);
  if (rc != HC_SETUP_OK) {
    fprintf(stderr, "hutch mcp: %s\n", why);
    return rc == HC_SETUP_BAD_URL ? EXIT_USAGE : EXIT_CONFIG;
  }
  hc_init();
  return mcp_stdio_serve(&n);
}
