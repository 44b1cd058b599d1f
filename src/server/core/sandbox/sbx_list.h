/* A tenant's sandboxes as its lists show them (sbx_list.c). */
#ifndef HUTCH_CORE_SANDBOX_SBX_LIST_H
#define HUTCH_CORE_SANDBOX_SBX_LIST_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct server;
struct principal;
struct sbx;

/* Which of the caller's sandboxes a list shows. */
struct sbx_filter {
  bool running, paused;     /* the states shown */
  json_t *metadata;         /* an object: every pair must match; NULL: any */
  const char *template;     /* NULL: any */
  int64_t started_after_ms; /* made at or after it (ms since the epoch) */
};
/* The caller's sandboxes that pass f, newest first (ties by id): a
 * malloc'd array of *n (the sandboxes are the registry's). */
struct sbx **sbx_list(struct server *srv, const struct principal *p, const struct sbx_filter *f,
                      size_t *n);

#endif
