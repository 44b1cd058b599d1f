/* The hutch command: one function per verb. */
#ifndef HUTCH_CLI_H
#define HUTCH_CLI_H

#include <stdbool.h>
#include <stdint.h>

#include "gvisor.h"
#include "msg.h"
#include "sandbox.h"

/* Exit codes of hutch itself (docs/cli.md), as in docker run and env(1). */
#define EXIT_HUTCH 125        /* hutch failed, or was asked something impossible */
#define EXIT_CANNOT_RUN 126   /* the command exists but cannot be executed */
#define EXIT_NOT_FOUND 127    /* the command does not exist */
#define EXIT_DOCTOR_MISSING 1 /* hutch doctor: something hutch needs is missing */

struct run_opts {
  struct hutch_sandbox_config cfg;
  struct hutch_bind *binds;
  struct hutch_exec_req req;
  size_t nenv;
  const char *stdin_path; /* "-" for hutch's own stdin */
  const char *verdict_path;
  bool quiet;
  /* --template: the store's template, its layers held (run_template.c) */
  const char *template_name;
  char *tmpl_rootfs, **tmpl_layers;
  size_t tmpl_nlayers;
  int tmpl_pin;
  const char *gvisor_platform; /* --gvisor-platform */
  struct hutch_gvisor gvisor;  /* probed for --isolation gvisor */
};

int cli_run(int argc, char **argv);
int cli_doctor(int argc, char **argv);
/* Run hutch-serve, the server, hutch-template, the template tools, and
 * hutch-mcp, the MCP server over stdio, from beside this program. */
int cli_serve(int argc, char **argv);
int cli_template(int argc, char **argv);
int cli_mcp(int argc, char **argv);
/* Run hutch-ctl, the operator's verbs over the API (src/ctl/), with
 * argv whole: argv[1] is its verb. */
int cli_ctl(int argc, char **argv);
int run_opts_parse(int argc, char **argv, struct run_opts *o);
void run_opts_free(struct run_opts *o);
/* Apply --template NAME to o: layers, environment, directory, user and,
 * when none was given, the command. */
int run_template(struct run_opts *o, struct hutch_err *err);

/* The exec request as the agent gets it (a terminal's size filled in), or
 * NULL with err set when it cannot be sent: checked before any sandbox is
 * made. */
char *stream_request(const struct hutch_exec_req *req, size_t *len, struct hutch_err *err);
/* Drive one exec on a fresh sandbox's connection: send the request, stream
 * its output to our stdout/stderr, feed it stdin_fd (-1: none), forward
 * signals. Fills v. Takes conn_fd: it is closed when this returns, whatever
 * happened. */
int stream_exec(int conn_fd, const char *request, size_t len, bool pty, int stdin_fd,
                struct hutch_verdict *v, struct hutch_err *err);

#endif
