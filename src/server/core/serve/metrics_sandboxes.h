/* /metrics' series of each sandbox (metrics_sandboxes.c). */
#ifndef HUTCH_CORE_SERVE_METRICS_SANDBOXES_H
#define HUTCH_CORE_SERVE_METRICS_SANDBOXES_H

#include <stdio.h>

struct server;

/* Each listed sandbox's memory, CPU and running execs, in Prometheus'
 * text format, labelled by sandbox, tenant and template: some 5 series a
 * sandbox, and one more for each kind of exec it runs (at most 9 each,
 * 9,000 at --max-sandboxes 1000). The operator's alone. */
void metrics_sandboxes_write(FILE *f, const struct server *srv);

#endif
