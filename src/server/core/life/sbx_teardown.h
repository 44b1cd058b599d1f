/* The end of a sandbox (sbx_teardown.c). */
#ifndef HUTCH_CORE_LIFE_SBX_TEARDOWN_H
#define HUTCH_CORE_LIFE_SBX_TEARDOWN_H

#include <jansson.h>
#include "sandbox.h"
#include "core/sandbox/sbx.h"

/* End hs off the loop; then release the fork snapshot of layers (or NULL). */
void sbx_teardown(struct server *srv, struct hutch_sandbox *hs, json_t *layers);
/* Sandboxes being torn down that stack layer (a snapshot's id): its files
 * are mounted until they are gone, so it is in use as by a live one. */
unsigned sbx_teardown_users(const struct server *srv, const char *layer);
/* Out of the registry at once; its processes and cgroups go off the loop
 * (sbx_teardown). sbx_destroy_then calls gone(arg) once they are gone. */
void sbx_destroy(struct sbx *sb);
void sbx_destroy_then(struct sbx *sb, void (*gone)(void *arg), void *arg);
/* agentc on_dead of a sandbox's connection: the sandbox is destroyed. */
void sbx_agent_dead(struct agentc *ac);
void sbx_destroy_all(struct server *srv);
/* Let go of every sandbox without ending it (a stop that leaves them to
 * the next server). */
void sbx_release_all(struct server *srv);

#endif
