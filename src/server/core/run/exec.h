/* A command run in a sandbox while its caller follows it (a foreground
 * exec; background ones are core/procs.h). */
#ifndef HUTCH_CORE_RUN_EXEC_H
#define HUTCH_CORE_RUN_EXEC_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"

struct sbx;
struct server;
struct exec;

/* Where an exec's events go, in order: start once it runs, its output,
 * then end, always, last. After end the exec is gone. */
struct exec_sink {
  void (*start)(json_t *pid, void *arg); /* pid borrowed */
  /* Output of stream which (0 stdout, 1 stderr). false: the reader is
   * behind, the command waits (for its output pipe) until exec_resume. */
  bool (*output)(int which, const uint8_t *data, size_t n, void *arg);
  /* The verdict ({"type":"exit", …}, docs: ndjson_exit); taken. */
  void (*end)(json_t *exit, void *arg);
  void *arg;
};

/* Run the agent request req (exec_request) with in (NULL: none) as its
 * whole stdin; t0_ns: when the request came (for the latency metric).
 * NULL and err: unavailable sandbox_error. */
struct exec *exec_start(struct sbx *sb, json_t *req, const char *in, uint64_t t0_ns,
                        const struct exec_sink *sink, struct hutch_err *err);
/* The reader caught up: the command may go on. */
void exec_resume(struct exec *x);
/* The reader left before the end: the agent kills what the exec started.
 * The sink hears nothing more; x is freed (once the sink call under way,
 * if it is called from one, has returned). */
void exec_abandon(struct exec *x);
/* When the longest running of sb's foreground execs started (ms since the
 * epoch); 0: none runs. */
int64_t exec_oldest_ms(const struct sbx *sb);

/* The exec.started and exec.ended events of a command, a foreground exec
 * or a background process (procs.c): its argv (as "cmd") and pid; its exit
 * line (NULL: abandoned, its client gone) and how long it ran. */
void exec_report_start(struct server *srv, const char *tenant, const char *sandbox, json_t *argv,
                       json_t *pid, bool background);
void exec_report_end(struct server *srv, const char *tenant, const char *sandbox, json_t *argv,
                     json_t *exit_line, int64_t duration_ms, bool background);

#endif
