/* What the shell takes of config.c, the checks of a sandbox's config.
 * hutch_config_check itself, which every front end calls, is declared in
 * sandbox.h, beside the config it checks. */
#ifndef HUTCH_CONFIG_H
#define HUTCH_CONFIG_H

#include <sys/stat.h>

#include "sandbox.h"

/* Look a bind source up once, for good: an O_PATH fd of b's source, with
 * *st its stat, checked to be what a bind source must be. The shell
 * id-maps that fd and clones the mount from it, so that what was checked
 * is what is mounted. -1 with err set otherwise. */
int hutch_config_open_bind(const struct hutch_bind *b, struct stat *st, struct hutch_err *err);

#endif
