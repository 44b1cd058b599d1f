/* hutch-ctl's output (ctl.h): errors as one line, JSON, colour only on a
 * terminal, ages, and aligned tables, none of them with a control
 * character of someone else's (ctl_clean). */
#include "ctl.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util.h"

/* What hutch prints is often the sandbox's to write: a file's name, a
 * path in a server's error, a label, an event's data. A terminal takes
 * some characters as commands (ESC starts a sequence that can retitle
 * the window, clear the screen, move the cursor over what was said, or,
 * in some terminals, answer back as if typed), so a sandbox could write
 * on the operator's terminal through hutch's own messages. Every such
 * character is shown escaped instead: C0 (newline and tab too: an error
 * is one line, a cell one cell), DEL, C1 (U+0080-U+009F: U+009B is CSI
 * to xterm), and any byte that is not UTF-8 (a raw 0x9B is CSI to an
 * 8-bit terminal). JSON from jansson already has C0 escaped in its
 * strings (a newline of its own is its indentation, kept); DEL and C1 are
 * escaped there too, as \u00NN, which stays the same JSON.
 *
 * What a command itself writes (exec, shell, a build's RUN) is not hutch's
 * to change and goes out as it came, as from any program on a terminal. */
char *ctl_clean(const char *s, enum ctl_clean style) {
  size_t n = strlen(s), o = 0;
  char *out = xmalloc(n * 6 + 1); /* each byte at most \u00NN */
  for (size_t i = 0, len; i < n; i += len) {
    unsigned cp = 0;
    len = utf8_seq(s + i, n - i, &cp);
    bool control = (cp < 0x20 && !(cp == '\n' && style == CTL_CLEAN_JSON)) || cp == 0x7f ||
                   (cp >= 0x80 && cp <= 0x9f);
    if (len && !control) {
      memcpy(out + o, s + i, len);
      o += len;
      continue;
    }
    unsigned char byte = (unsigned char)s[i];
    if (style == CTL_CLEAN_JSON)
      o += (size_t)sprintf(out + o, "\\u%04x", len ? cp : byte);
    else if (len > 1) /* a C1 code point */
      o += (size_t)sprintf(out + o, "\\u%04x", cp);
    else
      o += (size_t)sprintf(out + o, "\\x%02x", byte);
    len = len ? len : 1;
  }
  out[o] = '\0';
  return out;
}

int ctl_fail(struct ctl *ctl, int code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *text = NULL;
  if (vasprintf(&text, fmt, ap) < 0)
    abort();
  va_end(ap);
  char *clean = ctl_clean(text, CTL_CLEAN_TEXT);
  if (ctl->verb)
    fprintf(stderr, "hutch %s: %s\n", ctl->verb->name, clean);
  else
    fprintf(stderr, "hutch: %s\n", clean);
  free(clean);
  free(text);
  return code;
}

static void print_json(const json_t *j, size_t flags) {
  char *text = json_dumps(j, flags | JSON_ENCODE_ANY);
  char *clean = ctl_clean(text ? text : "", CTL_CLEAN_JSON);
  puts(clean);
  free(clean);
  free(text);
}

void ctl_print_json(const json_t *j) {
  print_json(j, JSON_INDENT(2));
}

void ctl_print_json_line(const json_t *j) {
  print_json(j, JSON_COMPACT);
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
    t->cells[t->nrows * t->ncols + i] = ctl_clean(cells[i] ? cells[i] : "-", CTL_CLEAN_TEXT);
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
