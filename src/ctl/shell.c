/* hutch shell [-e K=V] [-w DIR] [-u USER] ID [CMD...]: an interactive
 * shell in a sandbox, on a terminal of our terminal's size (a session:
 * term_session.c). Without CMD, the sandbox's bash, else its sh: the
 * choice is made inside the sandbox, by sh, so a template without bash
 * still gets a shell. Without a terminal on stdin, the shell reads our
 * stdin as a pipe (`echo ls | hutch shell ID`). */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ctl.h"
#include "term_session.h"
#include "util.h"

#define DEFAULT_SHELL "if command -v bash >/dev/null 2>&1; then exec bash; fi; exec sh"

/* -e K=V into env; false after saying what is wrong. */
bool term_env_add(struct ctl *ctl, json_t *env, const char *kv) {
  const char *eq = strchr(kv, '=');
  if (!eq || eq == kv) {
    ctl_fail(ctl, CTL_EXIT_FAILED, "-e takes NAME=VALUE: not %s", kv);
    return false;
  }
  char *name = xasprintf("%.*s", (int)(eq - kv), kv);
  json_object_set_new(env, name, json_string(eq + 1));
  free(name);
  return true;
}

static const struct ctl_opt opts[] = {
    {'e', "env", "NAME=VALUE", "set a variable (again for more)"},
    {'w', "workdir", "DIR", "the directory it starts in"},
    {'u', "user", "USER", "who it runs as (user, root, a name, UID[:GID])"},
    {0},
};

static int shell_run(struct ctl *ctl, int argc, char **argv) {
  json_t *env = json_object(), *body = json_object();
  const char *arg;
  int c, rc = 0;
  while (!rc && (c = ctl_opt_next(ctl, argc, argv, &arg)) >= 0) {
    if (c == 'e')
      rc = term_env_add(ctl, env, arg) ? 0 : CTL_EXIT_FAILED;
    else if (c == 'w')
      json_object_set_new(body, "cwd", json_string(arg));
    else if (c == 'u')
      json_object_set_new(body, "user", json_string(arg));
  }
  if (rc || !ctl_opts_end(ctl, c, argc, argv, 1, -1, &rc)) {
    json_decref(env);
    json_decref(body);
    return rc;
  }

  json_t *cmd = json_array();
  if (optind + 1 == argc)
    for (const char *const *w = (const char *const[]){"/bin/sh", "-c", DEFAULT_SHELL, NULL}; *w;
         w++)
      json_array_append_new(cmd, json_string(*w));
  for (int i = optind + 1; i < argc; i++)
    json_array_append_new(cmd, json_string(argv[i]));
  json_object_set_new(body, "cmd", cmd);
  if (json_object_size(env))
    json_object_set(body, "env", env);
  struct term_session_opts o = {
      .sandbox = argv[optind], .body = body, .in = true, .tty = isatty(0)};
  rc = term_session_run(ctl, &o);
  json_decref(env);
  json_decref(body);
  return rc;
}

const struct ctl_verb ctl_verb_shell = {
    "shell", "[OPTIONS] ID [CMD [ARGS...]]",
    "an interactive shell in a sandbox (its bash, else sh; or CMD) on a terminal", opts, shell_run};
