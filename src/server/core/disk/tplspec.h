/* What a template job is asked to do (tplspec.c): its spec checked, and
 * the steps it runs, each the argument list of one hutch-template child. */
#ifndef HUTCH_CORE_DISK_TPLSPEC_H
#define HUTCH_CORE_DISK_TPLSPEC_H

#include <stdbool.h>
#include "err.h"
#include "core/disk/templates.h"

struct principal;

/* Whether spec's name is a template's, and p may ask for it: a pull from
 * a registry on the server's loopback is the admin key's alone. false
 * with err (invalid_argument, forbidden). */
bool tplspec_ok(const struct template_spec *s, const struct principal *p, struct hutch_err *err);
/* j's steps for spec s, in order (j->steps, j->nsteps), with a build's
 * Dockerfile and context directory written in workdir; -1 and err. */
int tplspec_steps(struct template_job *j, const struct template_spec *s, const char *workdir,
                  struct hutch_err *err);
/* j's steps freed, none left. */
void tplspec_steps_free(struct template_job *j);

#endif
