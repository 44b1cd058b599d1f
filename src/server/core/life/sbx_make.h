/* Making a sandbox off the loop (sbx_make.c). */
#ifndef HUTCH_CORE_LIFE_SBX_MAKE_H
#define HUTCH_CORE_LIFE_SBX_MAKE_H

#include "sandbox.h"
#include "core/sandbox/sbx.h"

/* Made off the loop (offload.c): made is called on the loop with the
 * sandbox, or NULL and why. What cfg points to must live until then. A
 * server stopping meanwhile gets none: what was made is destroyed. */
typedef void (*sbx_made_fn)(struct server *srv, struct sbx *sb, const struct hutch_err *err,
                            void *arg);
/* tenant's creates and other tenants' take turns for a lane (offload.c). */
void sbx_make(struct server *srv, const struct hutch_sandbox_config *cfg, const char *template,
              const char *tenant, sbx_made_fn made, void *arg);
/* The same for a pool: in the background, behind every create waiting,
 * built at SBX_AHEAD_NICE below the server's priority (sbx_make.c). */
#define SBX_AHEAD_NICE 10
void sbx_make_ahead(struct server *srv, const struct hutch_sandbox_config *cfg,
                    const char *template, sbx_made_fn made, void *arg);

#endif
