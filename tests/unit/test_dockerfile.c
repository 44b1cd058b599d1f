/* The Dockerfile parser (src/image/dockerfile.c): directives,
 * continuations, forms, flags, errors with line numbers, and the word
 * splitting and substitution the builder applies. */
#include <stdlib.h>
#include <string.h>

#include "dockerfile.h"
#include "tap.h"

static int parse(const char *text, struct dockerfile *df, struct hutch_err *err) {
  memset(err, 0, sizeof *err);
  return dockerfile_parse(text, strlen(text), df, err);
}

static void refused(const char *text, const char *want_in_msg) {
  struct dockerfile df;
  struct hutch_err err;
  int r = parse(text, &df, &err);
  ok(r < 0 && strstr(err.msg, want_in_msg), "refused: %s (got '%s')", want_in_msg,
     r < 0 ? err.msg : "accepted");
  if (r == 0)
    dockerfile_free(&df);
}

static void test_basic(void) {
  struct dockerfile df;
  struct hutch_err err;
  const char *text = "# syntax=docker/dockerfile:1\n"
                     "ARG BASE=scratch\n"
                     "\n"
                     "# a comment\n"
                     "from ${BASE} AS build\n"
                     "RUN echo a && \\\n"
                     "# dropped inside a continuation\n"
                     "    echo b\n"
                     "COPY --chown=1:2 --from=build a b /dst/\n"
                     "CMD [\"/bin/sh\", \"-c\", \"echo hi\"]\r\n"
                     "ENTRYPOINT [not json\n"
                     "SHELL [\"/bin/bash\", \"-c\"]\n";
  if (!ok(parse(text, &df, &err) == 0, "parses (%s)", err.msg))
    return;
  is_int(df.n, 7, "seven instructions");
  is_int(df.escape, '\\', "default escape");
  is_int(df.v[0].kind, DF_ARG, "ARG first");
  is_int(df.v[1].kind, DF_FROM, "lower-case from");
  is_int(df.v[1].line, 5, "FROM's line");
  is_str(df.v[1].rest, "${BASE} AS build", "FROM's rest");
  is_int(df.v[2].kind, DF_RUN, "RUN");
  is_int(df.v[2].line, 6, "RUN starts on line 6");
  is_str(df.v[2].rest, "echo a &&     echo b", "continuation joined, comment dropped");
  ok(!df.v[2].json, "RUN shell form");
  is_int(df.v[3].nflags, 2, "COPY has two flags");
  is_str(df_flag(&df.v[3], "chown"), "1:2", "--chown");
  is_str(df_flag(&df.v[3], "from"), "build", "--from");
  is_str(df.v[3].rest, "a b /dst/", "COPY's rest after flags");
  ok(df.v[4].json && df.v[4].argc == 3, "CMD exec form, CRLF");
  is_str(df.v[4].argv[2], "echo hi", "CMD's third word");
  ok(!df.v[5].json, "broken JSON is the shell form");
  ok(df.v[6].json && df.v[6].argc == 2, "SHELL");
  dockerfile_free(&df);
}

static void test_escape_directive(void) {
  struct dockerfile df;
  struct hutch_err err;
  const char *text = "# escape=`\nFROM scratch\nRUN dir c:\\ `\n  && echo x\n";
  if (!ok(parse(text, &df, &err) == 0, "escape directive parses (%s)", err.msg))
    return;
  is_int(df.escape, '`', "backtick escape");
  is_str(df.v[1].rest, "dir c:\\   && echo x", "backslash kept, backtick continues");
  dockerfile_free(&df);
  /* After an instruction it is a comment, so the backslash still continues. */
  ok(parse("FROM scratch\n# escape=`\nRUN a \\\n b\n", &df, &err) == 0, "late directive: comment");
  is_str(df.v[1].rest, "a  b", "backslash continues");
  dockerfile_free(&df);
}

static void test_heredocs(void) {
  struct dockerfile df;
  struct hutch_err err;
  const char *text = "FROM scratch\n"
                     "RUN <<EOF\n"
                     "echo one\n"
                     "  echo two\n"
                     "EOF\n"
                     "RUN cat <<-'END' > /f && echo $((1<<2))\n"
                     "\tbody $X\n"
                     "\tEND\n"
                     "CMD [\"x\"]\n";
  if (!ok(parse(text, &df, &err) == 0, "here-documents parse (%s)", err.msg))
    return;
  is_int(df.n, 4, "four instructions");
  is_str(df.v[1].heredoc_script, "echo one\n  echo two\n", "a lone document is the script");
  is_str(df.v[2].rest, "cat <<-'END' > /f && echo $((1<<2))\n\tbody $X\nEND",
         "a document inside a command stays for the shell");
  ok(!df.v[2].heredoc_script, "not a lone document");
  is_int(df.v[3].line, 9, "line numbers count the documents");
  dockerfile_free(&df);
  refused("FROM scratch\nRUN <<EOF\necho\n", "line 2: the here-document EOF is not closed");
}

static void test_errors(void) {
  refused("FROM scratch\nFOO bar\n", "line 2: unknown instruction 'FOO'");
  refused("FROM scratch\n\nVOLUME /x\n", "line 3: VOLUME is not supported");
  refused("RUN x\n", "line 1: RUN before the first FROM");
  refused("ARG X\n", "no FROM");
  refused("FROM scratch\nCOPY --foo=1 a b\n", "line 2: COPY does not take --foo");
  refused("FROM scratch\nCOPY --chown a b\n", "line 2: --chown needs a value");
  refused("FROM scratch\nCOPY --from=a --from=b a b\n", "--from is given twice");
  refused("FROM scratch\nRUN --mount=type=cache echo\n", "RUN does not take --mount");
  refused("FROM scratch\nSHELL /bin/sh -c\n", "line 2: SHELL takes a JSON array");
  refused("FROM scratch\nWORKDIR\n", "line 2: WORKDIR needs arguments");
  refused("# escape=x\nFROM scratch\n", "escape must be");
  refused("# escape=`\n# escape=`\nFROM scratch\n", "given twice");
  refused("FROM scratch\nRUN \xff\n", "not UTF-8");
}

static void words_is(const char *s, json_t *vars, const char *want_json) {
  struct hutch_err err = {0};
  json_t *w = df_words(s, vars, '\\', &err);
  char *got = w ? json_dumps(w, JSON_COMPACT) : NULL;
  is_str(got, want_json, "words of %s", s);
  free(got);
  json_decref(w);
}

static void test_words(void) {
  json_t *vars = json_pack("{s:s,s:s,s:s}", "A", "one", "EMPTY", "", "SP", "a b");
  words_is("x y  z", vars, "[\"x\",\"y\",\"z\"]");
  words_is("$A ${A}x \\$A '$A' \"$A\"", vars, "[\"one\",\"onex\",\"$A\",\"$A\",\"one\"]");
  words_is("${NOPE:-def} ${EMPTY:-e} ${EMPTY-e} ${A:+alt} ${NOPE:+alt}x", vars,
           "[\"def\",\"e\",\"alt\",\"x\"]");
  words_is("\"a b\" '' c\\ d", vars, "[\"a b\",\"\",\"c d\"]");
  words_is("\"q\\\"\\x\"", vars, "[\"q\\\"\\\\x\"]");
  words_is("${NOPE:-${A}}", vars, "[\"one\"]");
  words_is("$ $1x", vars, "[\"$\"]"); /* an unquoted empty value is no word */
  struct hutch_err err = {0};
  ok(!df_words("'open", vars, '\\', &err) && strstr(err.msg, "unterminated"), "open quote");
  ok(!df_words("${A", vars, '\\', &err) && strstr(err.msg, "missing '}'"), "open brace");
  ok(!df_words("${A?x}", vars, '\\', &err) && strstr(err.msg, "modifier"), "other modifier");
  char *w = df_word("  \"$SP\"  tail ", vars, '\\', &err);
  is_str(w, "  a b  tail ", "one word keeps spaces");
  free(w);
  json_decref(vars);
}

int main(void) {
  test_basic();
  test_escape_directive();
  test_errors();
  test_heredocs();
  test_words();
  return done_testing();
}
