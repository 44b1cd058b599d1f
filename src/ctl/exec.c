/* hutch exec: a command in a sandbox, its output streamed as it comes
 * (POST /v1/sandboxes/{id}/exec, NDJSON), hutch's exit status the
 * command's own: as hutch run's, 128+N for a signal N, 137 for a limit
 * hutch enforced (a kill), 125 when hutch failed. -t (a terminal) is the
 * interactive exec of exec_tty.c. */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "ctl.h"
#include "util.h"

/* What -i sends: the server takes stdin as one string of its body, and a
 * body of at most 1 MiB (HTTP_BODY_MAX). */
#define STDIN_MAX ((1u << 20) - 4096)

enum { OPT_TIMEOUT = 256 };

static const struct ctl_opt opts[] = {
    {'i', "interactive", NULL, "send hutch's stdin to the command (text, up to 1 MiB)"},
    {'t', "tty", NULL, "a terminal for the command (with -i: a session to type into)"},
    {'e', "env", "K=V", "an environment variable; repeatable"},
    {'w', "workdir", "DIR", "the directory it runs in"},
    {'u', "user", "USER", "user, root, a user of the sandbox, or UID[:GID]"},
    {OPT_TIMEOUT, "timeout", "S", "seconds it may run (default: the server's)"},
    {0},
};

struct run {
  struct ctl *ctl;
  json_t *exit;  /* the exit line once it came */
  bool out_gone; /* our stdout or stderr was closed: the command is cut */
};

/* base64 text into its bytes (malloc'd), *n their count. */
static unsigned char *unbase64(const char *s, size_t *n) {
  size_t len = strlen(s);
  unsigned char *out = xmalloc(len / 4 * 3 + 3);
  int got = EVP_DecodeBlock(out, (const unsigned char *)s, (int)len);
  if (got < 0) {
    free(out);
    return NULL;
  }
  while (len && s[len - 1] == '=' && got > 0) {
    len--;
    got--;
  }
  *n = (size_t)got;
  return out;
}

static int on_line(void *arg, json_t *line) {
  struct run *r = arg;
  const char *type = json_string_value(json_object_get(line, "type"));
  if (!type)
    return HC_LINE_MORE;
  if (strcmp(type, "exit") == 0) {
    r->exit = json_incref(line);
    return HC_LINE_MORE;
  }
  int fd = strcmp(type, "stdout") == 0   ? STDOUT_FILENO
           : strcmp(type, "stderr") == 0 ? STDERR_FILENO
                                         : -1;
  if (fd < 0)
    return HC_LINE_MORE;

  json_t *text = json_object_get(line, "data");
  const char *b64 = json_string_value(json_object_get(line, "data_b64"));
  int w = 0;
  if (json_is_string(text)) {
    w = write_all(fd, json_string_value(text), json_string_length(text));
  } else if (b64) {
    size_t n = 0;
    unsigned char *bytes = unbase64(b64, &n);
    w = bytes ? write_all(fd, bytes, n) : 0;
    free(bytes);
  }
  if (w < 0) {
    r->out_gone = true;
    return HC_LINE_STOP;
  }
  return HC_LINE_MORE;
}

int ctl_exit_status(struct ctl *ctl, json_t *exit) {
  const char *status = json_string_value(json_object_get(exit, "status"));
  const char *message = json_string_value(json_object_get(exit, "message"));
  json_int_t code = json_integer_value(json_object_get(exit, "exit_code"));
  json_int_t sig = json_integer_value(json_object_get(exit, "signal"));
  if (!status)
    return ctl_fail(ctl, CTL_EXIT_FAILED, "the command's end came without a verdict");
  if (strcmp(status, "ok") == 0)
    return 0;

  bool limit = strcmp(status, "timeout") == 0 || strcmp(status, "oom") == 0 ||
               strcmp(status, "output_limit") == 0;
  /* Say why hutch ended it, or why it could not start (as hutch run
   * does); the command's own failures speak for themselves. */
  bool unstarted = strcmp(status, "nonzero") == 0 && code >= 125;
  if ((limit || unstarted || strcmp(status, "sandbox_error") == 0) && message && *message)
    ctl_fail(ctl, 0, "%s: %s", status, message);
  if (strcmp(status, "sandbox_error") == 0)
    return CTL_EXIT_FAILED;
  if (limit)
    return 128 + SIGKILL;
  if (sig > 0)
    return 128 + (int)sig;
  return json_is_integer(json_object_get(exit, "exit_code")) ? (int)code : CTL_EXIT_FAILED;
}

/* All of stdin as a JSON string, or NULL after saying why not. */
static json_t *read_stdin(struct ctl *ctl) {
  size_t len = 0, cap = 0;
  char *buf = NULL;
  for (;;) {
    buf = xgrow(buf, &cap, len + 65536);
    ssize_t n = read(STDIN_FILENO, buf + len, 65536);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0) {
      ctl_fail(ctl, 0, "reading stdin: %s", strerror(errno));
      break;
    }
    if (n == 0) {
      json_t *s = NULL;
      if (utf8_valid(buf, len) && !memchr(buf, '\0', len))
        s = json_stringn_nocheck(buf, len);
      else
        ctl_fail(ctl, 0, "-i sends text: stdin is not UTF-8 without NUL (use hutch cp for bytes)");
      free(buf);
      return s;
    }
    len += (size_t)n;
    if (len > STDIN_MAX) {
      ctl_fail(ctl, 0, "-i: stdin is longer than %u KiB", STDIN_MAX >> 10);
      break;
    }
  }
  free(buf);
  return NULL;
}

struct exec_opts {
  json_t *body;
  bool interactive, tty;
};

static int option(struct ctl *ctl, struct exec_opts *o, int c, const char *arg) {
  if (c == 'i') {
    o->interactive = true;
  } else if (c == 't') {
    o->tty = true;
  } else if (c == 'e') {
    const char *eq = strchr(arg, '=');
    if (!eq || eq == arg)
      return ctl_fail(ctl, CTL_EXIT_FAILED, "-e wants KEY=VALUE, not '%s'", arg);
    json_t *env = json_object_get(o->body, "env");
    if (!env)
      json_object_set_new(o->body, "env", env = json_object());
    char *k = xasprintf("%.*s", (int)(eq - arg), arg);
    json_object_set_new(env, k, json_string(eq + 1));
    free(k);
  } else if (c == 'w') {
    json_object_set_new(o->body, "cwd", json_string(arg));
  } else if (c == 'u') {
    json_object_set_new(o->body, "user", json_string(arg));
  } else if (c == OPT_TIMEOUT) {
    char *end;
    double t = strtod(arg, &end);
    if (!*arg || *end || t < 0)
      return ctl_fail(ctl, CTL_EXIT_FAILED, "--timeout wants seconds, not '%s'", arg);
    json_object_set_new(o->body, "timeout_s", json_real(t));
  }
  return 0;
}

static int exec_run(struct ctl *ctl, int argc, char **argv) {
  struct exec_opts o = {.body = json_object()};
  int c = CTL_OPT_END, rc = 0;
  const char *arg;
  while (rc == 0 && (c = ctl_opt_next(ctl, argc, argv, &arg)) >= 0)
    rc = option(ctl, &o, c, arg);
  if (rc || !ctl_opts_end(ctl, c, argc, argv, 2, -1, &rc)) {
    json_decref(o.body);
    return rc;
  }

  const char *id = argv[optind];
  json_t *cmd = json_array();
  for (int i = optind + 1; i < argc; i++)
    json_array_append_new(cmd, json_string(argv[i]));
  json_object_set_new(o.body, "cmd", cmd);
  if (o.tty) {
    rc = ctl_exec_tty(ctl, id, o.body, o.interactive);
    json_decref(o.body);
    return rc;
  }
  if (o.interactive) {
    json_t *in = read_stdin(ctl);
    if (!in) {
      json_decref(o.body);
      return CTL_EXIT_FAILED;
    }
    json_object_set_new(o.body, "stdin", in);
  }

  struct run r = {.ctl = ctl};
  char *path = ctl_path("/v1/sandboxes/%s/exec", id);
  rc = ctl_stream(ctl, "POST", path, o.body, on_line, &r);
  free(path);
  json_decref(o.body);
  if (rc == 0 && r.out_gone)
    rc = 128 + SIGPIPE; /* nobody reads what it says: it was cut, as by the shell's SIGPIPE */
  else if (rc == 0 && !r.exit)
    rc = ctl_fail(ctl, CTL_EXIT_FAILED, "the output ended before the command did");
  else if (rc == 0)
    rc = ctl_exit_status(ctl, r.exit);
  json_decref(r.exit);
  return rc;
}

const struct ctl_verb ctl_verb_exec = {"exec", "[OPTIONS] ID CMD [ARGS...]",
                                       "run CMD in sandbox ID; its exit status is hutch's", opts,
                                       exec_run};
