/* Code contexts: a kernel per context and the cells run in it, as actions
 * every front end calls (issue 17). Each that can fail returns NULL or -1
 * with err filled in; a cell's events go to the front end's sink. */
#ifndef HUTCH_CORE_RUN_CONTEXTS_H
#define HUTCH_CORE_RUN_CONTEXTS_H

#include <jansson.h>
#include <stdbool.h>

#include "err.h"

struct sbx;
struct context;
struct cell;

#define CONTEXTS_CODE_MAX (1u << 20) /* bytes of code in one cell */
#define CONTEXTS_CELL_TIMEOUT_S 300  /* a cell's timeout when none is given */

/* What a context is, for a front end to render. */
struct context_info {
  const char *id, *language;
  const char *cwd;     /* NULL: the kernel's own (the sandbox's home) */
  const char *state;   /* "starting", "ready" or "dead" */
  const char *died;    /* why it is dead; NULL while it is not */
  const char *fork_of; /* the context it is a copy of; NULL: none */
};
void contexts_info(const struct context *cx, struct context_info *out);

void contexts_free(struct sbx *sb);
/* When the longest running of sb's cells started (ms since the epoch); 0:
 * none runs. */
int64_t contexts_oldest_ms(const struct sbx *sb);
/* A new context of language (python, javascript or js, bash; NULL:
 * python) in cwd (NULL: the kernel's own) with env added to the
 * sandbox's. */
struct context *contexts_create(struct sbx *sb, const char *language, const char *cwd, json_t *env,
                                struct hutch_err *err);
struct context *contexts_find(struct sbx *sb, const char *id, struct hutch_err *err);
/* The default context of a language (made, or made again if it died). */
struct context *contexts_default(struct sbx *sb, const char *language, struct hutch_err *err);
/* E2B's interpreter starts with a python and a javascript context, listed
 * before any other: each sandbox's are made the first time this is called
 * (once; a default that dies is made again by the next cell that asks). */
void contexts_defaults(struct sbx *sb);
struct context *contexts_next(struct sbx *sb, struct context *prev); /* in order made */
void contexts_delete(struct context *cx);
int contexts_restart(struct context *cx, struct hutch_err *err);
/* SIGINT to the running cell, if one runs. */
void contexts_interrupt(struct context *cx);
/* A copy of a Python context: its state once the cells before run. */
struct context *contexts_fork(struct context *parent, struct hutch_err *err);

/* A cell: code, run in context_id or in the default context of language
 * (not both), with env, for at most timeout_s. */
struct cell_request {
  const char *code, *context_id, *language;
  json_t *env; /* NULL: none */
  double timeout_s;
};
/* Where a cell's events go. start comes first, once the cell is queued
 * (ce names it to contexts_cell_cancel and _drain); then event for each
 * of the lines E2B's interpreter sends (stdout, stderr, result, error,
 * number_of_executions, end_of_execution: ev is taken); end last. full:
 * whether the reader is behind, so the kernel's output waits until
 * contexts_cell_drain. After contexts_cell_cancel none is called. */
struct cell_sink {
  void (*start)(struct cell *ce, void *arg);
  void (*event)(json_t *ev, void *arg);
  void (*end)(void *arg);
  bool (*full)(void *arg);
  void *arg;
};
int contexts_run(struct sbx *sb, const struct cell_request *r, const struct cell_sink *sink,
                 struct hutch_err *err);
/* The reader went: a running cell is interrupted (the context keeps its
 * state), a waiting one dropped. */
void contexts_cell_cancel(struct cell *ce);
/* The reader caught up. */
void contexts_cell_drain(struct cell *ce);

#endif
