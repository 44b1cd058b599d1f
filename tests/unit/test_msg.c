/* JSON codecs of the exec request and the verdict (src/proto/msg.c). Under
 * the ASan build, LeakSanitizer checks that a rejected request leaves
 * nothing allocated. */
#include <stdlib.h>
#include <string.h>

#include "msg.h"
#include "tap.h"

static bool strv_eq(char **a, char **b) {
  for (; a && b && *a && *b; a++, b++)
    if (strcmp(*a, *b) != 0)
      return false;
  return a && b && !*a && !*b;
}

static size_t strv_len(char **v) {
  size_t n = 0;
  while (v && v[n])
    n++;
  return n;
}

/* The same entries, in any order. */
static bool strv_same_set(char **a, char **b) {
  if (strv_len(a) != strv_len(b))
    return false;
  for (char **p = a; p && *p; p++) {
    bool found = false;
    for (char **q = b; q && *q && !found; q++)
      found = strcmp(*p, *q) == 0;
    if (!found)
      return false;
  }
  return true;
}

/* Through the wire: dump, load, decode. */
static int via_wire(json_t *j, struct hutch_exec_req *out, struct hutch_err *err) {
  size_t len;
  char *s = hutch_json_dump(j, &len);
  json_t *back = json_loadb(s, len, 0, NULL);
  free(s);
  int r = hutch_exec_req_from_json(back, out, err);
  json_decref(back);
  return r;
}

static void test_exec_round_trip(void) {
  char *argv[] = {"sh", "-c", "echo \"$A\" && exit 3", "", "ünïcödé", NULL};
  char *env[] = {"A=1", "B=x=y=z", "EMPTY=", "PATH=/usr/bin:/bin", NULL};
  struct hutch_exec_req r = {
      .argv = argv,
      .env = env,
      .cwd = "/home/user/work dir",
      .user = "root",
      .stdin_open = true,
      .pty = true,
      .rows = 50,
      .cols = 132,
      .timeout_ms = 1500,
      .cpu_ms = 700,
      .output_limit = 1u << 20,
  };
  struct hutch_exec_req back;
  struct hutch_err err = {0};
  json_t *j = hutch_exec_req_to_json(&r, &err);
  ok(j && json_is_object(j), "exec request to_json gives an object");
  is_str(json_string_value(json_object_get(j, "op")), "exec", "... with op \"exec\"");
  is_int(via_wire(j, &back, &err), 0, "exec request from_json accepts it");
  json_decref(j);
  ok(strv_eq(back.argv, argv), "argv round trips (incl. an empty argument and UTF-8)");
  ok(strv_same_set(back.env, env), "env round trips (incl. '=' in values, empty values)");
  is_str(back.cwd, "/home/user/work dir", "cwd round trips");
  is_str(back.user, "root", "user round trips");
  ok(back.stdin_open, "stdin round trips");
  ok(back.pty && back.rows == 50 && back.cols == 132, "pty rows/cols round trip");
  ok(back.timeout_ms == 1500 && back.cpu_ms == 700 && back.output_limit == 1u << 20,
     "limits round trip");
  hutch_exec_req_free(&back);
  ok(back.argv == NULL && back.env == NULL && back.cwd == NULL && back.user == NULL,
     "hutch_exec_req_free leaves the request empty");

  char *argv1[] = {"true", NULL};
  struct hutch_exec_req min = {.argv = argv1};
  j = hutch_exec_req_to_json(&min, &err);
  is_int(via_wire(j, &back, &err), 0, "minimal request round trips");
  json_decref(j);
  ok(strv_eq(back.argv, argv1) && back.env && !back.env[0] && !back.cwd && !back.user &&
         !back.stdin_open && !back.pty && !back.timeout_ms && !back.cpu_ms && !back.output_limit,
     "... with empty env, no cwd/user/pty/stdin and no limits");
  hutch_exec_req_free(&back);

  j = json_pack("{s:[s], s:{}}", "argv", "x", "pty");
  is_int(hutch_exec_req_from_json(j, &back, &err), 0, "pty {} is accepted");
  ok(back.pty && back.rows == 24 && back.cols == 80, "... as 24x80");
  hutch_exec_req_free(&back);
  json_decref(j);

  j = json_pack("{s:[s], s:{s:i, s:i}}", "argv", "x", "pty", "rows", 10000, "cols", 1);
  is_int(hutch_exec_req_from_json(j, &back, &err), 0, "pty 10000x1 is accepted");
  ok(back.rows == 10000 && back.cols == 1, "... as 10000x1");
  hutch_exec_req_free(&back);
  json_decref(j);
}

/* What the CLI passes on from its own command line may be any bytes; JSON
 * carries only UTF-8, so such a request is refused, never sent altered. */
static void refused_as_not_utf8(const struct hutch_exec_req *r, const char *what) {
  struct hutch_err err = {0};
  json_t *j = hutch_exec_req_to_json(r, &err);
  ok(j == NULL && err.kind == HUTCH_ERR_INVALID && strstr(err.msg, "UTF-8"),
     "%s that is not UTF-8 is refused (%s)", what, err.msg);
  json_decref(j);
}

static void test_exec_to_json_bytes(void) {
  char *argv[] = {"printf", "%s\\n", "caf\xe9", "x", NULL};
  refused_as_not_utf8(&(struct hutch_exec_req){.argv = argv}, "an argument");
  char *argv1[] = {"pwd", NULL};
  refused_as_not_utf8(&(struct hutch_exec_req){.argv = argv1, .cwd = "/tmp/caf\xe9"}, "a cwd");
  char *env[] = {"LC_X=caf\xe9", NULL};
  refused_as_not_utf8(&(struct hutch_exec_req){.argv = argv1, .env = env}, "an env value");
  char *envk[] = {"X\xe9=1", NULL};
  refused_as_not_utf8(&(struct hutch_exec_req){.argv = argv1, .env = envk}, "an env name");
}

static void check_rejected(const char *text) {
  json_error_t je;
  json_t *j = json_loads(text, JSON_DECODE_ANY, &je);
  if (!j) {
    ok(0, "test input parses: %s (%s)", text, je.text);
    return;
  }
  struct hutch_exec_req r;
  struct hutch_err err;
  memset(&r, 0x5a, sizeof r);
  memset(&err, 0, sizeof err);
  int ret = hutch_exec_req_from_json(j, &r, &err);
  ok(ret == -1 && err.kind == HUTCH_ERR_INVALID && err.msg[0] && !r.argv && !r.env && !r.cwd &&
         !r.user,
     "rejected, INVALID, nothing kept: %s -> %s", text, err.msg);
  if (ret == 0)
    hutch_exec_req_free(&r);
  json_decref(j);
}

static void test_exec_rejected(void) {
  static const char *const bad[] = {
      "{}",
      "[]",
      "\"ls\"",
      "{\"argv\": null}",
      "{\"argv\": []}",
      "{\"argv\": \"ls\"}",
      "{\"argv\": {\"0\": \"ls\"}}",
      "{\"argv\": [\"ls\", 1]}",
      "{\"argv\": [\"ls\", null]}",
      "{\"argv\": [[\"ls\"]]}",
      "{\"argv\": [\"\"]}",
      "{\"argv\": [\"\", \"x\"]}",
      "{\"argv\": [\"ls\"], \"env\": [\"A=1\"]}",
      "{\"argv\": [\"ls\"], \"env\": \"A=1\"}",
      "{\"argv\": [\"ls\"], \"env\": {\"A=B\": \"c\"}}",
      "{\"argv\": [\"ls\"], \"env\": {\"\": \"c\"}}",
      "{\"argv\": [\"ls\"], \"env\": {\"A\": 1}}",
      "{\"argv\": [\"ls\"], \"env\": {\"A\": \"1\", \"B\": null}}",
      "{\"argv\": [\"ls\"], \"timeout_ms\": -1}",
      "{\"argv\": [\"ls\"], \"cpu_ms\": -5}",
      "{\"argv\": [\"ls\"], \"output_limit\": -9223372036854775807}",
      "{\"argv\": [\"ls\"], \"timeout_ms\": \"10\"}",
      "{\"argv\": [\"ls\"], \"timeout_ms\": 1.5}",
      "{\"argv\": [\"ls\"], \"pty\": {\"rows\": 0}}",
      "{\"argv\": [\"ls\"], \"pty\": {\"rows\": 10001}}",
      "{\"argv\": [\"ls\"], \"pty\": {\"rows\": -1}}",
      "{\"argv\": [\"ls\"], \"pty\": {\"cols\": 0}}",
      "{\"argv\": [\"ls\"], \"pty\": {\"cols\": 10001}}",
      "{\"argv\": [\"ls\"], \"pty\": {\"rows\": \"24\"}}",
      "{\"argv\": [\"ls\"], \"pty\": true}",
      "{\"argv\": [\"ls\"], \"user\": \"Admin!\"}",
      "{\"argv\": [\"ls\"], \"user\": \"65536\"}",
      "{\"argv\": [\"ls\"], \"user\": \"\"}",
      "{\"argv\": [\"ls\"], \"user\": \"ROOT\"}",
      "{\"argv\": [\"ls\"], \"user\": 0}",
      "{\"argv\": [\"ls\"], \"cwd\": 5}",
      "{\"argv\": [\"ls\"], \"cwd\": null}",
      "{\"argv\": [\"ls\"], \"stdin\": \"yes\"}",
      /* Rejected late, after argv, env, cwd and user were copied. */
      "{\"argv\": [\"ls\", \"-l\"], \"env\": {\"A\": \"1\"}, \"cwd\": \"/\", \"user\": \"user\","
      " \"pty\": {\"rows\": 0, \"cols\": 80}}",
      "{\"argv\": [\"ls\", \"-l\"], \"env\": {\"A\": \"1\", \"B=\": \"2\"}, \"cwd\": \"/\"}",
      "{\"argv\": [\"ls\", \"-l\", 3], \"env\": {\"A\": \"1\"}}",
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
    check_rejected(bad[i]);

  struct hutch_exec_req r;
  struct hutch_err err;
  is_int(hutch_exec_req_from_json(NULL, &r, &err), -1, "NULL JSON: rejected");

  /* Strings are bounded as the kernel bounds one execve string (NUL included). */
  char *big = malloc(HUTCH_STRING_MAX + 1);
  memset(big, 'a', HUTCH_STRING_MAX);
  big[HUTCH_STRING_MAX] = '\0';
  json_t *j = json_pack("{s:[s, s]}", "argv", "echo", big);
  is_int(hutch_exec_req_from_json(j, &r, &err), -1, "a %u-byte argument: rejected",
         HUTCH_STRING_MAX);
  json_decref(j);
  big[HUTCH_STRING_MAX - 1] = '\0';
  j = json_pack("{s:[s, s]}", "argv", "echo", big);
  is_int(hutch_exec_req_from_json(j, &r, &err), 0, "a %u-byte argument: accepted",
         HUTCH_STRING_MAX - 1);
  hutch_exec_req_free(&r);
  json_decref(j);
  free(big);
}

static void test_verdict(void) {
  static const char *const names[] = {"ok",  "nonzero",      "signaled",     "timeout",
                                      "oom", "output_limit", "sandbox_error"};
  for (int s = HUTCH_ST_OK; s <= HUTCH_ST_SANDBOX_ERROR; s++) {
    struct hutch_verdict v = {
        .status = (enum hutch_status)s,
        .exit_code = s == HUTCH_ST_SIGNALED || s == HUTCH_ST_TIMEOUT ? -1 : s,
        .signal = s == HUTCH_ST_SIGNALED || s == HUTCH_ST_TIMEOUT ? 9 : 0,
        .wall_ms = 12.5 + s,
        .cpu_ms = 3.25,
        .peak_memory_kb = 123456789012ull,
    };
    snprintf(v.message, sizeof v.message, "status %d: \"quoted\" é", s);
    json_t *j = hutch_verdict_to_json(&v);
    is_str(json_string_value(json_object_get(j, "status")), names[s], "verdict status %s",
           names[s]);
    ok(v.exit_code < 0 ? json_is_null(json_object_get(j, "exit_code"))
                       : json_integer_value(json_object_get(j, "exit_code")) == v.exit_code,
       "... exit_code %d is %s", v.exit_code, v.exit_code < 0 ? "null" : "an integer");
    ok(v.signal == 0 ? json_is_null(json_object_get(j, "signal"))
                     : json_integer_value(json_object_get(j, "signal")) == v.signal,
       "... signal %d is %s", v.signal, v.signal == 0 ? "null" : "an integer");
    size_t len;
    char *s_ = hutch_json_dump(j, &len);
    json_decref(j);
    j = json_loadb(s_, len, 0, NULL);
    free(s_);
    struct hutch_verdict back;
    struct hutch_err err;
    memset(&back, 0x5a, sizeof back);
    is_int(hutch_verdict_from_json(j, &back, &err), 0, "... from_json accepts it");
    ok(back.status == v.status && back.exit_code == v.exit_code && back.signal == v.signal &&
           back.wall_ms == v.wall_ms && back.cpu_ms == v.cpu_ms &&
           back.peak_memory_kb == v.peak_memory_kb && strcmp(back.message, v.message) == 0,
       "... and every field round trips");
    json_decref(j);
  }

  /* The agent builds messages with snprintf into fixed buffers, which can
   * cut a UTF-8 argv[0] in the middle of a character. */
  struct hutch_verdict cut = {.status = HUTCH_ST_NONZERO, .exit_code = 127};
  snprintf(cut.message, sizeof cut.message, "exec \xe2\x82");
  json_t *cj = hutch_verdict_to_json(&cut);
  ok(cj && json_integer_value(json_object_get(cj, "exit_code")) == 127,
     "a verdict whose message is not valid UTF-8 still gives a verdict object");
  json_decref(cj);

  struct hutch_verdict v;
  struct hutch_err err;
  json_t *j = json_pack("{s:s, s:i, s:n, s:i, s:f, s:i}", "status", "weird", "exit_code", 0,
                        "signal", "wall_ms", 1, "cpu_ms", 0.5, "peak_memory_kb", 1);
  is_int(hutch_verdict_from_json(j, &v, &err), 0, "verdict without a message, integer wall_ms");
  ok(v.status == HUTCH_ST_SANDBOX_ERROR && v.exit_code == 0 && v.signal == 0 && v.wall_ms == 1.0 &&
         v.message[0] == '\0',
     "... unknown status reads as sandbox_error, exit_code 0 stays 0");
  json_decref(j);
  j = json_pack("{s:s, s:n, s:n, s:f}", "status", "ok", "exit_code", "signal", "wall_ms", 1.0);
  memset(&err, 0, sizeof err);
  ok(hutch_verdict_from_json(j, &v, &err) == -1 && err.msg[0], "verdict missing fields: -1, %s",
     err.msg);
  json_decref(j);
}

static void test_status_names(void) {
  static const char *const names[] = {"ok",  "nonzero",      "signaled",     "timeout",
                                      "oom", "output_limit", "sandbox_error"};
  for (int s = HUTCH_ST_OK; s <= HUTCH_ST_SANDBOX_ERROR; s++)
    is_str(hutch_status_name((enum hutch_status)s), names[s], "hutch_status_name(%d)", s);
  is_str(hutch_status_name((enum hutch_status)(HUTCH_ST_SANDBOX_ERROR + 1)), "sandbox_error",
         "hutch_status_name(one past the last)");
  is_str(hutch_status_name((enum hutch_status)1000), "sandbox_error", "hutch_status_name(1000)");
  is_str(hutch_status_name((enum hutch_status) - 1), "sandbox_error", "hutch_status_name(-1)");
}

static void test_dump(void) {
  json_t *j = json_pack("{s:[i, i]}", "a", 1, 2);
  size_t len = 0;
  char *s = hutch_json_dump(j, &len);
  is_str(s, "{\"a\":[1,2]}", "hutch_json_dump is compact");
  is_int(len, strlen(s), "... and reports the length");
  free(s);
  json_decref(j);
}

int main(void) {
  test_exec_round_trip();
  test_exec_to_json_bytes();
  test_exec_rejected();
  test_verdict();
  test_status_names();
  test_dump();
  return done_testing();
}
