/* A sandbox's escape attempts, as its agent reports them (escapes.h).
 *
 * The agent sends cumulative counts, so a report lost with a connection
 * loses nothing; the server keeps the last ones. It trusts their numbers
 * no further than their shape: at most ESCAPES_MAX_CALLS names of at most
 * 31 characters from [a-z0-9_], counts that only grow. */

#include "core/sandbox/escapes.h"

#include <stddef.h>
#include <string.h>

#include "util.h"
#include "core/events/events.h"
#include "core/sandbox/audit.h"
#include "core/sandbox/sbx.h"

/* One audit line per sandbox and syscall per this many ms. */
#define AUDIT_INTERVAL_MS 60000

static bool good_name(const char *s) {
  size_t n = strlen(s);
  return n > 0 && n < sizeof((struct escape_call *)0)->name &&
         strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789_") == n;
}

static struct escape_call *find_or_add(struct escapes *e, const char *name) {
  for (unsigned i = 0; i < e->ncalls; i++)
    if (strcmp(e->calls[i].name, name) == 0)
      return &e->calls[i];
  if (e->ncalls == ESCAPES_MAX_CALLS)
    return NULL;
  e->calls = xrealloc(e->calls, (e->ncalls + 1) * sizeof *e->calls);
  struct escape_call *c = &e->calls[e->ncalls++];
  memset(c, 0, sizeof *c);
  str_copy(c->name, sizeof c->name, name);
  return c;
}

static void audit_line(struct sbx *sb, struct escape_call *c, int64_t now_ms) {
  audit_record(sb->srv,
               json_pack("{s:s,s:s,s:s,s:s,s:I,s:I}", "tenant", sb->tenant, "action",
                         "sandbox.escape_attempt", "sandbox", sb->id, "syscall", c->name, "count",
                         (json_int_t)(c->n - c->audited), "total", (json_int_t)c->n));
  events_emit(sb->srv, "escape.attempt", sb->tenant, sb->id,
              json_pack("{s:s,s:I,s:I}", "syscall", c->name, "count",
                        (json_int_t)(c->n - c->audited), "total", (json_int_t)c->n));
  c->audited = c->n;
  c->audited_ms = now_ms;
}

/* Write the lines that are due (all that are pending when final); return
 * whether some stay pending. */
static bool audit_sandbox(struct sbx *sb, int64_t now_ms, bool final) {
  bool pending = false;
  for (unsigned i = 0; i < sb->escapes.ncalls; i++) {
    struct escape_call *c = &sb->escapes.calls[i];
    if (c->n == c->audited)
      continue;
    if (final || c->audited_ms == 0 || now_ms - c->audited_ms >= AUDIT_INTERVAL_MS)
      audit_line(sb, c, now_ms);
    else
      pending = true;
  }
  return pending;
}

void escapes_update(struct agentc *ac, json_t *counts) {
  struct sbx *sb = (struct sbx *)((char *)ac - offsetof(struct sbx, ac));
  struct escapes *e = &sb->escapes;
  json_t *total = json_object_get(counts, "total");
  json_t *calls = json_object_get(counts, "syscalls");
  if (json_is_null(total)) {
    e->uncounted = true; /* This sandbox's kernel gave no listener. */
    return;
  }
  if (!json_is_integer(total) || !json_is_object(calls))
    return;

  if (json_integer_value(total) > (json_int_t)e->total)
    e->total = (uint64_t)json_integer_value(total);

  const char *name;
  json_t *v;
  json_object_foreach(calls, name, v) {
    if (!json_is_integer(v) || json_integer_value(v) < 0 || !good_name(name))
      continue;
    struct escape_call *c = find_or_add(e, name);
    if (!c)
      continue;

    if ((uint64_t)json_integer_value(v) > c->n) {
      sb->srv->metrics.escape_attempts += (uint64_t)json_integer_value(v) - c->n;
      c->n = (uint64_t)json_integer_value(v);
      e->pending = true;
    }

    /* The first counts are a HELLO: a new sandbox's are 0; a sandbox taken
     * over after a restart had its lines written by the server before
     * (escapes_final on release), so they are not written again. */
    if (!e->heard)
      c->audited = c->n;
  }

  if (!e->heard) {
    e->heard = true;
    e->pending = false;
  }
  if (e->pending)
    e->pending = audit_sandbox(sb, wall_ms(), false);
}

void escapes_audit_due(struct server *srv, int64_t now_ms) {
  for (struct sbx *sb = srv->sandboxes; sb; sb = sb->next)
    if (sb->escapes.pending)
      sb->escapes.pending = audit_sandbox(sb, now_ms, false);
}

void escapes_final(struct sbx *sb) {
  if (sb->escapes.pending)
    sb->escapes.pending = audit_sandbox(sb, wall_ms(), true);
}

void escapes_free(struct sbx *sb) {
  free(sb->escapes.calls);
  sb->escapes.calls = NULL;
  sb->escapes.ncalls = 0;
}

void escapes_json(const struct sbx *sb, json_t *j) {
  const struct escapes *e = &sb->escapes;
  if (e->uncounted) {
    json_object_set_new(j, "escape_attempts", json_null());
    json_object_set_new(j, "escape_syscalls", json_null());
    return;
  }
  json_t *calls = json_object();
  for (unsigned i = 0; i < e->ncalls; i++)
    json_object_set_new(calls, e->calls[i].name, json_integer((json_int_t)e->calls[i].n));
  json_object_set_new(j, "escape_attempts", json_integer((json_int_t)e->total));
  json_object_set_new(j, "escape_syscalls", calls);
}

void escapes_metrics(FILE *f, const struct server *srv) {
  fprintf(f, "# HELP hutch_escape_attempts_total Syscalls a sandbox's seccomp filter refused "
             "(docs/security.md).\n# TYPE hutch_escape_attempts_total counter\n");
  for (const struct sbx *sb = srv->sandboxes; sb; sb = sb->next)
    for (unsigned i = 0; i < sb->escapes.ncalls; i++)
      fprintf(f, "hutch_escape_attempts_total{sandbox=\"%s\",syscall=\"%s\"} %llu\n", sb->id,
              sb->escapes.calls[i].name, (unsigned long long)sb->escapes.calls[i].n);
  fprintf(f,
          "# HELP hutch_escape_attempts_seen_total Refused syscalls of every sandbox this "
          "server has run, ended ones included.\n"
          "# TYPE hutch_escape_attempts_seen_total counter\n"
          "hutch_escape_attempts_seen_total %llu\n",
          (unsigned long long)srv->metrics.escape_attempts);
}
