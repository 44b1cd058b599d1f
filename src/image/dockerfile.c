/* The Dockerfile parser and its word splitting and substitution
 * (dockerfile.h). The rules follow Docker's reference: directives only
 * before anything else, a line ending in the escape character continues
 * on the next, comment lines inside a continuation are dropped, and
 * quotes and `$` are processed only when the builder asks for words. */
#include "dockerfile.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "util.h"

static const struct {
  const char *name;
  enum df_kind kind;
  const char *flags; /* the flags it takes, space-separated */
  bool json;         /* takes the exec (JSON) form */
} kinds[] = {
    {"FROM", DF_FROM, "platform", false},
    {"RUN", DF_RUN, "", true},
    {"COPY", DF_COPY, "from chown chmod", true},
    {"ADD", DF_ADD, "chown chmod", true},
    {"ENV", DF_ENV, "", false},
    {"ARG", DF_ARG, "", false},
    {"WORKDIR", DF_WORKDIR, "", false},
    {"USER", DF_USER, "", false},
    {"LABEL", DF_LABEL, "", false},
    {"EXPOSE", DF_EXPOSE, "", false},
    {"ENTRYPOINT", DF_ENTRYPOINT, "", true},
    {"CMD", DF_CMD, "", true},
    {"SHELL", DF_SHELL, "", true},
};
/* Instructions of Docker's that hutch does not carry out: named, so that
 * the error says so rather than "unknown". */
static const char *const unsupported[] = {"VOLUME", "STOPSIGNAL", "HEALTHCHECK", "ONBUILD",
                                          "MAINTAINER"};

const char *df_kind_name(enum df_kind k) {
  for (size_t i = 0; i < ARRAY_SIZE(kinds); i++)
    if (kinds[i].kind == k)
      return kinds[i].name;
  return "?";
}

const char *df_flag(const struct df_instr *in, const char *name) {
  for (size_t i = 0; i < in->nflags; i++)
    if (strcmp(in->flags[i].name, name) == 0)
      return in->flags[i].value;
  return NULL;
}

static void instr_free(struct df_instr *in) {
  for (size_t i = 0; i < in->nflags; i++) {
    free(in->flags[i].name);
    free(in->flags[i].value);
  }
  free(in->flags);
  for (size_t i = 0; i < in->argc; i++)
    free(in->argv[i]);
  free(in->argv);
  free(in->rest);
  free(in->heredoc_script);
}

void dockerfile_free(struct dockerfile *df) {
  for (size_t i = 0; i < df->n; i++)
    instr_free(&df->v[i]);
  free(df->v);
  df->v = NULL;
  df->n = 0;
}

/* ---- words and substitution ---- */

struct lex {
  const char *s;
  size_t i;
  json_t *vars;
  char esc;
  struct hutch_err *err;
};

static int scan(struct lex *lx, char stop, bool split, json_t *words, char **buf, bool *have);

static void put(char **buf, bool *have, const char *at, size_t n) {
  str_append(buf, at, n);
  *have = true;
}

static bool name_char(char c) {
  return isalnum((unsigned char)c) || c == '_';
}

/* After "${NAME" (name, nlen bytes; val its value, NULL when unset): the
 * modifier (":-", ":+", "-", "+" or none) and the closing '}', and what
 * the whole expands to appended to buf. */
static int expand_braced(struct lex *lx, char **buf, bool *have, const char *val, const char *name,
                         size_t nlen) {
  const char *s = lx->s;
  char op = 0;
  bool colon = false;
  if (s[lx->i] == ':' && (s[lx->i + 1] == '-' || s[lx->i + 1] == '+')) {
    colon = true;
    lx->i++;
  }

  if (s[lx->i] == '-' || s[lx->i] == '+')
    op = s[lx->i++];
  else if (!s[lx->i])
    return hutch_err_invalid(lx->err, "bad substitution: missing '}'");
  else if (s[lx->i] != '}')
    return hutch_err_invalid(lx->err, "bad substitution: unsupported modifier in '${%.*s'",
                             (int)nlen, name);

  char *word = NULL;
  bool wh = false;
  if (op && scan(lx, '}', false, NULL, &word, &wh) < 0) {
    free(word);
    return -1;
  }
  if (s[lx->i] != '}') {
    free(word);
    return hutch_err_invalid(lx->err, "bad substitution: missing '}'");
  }
  lx->i++;

  /* With ':', an empty value counts as unset. */
  bool set = val && (!colon || val[0]);
  const char *out = val;
  if (op == '-' && !set)
    out = word ? word : "";
  else if (op == '+')
    out = set && word ? word : "";
  if (out && out[0])
    put(buf, have, out, strlen(out));
  free(word);
  return 0;
}

/* At '$': a variable's value appended to buf, or the '$' itself when no
 * name follows. */
static int expand(struct lex *lx, char **buf, bool *have) {
  const char *s = lx->s;
  lx->i++;
  bool braced = s[lx->i] == '{';
  size_t start = lx->i + braced;
  size_t end = start;
  while (name_char(s[end]))
    end++;
  if (end == start) {
    if (braced)
      return hutch_err_invalid(lx->err, "bad substitution: '${' without a name");
    put(buf, have, "$", 1);
    return 0;
  }

  char *name = xasprintf("%.*s", (int)(end - start), s + start);
  const char *val = json_string_value(json_object_get(lx->vars, name));
  free(name);
  lx->i = end;
  if (braced)
    return expand_braced(lx, buf, have, val, s + start, end - start);
  if (val)
    put(buf, have, val, strlen(val));
  return 0;
}

static int single_quoted(struct lex *lx, char **buf, bool *have) {
  const char *s = lx->s;
  size_t start = ++lx->i;
  while (s[lx->i] && s[lx->i] != '\'')
    lx->i++;
  if (!s[lx->i])
    return hutch_err_invalid(lx->err, "unterminated single quote");
  put(buf, have, s + start, lx->i - start);
  lx->i++;
  return 0;
}

/* Inside double quotes the escape character escapes only '"', '$' and
 * itself, as in Docker; anything else keeps it. */
static int double_quoted(struct lex *lx, char **buf, bool *have) {
  const char *s = lx->s;
  lx->i++;
  *have = true;
  while (s[lx->i] && s[lx->i] != '"') {
    char c = s[lx->i];
    if (c == '$') {
      if (expand(lx, buf, have) < 0)
        return -1;
      continue;
    }
    if (c == lx->esc && (s[lx->i + 1] == '"' || s[lx->i + 1] == '$' || s[lx->i + 1] == lx->esc))
      lx->i++;
    put(buf, have, s + lx->i, 1);
    lx->i++;
  }
  if (!s[lx->i])
    return hutch_err_invalid(lx->err, "unterminated double quote");
  lx->i++;
  return 0;
}

static void end_word(json_t *words, char **buf, bool *have) {
  if (*have)
    json_array_append_new(words, json_string(*buf ? *buf : ""));
  free(*buf);
  *buf = NULL;
  *have = false;
}

/* Up to the end, or stop outside quotes (left unread). With split, words
 * end at unquoted whitespace and go to words; else all is one word. */
static int scan(struct lex *lx, char stop, bool split, json_t *words, char **buf, bool *have) {
  const char *s = lx->s;
  while (s[lx->i] && s[lx->i] != stop) {
    char c = s[lx->i];
    int r = 0;
    if (split && (c == ' ' || c == '\t' || c == '\n')) {
      end_word(words, buf, have);
      lx->i++;
    } else if (c == '\'') {
      r = single_quoted(lx, buf, have);
    } else if (c == '"') {
      r = double_quoted(lx, buf, have);
    } else if (c == '$') {
      r = expand(lx, buf, have);
    } else if (c == lx->esc) {
      if (s[++lx->i]) /* an escape at the very end is dropped */
        put(buf, have, s + lx->i++, 1);
    } else {
      put(buf, have, s + lx->i++, 1);
    }
    if (r < 0)
      return -1;
  }
  return 0;
}

json_t *df_words(const char *s, json_t *vars, char escape, struct hutch_err *err) {
  struct lex lx = {.s = s, .vars = vars, .esc = escape, .err = err};
  json_t *words = json_array();
  char *buf = NULL;
  bool have = false;
  if (scan(&lx, 0, true, words, &buf, &have) < 0) {
    free(buf);
    json_decref(words);
    return NULL;
  }
  end_word(words, &buf, &have);
  return words;
}

char *df_word(const char *s, json_t *vars, char escape, struct hutch_err *err) {
  struct lex lx = {.s = s, .vars = vars, .esc = escape, .err = err};
  char *buf = NULL;
  bool have = false;
  if (scan(&lx, 0, false, NULL, &buf, &have) < 0) {
    free(buf);
    return NULL;
  }
  return buf ? buf : xstrdup("");
}

/* ---- lines and instructions ---- */

struct parser {
  const char *text;
  size_t len, at;
  int line;
  struct dockerfile *df;
  struct hutch_err *err;
};

/* The next physical line (without its end), or false at the end. */
static bool next_line(struct parser *p, const char **s, size_t *n) {
  if (p->at >= p->len)
    return false;
  const char *start = p->text + p->at;
  const char *nl = memchr(start, '\n', p->len - p->at);
  size_t l = nl ? (size_t)(nl - start) : p->len - p->at;
  p->at += l + (nl != NULL);
  p->line++;
  if (l && start[l - 1] == '\r')
    l--;
  *s = start;
  *n = l;
  return true;
}

static size_t skip_ws(const char *s, size_t n, size_t i) {
  while (i < n && (s[i] == ' ' || s[i] == '\t'))
    i++;
  return i;
}

static bool blank_or_comment(const char *s, size_t n) {
  size_t i = skip_ws(s, n, 0);
  return i == n || s[i] == '#';
}

/* The line s (n bytes) of directives(), from k, just after its '#': 1
 * when it was a directive, 0 when the directives end with it (a comment,
 * an unknown directive), -1 on a wrong one. */
static int directive(struct parser *p, const char *s, size_t n, size_t k, bool *seen_escape,
                     bool *seen_syntax) {
  k = skip_ws(s, n, k);
  size_t ks = k;
  while (k < n && (isalnum((unsigned char)s[k]) || s[k] == '_'))
    k++;
  size_t ke = k;
  k = skip_ws(s, n, k);
  if (ke == ks || k >= n || s[k] != '=')
    return 0; /* a comment: directives end */
  size_t vs = skip_ws(s, n, k + 1), ve = n;
  while (ve > vs && (s[ve - 1] == ' ' || s[ve - 1] == '\t'))
    ve--;

  bool *seen;
  if (ke - ks == 6 && strncasecmp(s + ks, "escape", 6) == 0)
    seen = seen_escape;
  else if (ke - ks == 6 && strncasecmp(s + ks, "syntax", 6) == 0)
    seen = seen_syntax;
  else
    return 0; /* unknown directives are comments */
  if (*seen)
    return hutch_err_invalid(p->err, "line %d: the %.*s directive is given twice", p->line,
                             (int)(ke - ks), s + ks);
  *seen = true;

  if (seen == seen_escape) {
    if (ve - vs != 1 || (s[vs] != '\\' && s[vs] != '`'))
      return hutch_err_invalid(p->err, "line %d: escape must be '\\' or '`'", p->line);
    p->df->escape = s[vs];
  }
  return 1;
}

/* Parser directives: `# key=value` lines before anything else. */
static int directives(struct parser *p) {
  bool seen_escape = false, seen_syntax = false;
  for (;;) {
    size_t save = p->at;
    int save_line = p->line;
    const char *s;
    size_t n;
    if (!next_line(p, &s, &n))
      return 0;
    size_t i = skip_ws(s, n, 0);
    if (i >= n || s[i] != '#') {
      p->at = save, p->line = save_line;
      return 0;
    }

    int r = directive(p, s, n, i + 1, &seen_escape, &seen_syntax);
    if (r <= 0)
      return r;
  }
}

/* The next logical line (continuations joined, comment lines inside them
 * dropped), malloc'd, with the line it starts on; NULL at the end. */
static char *logical_line(struct parser *p, int *start) {
  const char *s;
  size_t n;
  char *out = NULL;
  while (next_line(p, &s, &n)) {
    if (blank_or_comment(s, n))
      continue;
    if (!out)
      *start = p->line;
    size_t e = n;
    while (e > 0 && (s[e - 1] == ' ' || s[e - 1] == '\t'))
      e--;
    bool cont = e > 0 && s[e - 1] == p->df->escape;
    str_append(&out, s, cont ? e - 1 : n);
    if (!cont)
      return out;
  }
  return out;
}

static bool takes_flag(const char *flags, const char *name, size_t n) {
  for (const char *f = flags; *f;) {
    size_t l = strcspn(f, " ");
    if (l == n && strncmp(f, name, n) == 0)
      return true;
    f += l + (f[l] == ' ');
  }
  return false;
}

static int parse_flags(struct parser *p, struct df_instr *in, const char *flags,
                       const char **rest) {
  const char *r = *rest;
  while (r[0] == '-' && r[1] == '-') {
    size_t tok = strcspn(r, " \t");
    const char *eq = memchr(r, '=', tok);
    size_t nl = (eq ? (size_t)(eq - r) : tok) - 2;

    if (!takes_flag(flags, r + 2, nl))
      return hutch_err_invalid(p->err, "line %d: %s does not take --%.*s", in->line,
                               df_kind_name(in->kind), (int)nl, r + 2);
    if (!eq || eq + 1 == r + tok)
      return hutch_err_invalid(p->err, "line %d: --%.*s needs a value (--%.*s=...)", in->line,
                               (int)nl, r + 2, (int)nl, r + 2);
    char *name = xasprintf("%.*s", (int)nl, r + 2);
    if (df_flag(in, name)) {
      free(name);
      return hutch_err_invalid(p->err, "line %d: --%.*s is given twice", in->line, (int)nl, r + 2);
    }

    in->flags = xrealloc(in->flags, (in->nflags + 1) * sizeof *in->flags);
    in->flags[in->nflags].name = name;
    in->flags[in->nflags++].value = xasprintf("%.*s", (int)(r + tok - eq - 1), eq + 1);
    r += tok;
    while (*r == ' ' || *r == '\t')
      r++;
  }
  *rest = r;
  return 0;
}

/* The exec form: a JSON array of strings. Anything else that starts with
 * '[' is the shell form, as in Docker. */
static bool json_form(struct df_instr *in, const char *rest) {
  if (rest[0] != '[')
    return false;
  json_t *a = json_loads(rest, JSON_DECODE_ANY, NULL);
  if (!json_is_array(a)) {
    json_decref(a);
    return false;
  }
  size_t i;
  json_t *v;
  json_array_foreach(a, i, v)
    if (!json_is_string(v)) {
      json_decref(a);
      return false;
    }
  in->argc = json_array_size(a);
  in->argv = xcalloc(in->argc + 1, sizeof(char *));
  json_array_foreach(a, i, v)
    in->argv[i] = xstrdup(json_string_value(v));
  json_decref(a);
  in->json = true;
  return true;
}

/* The instruction named s[0..kl): its index in kinds, or -1 with the
 * error set (one hutch does not support, or none). */
static int kind_of(struct parser *p, const char *s, size_t kl, int lineno) {
  for (size_t k = 0; k < ARRAY_SIZE(kinds); k++)
    if (strlen(kinds[k].name) == kl && strncasecmp(kinds[k].name, s, kl) == 0)
      return (int)k;
  for (size_t u = 0; u < ARRAY_SIZE(unsupported); u++)
    if (strlen(unsupported[u]) == kl && strncasecmp(unsupported[u], s, kl) == 0)
      return hutch_err_fail(p->err, HUTCH_ERR_UNSUPPORTED, "unsupported_instruction",
                            "line %d: %s is not supported by hutch", lineno, unsupported[u]);
  return hutch_err_invalid(p->err, "line %d: unknown instruction '%.*s'", lineno,
                           (int)(kl > 40 ? 40 : kl), s);
}

static int parse_instr(struct parser *p, char *line, int lineno, struct df_instr *in) {
  char *s = line;
  while (*s == ' ' || *s == '\t')
    s++;
  size_t kl = strcspn(s, " \t");
  in->line = lineno;
  int found = kind_of(p, s, kl, lineno);
  if (found < 0)
    return -1;
  size_t k = (size_t)found;
  in->kind = kinds[k].kind;
  const char *rest = s + kl;
  while (*rest == ' ' || *rest == '\t')
    rest++;
  if (parse_flags(p, in, kinds[k].flags, &rest) < 0)
    return -1;

  size_t e = strlen(rest);
  while (e > 0 && (rest[e - 1] == ' ' || rest[e - 1] == '\t'))
    e--;
  in->rest = xasprintf("%.*s", (int)e, rest);

  if (kinds[k].json && json_form(in, in->rest))
    return 0;
  if (in->kind == DF_SHELL)
    return hutch_err_invalid(
        p->err, "line %d: SHELL takes a JSON array, e.g. [\"/bin/sh\", \"-c\"]", lineno);
  if (!in->rest[0])
    return hutch_err_invalid(p->err, "line %d: %s needs arguments", lineno, kinds[k].name);
  return 0;
}

/* RUN's here-documents (`<<EOF`, `<<-EOF`, `<<"EOF"`): the lines after
 * the instruction up to each terminator are part of its command, for the
 * shell to read as it reads any here-document. A command that is only
 * one here-document is that document, run as a script (BuildKit's rule);
 * in_heredoc tells the builder. */
/* A here-document's body, the lines up to its terminator w (wl bytes;
 * with dash, after leading tabs), appended to cmd: whether it was closed. */
static bool heredoc_body(struct parser *p, char **cmd, const char *w, size_t wl, bool dash) {
  const char *s;
  size_t n;
  while (next_line(p, &s, &n)) {
    size_t t = 0;
    while (dash && t < n && s[t] == '\t')
      t++;
    if (n - t == wl && strncmp(s + t, w, wl) == 0)
      return true;
    str_append(cmd, s, n);
    str_append(cmd, "\n", 1);
  }
  return false;
}

static int heredocs(struct parser *p, struct df_instr *in) {
  char *cmd = xstrdup(in->rest);
  size_t count = 0;
  for (const char *m = strstr(in->rest, "<<"); m; m = strstr(m, "<<")) {
    m += 2;
    bool dash = *m == '-';
    const char *w = m + dash;
    char q = *w == '"' || *w == '\'' ? *w : 0;
    w += q != 0;
    size_t wl = 0;
    while (w[wl] && (isalnum((unsigned char)w[wl]) || w[wl] == '_'))
      wl++;
    /* A word starting with a letter, as BuildKit's: `$((1<<2))` is no marker. */
    if (!wl || isdigit((unsigned char)w[0]) || (q && w[wl] != q))
      continue;

    count++;
    str_append(&cmd, "\n", 1);
    size_t body_at = strlen(cmd);
    if (!heredoc_body(p, &cmd, w, wl, dash)) {
      free(cmd);
      return hutch_err_invalid(p->err, "line %d: the here-document %.*s is not closed", in->line,
                               (int)wl, w);
    }
    /* The whole command is this one marker: the document is the script. */
    if (count == 1 && m - 2 == in->rest && !w[wl + (q != 0)])
      in->heredoc_script = xstrdup(cmd + body_at);
    str_append(&cmd, w, wl);
  }

  free(in->rest);
  in->rest = cmd;
  if (count != 1) {
    free(in->heredoc_script);
    in->heredoc_script = NULL;
  }
  return 0;
}

/* A logical line (which starts on line start) parsed as the next
 * instruction, with RUN's here-documents; before the first FROM
 * (seen_from), only an ARG may come. */
static int parse_next(struct parser *p, char *line, int start, bool seen_from) {
  struct dockerfile *df = p->df;
  df->v = xrealloc(df->v, (df->n + 1) * sizeof *df->v);
  struct df_instr *in = &df->v[df->n++];
  memset(in, 0, sizeof *in);
  if (parse_instr(p, line, start, in) < 0)
    return -1;
  if (in->kind == DF_RUN && !in->json && strstr(in->rest, "<<") && heredocs(p, in) < 0)
    return -1;
  if (!seen_from && in->kind != DF_FROM && in->kind != DF_ARG)
    return hutch_err_invalid(p->err, "line %d: %s before the first FROM", start,
                             df_kind_name(in->kind));
  return 0;
}

int dockerfile_parse(const char *text, size_t len, struct dockerfile *df, struct hutch_err *err) {
  memset(df, 0, sizeof *df);
  df->escape = '\\';
  if (len > DF_MAX_BYTES)
    return hutch_err_invalid(err, "the Dockerfile is larger than %u bytes", DF_MAX_BYTES);
  if (memchr(text, '\0', len) || !utf8_valid(text, len))
    return hutch_err_invalid(err, "the Dockerfile is not UTF-8 text");

  struct parser p = {.text = text, .len = len, .df = df, .err = err};
  if (directives(&p) < 0)
    return -1;

  bool seen_from = false;
  int start = 0;
  char *line;
  while ((line = logical_line(&p, &start))) {
    if (df->n == DF_MAX_INSTRUCTIONS) {
      free(line);
      dockerfile_free(df);
      return hutch_err_invalid(err, "more than %d instructions", DF_MAX_INSTRUCTIONS);
    }
    int r = parse_next(&p, line, start, seen_from);
    free(line);
    if (r < 0) {
      dockerfile_free(df);
      return -1;
    }
    seen_from |= df->v[df->n - 1].kind == DF_FROM;
  }

  if (!seen_from) {
    dockerfile_free(df);
    return hutch_err_invalid(err, "no FROM instruction");
  }
  return 0;
}
