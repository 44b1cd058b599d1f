/* Metrics. */
#ifndef HUTCH_CORE_METRICS_H
#define HUTCH_CORE_METRICS_H

#include <stdint.h>
#include <stdio.h>
#include "err.h"

struct server;
struct metrics;
struct hutch_err;

/* metrics.c */
void metrics_observe(uint64_t hist[16], double *sum, double seconds);
void metrics_error_code(struct metrics *m, const char *code);
/* --metrics-token-file read into srv->metrics_token. */
int metrics_open(struct server *srv, struct hutch_err *err);

#endif
