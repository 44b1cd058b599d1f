/* E2B's template build spec (POST /v2/templates/{id}/builds/{buildID},
 * its TemplateBuildStartV2) as a Dockerfile for hutch-template build
 * (docs/templates.md, "The API and E2B's Template SDK"):
 *
 *   fromTemplate T / fromImage I   FROM T / FROM I
 *   RUN [cmd, user?]               RUN cmd (as user: USER user, RUN, USER back)
 *   COPY [src, dest, user?, mode?] COPY [--chown=user] src dest; the file
 *                                  tars its filesHash names form the context
 *   ENV [k, v, k, v...]            ENV k="v" ...
 *   WORKDIR [dir], USER [name]     the same
 *   startCmd, readyCmd             LABEL hutch.start_cmd=... hutch.ready_cmd=...
 *
 * Every argument is the client's: a newline would start an instruction of
 * its own, so none may hold one (a RUN's command always goes in JSON's
 * exec form), and values are quoted with '"', '\' and '$' escaped. */
#include "e2b/tplbuild.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "images.h"
#include "util.h"
#include "core/disk/tplfiles.h"

static bool one_line(const char *s) {
  return s && !strpbrk(s, "\r\n");
}

/* "s" with '"', '\' and '$' escaped. */
static void quoted(char **out, const char *s) {
  str_append(out, "\"", 1);
  for (; *s; s++) {
    if (*s == '"' || *s == '\\' || *s == '$')
      str_append(out, "\\", 1);
    str_append(out, s, 1);
  }
  str_append(out, "\"", 1);
}

static void line(char **out, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void line(char **out, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *s = NULL;
  if (vasprintf(&s, fmt, ap) < 0)
    abort();
  va_end(ap);
  str_append(out, s, strlen(s));
  free(s);
}

/* A plain word: a user, a path, an image; no space or quote to escape. */
static bool word_ok(const char *s) {
  return s && *s && one_line(s) && !strpbrk(s, " \t\"'\\$");
}

static int step_run(char **out, json_t *args, const char *user, struct hutch_err *err) {
  const char *cmd = json_string_value(json_array_get(args, 0));
  const char *as = json_string_value(json_array_get(args, 1));
  if (!cmd)
    return hutch_err_invalid(err, "RUN takes a command");
  if (as && *as && !word_ok(as))
    return hutch_err_invalid(err, "RUN's user '%s' is no user name", as);
  if (as && *as)
    line(out, "USER %s\n", as);
  /* Always the exec form: a command in the shell form could end in '\'
   * (joining the next instruction to it), hold a here-document marker or
   * start with '[' (read as an exec form), as a Dockerfile reads them. */
  json_t *v = json_pack("[s,s,s]", "/bin/sh", "-c", cmd);
  char *argv = json_dumps(v, JSON_COMPACT);
  json_decref(v);
  line(out, "RUN %s\n", argv);
  free(argv);
  if (as && *as)
    line(out, "USER %s\n", user);
  return 0;
}

static int step_copy(char **out, json_t *step, json_t *args, json_t *hashes,
                     struct hutch_err *err) {
  const char *src = json_string_value(json_array_get(args, 0));
  const char *dest = json_string_value(json_array_get(args, 1));
  const char *user = json_string_value(json_array_get(args, 2));
  const char *mode = json_string_value(json_array_get(args, 3));
  const char *hash = json_string_value(json_object_get(step, "filesHash"));
  if (!word_ok(src) || !word_ok(dest))
    return hutch_err_invalid(err, "COPY takes a source and a destination without spaces");
  if (!hash || !hutch_images_hex_ok(hash))
    return hutch_err_invalid(err, "COPY %s: no filesHash (64 hex digits)", src);
  if (mode && *mode)
    return hutch_err_fail(err, HUTCH_ERR_UNSUPPORTED, "not_supported",
                          "COPY %s: a mode is not supported; set it with a RUN chmod", src);
  if (user && *user && !word_ok(user))
    return hutch_err_invalid(err, "COPY's user '%s' is no user name", user);
  if (user && *user)
    line(out, "COPY --chown=%s %s %s\n", user, src, dest);
  else
    line(out, "COPY %s %s\n", src, dest);
  json_array_append_new(hashes, json_string(hash));
  return 0;
}

static int step_env(char **out, json_t *args, struct hutch_err *err) {
  size_t n = json_array_size(args);
  if (n == 0 || n % 2)
    return hutch_err_invalid(err, "ENV takes pairs of a name and a value");
  str_append(out, "ENV", 3);
  for (size_t i = 0; i < n; i += 2) {
    const char *k = json_string_value(json_array_get(args, i));
    const char *v = json_string_value(json_array_get(args, i + 1));
    if (!word_ok(k) || strchr(k, '=') || !one_line(v))
      return hutch_err_invalid(err, "ENV %s: a name, and a value on one line", k ? k : "");
    line(out, " %s=", k);
    quoted(out, v);
  }
  str_append(out, "\n", 1);
  return 0;
}

static int step(char **out, json_t *st, char **user, json_t *hashes, struct hutch_err *err) {
  const char *type = json_string_value(json_object_get(st, "type"));
  json_t *args = json_object_get(st, "args");
  const char *a0 = json_string_value(json_array_get(args, 0));
  if (!type || (args && !json_is_array(args)))
    return hutch_err_invalid(err, "a step takes a type and an array of args");

  if (strcmp(type, "RUN") == 0)
    return step_run(out, args, *user, err);
  if (strcmp(type, "COPY") == 0)
    return step_copy(out, st, args, hashes, err);
  if (strcmp(type, "ENV") == 0)
    return step_env(out, args, err);

  if (strcmp(type, "WORKDIR") == 0 && word_ok(a0)) {
    line(out, "WORKDIR %s\n", a0);
    return 0;
  }
  if (strcmp(type, "USER") == 0 && word_ok(a0)) {
    line(out, "USER %s\n", a0);
    free(*user);
    *user = xstrdup(a0);
    return 0;
  }

  if (strcmp(type, "WORKDIR") == 0 || strcmp(type, "USER") == 0)
    return hutch_err_invalid(err, "%s takes one word", type);
  return hutch_err_fail(err, HUTCH_ERR_UNSUPPORTED, "not_supported",
                        "a build step of type %s is not supported", type);
}

static int labels(char **out, json_t *spec, struct hutch_err *err) {
  static const char *const keys[][2] = {{"startCmd", "hutch.start_cmd"},
                                        {"readyCmd", "hutch.ready_cmd"}};
  for (size_t i = 0; i < 2; i++) {
    json_t *v = json_object_get(spec, keys[i][0]);
    if (!v || json_is_null(v))
      continue;
    const char *s = json_string_value(v);
    if (!one_line(s))
      return hutch_err_invalid(err, "%s: a command on one line", keys[i][0]);
    line(out, "LABEL %s=", keys[i][1]);
    quoted(out, s);
    str_append(out, "\n", 1);
  }
  return 0;
}

/* Each of steps (a JSON array, or NULL) onto out, the first run as
 * base_user; -1 with err naming the step that is wrong. */
static int add_steps(char **out, json_t *steps, const char *base_user, json_t *hashes,
                     struct hutch_err *err) {
  char *user = xstrdup(base_user && *base_user ? base_user : "root");
  size_t i;
  json_t *st;
  int r = 0;
  json_array_foreach(steps, i, st) {
    if (!json_is_object(st))
      hutch_err_invalid(err, "step %zu: an object", i + 1);
    else if (step(out, st, &user, hashes, err) == 0)
      continue;
    hutch_err_wrap(err, "step %zu", i + 1);
    r = -1;
    break;
  }
  free(user);
  return r;
}

char *e2b_dockerfile(json_t *spec, const char *base_user, json_t *hashes, struct hutch_err *err) {
  const char *tpl = json_string_value(json_object_get(spec, "fromTemplate"));
  const char *img = json_string_value(json_object_get(spec, "fromImage"));
  json_t *steps = json_object_get(spec, "steps");
  if (json_object_get(spec, "fromImageRegistry")) {
    hutch_err_fail(err, HUTCH_ERR_UNSUPPORTED, "not_supported",
                   "registry credentials (fromImageRegistry) are not supported");
    return NULL;
  }
  if (!tpl == !img || !word_ok(tpl ? tpl : img)) {
    hutch_err_invalid(err, "a build starts from one fromTemplate or fromImage");
    return NULL;
  }
  if (steps && !json_is_array(steps)) {
    hutch_err_invalid(err, "steps: an array");
    return NULL;
  }

  char *out = NULL;
  line(&out, "FROM %s\n", tpl ? tpl : img);
  if (add_steps(&out, steps, base_user, hashes, err) < 0)
    goto fail;
  if (labels(&out, spec, err) < 0)
    goto fail;
  return out;

fail:
  free(out);
  return NULL;
}
