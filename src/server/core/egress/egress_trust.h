/* A sandbox trusts its egress CA (egress_trust.c). */
#ifndef HUTCH_CORE_EGRESS_EGRESS_TRUST_H
#define HUTCH_CORE_EGRESS_EGRESS_TRUST_H

#include "err.h"

struct sbx;

/* When sb has secrets and no CA yet, make its CA and
 * install its certificate in the sandbox (1; done(NULL or why, arg) is
 * called once it is there or failed, from the agent connection's
 * callback); else 0, and done is not called. With done NULL, a failure is
 * said on stderr. */
typedef void (*trust_done_fn)(const struct hutch_err *err, void *arg);
int egress_trust(struct sbx *sb, trust_done_fn done, void *arg);

#endif
