/* The instructions of a stage (build.h): what each sets in the stage's
 * config, and the steps that make layers (RUN, COPY, ADD, WORKDIR), with
 * the step cache: a step's key is the sha256 of the stage's chain (every
 * instruction before it, substituted, and the layers they made), its own
 * text after substitution; a hit is an entry of the owner's cache
 * (STATE/images/cache/<owner>/<key>.json) naming a layer still in the
 * store. COPY and ADD need no entry: their layer is
 * named by its content, so the same files are the same layer. */
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "build.h"
#include "cleanup.h"
#include "digest.h"
#include "layer.h"
#include "layout.h"
#include "util.h"

void build_chain(struct stage *st, const char *text, const char *hex) {
  EVP_MD_CTX *md = EVP_MD_CTX_new();
  unsigned char d[32];
  unsigned len = 0;
  EVP_DigestInit_ex(md, EVP_sha256(), NULL);
  EVP_DigestUpdate(md, st->chain, strlen(st->chain));
  EVP_DigestUpdate(md, "\n", 1);
  EVP_DigestUpdate(md, text, strlen(text) + 1);
  EVP_DigestUpdate(md, hex, strlen(hex));
  EVP_DigestFinal_ex(md, d, &len);
  EVP_MD_CTX_free(md);
  digest_hex(d, st->chain);
}

json_t *build_vars(const struct stage *st) {
  json_t *v = json_deep_copy(st->args);
  json_object_update(v, st->env);
  return v;
}

char **build_run_env(const struct stage *st) {
  size_t n = json_object_size(st->env) + json_object_size(st->args);
  char **env = xcalloc(n + 2, sizeof(char *));
  size_t k = 0;
  const char *key;
  json_t *val;
  json_object_foreach(st->env, key, val)
    env[k++] = xasprintf("%s=%s", key, json_string_value(val));
  json_object_foreach(st->args, key, val)
    if (!json_object_get(st->env, key))
      env[k++] = xasprintf("%s=%s", key, json_string_value(val));
  if (!json_object_get(st->env, "PATH") && !json_object_get(st->args, "PATH"))
    env[k++] = xstrdup("PATH=" HUTCH_DEFAULT_PATH);
  return env;
}

/* ---- the cache (the store's, images_cache.c, kept per owner) ---- */

/* A stored layer's size, from its layers/<hex>.json. */
static uint64_t layer_size(struct build *b, const char *hex) {
  _cleanup_free_ char *name = xasprintf("layers/%s.json", hex);
  char buf[512];
  struct hutch_err e = {0};
  if (read_file_at(b->ctx->store.dirfd, name, buf, sizeof buf, &e) < 0)
    return 0;
  json_t *j = json_loads(buf, 0, NULL);
  json_int_t n = json_integer_value(json_object_get(j, "size"));
  json_decref(j);
  return n > 0 ? (uint64_t)n : 0;
}

/* ---- steps that make layers ---- */

void build_add_layer(struct stage *st, const char *hex) {
  for (size_t i = json_array_size(st->layers); i-- > 0;)
    if (strcmp(json_string_value(json_array_get(st->layers, i)), hex) == 0)
      json_array_remove(st->layers, i);
  json_array_append_new(st->layers, json_string(hex));
}

/* A sandbox stacks at most HUTCH_MAX_LAYERS, one of them hutch's top
 * layer: a template with more could never run, nor could its RUN steps. */
static int layer_count_ok(const struct stage *st, struct hutch_err *err) {
  if (json_array_size(st->layers) + 1 > HUTCH_MAX_LAYERS - 1)
    return hutch_err_invalid(err, "a template stacks at most %d layers (combine steps)",
                             HUTCH_MAX_LAYERS - 1);
  return 0;
}

static json_t *instr_argv(const struct df_instr *in) {
  json_t *a = json_array();
  for (size_t i = 0; i < in->argc; i++)
    json_array_append_new(a, json_string(in->argv[i]));
  return a;
}

static int run_cached(struct build *b, struct stage *st, json_t *argv, const char *text,
                      struct step_result *res, struct hutch_err *err) {
  /* What the step could reach is part of what it did. */
  _cleanup_free_ char *keyed = xasprintf("%s allow-out=%s", text, b->network);
  struct stage probe = *st;
  build_chain(&probe, keyed, "");
  if (!b->no_cache &&
      hutch_images_cache_get(&b->ctx->store, b->ctx->owner, probe.chain, res->hex)) {
    res->cached = true;
    res->bytes = layer_size(b, res->hex);
    return 0;
  }

  size_t n = json_array_size(argv);
  char **v = xcalloc(n + 1, sizeof(char *));
  for (size_t i = 0; i < n; i++)
    v[i] = (char *)json_string_value(json_array_get(argv, i));
  int r = build_run(b, st, v, res, err);
  free(v);
  res->cached = false;
  if (r == 0)
    hutch_images_cache_put(&b->ctx->store, b->ctx->owner, probe.chain, res->hex);
  return r;
}

int build_step_run(struct build *b, struct stage *st, const struct df_instr *in,
                   struct step_result *res, struct hutch_err *err) {
  json_t *argv = in->json ? instr_argv(in) : json_deep_copy(json_object_get(st->config, "shell"));
  if (!in->json)
    json_array_append_new(argv, json_string(in->heredoc_script ? in->heredoc_script : in->rest));
  _cleanup_free_ char *a = json_dumps(argv, JSON_COMPACT);
  _cleanup_free_ char *text = xasprintf("RUN %s", a);
  int r;
  if (json_array_size(argv) == 0)
    r = hutch_err_invalid(err, "RUN with an empty command");
  else
    r = layer_count_ok(st, err);
  if (r == 0)
    r = run_cached(b, st, argv, text, res, err);
  json_decref(argv);
  if (r < 0)
    return -1;
  build_add_layer(st, res->hex);
  build_chain(st, text, res->hex);
  return 0;
}

char *build_image_path(const struct stage *st, const char *p) {
  const char *wd = json_string_value(json_object_get(st->config, "workdir"));
  _cleanup_free_ char *joined = NULL;
  if (p[0] == '/')
    joined = xstrdup(p);
  else
    joined = xasprintf("%s/%s", wd && wd[0] ? wd : "", p);

  char *out = xstrdup("/");
  for (const char *s = joined; *s;) {
    size_t n = strcspn(s, "/");
    if (n == 2 && strncmp(s, "..", 2) == 0) {
      char *slash = strrchr(out, '/');
      slash[slash == out] = '\0';
    } else if (n && !(n == 1 && s[0] == '.')) {
      char *next = xasprintf("%s%s%.*s", out, strcmp(out, "/") ? "/" : "", (int)n, s);
      free(out);
      out = next;
    }
    s += n + (s[n] == '/');
  }

  size_t jl = strlen(joined);
  if (jl && joined[jl - 1] == '/' && strcmp(out, "/") != 0) {
    char *next = xasprintf("%s/", out);
    free(out);
    out = next;
  }
  return out;
}

/* --chmod's mode (-1 when there is none): octal, as Docker takes it;
 * setuid and setgid bits are none of a layer's. */
static int chmod_flag(const struct df_instr *in, int *perm, struct hutch_err *err) {
  *perm = -1;
  const char *mode = df_flag(in, "chmod");
  if (!mode)
    return 0;
  char *end;
  long m = strtol(mode, &end, 8);
  if (!*mode || *end || m < 0 || m > 07777)
    return hutch_err_invalid(err, "--chmod=%s: expected an octal mode such as 755", mode);
  *perm = (int)(m & 01777);
  return 0;
}

static int copy_words(struct build *b, struct stage *st, const struct df_instr *in,
                      const struct stage *from, json_t *words, json_t *vars,
                      struct step_result *res, struct hutch_err *err) {
  _cleanup_free_ char *chown = NULL;
  const char *chown_raw = df_flag(in, "chown");
  if (chown_raw) {
    chown = df_word(chown_raw, vars, b->df.escape, err);
    if (!chown)
      return -1;
  }
  if (json_array_size(words) < 2)
    return hutch_err_invalid(err, "%s needs a source and a destination", df_kind_name(in->kind));
  int perm;
  if (chmod_flag(in, &perm, err) < 0)
    return -1;

  size_t n = json_array_size(words);
  _cleanup_free_ char *dest = build_image_path(st, json_string_value(json_array_get(words, n - 1)));
  json_array_remove(words, n - 1);
  struct copy_req req = {.srcs = words,
                         .dest = dest,
                         .chown = chown,
                         .from = from,
                         .add = in->kind == DF_ADD,
                         .chmod = perm};
  if (layer_count_ok(st, err) < 0)
    return -1;
  if (build_copy(b, st, &req, res, err) < 0)
    return -1;

  _cleanup_free_ char *srcs = json_dumps(words, JSON_COMPACT);
  _cleanup_free_ char *text =
      xasprintf("%s chown=%s chmod=%o from=%s %s %s", df_kind_name(in->kind), chown ? chown : "",
                perm < 0 ? 0u : (unsigned)perm, from ? from->chain : "", srcs, dest);
  build_add_layer(st, res->hex);
  build_chain(st, text, res->hex);
  return 0;
}

int build_step_copy(struct build *b, struct stage *st, const struct df_instr *in,
                    const struct stage *from, struct step_result *res, struct hutch_err *err) {
  json_t *vars = build_vars(st);
  json_t *words = in->json ? instr_argv(in) : df_words(in->rest, vars, b->df.escape, err);
  int r = -1;
  if (words)
    r = copy_words(b, st, in, from, words, vars, res, err);
  json_decref(words);
  json_decref(vars);
  return r;
}
