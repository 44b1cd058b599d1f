/* The root of the `host` template, the default one (the template store of
 * every other template is images.h). It is a small skeleton of links,
 * mount points and a synthesized /etc, completed at sandbox creation by
 * read-only views of the host's /usr (and /bin, /lib... where they are not
 * links into /usr). */
#ifndef HUTCH_HOSTROOT_H
#define HUTCH_HOSTROOT_H

#include "err.h"

/* The host's top-level directories a `host` template shows. Each is either
 * replicated as a symlink (merged /usr) or shown read-only. */
extern const char *const hutch_hostroot_dirs[];
/* Host files and directories under /etc shown read-only. */
extern const char *const hutch_hostroot_etc[];

/* Path of the `host` template skeleton under state_dir, built on first use.
 * Returns a malloc'd path. */
char *hutch_hostroot_skeleton(const char *state_dir, struct hutch_err *err);

#endif
