/* A verb's options (ctl.h): getopt_long over the verb's table, with the
 * options every verb has (--help, --url, --key) added. */
#include "ctl.h"

#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

enum { OPT_HELP = 1000, OPT_URL, OPT_KEY };

static const struct ctl_opt common[] = {
    {OPT_URL, "url", "URL", "the server (default $HUTCH_URL, else http://127.0.0.1:7420)"},
    {OPT_KEY, "key", "KEY",
     "the API key (default $HUTCH_API_KEY, else a readable local admin key)"},
    {OPT_HELP, "help", NULL, "print this help"},
    {0},
};

const struct ctl_opt *ctl_common_opts(void) {
  return common;
}

/* getopt_long's tables for v: "+" (stop at the first operand), then a
 * letter per short option; a struct option per option, common ones too. */
static void tables(const struct ctl_verb *v, char *shorts, size_t nshorts, struct option *longs,
                   size_t nlongs) {
  size_t s = 0, l = 0;
  shorts[s++] = '+';
  shorts[s++] = ':';
  const struct ctl_opt *lists[] = {v->opts, common};
  for (size_t k = 0; k < 2; k++) {
    for (const struct ctl_opt *o = lists[k]; o && o->id; o++) {
      if (o->id < 256 && s + 3 < nshorts) {
        shorts[s++] = (char)o->id;
        if (o->arg)
          shorts[s++] = ':';
      }
      if (o->name && l + 1 < nlongs)
        longs[l++] =
            (struct option){o->name, o->arg ? required_argument : no_argument, NULL, o->id};
    }
  }
  shorts[s] = '\0';
  longs[l] = (struct option){0};
}

int ctl_opt_next(struct ctl *ctl, int argc, char **argv, const char **arg) {
  char shorts[128];
  struct option longs[64];
  tables(ctl->verb, shorts, sizeof shorts, longs, ARRAY_SIZE(longs));
  opterr = 0;

  int c = getopt_long(argc, argv, shorts, longs, NULL);
  *arg = optarg;
  if (c == -1)
    return CTL_OPT_END;
  if (c == OPT_HELP) {
    ctl_help(ctl->verb, stdout);
    return CTL_OPT_HELP;
  }
  if (c == OPT_URL) {
    ctl->url = optarg;
    return ctl_opt_next(ctl, argc, argv, arg);
  }
  if (c == OPT_KEY) {
    ctl->key = optarg;
    return ctl_opt_next(ctl, argc, argv, arg);
  }
  if (c == '?' || c == ':') {
    char letter[3] = {'-', (char)optopt, '\0'};
    const char *what = optopt > 0 && optopt < 256 ? letter : argv[optind - 1];
    if (c == ':')
      ctl_fail(ctl, CTL_EXIT_FAILED, "option %s wants an argument (see hutch %s --help)", what,
               ctl->verb->name);
    else
      ctl_fail(ctl, CTL_EXIT_FAILED, "unknown option %s (see hutch %s --help)", what,
               ctl->verb->name);
    return CTL_OPT_BAD;
  }
  return c;
}

bool ctl_opts_end(struct ctl *ctl, int c, int argc, char **argv, int min, int max, int *rc) {
  *rc = CTL_EXIT_FAILED;
  if (c == CTL_OPT_HELP)
    *rc = 0;
  if (c != CTL_OPT_END)
    return false;

  int n = argc - optind;
  if (n < min) {
    ctl_fail(ctl, *rc, "too few arguments: usage: hutch %s %s", ctl->verb->name, ctl->verb->args);
    return false;
  }
  if (max >= 0 && n > max) {
    ctl_fail(ctl, *rc, "unexpected argument '%s': usage: hutch %s %s", argv[optind + max],
             ctl->verb->name, ctl->verb->args);
    return false;
  }
  *rc = 0;
  return true;
}

const char *ctl_sub(int *argc, char ***argv) {
  if (*argc < 2 || (*argv)[1][0] == '-')
    return NULL;
  (*argc)--;
  (*argv)++;
  return (*argv)[0];
}
