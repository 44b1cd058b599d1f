/* hutch mcp: hutch as an MCP server for an agent's client (Claude Code,
 * Cursor, VS Code), over stdio, reaching a hutch serve by its native API
 * (docs/mcp.md). The same tools are on hutch serve's /mcp over HTTP. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"
#include "serve_stdio.h"
#include "util.h"

#define EXIT_USAGE 2
#define EXIT_CONFIG 78

static const char usage[] =
    "usage: hutch mcp [--url URL] [--key KEY]\n"
    "  Serve MCP over stdin and stdout for an agent's client; logs go to stderr.\n"
    "  --url URL   the hutch serve to reach (default $HUTCH_URL, else http://127.0.0.1:7420)\n"
    "  --key KEY   its API key (default $HUTCH_API_KEY, else the admin key in\n"
    "              $HUTCH_STATE_DIR/admin.key or /var/lib/hutch/admin.key when readable)\n";

/* The admin key of a local server, when this user may read it. */
static bool local_key(char *key, size_t n) {
  const char *dir = getenv("HUTCH_STATE_DIR");
  char path[4096];
  snprintf(path, sizeof path, "%s/admin.key", dir && *dir ? dir : "/var/lib/hutch");
  FILE *f = fopen(path, "r");
  if (!f)
    return false;
  bool ok = fgets(key, (int)n, f) != NULL;
  fclose(f);
  key[strcspn(key, "\r\n")] = '\0';
  return ok && key[0];
}

int main(int argc, char **argv) {
  struct hc_client n = {0};
  const char *url = getenv("HUTCH_URL");
  const char *key = getenv("HUTCH_API_KEY");
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

  if (!url || !*url)
    url = "http://127.0.0.1:7420";
  if (strncmp(url, "http://", 7) != 0 && strncmp(url, "https://", 8) != 0) {
    fprintf(stderr, "hutch mcp: --url wants http://HOST:PORT or https://..., not '%s'\n", url);
    return EXIT_USAGE;
  }
  if (strlen(url) >= sizeof n.url) {
    fprintf(stderr, "hutch mcp: --url is longer than %zu bytes\n", sizeof n.url - 1);
    return EXIT_USAGE;
  }
  str_copy(n.url, sizeof n.url, url);
  size_t len = strlen(n.url);
  while (len && n.url[len - 1] == '/')
    n.url[--len] = '\0';

  if (key && *key)
    str_copy(n.key, sizeof n.key, key);
  else if (!local_key(n.key, sizeof n.key)) {
    fprintf(stderr, "hutch mcp: no API key: set HUTCH_API_KEY or --key (the admin key of a "
                    "local server is read only when this user may read it)\n");
    return EXIT_CONFIG;
  }
  hc_init();
  return mcp_stdio_serve(&n);
}
