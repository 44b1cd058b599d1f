/* A template job's disk ceiling (tplcap.c): what its child may write,
 * held of its tenant's disk quota while it runs, released at its end
 * (diskroom_uncap of j->max_bytes). */
#ifndef HUTCH_CORE_DISK_TPLCAP_H
#define HUTCH_CORE_DISK_TPLCAP_H

#include <stdbool.h>

#include <stdint.h>

struct hutch_err;

struct template_job;

/* How many of j's tenant's jobs but j are running. */
int tplcap_running(const struct template_job *j);
/* Whether j must wait for its tenant's running jobs to end: their
 * ceilings hold all of its disk quota left. */
bool tplcap_waits(struct template_job *j);
/* Hold j's ceiling (j->max_bytes): 0, or -1 and err (quota_exceeded when
 * nothing is left, no_space). */
int tplcap_take(struct template_job *j, struct hutch_err *err);

#endif
