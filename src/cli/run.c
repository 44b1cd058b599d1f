/* hutch run: create -> exec -> stream -> destroy, in one process. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cleanup.h"
#include "cli.h"
#include "util.h"

static int exit_code(const struct hutch_verdict *v) {
  switch (v->status) {
  case HUTCH_ST_OK:
    return 0;
  case HUTCH_ST_SANDBOX_ERROR:
    return EXIT_HUTCH;
  default:
    if (v->signal > 0)
      return 128 + v->signal;
    return v->exit_code >= 0 ? v->exit_code : EXIT_HUTCH;
  }
}

static void write_verdict(int fd, const struct hutch_verdict *v) {
  if (fd < 0)
    return;
  json_t *j = hutch_verdict_to_json(v);
  char *s = json_dumps(j, JSON_COMPACT);
  json_decref(j);
  if (s && (write_all(fd, s, strlen(s)) < 0 || write_all(fd, "\n", 1) < 0))
    fprintf(stderr, "hutch run: --verdict-json: %s\n", strerror(errno));
  free(s);
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

static int open_inputs(const struct run_opts *o, int *in, int *verdict) {
  *in = *verdict = -1;
  if (o->stdin_path && strcmp(o->stdin_path, "-") == 0) {
    *in = 0;
  } else if (o->stdin_path && (*in = open(o->stdin_path, O_RDONLY | O_CLOEXEC)) < 0) {
    fprintf(stderr, "hutch run: --stdin %s: %s\n", o->stdin_path, strerror(errno));
    return -1;
  }
  if (o->verdict_path &&
      (*verdict = open(o->verdict_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)) < 0) {
    fprintf(stderr, "hutch run: --verdict-json %s: %s\n", o->verdict_path, strerror(errno));
    if (*in > 0)
      close(*in);
    return -1;
  }
  return 0;
}

int cmd_run(int argc, char **argv) {
  struct run_opts o;
  int r = run_parse(argc, argv, &o);
  if (r != 0) {
    run_opts_free(&o);
    return r > 0 ? 0 : EXIT_HUTCH;
  }
  struct hutch_err err = {0};
  struct hutch_verdict v = {.status = HUTCH_ST_SANDBOX_ERROR, .exit_code = -1};
  int in, vfd;
  if (geteuid() != 0) {
    fprintf(stderr, "hutch run: must run as root: it creates namespaces, cgroups and "
                    "id-mapped users\n");
    run_opts_free(&o);
    return EXIT_HUTCH;
  }
  if (hutch_config_check(&o.cfg, &err) < 0 || open_inputs(&o, &in, &vfd) < 0) {
    if (err.msg[0])
      fprintf(stderr, "hutch run: %s\n", err.msg);
    run_opts_free(&o);
    return EXIT_HUTCH;
  }
  o.req.stdin_open = in >= 0;
  struct hutch_sandbox *sb = NULL;
  if (hutch_sandbox_create(&o.cfg, &sb, &err) < 0) {
    fprintf(stderr, "hutch run: %s\n", err.msg);
    o.quiet = true; /* said */
  } else if (run_stream(sb->conn_fd, &o.req, in, &v, &err) < 0) {
    v.status = HUTCH_ST_SANDBOX_ERROR;
  }
  if (v.status == HUTCH_ST_SANDBOX_ERROR && !v.message[0])
    str_copy(v.message, sizeof v.message, err.msg);
  if (sb) {
    sb->conn_fd = -1; /* run_stream owned and closed it */
    struct hutch_err derr = {0};
    if (hutch_sandbox_destroy(sb, &derr) < 0 && v.status != HUTCH_ST_SANDBOX_ERROR) {
      v.status = HUTCH_ST_SANDBOX_ERROR;
      hutch_err_wrap(&derr, "teardown");
      str_copy(v.message, sizeof v.message, derr.msg);
    }
  }
  explain(&o, &v);
  write_verdict(vfd, &v);
  if (vfd >= 0)
    close(vfd);
  if (in > 0)
    close(in);
  run_opts_free(&o);
  return exit_code(&v);
}
