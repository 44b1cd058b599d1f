/* A RUN step (build.h): the command runs in a hutch sandbox made exactly as
 * `hutch run` makes one, over the stage's layers, as the sandbox's root
 * (uid 0 of its own user namespace, nobody on the host) with the default
 * limits, the build's --memory, --disk and --timeout, and no network but
 * its loopback: the Dockerfile and whatever it downloads are a hostile
 * workload. When the command succeeds, the sandbox is frozen and its
 * writable layer captured (layer.c: nothing followed, ids shifted back to
 * 0..65535, setuid bits dropped) and committed as the step's layer. The
 * sandbox is destroyed whatever happened. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "build.h"
#include "cleanup.h"
#include "conn.h"
#include "layer.h"
#include "msg.h"
#include "sandbox.h"
#include "util.h"

#define RUN_STREAM 1
#define LOG_LINE_MAX 4096
/* A step's output shown as progress, at most: a hostile step could print
 * without end, and each line is an event the server streams to a client. */
#define LOG_BYTES_MAX (8u << 20)

struct run_client {
  struct build *b;
  struct hutch_conn conn;
  struct hutch_verdict *v;
  char *partial[2]; /* stdout's and stderr's unfinished line */
  uint64_t logged;
  bool done;
};

static void log_chunk(struct run_client *c, int which, const char *p, size_t n) {
  char **part = &c->partial[which];
  if (c->logged > LOG_BYTES_MAX)
    return;
  if ((c->logged += n) > LOG_BYTES_MAX) {
    static const char clipped[] = "[hutch: more output than 8 MiB; the rest is not shown]";
    build_log(c->b, clipped, sizeof clipped - 1, true);
    return;
  }
  while (n > 0) {
    const char *nl = memchr(p, '\n', n);
    size_t take = nl ? (size_t)(nl - p) : n;
    size_t have = *part ? strlen(*part) : 0;
    if (have + take > LOG_LINE_MAX)
      take = LOG_LINE_MAX - have, nl = NULL;
    str_append(part, p, take);
    if (nl || have + take >= LOG_LINE_MAX) {
      build_log(c->b, *part, strlen(*part), which == 1);
      free(*part);
      *part = NULL;
    }
    p += take + (nl != NULL);
    n -= take + (nl != NULL);
  }
}

/* The agent's error frame as the step's error: "invalid" means the
 * request was the Dockerfile's (a USER the image lacks). */
static int agent_error(json_t *j, struct hutch_err *err) {
  const char *msg = json_string_value(json_object_get(j, "message"));
  const char *code = json_string_value(json_object_get(j, "code"));
  if (code && strcmp(code, "invalid") == 0)
    return hutch_err_fail(err, HUTCH_ERR_INVALID, "step_failed", "%s", msg ? msg : "refused");
  return hutch_err_set(err, 0, "agent: %s", msg ? msg : "error");
}

static int on_frame(struct run_client *c, const struct hutch_frame *f, struct hutch_err *err) {
  if (f->type == HUTCH_F_STDOUT || f->type == HUTCH_F_STDERR) {
    log_chunk(c, f->type == HUTCH_F_STDERR, (const char *)f->payload, f->len);
    hutch_conn_send_window(&c->conn, RUN_STREAM, f->len);
    return 0;
  }
  if (f->type != HUTCH_F_EVENT && f->type != HUTCH_F_ERROR)
    return 0;

  json_t *j = json_loadb((const char *)f->payload, f->len, 0, NULL);
  if (!j)
    return hutch_err_set(err, EPROTO, "agent sent malformed JSON");
  int r = 0;
  const char *ev = json_string_value(json_object_get(j, "event"));
  if (f->type == HUTCH_F_ERROR) {
    r = agent_error(j, err);
    c->done = true;
  } else if (ev && strcmp(ev, "exit") == 0) {
    r = hutch_verdict_from_json(j, c->v, err);
    c->done = true;
  }
  json_decref(j);
  return r;
}

/* Drive the exec until its verdict. The agent enforces the step's wall
 * clock (the request's timeout); this loop only waits for it, or for an
 * interrupt of ours (SIGINT, SIGTERM, SIGHUP: a person's ^C, a server
 * ending the build), which fails the step so that the sandbox and the
 * work under way are cleaned up as after any failure. */
/* What the agent sent, read, and its frames handled until one ends the
 * exec. */
static int read_frames(struct run_client *c, struct hutch_err *err) {
  if (hutch_conn_fill(&c->conn, err) < 0)
    return -1;

  struct hutch_frame f;
  int n;
  while (!c->done && (n = hutch_conn_next(&c->conn, &f, err)) != 0) {
    if (n < 0)
      return -1;
    if (on_frame(c, &f, err) < 0)
      return -1;
  }

  if (!c->done && c->conn.eof)
    return hutch_err_set(err, 0, "the build sandbox's agent went away");
  return 0;
}

static int exec_loop(struct run_client *c, int sfd, struct hutch_err *err) {
  while (!c->done) {
    if (hutch_conn_flush(&c->conn, err) < 0)
      return -1;

    struct pollfd p[2] = {{c->conn.fd, POLLIN | (hutch_conn_queued(&c->conn) ? POLLOUT : 0), 0},
                          {sfd, POLLIN, 0}};
    int ready = poll(p, 2, 1000);
    if (ready <= 0) {
      int r = 0;
      if (ready < 0 && errno != EINTR)
        r = hutch_err_set(err, errno, "poll");
      build_tick(c->b);
      if (r < 0)
        return -1;
      continue;
    }

    struct signalfd_siginfo si;
    if (p[1].revents && read(sfd, &si, sizeof si) == sizeof si)
      return hutch_err_fail(err, HUTCH_ERR_UNAVAILABLE, "interrupted", "interrupted by signal %u",
                            si.ssi_signo);
    if (!(p[0].revents & (POLLIN | POLLHUP | POLLERR)))
      continue;
    if (read_frames(c, err) < 0)
      return -1;
  }
  return 0;
}

/* The interrupts a RUN step answers by cleaning up (exec_loop). */
static void interrupts(sigset_t *set) {
  sigemptyset(set);
  sigaddset(set, SIGINT);
  sigaddset(set, SIGTERM);
  sigaddset(set, SIGHUP);
}

/* With the interrupts blocked (build_run): one that came while the
 * sandbox was being made is read here, pending. */
static int run_exec(struct build *b, int conn_fd, const char *req, size_t len,
                    struct hutch_verdict *v, struct hutch_err *err) {
  struct run_client c = {.b = b, .v = v};
  hutch_conn_init(&c.conn, conn_fd);
  hutch_conn_send(&c.conn, HUTCH_F_OPEN, 0, RUN_STREAM, req, len);

  sigset_t set;
  interrupts(&set);
  int sfd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
  int r;
  if (sfd < 0)
    r = hutch_err_set(err, errno, "signalfd");
  else
    r = exec_loop(&c, sfd, err);
  if (sfd >= 0)
    close(sfd);

  for (int i = 0; i < 2; i++) {
    if (c.partial[i])
      build_log(b, c.partial[i], strlen(c.partial[i]), i == 1);
    free(c.partial[i]);
  }
  hutch_conn_free(&c.conn);
  return r;
}

/* A verdict other than ok as the step's one-line error. */
static int step_failed(const struct build *b, const struct hutch_verdict *v,
                       struct hutch_err *err) {
  switch (v->status) {
  case HUTCH_ST_NONZERO:
    return hutch_err_fail(err, HUTCH_ERR_INVALID, "step_failed", "the command exited with code %d",
                          v->exit_code);
  case HUTCH_ST_SIGNALED:
    return hutch_err_fail(err, HUTCH_ERR_INVALID, "step_failed",
                          "the command was killed by signal %d", v->signal);
  case HUTCH_ST_TIMEOUT:
    return hutch_err_fail(err, HUTCH_ERR_INVALID, "step_failed",
                          "the command ran longer than %llu s (--timeout)",
                          (unsigned long long)(b->timeout_ms / 1000));
  case HUTCH_ST_OOM:
    return hutch_err_fail(err, HUTCH_ERR_INVALID, "step_failed",
                          "the command ran out of memory (--memory)");
  default:
    return hutch_err_fail(err, HUTCH_ERR_SYSTEM, "step_failed", "the build sandbox failed: %s",
                          v->message[0] ? v->message : "no verdict");
  }
}

static char *exec_request(const struct build *b, const struct stage *st, char **argv, size_t *len,
                          struct hutch_err *err) {
  const char *wd = json_string_value(json_object_get(st->config, "workdir"));
  /* As Docker: root of the sandbox unless USER named another of its users. */
  const char *user = json_string_value(json_object_get(st->config, "user"));
  if (!user || !user[0])
    user = "root";
  if (!hutch_user_ok(user)) {
    hutch_err_invalid(err, "USER %s: not a user name or UID[:GID]", user);
    return NULL;
  }

  struct hutch_exec_req r = {
      .argv = argv,
      .env = b->egress ? build_egress_env(build_run_env(st)) : build_run_env(st),
      .cwd = (char *)(wd && wd[0] ? wd : "/"),
      .user = (char *)user,
      .timeout_ms = b->timeout_ms,
  };
  json_t *open = hutch_exec_req_to_json(&r, err);
  for (char **e = r.env; *e; e++)
    free(*e);
  free(r.env);
  if (!open)
    return NULL;

  char *s = hutch_json_dump(open, len);
  json_decref(open);
  if (*len > HUTCH_FRAME_MAX) {
    free(s);
    hutch_err_invalid(err, "the RUN command and its environment exceed %u bytes", HUTCH_FRAME_MAX);
    return NULL;
  }
  return s;
}

/* What the sandbox's own set-up wrote into its upper layer (rootfs.c,
 * storage_upper) is not the step's: each sandbox writes its own. */
static void drop_sandbox_files(const char *layer) {
  _cleanup_close_ int fd = open(layer, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return;
  unlinkat(fd, "etc/hostname", 0);
  unlinkat(fd, "etc/hosts", 0);
  unlinkat(fd, "etc", AT_REMOVEDIR); /* when nothing else is in it */
  unlinkat(fd, "tmp", AT_REMOVEDIR);
  unlinkat(fd, "home/user", AT_REMOVEDIR);
  unlinkat(fd, "home", AT_REMOVEDIR);
  unlinkat(fd, "root", AT_REMOVEDIR);
}

static int capture(struct build *b, struct hutch_sandbox *sb, struct step_result *res,
                   struct hutch_err *err) {
  if (hutch_sandbox_freeze(sb, true, err) < 0)
    return hutch_err_wrap(err, "freeze the build sandbox");
  _cleanup_free_ char *tmp = hutch_images_tmpdir(&b->ctx->store, err);
  if (!tmp)
    return -1;

  _cleanup_free_ char *layer = xasprintf("%s/layer", tmp);
  struct hutch_layer_stats stats = {0};
  struct layer_sum sum = {.max_bytes = build_bytes_left(b)};
  int r = hutch_layer_capture(sb->storage_fd, sb->uid_base, layer, &stats, err);
  if (r == 0) {
    drop_sandbox_files(layer);
    r = layertar_commit_staged(b->ctx, layer, &sum, &res->cached, err);
    /* Too much made, or what no layer holds, is the step's doing, as a
     * failed command is. */
    if (r < 0 && err->code &&
        (strcmp(err->code, "too_large") == 0 || strcmp(err->code, "bad_layer") == 0)) {
      char msg[sizeof err->msg];
      str_copy(msg, sizeof msg, err->msg);
      hutch_err_fail(err, HUTCH_ERR_INVALID, "step_failed", "%s", msg);
    }
  }
  struct hutch_err rerr = {0};
  hutch_layer_remove(tmp, &rerr);
  if (r < 0)
    return -1;

  memcpy(res->hex, sum.hex, 65);
  res->bytes = sum.bytes;
  return 0;
}

/* The command run in sb (behind the egress proxy, when the build allows a
 * way out); when it succeeds, the layer it left captured. */
static int run_step(struct build *b, struct hutch_sandbox *sb, const char *req, size_t len,
                    struct step_result *res, struct hutch_err *err) {
  struct hutch_verdict v = {.status = HUTCH_ST_SANDBOX_ERROR, .exit_code = -1};
  int r = 0;
  if (b->egress)
    r = build_egress_start(b, sb, err);
  if (r == 0)
    r = run_exec(b, sb->conn_fd, req, len, &v, err);
  build_egress_stop(b);
  sb->conn_fd = -1; /* run_exec closed it */
  if (r < 0)
    return -1;

  if (v.status != HUTCH_ST_OK)
    return step_failed(b, &v, err);
  return capture(b, sb, res, err);
}

/* The step's sandbox, made from cfg, the step run in it, and the sandbox
 * destroyed whatever happened. */
static int run_in_sandbox(struct build *b, struct hutch_sandbox_config *cfg, const char *req,
                          size_t len, struct step_result *res, struct hutch_err *err) {
  struct hutch_sandbox *sb = NULL;
  int r;
  if (hutch_config_check(cfg, err) < 0)
    r = hutch_err_wrap(err, "build sandbox");
  else if (hutch_sandbox_create(cfg, &sb, err) < 0)
    r = hutch_err_wrap(err, "build sandbox");
  else
    r = run_step(b, sb, req, len, res, err);

  if (sb) {
    struct hutch_err derr = {0};
    if (hutch_sandbox_destroy(sb, &derr) < 0 && r == 0) {
      hutch_err_wrap(&derr, "build sandbox teardown");
      *err = derr;
      r = -1;
    }
  }
  return r;
}

int build_run(struct build *b, struct stage *st, char **argv, struct step_result *res,
              struct hutch_err *err) {
  size_t len;
  _cleanup_free_ char *req = exec_request(b, st, argv, &len, err);
  if (!req)
    return -1;

  /* The stage's layers, topmost first, over the store's skeleton of mount
   * points (as hutch_images_stack gives a template's, without the top
   * layer hutch adds to a finished template). */
  size_t nlayers = json_array_size(st->layers);
  char *rootfs = xasprintf("%s/skel", b->ctx->store.dir);
  char **layers = xcalloc(nlayers + 1, sizeof(char *));
  for (size_t i = 0; i < nlayers; i++) {
    const char *hex = json_string_value(json_array_get(st->layers, nlayers - 1 - i));
    layers[i] = hutch_images_layer_path(&b->ctx->store, hex);
  }

  _cleanup_free_ char *state_dir = build_state_dir(b);
  struct hutch_sandbox_config cfg = {
      .state_dir = state_dir,
      .rootfs = rootfs,
      .memory_bytes = b->memory_bytes,
      .disk_bytes = b->disk_bytes,
      .layers = (const char *const *)layers,
      .nlayers = nlayers,
      .die_with_parent = true,
      .build = true,
  };
  /* An interrupt (the server cancelling the job, or stopping) waits from
   * here until the sandbox is destroyed: one that came while the sandbox
   * was being made killed the build there, and left the sandbox's cgroups
   * (its processes die with the build) behind on the host. Blocked, it
   * fails the step as soon as the command runs, or ends the build once
   * the sandbox is gone. */
  sigset_t set, old;
  interrupts(&set);
  sigprocmask(SIG_BLOCK, &set, &old);
  int r = run_in_sandbox(b, &cfg, req, len, res, err);
  sigprocmask(SIG_SETMASK, &old, NULL);

  hutch_images_stack_free(rootfs, layers, nlayers);
  return r;
}
