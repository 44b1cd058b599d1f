/* The audit log (STATE/audit.jsonl): one JSON line per action. Lines are
 * kept in memory and written by a job off the loop (offload.c), one job at
 * a time so that they stay in order: an append is a page-cache copy, but
 * one that can wait (dirty-page throttling while a snapshot or a volume is
 * written, the filesystem's journal), and the loop must not. A line is on
 * disk (in the page cache) moments after its action; a stopping server
 * writes what is left before it exits (audit_close). Nothing is fsynced:
 * a crash of the host may lose the last lines, as it would before.
 *
 * Every tenant's requests write lines, so the log must not grow without
 * bound (a tenant could fill the state filesystem): when a write would
 * take it past its maximum, the job renames it audit.jsonl.1 (the older
 * one goes) and starts a new one. Two files at most, 2 × max. */
#ifndef HUTCH_CORE_SANDBOX_AUDIT_H
#define HUTCH_CORE_SANDBOX_AUDIT_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "core/base/offload.h"

struct audit;
struct server;

/* Open (or create, 0600) DIR/audit.jsonl; NULL with err set. */
struct audit *audit_open(const char *dir, uint64_t max_bytes, struct hutch_err *err);
/* Append one line (a newline is added) and start writing. */
void audit_append(struct server *srv, struct audit *a, const char *line, size_t n);
/* Write what is left, on the calling thread, and close (at exit, when no
 * job runs any more). */
void audit_close(struct audit *a);

/* Write one audit line (its "time" is added here); takes j's reference. */
void audit_record(struct server *srv, json_t *j);

#endif
