/* The audit log (STATE/audit.jsonl): one JSON line per action. Lines are
 * kept in memory and written by a job off the loop (offload.c), one job at
 * a time so that they stay in order: an append is a page-cache copy, but
 * one that can wait (dirty-page throttling while a snapshot or a volume is
 * written, the filesystem's journal), and the loop must not. A line is on
 * disk (in the page cache) moments after its action; a stopping server
 * writes what is left before it exits (audit_close). Nothing is fsynced:
 * a crash of the host may lose the last lines, as it would before. */
#ifndef HUTCH_AUDIT_H
#define HUTCH_AUDIT_H

#include <stddef.h>

#include "offload.h"

struct audit;
struct server;

/* Takes fd (O_APPEND). */
struct audit *audit_open(int fd);
/* Append one line (a newline is added) and start writing. */
void audit_append(struct server *srv, struct audit *a, const char *line, size_t n);
/* Write what is left, on the calling thread, and close (at exit, when no
 * job runs any more). */
void audit_close(struct audit *a);

#endif
