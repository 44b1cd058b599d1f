/* Metrics. */
#ifndef HUTCH_CORE_SERVE_METRICS_H
#define HUTCH_CORE_SERVE_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "err.h"

struct server;
struct metrics;
struct hutch_err;

/* metrics.c */
/* --metrics-token-file read into srv->metrics_token. */
int metrics_open(struct server *srv, struct hutch_err *err);
/* Whether token is the metrics token (compared in constant time). */
bool metrics_token_is(const struct server *srv, const char *token);
/* The counters in Prometheus' text format; operator: with the series
 * only the operator reads (escape attempts, which name sandboxes);
 * queued: the bytes the transport holds for slow clients. */
void metrics_write(FILE *f, const struct server *srv, bool operator, size_t queued);

#endif
