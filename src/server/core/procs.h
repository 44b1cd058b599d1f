/* Background processes. */
#ifndef HUTCH_CORE_PROCS_H
#define HUTCH_CORE_PROCS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include "core/sbx.h"

struct server;
struct sbx;
struct http_conn;
struct principal;

/* procs.c: background processes (an exec with "background": true). A
 * process from the agent request req (exec_request); NULL after an error
 * answer. procs_start also answers c with 201 {pid} once it runs. */
struct proc *procs_spawn(struct http_conn *c, struct sbx *sb, json_t *req, const char *in,
                         bool keep_stdin);
int procs_start(struct http_conn *c, struct sbx *sb, json_t *req, const char *in,
                bool keep_stdin);
void procs_free(struct sbx *sb);
/* After a restart: the execs the agent still runs become background
 * processes (output from now on; what was kept went with the old server). */
void procs_adopt(struct sbx *sb, json_t *jobs);
/* For other readers and writers of a process (ws.c). A reader gets each
 * output line by line(), then the exit line by end(), which owns u (it is
 * unlinked then); one that goes away first calls procs_unsubscribe. */
struct sub {
  struct sub *next;
  struct proc *pr;
  void (*start)(struct sub *u, int pid); /* optional: it started */
  void (*line)(struct sub *u, const char *line, size_t n);
  void (*end)(struct sub *u, const char *line, size_t n);
  void *ctx;
};
struct proc *procs_find(struct http_conn *c, const struct principal *p); /* NULL after 404 */
struct sub *procs_subscribe(struct proc *pr,
                            void (*line)(struct sub *u, const char *line, size_t n),
                            void (*end)(struct sub *u, const char *line, size_t n), void *ctx);
void procs_unsubscribe(struct sub *u);
const char *procs_kept(const struct proc *pr, size_t *n);
json_t *procs_exit_line(const struct proc *pr); /* NULL while it runs */
/* A sandbox's processes that started, newest first (prev NULL: the first). */
struct proc *procs_next(struct sbx *sb, struct proc *prev);
struct proc *procs_by_pid(struct sbx *sb, int pid); /* NULL: none */
int procs_pid(const struct proc *pr);
json_t *procs_cmd(const struct proc *pr); /* the argv; borrowed */
/* 0, or -1 when its stdin is closed, -2 when too much waits unread. */
int procs_stdin(struct proc *pr, const void *data, size_t n, bool eof);
bool procs_control(struct proc *pr, json_t *ctl); /* takes ctl; false: ended */

#endif
