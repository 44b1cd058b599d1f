/* The table of hutch's verbs (ctl.h): what hutch-ctl runs, what hutch
 * help lists and what the bash completion offers (help --complete). */
#include "ctl.h"

#include <getopt.h>
#include <string.h>

/* The verbs hutch runs itself (src/cli/main.c), listed here so that one
 * table says what hutch can do. */
static const struct ctl_verb run = {"run", "[OPTIONS] -- CMD [ARGS...]",
                                    "run CMD in a fresh sandbox, no server (hutch run --help)"};
static const struct ctl_verb serve = {"serve", "[OPTIONS]",
                                      "serve the HTTP API (hutch serve --help)"};
static const struct ctl_verb mcp = {"mcp", "[--url URL] [--key KEY]",
                                    "serve MCP over stdio for an agent (docs/mcp.md)"};
static const struct ctl_verb doctor = {"doctor", "[--json]", "check what hutch needs of this host"};

const struct ctl_verb *const ctl_verbs[] = {
    /* a sandbox's life */
    &ctl_verb_ps,
    &ctl_verb_create,
    &ctl_verb_inspect,
    &ctl_verb_kill,
    &ctl_verb_pause,
    &ctl_verb_resume,
    &ctl_verb_snapshot,
    &ctl_verb_fork,
    &ctl_verb_port,
    /* work in one */
    &ctl_verb_exec,
    &ctl_verb_shell,
    &ctl_verb_cp,
    &ctl_verb_top,
    /* what happens */
    &ctl_verb_logs,
    &ctl_verb_events,
    /* what they use */
    &ctl_verb_template,
    &ctl_verb_volume,
    /* the admin's */
    &ctl_verb_key,
    &ctl_verb_tenant,
    /* hutch itself */
    &run,
    &serve,
    &mcp,
    &doctor,
    &ctl_verb_version,
    &ctl_verb_help,
    NULL,
};

const struct ctl_verb *ctl_verb_find(const char *name) {
  for (size_t i = 0; ctl_verbs[i]; i++)
    if (strcmp(ctl_verbs[i]->name, name) == 0)
      return ctl_verbs[i];
  return NULL;
}

static void help_opts(const struct ctl_opt *o, FILE *to) {
  for (; o && o->id; o++) {
    char left[64];
    if (o->id < 256)
      snprintf(left, sizeof left, "-%c, --%s%s%s", o->id, o->name, o->arg ? " " : "",
               o->arg ? o->arg : "");
    else
      snprintf(left, sizeof left, "    --%s%s%s", o->name, o->arg ? " " : "", o->arg ? o->arg : "");
    fprintf(to, "  %-24s %s\n", left, o->help);
  }
}

void ctl_help(const struct ctl_verb *v, FILE *to) {
  fprintf(to, "usage: hutch %s %s\n%s\n", v->name, v->args, v->summary);
  if (!v->run)
    return;
  fputs("\noptions:\n", to);
  help_opts(v->opts, to);
  help_opts(ctl_common_opts(), to);
}

/* The bash completion's questions: the verbs, or a verb's subcommands
 * and options. */
static void complete(const char *verb) {
  if (!verb) {
    for (size_t i = 0; ctl_verbs[i]; i++)
      printf("%s\n", ctl_verbs[i]->name);
    return;
  }
  const struct ctl_verb *v = ctl_verb_find(verb);
  if (!v || !v->run)
    return;
  for (const char *s = v->subs; s && *s; s += strspn(s, " ")) {
    size_t n = strcspn(s, " ");
    printf("%.*s\n", (int)n, s);
    s += n;
  }
  const struct ctl_opt *lists[] = {v->opts, ctl_common_opts()};
  for (size_t k = 0; k < 2; k++)
    for (const struct ctl_opt *o = lists[k]; o && o->id; o++)
      printf("--%s\n", o->name);
}

static void help_all(void) {
  fputs("usage: hutch COMMAND [ARGS...]\n\n", stdout);
  for (size_t i = 0; ctl_verbs[i]; i++)
    printf("  %-10s %s\n", ctl_verbs[i]->name, ctl_verbs[i]->summary);
  fputs("\nhutch help COMMAND (or hutch COMMAND --help) for its options; docs/cli.md for exit\n"
        "codes and the environment ($HUTCH_URL, $HUTCH_API_KEY, NO_COLOR).\n",
        stdout);
}

enum { OPT_COMPLETE = 256 };
static const struct ctl_opt help_opts_table[] = {
    {OPT_COMPLETE, "complete", NULL, "print the verbs, or VERB's options, one a line"},
    {0},
};

static int help_run(struct ctl *ctl, int argc, char **argv) {
  bool completing = false;
  int c, rc;
  const char *arg;
  while ((c = ctl_opt_next(ctl, argc, argv, &arg)) >= 0)
    completing = c == OPT_COMPLETE;
  if (!ctl_opts_end(ctl, c, argc, argv, 0, 1, &rc))
    return rc;

  const char *name = optind < argc ? argv[optind] : NULL;
  if (completing) {
    complete(name);
    return 0;
  }
  if (!name) {
    help_all();
    return 0;
  }
  const struct ctl_verb *v = ctl_verb_find(name);
  if (!v)
    return ctl_fail(ctl, CTL_EXIT_FAILED, "no command '%s' (see hutch help)", name);
  ctl_help(v, stdout);
  return 0;
}

const struct ctl_verb ctl_verb_help = {"help", "[--complete] [COMMAND]",
                                       "list the commands, or say what COMMAND does",
                                       help_opts_table, help_run};
