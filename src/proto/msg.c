/* The JSON codecs of msg.h: the exec request and the verdict to JSON and
 * back, each field checked on the way in; which accounts a request may
 * name; and text made fit for JSON. */
#include "msg.h"

#include <stdlib.h>
#include <string.h>

#include "util.h"

static const char *const status_names[] = {
    [HUTCH_ST_OK] = "ok",
    [HUTCH_ST_NONZERO] = "nonzero",
    [HUTCH_ST_SIGNALED] = "signaled",
    [HUTCH_ST_TIMEOUT] = "timeout",
    [HUTCH_ST_OOM] = "oom",
    [HUTCH_ST_OUTPUT_LIMIT] = "output_limit",
    [HUTCH_ST_SANDBOX_ERROR] = "sandbox_error",
};

const char *hutch_status_name(enum hutch_status s) {
  return (unsigned)s < ARRAY_SIZE(status_names) ? status_names[s] : "sandbox_error";
}

json_t *hutch_json_text(const char *s) {
  json_t *j = json_string(s);
  if (j)
    return j;
  char *copy = xstrdup(s);
  size_t len = strlen(copy);
  unsigned cp;
  for (size_t i = 0, n; i < len; i += n)
    if ((n = utf8_seq(copy + i, len - i, &cp)) == 0)
      copy[i] = '?', n = 1;
  j = json_string(copy);
  free(copy);
  return j;
}

json_t *hutch_verdict_to_json(const struct hutch_verdict *v) {
  return json_pack(
      "{s:s, s:o, s:o, s:f, s:f, s:I, s:o, s:o}", "status", hutch_status_name(v->status),
      "exit_code", v->exit_code >= 0 ? json_integer(v->exit_code) : json_null(), "signal",
      v->signal > 0 ? json_integer(v->signal) : json_null(), "wall_ms", v->wall_ms, "cpu_ms",
      v->cpu_ms, "peak_memory_kb", (json_int_t)v->peak_memory_kb, "escape_attempts",
      v->escape_attempts >= 0 ? json_integer(v->escape_attempts) : json_null(), "message",
      hutch_json_text(v->message));
}

int hutch_verdict_from_json(json_t *j, struct hutch_verdict *v, struct hutch_err *err) {
  const char *status = NULL, *message = "";
  json_t *code = NULL, *sig = NULL, *escapes = NULL;
  json_int_t peak = 0;
  json_error_t je;
  memset(v, 0, sizeof *v);

  if (json_unpack_ex(j, &je, 0, "{s:s, s:o, s:o, s:F, s:F, s:I, s?o, s?s}", "status", &status,
                     "exit_code", &code, "signal", &sig, "wall_ms", &v->wall_ms, "cpu_ms",
                     &v->cpu_ms, "peak_memory_kb", &peak, "escape_attempts", &escapes, "message",
                     &message) < 0)
    return hutch_err_set(err, 0, "bad verdict from agent: %s", je.text);

  v->status = HUTCH_ST_SANDBOX_ERROR;
  for (size_t i = 0; i < ARRAY_SIZE(status_names); i++)
    if (strcmp(status, status_names[i]) == 0)
      v->status = (enum hutch_status)i;
  v->exit_code = json_is_integer(code) ? (int)json_integer_value(code) : -1;
  v->signal = json_is_integer(sig) ? (int)json_integer_value(sig) : 0;
  v->peak_memory_kb = peak > 0 ? (uint64_t)peak : 0;
  v->escape_attempts = json_is_integer(escapes) && json_integer_value(escapes) >= 0
                           ? (int64_t)json_integer_value(escapes)
                           : -1;
  snprintf(v->message, sizeof v->message, "%s", message);
  return 0;
}

static json_t *utf8_string(const char *s, const char *what, struct hutch_err *err) {
  json_t *j = json_string(s);
  if (!j)
    hutch_err_invalid(err, "%s is not valid UTF-8", what);
  return j;
}

static json_t *strv_to_json(char **v, struct hutch_err *err) {
  json_t *a = json_array();
  for (size_t i = 0; v && v[i]; i++) {
    char what[32];
    snprintf(what, sizeof what, "argument %zu", i);
    json_t *s = utf8_string(v[i], what, err);
    if (!s) {
      json_decref(a);
      return NULL;
    }
    json_array_append_new(a, s);
  }
  return a;
}

static json_t *env_to_json(char **env, struct hutch_err *err) {
  json_t *o = json_object();
  for (char **e = env; e && *e; e++) {
    const char *eq = strchr(*e, '=');
    if (!eq)
      continue;
    char *k = xasprintf("%.*s", (int)(eq - *e), *e);
    json_t *v = utf8_string(eq + 1, "an environment value", err);
    int r = v ? json_object_set_new(o, k, v) : -1;
    if (v && r < 0)
      hutch_err_invalid(err, "environment variable %s: name is not valid UTF-8", k);
    free(k);
    if (r < 0) {
      json_decref(o);
      return NULL;
    }
  }
  return o;
}

/* An id below the sandbox's range: digits only, no sign, no leading zero
 * beyond "0". */
static bool id_ok(const char *s, size_t n) {
  if (n == 0 || n > 5 || (n > 1 && s[0] == '0'))
    return false;
  unsigned long v = 0;
  for (size_t i = 0; i < n; i++) {
    if (s[i] < '0' || s[i] > '9')
      return false;
    v = v * 10 + (unsigned long)(s[i] - '0');
  }
  return v < 65536;
}

bool hutch_user_ok(const char *user) {
  size_t n = strlen(user);
  const char *colon = strchr(user, ':');
  if (user[0] >= '0' && user[0] <= '9')
    return colon ? id_ok(user, (size_t)(colon - user)) && id_ok(colon + 1, strlen(colon + 1))
                 : id_ok(user, n);
  /* A name as useradd takes it: it is looked up in the sandbox's own
   * /etc/passwd, by the agent. */
  if (n == 0 || n > 32 || !((user[0] >= 'a' && user[0] <= 'z') || user[0] == '_'))
    return false;
  for (size_t i = 1; i < n; i++)
    if (!((user[i] >= 'a' && user[i] <= 'z') || (user[i] >= '0' && user[i] <= '9') ||
          user[i] == '_' || user[i] == '-' || user[i] == '.'))
      return false;
  return true;
}

json_t *hutch_exec_req_to_json(const struct hutch_exec_req *r, struct hutch_err *err) {
  json_t *argv = strv_to_json(r->argv, err);
  if (!argv)
    return NULL;
  json_t *env = env_to_json(r->env, err);
  if (!env) {
    json_decref(argv);
    return NULL;
  }
  json_t *cwd = NULL;
  if (r->cwd) {
    cwd = utf8_string(r->cwd, "the working directory", err);
    if (!cwd) {
      json_decref(argv);
      json_decref(env);
      return NULL;
    }
  }

  json_t *j =
      json_pack("{s:s, s:o, s:o, s:b, s:I, s:I, s:I}", "op", "exec", "argv", argv, "env", env,
                "stdin", r->stdin_open, "timeout_ms", (json_int_t)r->timeout_ms, "cpu_ms",
                (json_int_t)r->cpu_ms, "output_limit", (json_int_t)r->output_limit);

  if (cwd)
    json_object_set_new(j, "cwd", cwd);
  if (r->user)
    json_object_set_new(j, "user", json_string(r->user));
  if (r->pty)
    json_object_set_new(j, "pty", json_pack("{s:i, s:i}", "rows", r->rows, "cols", r->cols));
  return j;
}

static bool valid_string(const char *s) {
  return s && strlen(s) < HUTCH_STRING_MAX;
}

int hutch_exec_req_from_json(json_t *j, struct hutch_exec_req *r, struct hutch_err *err) {
  json_t *argv = NULL, *env = NULL, *pty = NULL;
  const char *cwd = NULL, *user = NULL;
  int stdin_open = 0;
  json_int_t timeout = 0, cpu = 0, outlim = 0;
  json_error_t je;
  memset(r, 0, sizeof *r);

  if (json_unpack_ex(j, &je, 0, "{s:o, s?o, s?s, s?s, s?b, s?o, s?I, s?I, s?I}", "argv", &argv,
                     "env", &env, "cwd", &cwd, "user", &user, "stdin", &stdin_open, "pty", &pty,
                     "timeout_ms", &timeout, "cpu_ms", &cpu, "output_limit", &outlim) < 0)
    return hutch_err_invalid(err, "bad exec request: %s", je.text);
  if (!json_is_array(argv) || json_array_size(argv) == 0 || json_array_size(argv) > 65536)
    return hutch_err_invalid(err, "bad exec request: argv must be a non-empty array");
  if (env && !json_is_object(env))
    return hutch_err_invalid(err, "bad exec request: env must be an object");
  if (user && !hutch_user_ok(user))
    return hutch_err_invalid(err, "bad exec request: user must be \"user\", \"root\", a user "
                                  "name or UID[:GID] below 65536");
  if (timeout < 0 || cpu < 0 || outlim < 0)
    return hutch_err_invalid(err, "bad exec request: limits must not be negative");

  r->argv = xcalloc(json_array_size(argv) + 1, sizeof(char *));
  size_t i;
  json_t *v;
  json_array_foreach(argv, i, v) {
    if (!json_is_string(v) || !valid_string(json_string_value(v)) ||
        (i == 0 && json_string_length(v) == 0)) {
      hutch_exec_req_free(r);
      return hutch_err_invalid(err, "bad exec request: argv[%zu] is not a usable string", i);
    }
    r->argv[i] = xstrdup(json_string_value(v));
  }

  r->env = xcalloc(json_object_size(env) + 1, sizeof(char *));
  const char *k;
  i = 0;
  json_object_foreach(env, k, v) {
    if (!json_is_string(v) || !*k || strchr(k, '=') || !valid_string(json_string_value(v))) {
      hutch_exec_req_free(r);
      return hutch_err_invalid(err, "bad exec request: env entry '%s' is not usable", k);
    }
    r->env[i++] = xasprintf("%s=%s", k, json_string_value(v));
  }

  if (cwd)
    r->cwd = xstrdup(cwd);
  if (user)
    r->user = xstrdup(user);
  r->stdin_open = stdin_open;
  r->timeout_ms = (uint64_t)timeout;
  r->cpu_ms = (uint64_t)cpu;
  r->output_limit = (uint64_t)outlim;

  if (pty) {
    int rows = 24, cols = 80;
    if (json_unpack_ex(pty, &je, 0, "{s?i, s?i}", "rows", &rows, "cols", &cols) < 0 || rows <= 0 ||
        cols <= 0 || rows > 10000 || cols > 10000) {
      hutch_exec_req_free(r);
      return hutch_err_invalid(err, "bad exec request: pty size");
    }
    r->pty = true;
    r->rows = (uint16_t)rows;
    r->cols = (uint16_t)cols;
  }

  return 0;
}

void hutch_exec_req_free(struct hutch_exec_req *r) {
  for (char **p = r->argv; p && *p; p++)
    free(*p);
  for (char **p = r->env; p && *p; p++)
    free(*p);
  free(r->argv);
  free(r->env);
  free(r->cwd);
  free(r->user);
  memset(r, 0, sizeof *r);
}

char *hutch_json_dump(json_t *j, size_t *len) {
  char *s = json_dumps(j, JSON_COMPACT);
  if (!s)
    s = xstrdup("null");
  *len = strlen(s);
  return s;
}
