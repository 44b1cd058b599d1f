/* hutch doctor: whether this host can run hutch, each capability checked
 * (src/lib/hostcheck.c), and what to do where one is missing. */
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "hostcheck.h"

static const char usage[] =
    "usage: hutch doctor [--json] [--state-dir DIR]\n\n"
    "Check what hutch needs of this host and say what to do about what is missing.\n\n"
    "  --json            one JSON object: {\"ok\", \"state_dir\", \"checks\": [{\"name\",\n"
    "                    \"status\", \"optional\", \"detail\", \"remedy\"}]}\n"
    "  --state-dir DIR   the state directory whose filesystem to probe (default\n"
    "                    $HUTCH_STATE_DIR, else /var/lib/hutch)\n\n"
    "Exit status: 0 when hutch can make sandboxes here (optional items may be missing),\n"
    "1 when something it needs is missing or refused, 125 on a bad command line.\n";

static void print_text(const struct hutch_check *c, size_t n, bool ok) {
  for (size_t i = 0; i < n; i++) {
    printf("%-8s %-10s %s%s\n", hutch_check_status_name(c[i].status), c[i].name, c[i].detail,
           c[i].optional && c[i].status != HUTCH_CHECK_OK ? " (optional)" : "");
    if (c[i].status != HUTCH_CHECK_OK && c[i].remedy[0])
      printf("%-19s to fix: %s\n", "", c[i].remedy);
  }
  printf(ok ? "hutch can make sandboxes here\n"
            : "hutch cannot make sandboxes here: fix what is missing or refused above\n");
}

static void print_json(const struct hutch_check *c, size_t n, bool ok, const char *state_dir) {
  json_t *checks = json_array();
  for (size_t i = 0; i < n; i++)
    json_array_append_new(checks, json_pack("{s:s, s:s, s:b, s:s, s:s?}", "name", c[i].name,
                                            "status", hutch_check_status_name(c[i].status),
                                            "optional", c[i].optional, "detail", c[i].detail,
                                            "remedy", c[i].remedy[0] ? c[i].remedy : NULL));
  json_t *j = json_pack("{s:b, s:s, s:o}", "ok", ok, "state_dir", state_dir, "checks", checks);
  json_dumpf(j, stdout, JSON_INDENT(2));
  putchar('\n');
  json_decref(j);
}

int cli_doctor(int argc, char **argv) {
  enum { O_JSON = 256, O_STATE, O_HELP };
  static const struct option opts[] = {
      {"json", no_argument, NULL, O_JSON},
      {"state-dir", required_argument, NULL, O_STATE},
      {"help", no_argument, NULL, O_HELP},
      {0},
  };

  const char *state_dir = hutch_config_default_state_dir();
  bool json = false;
  int o;
  opterr = 0;
  while ((o = getopt_long(argc, argv, "+h", opts, NULL)) != -1) {
    if (o == O_JSON) {
      json = true;
    } else if (o == O_STATE) {
      state_dir = optarg;
    } else if (o == 'h' || o == O_HELP) {
      fputs(usage, stdout);
      return 0;
    } else {
      fprintf(stderr, "hutch doctor: unknown option '%s' (see hutch doctor --help)\n",
              argv[optind - 1]);
      return EXIT_HUTCH;
    }
  }
  if (optind < argc) {
    fprintf(stderr, "hutch doctor: unexpected argument '%s'\n", argv[optind]);
    return EXIT_HUTCH;
  }

  struct hutch_check checks[HUTCH_CHECK_MAX];
  size_t n = hutch_host_check_all(state_dir, checks);
  bool ok = true;
  for (size_t i = 0; i < n; i++)
    ok &= !hutch_check_fails(&checks[i]);

  if (json)
    print_json(checks, n, ok, state_dir);
  else
    print_text(checks, n, ok);
  fflush(stdout);
  return ok ? 0 : EXIT_DOCTOR_MISSING;
}
