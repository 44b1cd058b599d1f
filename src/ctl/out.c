/* hutch-ctl's output (ctl.h): errors as one line, JSON, colour only on a
 * terminal, ages, and aligned tables. */
#include "ctl.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util.h"

int ctl_fail(struct ctl *ctl, int code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  if (ctl->verb)
    fprintf(stderr, "hutch %s: ", ctl->verb->name);
  else
    fputs("hutch: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  return code;
}

void ctl_print_json(const json_t *j) {
  json_dumpf(j, stdout, JSON_INDENT(2) | JSON_ENCODE_ANY);
  fputc('\n', stdout);
}

const char *ctl_sgr(const struct ctl *ctl, const char *sgr) {
  return ctl->color ? sgr : "";
}

void ctl_age(const char *iso, char out[32]) {
  struct tm tm = {0};
  const char *end = iso ? strptime(iso, "%Y-%m-%dT%H:%M:%S", &tm) : NULL;
  if (!end) {
    str_copy(out, 32, "-");
    return;
  }
  long long s = (long long)(time(NULL) - timegm(&tm));
  if (s < 0)
    s = 0;
  if (s < 60)
    snprintf(out, 32, "%llds", s);
  else if (s < 3600)
    snprintf(out, 32, "%lldm", s / 60);
  else if (s < 86400)
    snprintf(out, 32, "%lldh", s / 3600);
  else
    snprintf(out, 32, "%lldd", s / 86400);
}

struct ctl_table {
  size_t ncols, nrows, cap;
  char **cells; /* row-major, the header first */
};

struct ctl_table *ctl_table_new(size_t ncols, const char *const *headers) {
  struct ctl_table *t = xcalloc(1, sizeof *t);
  t->ncols = ncols;
  ctl_table_row(t, headers);
  return t;
}

void ctl_table_row(struct ctl_table *t, const char *const *cells) {
  size_t need = (t->nrows + 1) * t->ncols * sizeof *t->cells;
  t->cells = xgrow(t->cells, &t->cap, need);
  for (size_t i = 0; i < t->ncols; i++)
    t->cells[t->nrows * t->ncols + i] = xstrdup(cells[i] ? cells[i] : "-");
  t->nrows++;
}

void ctl_table_print(const struct ctl *ctl, struct ctl_table *t) {
  size_t *width = xcalloc(t->ncols, sizeof *width);
  for (size_t i = 0; i < t->nrows * t->ncols; i++) {
    size_t n = strlen(t->cells[i]);
    if (n > width[i % t->ncols])
      width[i % t->ncols] = n;
  }

  for (size_t r = 0; r < t->nrows; r++) {
    if (r == 0)
      fputs(ctl_sgr(ctl, CTL_BOLD), stdout);
    for (size_t col = 0; col < t->ncols; col++) {
      const char *cell = t->cells[r * t->ncols + col];
      bool last = col + 1 == t->ncols;
      printf("%-*s%s", last ? 0 : (int)width[col], cell, last ? "" : "   ");
    }
    if (r == 0)
      fputs(ctl_sgr(ctl, CTL_RESET), stdout);
    fputc('\n', stdout);
  }

  for (size_t i = 0; i < t->nrows * t->ncols; i++)
    free(t->cells[i]);
  free(t->cells);
  free(width);
  free(t);
}
