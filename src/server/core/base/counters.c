/* The server's counters that requests add to as they go (counters.h). */
#include "core/base/counters.h"

#include <string.h>

#include "util.h"
#include "core/base/server.h"

const double counters_bounds[COUNTERS_BOUNDS] = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                                 0.1,    0.25,  0.5,    1,     2.5,  5,     10};
_Static_assert(COUNTERS_BOUNDS + 1 <= 16, "struct metrics holds 16 buckets");

void counters_observe(uint64_t hist[16], double *sum, double seconds) {
  size_t i = 0;
  while (i < COUNTERS_BOUNDS && seconds > counters_bounds[i])
    i++;
  hist[i]++;
  *sum += seconds;
}

void counters_error_code(struct metrics *m, const char *code) {
  for (size_t i = 0; i < METRICS_CODES; i++) {
    if (!m->errors_by_code[i].code[0])
      str_copy(m->errors_by_code[i].code, sizeof m->errors_by_code[i].code, code);
    if (strncmp(m->errors_by_code[i].code, code, sizeof m->errors_by_code[i].code - 1) == 0) {
      m->errors_by_code[i].n++;
      return;
    }
  }
}
