/* JSON codecs for the messages both ends of the agent protocol read:
 * the exec request and the verdict. Other control payloads are small
 * enough to be built where they are sent. */
#ifndef HUTCH_MSG_H
#define HUTCH_MSG_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "err.h"

/* How a workload ended (docs/architecture.md, "A sandbox's life": exec). */
enum hutch_status {
  HUTCH_ST_OK = 0,
  HUTCH_ST_NONZERO,
  HUTCH_ST_SIGNALED,
  HUTCH_ST_TIMEOUT,
  HUTCH_ST_OOM,
  HUTCH_ST_OUTPUT_LIMIT,
  HUTCH_ST_SANDBOX_ERROR,
};

struct hutch_verdict {
  enum hutch_status status;
  int exit_code; /* -1 when the process did not exit by itself */
  int signal;    /* 0 when no signal ended it */
  double wall_ms, cpu_ms;
  uint64_t peak_memory_kb;
  int64_t escape_attempts; /* refused syscalls (monitor.c); -1 when not counted */
  char message[512];
};

const char *hutch_status_name(enum hutch_status s);
json_t *hutch_verdict_to_json(const struct hutch_verdict *v);
int hutch_verdict_from_json(json_t *j, struct hutch_verdict *v, struct hutch_err *err);

struct hutch_exec_req {
  char **argv; /* NULL-terminated, argv[0] looked up in the workload's PATH */
  char **env;  /* NULL-terminated "K=V" */
  char *cwd;   /* NULL: the user's home */
  char *user;  /* "user" (default), "root", a name or UID[:GID] of the sandbox's; never host root */
  bool stdin_open; /* the client sends STDIN frames; otherwise /dev/null */
  bool pty;
  uint16_t rows, cols;
  uint64_t timeout_ms, cpu_ms, output_limit; /* 0 = no limit */
};

/* NULL with err set when a string is not valid UTF-8: JSON cannot carry it,
 * and dropping it would run another command. */
/* Longest argument or environment string: the kernel's own limit for one
 * execve string (MAX_ARG_STRLEN, 32 pages), terminating NUL included. */
#define HUTCH_STRING_MAX (128u << 10)

/* Whether user names a sandbox account: "user", "root", a name (looked up
 * in the sandbox's /etc/passwd) or UID[:GID], each id below 65536. */
bool hutch_user_ok(const char *user);

json_t *hutch_exec_req_to_json(const struct hutch_exec_req *r, struct hutch_err *err);
int hutch_exec_req_from_json(json_t *j, struct hutch_exec_req *r, struct hutch_err *err);
void hutch_exec_req_free(struct hutch_exec_req *r);

/* A JSON string of text that may not be valid UTF-8 (a message cut short,
 * a file name a workload chose): invalid bytes become '?'. */
json_t *hutch_json_text(const char *s);

/* Serialize compactly into a malloc'd string (for a frame payload). */
char *hutch_json_dump(json_t *j, size_t *len);

#endif
