/* Making a directory with its missing parents (`mkdir -p`), for the host
 * side: the sandbox library and the server. */
#ifndef HUTCH_MKDIR_H
#define HUTCH_MKDIR_H

#include <sys/types.h>

#include "err.h"

/* Make path and each missing directory above it. The parents are made
 * 0755, path itself mode; a directory already there is left as it is.
 * Returns 0, or -1 with errno set and *err naming the directory that could
 * not be made ("mkdir DIR: reason"). */
int mkdir_p(const char *path, mode_t mode, struct hutch_err *err);

#endif
