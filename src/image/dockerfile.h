/* A Dockerfile, parsed (docs/templates.md, "Building from a Dockerfile"):
 * parser directives (`# escape=`, `# syntax=` is read and ignored), line
 * continuations, comments, RUN's here-documents, each instruction with its
 * line number, its
 * `--name=value` flags and its arguments, either the JSON (exec) form or
 * the rest of the line as written. Variables are substituted later, by the
 * builder, as each stage's ARG and ENV change them (df_words). Nothing here
 * touches a file: the text may be anyone's. */
#ifndef HUTCH_DOCKERFILE_H
#define HUTCH_DOCKERFILE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "err.h"

/* Refused beyond these: a Dockerfile is a page, not a data set. */
#define DF_MAX_BYTES (1u << 20)
#define DF_MAX_INSTRUCTIONS 1000

enum df_kind {
  DF_FROM,
  DF_RUN,
  DF_COPY,
  DF_ADD,
  DF_ENV,
  DF_ARG,
  DF_WORKDIR,
  DF_USER,
  DF_LABEL,
  DF_EXPOSE,
  DF_ENTRYPOINT,
  DF_CMD,
  DF_SHELL,
};

struct df_flag {
  char *name;  /* "chown", without the dashes */
  char *value; /* as written: substituted by the builder */
};

struct df_instr {
  enum df_kind kind;
  int line; /* where it starts, from 1 */
  struct df_flag *flags;
  size_t nflags;
  bool json;   /* the exec form: argv holds the words */
  char **argv; /* json: the array's strings, NULL-terminated */
  size_t argc;
  char *rest;           /* not json: the arguments as written, trimmed; a RUN's
                           here-documents follow it, each line and terminator */
  char *heredoc_script; /* RUN <<EOF alone: the document, a script for the shell */
};

struct dockerfile {
  struct df_instr *v;
  size_t n;
  char escape; /* '\\' or '`' */
};

/* Parse text (len bytes, need not be terminated). Fails, naming the line,
 * on an unknown instruction, one without arguments, a flag it does not
 * take, a SHELL not in JSON form, or no FROM before the first instruction
 * other than ARG. */
int dockerfile_parse(const char *text, size_t len, struct dockerfile *df, struct hutch_err *err);
void dockerfile_free(struct dockerfile *df);
const char *df_kind_name(enum df_kind k);
/* A flag's value, or NULL when the instruction has none of that name. */
const char *df_flag(const struct df_instr *in, const char *name);

/* Variables in scope: a lookup in a JSON object of name -> string. */
/* Split s into words as a shell would (quotes, the escape character), each
 * with $VAR, ${VAR}, ${VAR:-word}, ${VAR-word}, ${VAR:+word}, ${VAR+word}
 * replaced from vars (unset: empty). A new JSON array of strings, or NULL
 * with err set (an unterminated quote or ${). */
json_t *df_words(const char *s, json_t *vars, char escape, struct hutch_err *err);
/* The same, substituted and unquoted as one word, whitespace kept (ENV's
 * `ENV KEY value with spaces` form, WORKDIR, USER). malloc'd. */
char *df_word(const char *s, json_t *vars, char escape, struct hutch_err *err);

#endif
