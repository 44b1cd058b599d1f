/* hutch run: create -> exec -> stream -> destroy, in one process. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cleanup.h"
#include "cli.h"
#include "hostcheck.h"
#include "util.h"

static int exit_code(const struct hutch_verdict *v) {
  switch (v->status) {
  case HUTCH_ST_OK:
    return 0;
  case HUTCH_ST_SANDBOX_ERROR:
    return EXIT_HUTCH;
  case HUTCH_ST_TIMEOUT:
  case HUTCH_ST_OOM:
  case HUTCH_ST_OUTPUT_LIMIT:
    /* hutch's limits kill with SIGKILL. The command may have exited by
     * itself an instant before the kill landed; it was still cut short. */
    return 128 + SIGKILL;
  default:
    if (v->signal > 0)
      return 128 + v->signal;
    return v->exit_code >= 0 ? v->exit_code : EXIT_HUTCH;
  }
}

static int write_verdict(int fd, const struct hutch_verdict *v) {
  if (fd < 0)
    return 0;
  json_t *j = hutch_verdict_to_json(v);
  char *s = json_dumps(j, JSON_COMPACT);
  json_decref(j);
  int r = s ? write_all(fd, s, strlen(s)) : -1;
  if (r == 0)
    r = write_all(fd, "\n", 1);
  if (r < 0)
    fprintf(stderr, "hutch run: --verdict-json: %s\n", strerror(errno));
  free(s);
  return r;
}

/* Say why hutch ended the workload, or why it could not start: the
 * workload's own failures speak for themselves. */
static void explain(const struct run_opts *o, const struct hutch_verdict *v) {
  if (o->quiet || !v->message[0])
    return;
  if (v->status == HUTCH_ST_TIMEOUT || v->status == HUTCH_ST_OOM ||
      v->status == HUTCH_ST_OUTPUT_LIMIT || v->status == HUTCH_ST_SANDBOX_ERROR ||
      (v->status == HUTCH_ST_NONZERO && v->exit_code >= 125))
    fprintf(stderr, "hutch: %s: %s\n", hutch_status_name(v->status), v->message);
}

/* Opened (and emptied) first: a verdict left by an earlier run must not
 * stand for this one if it fails to start. */
static int open_verdict(const struct run_opts *o, int *fd) {
  *fd = -1;
  if (!o->verdict_path)
    return 0;
  *fd = open(o->verdict_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (*fd < 0) {
    fprintf(stderr, "hutch run: --verdict-json %s: %s\n", o->verdict_path, strerror(errno));
    return -1;
  }
  return 0;
}

static int open_stdin(const struct run_opts *o, int *fd) {
  struct stat st;
  *fd = -1;
  if (!o->stdin_path)
    return 0;
  if (strcmp(o->stdin_path, "-") == 0) {
    *fd = 0;
    return 0;
  }
  *fd = open(o->stdin_path, O_RDONLY | O_CLOEXEC);
  if (*fd < 0) {
    fprintf(stderr, "hutch run: --stdin %s: %s\n", o->stdin_path, strerror(errno));
    return -1;
  }
  if (fstat(*fd, &st) < 0) {
    fprintf(stderr, "hutch run: --stdin %s: %s\n", o->stdin_path, strerror(errno));
    return -1;
  }
  if (S_ISDIR(st.st_mode)) {
    fprintf(stderr, "hutch run: --stdin %s: is a directory\n", o->stdin_path);
    return -1;
  }
  return 0;
}

/* A sandbox hutch could not make: when the host is why (a chroot, a
 * seccomp profile, a sysctl), say so in one line. Only after a failure:
 * the checks fork, and the fast path must not pay for them. */
static void say_host_cause(const struct run_opts *o, const struct hutch_err *err) {
  char line[1024];
  if (err->kind == HUTCH_ERR_SYSTEM && hutch_host_diagnose(o->cfg.state_dir, line, sizeof line))
    fprintf(stderr, "hutch: %s\n", line);
}

static int run_sandbox(struct run_opts *o, const char *request, size_t len, int in, int vfd) {
  struct hutch_err err = {0};
  struct hutch_verdict v = {.status = HUTCH_ST_SANDBOX_ERROR, .exit_code = -1};
  struct hutch_sandbox *sb = NULL;
  if (hutch_sandbox_create(&o->cfg, &sb, &err) < 0) {
    fprintf(stderr, "hutch run: %s\n", err.msg);
    say_host_cause(o, &err);
    o->quiet = true; /* said */
  } else if (stream_exec(sb->conn_fd, request, len, o->req.pty, in, &v, &err) < 0) {
    v.status = HUTCH_ST_SANDBOX_ERROR;
  }
  if (v.status == HUTCH_ST_SANDBOX_ERROR && !v.message[0])
    str_copy(v.message, sizeof v.message, err.msg);

  if (sb) {
    sb->conn_fd = -1; /* stream_exec owned and closed it */
    struct hutch_err derr = {0};
    if (hutch_sandbox_destroy(sb, &derr) < 0 && v.status != HUTCH_ST_SANDBOX_ERROR) {
      v.status = HUTCH_ST_SANDBOX_ERROR;
      hutch_err_wrap(&derr, "teardown");
      str_copy(v.message, sizeof v.message, derr.msg);
    }
  }

  explain(o, &v);
  return write_verdict(vfd, &v) < 0 ? EXIT_HUTCH : exit_code(&v);
}

/* Everything that can be refused before a sandbox exists; the request to
 * send, or NULL when something was (and has been said on stderr). */
static char *prepare(struct run_opts *o, int *in, int *vfd, size_t *len) {
  struct hutch_err err = {0};
  if (open_verdict(o, vfd) < 0)
    return NULL;
  if (open_stdin(o, in) < 0)
    return NULL;

  if (geteuid() != 0) {
    fprintf(stderr, "hutch run: must run as root: it creates namespaces, cgroups and "
                    "id-mapped users\n");
    return NULL;
  }

  o->req.stdin_open = *in >= 0;
  if (o->template_name && run_template(o, &err) < 0) {
    fprintf(stderr, "hutch run: %s\n", err.msg);
    return NULL;
  }

  if (o->cfg.isolation == HUTCH_ISOLATION_GVISOR &&
      hutch_gvisor_find(&o->gvisor, o->gvisor_platform, &err) == 0)
    o->cfg.gvisor = &o->gvisor;
  if (o->cfg.isolation == HUTCH_ISOLATION_GVISOR && !o->cfg.gvisor) {
    fprintf(stderr, "hutch run: %s\n", err.msg);
    return NULL;
  }
  if (hutch_config_check(&o->cfg, &err) < 0) {
    fprintf(stderr, "hutch run: %s\n", err.msg);
    return NULL;
  }

  char *request = stream_request(&o->req, len, &err);
  if (!request)
    fprintf(stderr, "hutch run: %s\n", err.msg);
  return request;
}

int cli_run(int argc, char **argv) {
  struct run_opts o;
  int code = EXIT_HUTCH, in = -1, vfd = -1;
  int r = run_opts_parse(argc, argv, &o);
  if (r != 0) {
    if (r < 0 && o.verdict_path) /* given before the bad option: no stale verdict */
      (void)!truncate(o.verdict_path, 0);
    run_opts_free(&o);
    return r > 0 ? 0 : EXIT_HUTCH;
  }

  size_t len = 0;
  char *request = prepare(&o, &in, &vfd, &len);
  if (request)
    code = run_sandbox(&o, request, len, in, vfd);

  free(request);
  if (vfd >= 0)
    close(vfd);
  if (in > 0)
    close(in);
  run_opts_free(&o);
  return code;
}
