/* ctl_clean (src/ctl/out.c): what hutch prints of others' text holds no
 * control character a terminal acts on, nor a byte that is not UTF-8;
 * JSON stays the same JSON. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ctl.h"
#include "tap.h"
#include "util.h"

static void text_is(const char *in, const char *want, const char *what) {
  char *got = ctl_clean(in, CTL_CLEAN_TEXT);
  is_str(got, want, "%s", what);
  free(got);
}

/* A table with a hostile cell, as ctl_table_print writes it to stdout. */
static char *table_printed(void) {
  static const char *const head[] = {"NAME", "SIZE"};
  struct ctl_table *t = ctl_table_new(2, head);
  ctl_table_row(t, (const char *const[]){"\033[2J\xc2\x9b" "2J\tx", "1"});
  ctl_table_row(t, (const char *const[]){"plain", NULL});
  struct ctl ctl = {.color = false};
  fflush(stdout);
  int saved = dup(1);
  FILE *f = tmpfile();
  dup2(fileno(f), 1);
  ctl_table_print(&ctl, t);
  fflush(stdout);
  dup2(saved, 1);
  close(saved);
  char *out = xcalloc(1, 4096);
  rewind(f);
  out[fread(out, 1, 4095, f)] = '\0';
  fclose(f);
  return out;
}

int main(void) {
  text_is("plain, ütf-8 ✓ and a\u00a0nbsp", "plain, ütf-8 ✓ and a\u00a0nbsp", "text kept");
  text_is("\033]0;pwned\007\033[2J", "\\x1b]0;pwned\\x07\\x1b[2J", "ESC and BEL escaped");
  text_is("a\tb\nc\rd\177", "a\\x09b\\x0ac\\x0dd\\x7f", "tab, newline, CR and DEL escaped");
  text_is("\xc2\x9b" "2J \xc2\x80\xc2\x9f", "\\u009b2J \\u0080\\u009f", "C1 characters escaped");
  text_is("\x9b" "2J", "\\x9b2J", "a raw 0x9B (no UTF-8) escaped");
  text_is("\xc0\x9b \xe0\x80\x9b \xed\xa0\x80 \xf4\x90\x80\x80",
          "\\xc0\\x9b \\xe0\\x80\\x9b \\xed\\xa0\\x80 \\xf4\\x90\\x80\\x80",
          "overlong forms, a surrogate, past U+10FFFF: bytes escaped");
  text_is("cut \xe2\x9c", "cut \\xe2\\x9c", "a sequence cut short escaped");

  json_t *j = json_pack("{s:s, s:[s]}", "a", "x\xc2\x9by\x7f\033z", "b", "é\xc2\x85");
  char *dumped = json_dumps(j, JSON_COMPACT);
  char *clean = ctl_clean(dumped, CTL_CLEAN_JSON);
  ok(!strchr(clean, '\033') && !strchr(clean, '\x7f') && !strstr(clean, "\xc2\x9b") &&
         !strstr(clean, "\xc2\x85"),
     "JSON: no ESC, DEL or C1 left");
  ok(strstr(clean, "x\\u009by\\u007f\\u001Bz") != NULL && strstr(clean, "é\\u0085") != NULL,
     "JSON: DEL and C1 as \\u00NN, the rest kept (%s)", clean);
  json_t *back = json_loads(clean, 0, NULL);
  ok(back && json_equal(back, j), "JSON: the same JSON");
  json_decref(back);
  free(clean);
  free(dumped);
  dumped = json_dumps(j, JSON_INDENT(2));
  clean = ctl_clean(dumped, CTL_CLEAN_JSON);
  back = json_loads(clean, 0, NULL);
  ok(back && json_equal(back, j) && strchr(clean, '\n'), "JSON: its indentation kept");
  json_decref(back);
  free(clean);
  free(dumped);
  json_decref(j);

  char *table = table_printed();
  is_str(table,
         "NAME                   SIZE\n"
         "\\x1b[2J\\u009b2J\\x09x   1\n"
         "plain                  -\n",
         "a table's cells escaped, and aligned as shown");
  free(table);
  return done_testing();
}
