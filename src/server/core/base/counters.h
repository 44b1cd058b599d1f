/* The server's counters that requests add to as they go (counters.c):
 * latency histograms and error answers by code, in struct metrics
 * (server.h); serve/metrics.c writes them out. */
#ifndef HUTCH_CORE_BASE_COUNTERS_H
#define HUTCH_CORE_BASE_COUNTERS_H

#include <stdint.h>

struct metrics;

/* The upper bounds of the latency buckets, in seconds; one bucket more
 * past the last holds the rest (+Inf). */
#define COUNTERS_BOUNDS 14
extern const double counters_bounds[COUNTERS_BOUNDS];

/* seconds counted in its bucket of hist, and added to *sum. */
void counters_observe(uint64_t hist[16], double *sum, double seconds);
/* One more error answer with code (each code kept once, the first
 * METRICS_CODES of them). */
void counters_error_code(struct metrics *m, const char *code);

#endif
