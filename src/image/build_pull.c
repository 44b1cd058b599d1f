/* FROM an image reference the store does not hold (build.h): pulled as
 * `hutch template pull` pulls it, by this very program run again (its own
 * process: the pull's network and archive handling stay apart from the
 * build's), into a template named after the reference, which later builds
 * reuse as Docker reuses a pulled base. The pull's progress events are
 * passed on; its one-line error becomes the step's. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "build.h"
#include "cleanup.h"
#include "util.h"

bool build_is_image_ref(const char *s) {
  return strpbrk(s, "/:@") != NULL;
}

char *build_pulled_name(const char *ref) {
  char *n = xstrdup(ref);
  for (char *p = n; *p; p++) {
    if (*p >= 'A' && *p <= 'Z')
      *p = (char)(*p - 'A' + 'a');
    else if (*p == ':' || *p == '@')
      *p = '-';
  }
  return n;
}

/* One line of the pull's: a progress event (stdout) passed on as the
 * step's, or its error line (stderr) kept in errline. */
static void pass_line(struct build *b, const char *line, char *errline, size_t errsize,
                      bool is_err) {
  json_t *ev = is_err ? NULL : json_loads(line, 0, NULL);
  if (!ev || !json_is_object(ev) || json_object_get(ev, "step")) {
    json_decref(ev);
    if (is_err && *line)
      str_copy(errline, errsize, line);
    return;
  }

  json_object_set_new(ev, "step", json_integer((json_int_t)b->step));
  const char *msg = json_string_value(json_object_get(ev, "message"));
  if (b->ctx->ndjson) {
    image_progress(b->ctx, ev);
    return;
  }
  if (msg && !b->ctx->quiet)
    fprintf(stderr, "  %s\n", msg);
  json_decref(ev);
}

static void pass_on(struct build *b, char *buf, size_t *have, char *errline, size_t errsize,
                    bool is_err) {
  char *start = buf, *nl;
  while ((nl = memchr(start, '\n', *have - (size_t)(start - buf)))) {
    *nl = '\0';
    pass_line(b, start, errline, errsize, is_err);
    start = nl + 1;
  }
  *have -= (size_t)(start - buf);
  memmove(buf, start, *have);
  if (*have > 16384) /* a line that long is no event: dropped */
    *have = 0;
}

/* The child: this very program, pulling; stdin /dev/null, stdout out,
 * stderr errfd. */
static void __attribute__((noreturn)) exec_pull(char **argv, int out, int errfd) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  int null = open("/dev/null", O_RDONLY);
  if (null < 0)
    _exit(EXIT_IMAGE);
  const int from[3] = {null, out, errfd};
  for (int fd = 0; fd < 3; fd++)
    if (dup2(from[fd], fd) < 0)
      _exit(EXIT_IMAGE);
  execv("/proc/self/exe", argv);
  _exit(EXIT_IMAGE);
}

static pid_t spawn_pull(struct build *b, const char *ref, const char *name, int out, int errfd,
                        struct hutch_err *err) {
  _cleanup_free_ char *state = build_state_dir(b);
  const char *argv[16];
  size_t n = 0;
  argv[n++] = "hutch-template";
  argv[n++] = "--state-dir";
  argv[n++] = state;
  argv[n++] = "--owner";
  argv[n++] = b->ctx->owner;
  argv[n++] = "--progress";
  argv[n++] = "ndjson";
  if (b->ctx->public_registries)
    argv[n++] = "--public-registries";
  argv[n++] = "pull";
  if (b->insecure)
    argv[n++] = "--insecure";
  argv[n++] = "--name";
  argv[n++] = name;
  argv[n++] = "--replace";
  argv[n++] = "--";
  argv[n++] = ref;
  argv[n] = NULL;

  fflush(NULL);
  pid_t pid = fork();
  if (pid < 0) {
    hutch_err_set(err, errno, "fork");
    return -1;
  }
  if (pid == 0)
    exec_pull((char **)argv, out, errfd);
  return pid;
}

/* The pull's stdout (out) and stderr (errout) read to their ends, passed
 * on line by line; its last error line in errline. */
static void relay_pull(struct build *b, int out, int errout, char *errline, size_t errsize) {
  char bufs[2][32768];
  size_t have[2] = {0, 0};
  struct pollfd p[2] = {{out, POLLIN, 0}, {errout, POLLIN, 0}};
  while (p[0].fd >= 0 || p[1].fd >= 0) {
    if (poll(p, 2, -1) < 0 && errno != EINTR)
      break;
    for (int i = 0; i < 2; i++) {
      if (p[i].fd < 0 || !p[i].revents)
        continue;
      ssize_t n = read(p[i].fd, bufs[i] + have[i], sizeof bufs[i] - have[i]);
      if (n <= 0) {
        p[i].fd = -1;
        continue;
      }
      have[i] += (size_t)n;
      pass_on(b, bufs[i], &have[i], errline, errsize, i == 1);
    }
  }
}

json_t *build_pull(struct build *b, const char *ref, struct hutch_err *err) {
  _cleanup_free_ char *name = build_pulled_name(ref);
  if (!hutch_images_name_ok(name)) {
    hutch_err_invalid(err, "FROM %s: no template of that name, and no image reference", ref);
    return NULL;
  }
  int o[2], e[2];
  if (pipe2(o, O_CLOEXEC) < 0)
    return hutch_err_set(err, errno, "pipe"), NULL;
  if (pipe2(e, O_CLOEXEC) < 0) {
    close(o[0]), close(o[1]);
    return hutch_err_set(err, errno, "pipe"), NULL;
  }
  pid_t pid = spawn_pull(b, ref, name, o[1], e[1], err);
  close(o[1]), close(e[1]);
  char errline[512] = "";
  if (pid >= 0)
    relay_pull(b, o[0], e[0], errline, sizeof errline);
  close(o[0]), close(e[0]);
  if (pid < 0)
    return NULL;

  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
    ;
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    const char *why = strncmp(errline, "hutch template pull: ", 21) == 0 ? errline + 21 : errline;
    bool input = WIFEXITED(status) && WEXITSTATUS(status) == EXIT_IMAGE_INPUT;
    hutch_err_fail(err, input ? HUTCH_ERR_INVALID : HUTCH_ERR_SYSTEM, "pull_failed",
                   "FROM %s: the pull failed: %s", ref, why[0] ? why : "no reason given");
    return NULL;
  }
  /* As base_record looks: the build's owner exactly, never anyone's. */
  return hutch_images_find(&b->ctx->store, b->ctx->owner, name, err);
}
