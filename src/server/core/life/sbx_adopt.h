/* Taking sandboxes over after a restart (sbx_adopt.c). */
#ifndef HUTCH_CORE_LIFE_SBX_ADOPT_H
#define HUTCH_CORE_LIFE_SBX_ADOPT_H

#include "err.h"

struct server;
struct sbx;

/* Connect to the agent of a sandbox taken over (agent_pending): its
 * HELLO, then the execs it still runs. -1 when it does not answer. */
int sbx_connect_agent(struct sbx *sb);
/* At start: take over the sandboxes the last server left running. */
int sbx_adopt_all(struct server *srv, struct hutch_err *err);

#endif
