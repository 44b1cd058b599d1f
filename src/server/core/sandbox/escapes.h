/* A sandbox's escape attempts: the syscalls its seccomp filter refused, as
 * its agent counts them (src/agent/monitor.c), shown in its info and on
 * /metrics, and written to the audit log at most once a minute per sandbox
 * and syscall (docs/security.md, "Escape attempts"). */
#ifndef HUTCH_CORE_SANDBOX_ESCAPES_H
#define HUTCH_CORE_SANDBOX_ESCAPES_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

struct agentc;
struct sbx;
struct server;

/* What the agent can name: its filter's table is shorter. */
#define ESCAPES_MAX_CALLS 160

struct escape_call {
  char name[32];
  uint64_t n;         /* as the agent last said */
  uint64_t audited;   /* n when the last audit line was written */
  int64_t audited_ms; /* when (0: never) */
};

struct escapes {
  /* The agent said it cannot count (its kernel gave it no listener).
   * Until it says either, nothing has run: no attempts. */
  bool uncounted;
  uint64_t total;
  struct escape_call *calls;
  unsigned ncalls;
  bool pending; /* some call has attempts no audit line has told yet */
  bool heard;   /* the agent's first counts (its HELLO) have come */
};

/* agentc's on_escapes: the agent's counts ({"total", "syscalls"}). */
void escapes_update(struct agentc *ac, json_t *counts);
/* Audit lines whose minute has passed (the reaper calls it). */
void escapes_audit_due(struct server *srv, int64_t now_ms);
/* The sandbox ends: what no line has told yet is written now. */
void escapes_final(struct sbx *sb);
void escapes_free(struct sbx *sb);
/* "escape_attempts" and "escape_syscalls" in the sandbox's JSON. */
void escapes_json(const struct sbx *sb, json_t *j);
/* hutch_escape_attempts_total{sandbox, syscall} for every live sandbox. */
void escapes_metrics(FILE *f, const struct server *srv);

#endif
