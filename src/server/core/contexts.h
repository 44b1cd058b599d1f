/* Code contexts. */
#ifndef HUTCH_CORE_CONTEXTS_H
#define HUTCH_CORE_CONTEXTS_H

#include <jansson.h>
#include "core/sbx.h"

struct sbx;
struct http_conn;

/* contexts.c: code contexts, their kernels, and /code. The core, shared
 * by both APIs; each returns NULL (or -1) after an error answer. */
void contexts_free(struct sbx *sb);
struct context *contexts_create(struct http_conn *c, struct sbx *sb, const char *language,
                                const char *cwd, json_t *env);
struct context *contexts_find(struct http_conn *c, struct sbx *sb, const char *id);
/* The default context of a language (made, or made again if it died). */
struct context *contexts_default(struct http_conn *c, struct sbx *sb, const char *language);
struct context *contexts_next(struct sbx *sb, struct context *prev); /* in order made */
json_t *contexts_json(const struct context *cx); /* {id, language, cwd, state, error?} */
void contexts_delete(struct context *cx);
int contexts_restart(struct http_conn *c, struct context *cx);
/* Run a cell: o is a native /code body; the answer streams. */
void contexts_run(struct http_conn *c, struct sbx *sb, json_t *o);

#endif
