/* An interactive session on a sandbox: a command started as a background
 * process (on a PTY with -t, its stdin kept open), attached over the
 * WebSocket route, the local terminal raw while it runs. What `hutch
 * shell` and `hutch exec -it` share. */
#ifndef HUTCH_TERM_SESSION_H
#define HUTCH_TERM_SESSION_H

#include <jansson.h>
#include <stdbool.h>

#include "ctl.h"

struct term_session_opts {
  const char *sandbox;
  json_t *body; /* the exec's: cmd, env, cwd, user (borrowed) */
  bool in;      /* -i: our stdin goes to the command */
  bool tty;     /* -t: a terminal of our terminal's size */
};

/* Run the session; the command's exit status (128+N for a signal), or
 * one of the CLI's own codes when hutch failed (one line on stderr). */
int term_session_run(struct ctl *ctl, const struct term_session_opts *o);

/* An -e NAME=VALUE added to env (shell.c); false after saying what is
 * wrong. */
bool term_env_add(struct ctl *ctl, json_t *env, const char *kv);

#endif
