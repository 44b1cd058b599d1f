/* The instructions that set a stage's config (build.h): ENV, ARG, LABEL,
 * USER, EXPOSE, ENTRYPOINT, CMD, SHELL, and WORKDIR (which makes a layer
 * only when its directory is missing). Each folds its substituted text
 * into the stage's chain, so that a later step's cache key sees it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "build.h"
#include "cleanup.h"
#include "util.h"

static bool env_name_ok(const char *s, size_t n) {
  if (n == 0)
    return false;
  for (size_t i = 0; i < n; i++)
    if (s[i] == '=' || s[i] == ' ' || s[i] == '\t')
      return false;
  return true;
}

/* The old form, `KEY value with spaces`: the value is the rest of the
 * line, substituted. */
static int pair_spaced(struct build *b, const struct df_instr *in, json_t *vars, const char *key,
                       json_t *into, struct hutch_err *err) {
  size_t kl = strcspn(in->rest, " \t");
  const char *v = in->rest + kl + strspn(in->rest + kl, " \t");
  if (!*v)
    return hutch_err_invalid(err, "%s %s: no value", df_kind_name(in->kind), key);
  char *val = df_word(v, vars, b->df.escape, err);
  if (!val)
    return -1;
  json_object_set_new(into, key, json_string(val));
  free(val);
  return 0;
}

/* KEY=VALUE words. A label's key may hold spaces (quoted); a variable's
 * may not. */
static int pairs_kv(const struct df_instr *in, json_t *words, json_t *into, struct hutch_err *err) {
  size_t i;
  json_t *w;
  json_array_foreach(words, i, w) {
    const char *s = json_string_value(w), *eq = strchr(s, '=');
    if (!eq || eq == s || (in->kind == DF_ENV && !env_name_ok(s, (size_t)(eq - s))))
      return hutch_err_invalid(err, "%s: '%s' is not KEY=VALUE", df_kind_name(in->kind), s);
    _cleanup_free_ char *k = xasprintf("%.*s", (int)(eq - s), s);
    json_object_set_new(into, k, json_string(eq + 1));
  }
  return 0;
}

/* ENV and LABEL: KEY=VALUE words, or the old `KEY value with spaces`. */
static int pairs(struct build *b, struct stage *st, const struct df_instr *in, json_t *into,
                 struct hutch_err *err) {
  json_t *vars = build_vars(st);
  json_t *words = df_words(in->rest, vars, b->df.escape, err);
  int r = -1;
  if (words) {
    const char *first = json_string_value(json_array_get(words, 0));
    if (first && !strchr(first, '='))
      r = pair_spaced(b, in, vars, first, into, err);
    else
      r = pairs_kv(in, words, into, err);
  }
  json_decref(words);
  json_decref(vars);
  return r;
}

int build_arg(struct build *b, json_t *scope, const struct df_instr *in, json_t *into,
              struct hutch_err *err) {
  json_t *words = df_words(in->rest, scope, b->df.escape, err);
  if (!words)
    return -1;

  size_t i;
  json_t *w;
  int r = 0;
  json_array_foreach(words, i, w) {
    const char *s = json_string_value(w), *eq = strchr(s, '=');
    size_t nl = eq ? (size_t)(eq - s) : strlen(s);
    if (!env_name_ok(s, nl)) {
      r = hutch_err_invalid(err, "ARG: '%s' is not NAME[=DEFAULT]", s);
      break;
    }

    _cleanup_free_ char *name = xasprintf("%.*s", (int)nl, s);
    json_t *given = json_object_get(b->build_args, name);
    json_t *global = into == b->global_args ? NULL : json_object_get(b->global_args, name);
    if (given)
      json_object_set(into, name, given);
    else if (eq)
      json_object_set_new(into, name, json_string(eq + 1));
    else if (global)
      json_object_set(into, name, global);
  }
  json_decref(words);
  return r;
}

/* A port number (1..65535) at s: where it ends, or NULL. */
static const char *port_number(const char *s, uint64_t *out) {
  size_t dl = strspn(s, "0123456789");
  char num[8];
  if (dl == 0 || dl >= sizeof num)
    return NULL;
  memcpy(num, s, dl);
  num[dl] = '\0';
  return parse_u64(num, out) && *out >= 1 && *out <= 65535 ? s + dl : NULL;
}

/* An EXPOSE word, PORT[-PORT][/tcp|udp|sctp], as "PORT[-PORT]/PROTO"
 * (malloc'd), or NULL when it is none. */
static char *port_spec(const char *s) {
  uint64_t port = 0, last = 0;
  const char *at = port_number(s, &port), *proto = "tcp";
  if (at && *at == '-')
    at = port_number(at + 1, &last);
  else
    last = port;
  if (at && *at == '/')
    proto = at + 1;
  else if (at && *at)
    at = NULL;
  if (!at || port == 0 || last < port ||
      (strcmp(proto, "tcp") && strcmp(proto, "udp") && strcmp(proto, "sctp")))
    return NULL;

  if (last == port)
    return xasprintf("%u/%s", (unsigned)port, proto);
  return xasprintf("%u-%u/%s", (unsigned)port, (unsigned)last, proto);
}

static int expose(struct build *b, struct stage *st, const struct df_instr *in,
                  struct hutch_err *err) {
  json_t *vars = build_vars(st);
  json_t *words = df_words(in->rest, vars, b->df.escape, err);
  json_decref(vars);
  if (!words)
    return -1;

  json_t *ports = json_object_get(st->config, "exposed_ports");
  size_t i;
  json_t *w;
  int r = 0;
  json_array_foreach(words, i, w) {
    const char *s = json_string_value(w);
    _cleanup_free_ char *p = port_spec(s);
    if (!p) {
      r = hutch_err_invalid(err, "EXPOSE %s: expected PORT[-PORT][/tcp|udp|sctp]", s);
      break;
    }
    bool have = false;
    size_t k;
    json_t *e;
    json_array_foreach(ports, k, e)
      have |= strcmp(json_string_value(e), p) == 0;
    if (!have)
      json_array_append_new(ports, json_string(p));
  }
  json_decref(words);
  return r;
}

/* CMD, ENTRYPOINT: the exec form as given, the shell form through SHELL. */
static json_t *command(const struct stage *st, const struct df_instr *in) {
  json_t *a = json_array();
  if (in->json) {
    for (size_t i = 0; i < in->argc; i++)
      json_array_append_new(a, json_string(in->argv[i]));
    return a;
  }
  json_array_extend(a, json_object_get(st->config, "shell"));
  json_array_append_new(a, json_string(in->rest));
  return a;
}

static int workdir(struct build *b, struct stage *st, const struct df_instr *in,
                   struct step_result *res, struct hutch_err *err) {
  json_t *vars = build_vars(st);
  char *w = df_word(in->rest, vars, b->df.escape, err);
  json_decref(vars);
  if (!w)
    return -1;

  char *path = build_image_path(st, w);
  free(w);
  size_t l = strlen(path);
  if (l > 1 && path[l - 1] == '/')
    path[l - 1] = '\0';
  json_object_set_new(st->config, "workdir", json_string(path));

  int r = 0;
  if (build_stage_lookup(b, st, path, NULL) != S_IFDIR) {
    r = build_mkdir_layer(b, path, res, err);
    if (r == 0)
      build_add_layer(st, res->hex);
  }
  free(path);
  return r;
}

static int set_arg(struct build *b, struct stage *st, const struct df_instr *in,
                   struct hutch_err *err) {
  json_t *vars = build_vars(st);
  int r = build_arg(b, vars, in, st->args, err);
  json_decref(vars);
  return r;
}

static int set_user(struct build *b, struct stage *st, const struct df_instr *in,
                    struct hutch_err *err) {
  json_t *vars = build_vars(st);
  char *user = df_word(in->rest, vars, b->df.escape, err);
  json_decref(vars);
  if (!user)
    return -1;
  json_object_set_new(st->config, "user", json_string(user));
  free(user);
  return 0;
}

/* The instruction's effect on st. */
static int apply_meta(struct build *b, struct stage *st, const struct df_instr *in,
                      struct step_result *res, struct hutch_err *err) {
  json_t *cfg = st->config;
  switch (in->kind) {
  case DF_ENV:
    return pairs(b, st, in, st->env, err);
  case DF_LABEL:
    return pairs(b, st, in, json_object_get(cfg, "labels"), err);
  case DF_ARG:
    return set_arg(b, st, in, err);
  case DF_EXPOSE:
    return expose(b, st, in, err);
  case DF_USER:
    return set_user(b, st, in, err);
  case DF_CMD:
    json_object_set_new(cfg, "cmd", command(st, in));
    st->cmd_set = true;
    return 0;
  case DF_ENTRYPOINT:
    json_object_set_new(cfg, "entrypoint", command(st, in));
    if (!st->cmd_set)
      json_object_set_new(cfg, "cmd", json_null());
    return 0;
  case DF_SHELL:
    if (!in->argc)
      return hutch_err_invalid(err, "SHELL needs at least one word");
    json_object_set_new(cfg, "shell", command(st, in));
    return 0;
  case DF_WORKDIR:
    return workdir(b, st, in, res, err);
  default:
    return hutch_err_set(err, 0, "%s is no config instruction", df_kind_name(in->kind));
  }
}

/* The instruction's effect on st; *res->hex is set when it made a layer. */
int build_step_meta(struct build *b, struct stage *st, const struct df_instr *in,
                    struct step_result *res, struct hutch_err *err) {
  if (apply_meta(b, st, in, res, err) < 0)
    return -1;

  /* What the instruction left, as the chain's text: the config and env
   * after it, so two spellings of one effect share a cache. */
  json_t *state =
      json_pack("{s:O,s:O,s:O}", "config", st->config, "env", st->env, "args", st->args);
  _cleanup_free_ char *text = json_dumps(state, JSON_COMPACT);
  json_decref(state);
  build_chain(st, text, res->hex);
  return 0;
}
