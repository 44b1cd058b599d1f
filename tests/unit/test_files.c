/* The file actions (src/server/core/files.c) driven directly, with no
 * HTTP: a sandbox whose agent is this test, at the other end of a
 * socketpair. What each action asks the agent, how its answers and errors
 * come back (the agent's codes as kinds), and a read's flow control. */
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/run/files.h"
#include "core/sandbox/sbx.h"
#include "tap.h"

static uv_loop_t *loop;
static struct sbx sb;
static struct hutch_conn agent; /* the agent's end */

/* Let the server's end send what it queued and read what came. */
static void pump(void) {
  for (int i = 0; i < 20; i++)
    uv_run(loop, UV_RUN_NOWAIT);
}

/* The next frame the agent is sent; 0 when none comes. */
static int agent_next(struct hutch_frame *f) {
  struct hutch_err err = {0};
  for (int tries = 0; tries < 50; tries++) {
    int r = hutch_conn_next(&agent, f, &err);
    if (r != 0)
      return r;
    pump();
    struct pollfd p = {agent.fd, POLLIN, 0};
    if (poll(&p, 1, 20) == 1 && hutch_conn_fill(&agent, &err) < 0)
      return -1;
  }
  return 0;
}

/* The request of the next stream opened, and its id. */
static json_t *agent_open(uint32_t *id) {
  struct hutch_frame f;
  while (agent_next(&f) == 1)
    if (f.type == HUTCH_F_OPEN) {
      *id = f.stream;
      return json_loadb((const char *)f.payload, f.len, 0, NULL);
    }
  return NULL;
}

static void agent_send(uint32_t id, uint8_t type, uint8_t flags, const char *payload) {
  struct hutch_err err = {0};
  hutch_conn_send(&agent, type, flags, id, payload, strlen(payload));
  while (hutch_conn_flush(&agent, &err) == 1)
    ;
  pump();
}

struct seen {
  int calls;
  struct hutch_err err;
  bool failed;
  json_t *done, *entries;
  char path[64];
};

static void done(const struct files_result *r, const struct hutch_err *err, void *arg) {
  struct seen *s = arg;
  s->calls++;
  s->failed = err != NULL;
  if (err)
    s->err = *err;
  else {
    s->done = json_incref(r->done);
    s->entries = json_incref(r->entries);
    snprintf(s->path, sizeof s->path, "%s", r->path);
  }
}

static void seen_clear(struct seen *s) {
  json_decref(s->done);
  json_decref(s->entries);
  memset(s, 0, sizeof *s);
}

static void unary(void) {
  struct seen s = {0};
  struct hutch_err err = {0};
  uint32_t id;
  ok(files_stat(&sb, "/tmp/x", "root", done, &s, &err) == 0, "a stat starts");
  json_t *req = agent_open(&id);
  is_str(json_string_value(json_object_get(req, "op")), "stat", "the agent is asked to stat");
  is_str(json_string_value(json_object_get(req, "user")), "root", "... as the user named");
  json_decref(req);
  agent_send(id, HUTCH_F_EVENT, HUTCH_FL_END, "{\"event\":\"done\",\"size\":5}");
  ok(s.calls == 1 && !s.failed && json_integer_value(json_object_get(s.done, "size")) == 5,
     "its done event is the result");
  seen_clear(&s);

  static const struct {
    const char *code;
    enum hutch_errkind kind;
    const char *as;
  } errs[] = {{"not_found", HUTCH_ERR_NOT_FOUND, "not_found"},
              {"permission_denied", HUTCH_ERR_FORBIDDEN, "permission_denied"},
              {"not_empty", HUTCH_ERR_CONFLICT, "not_empty"},
              {"no_space", HUTCH_ERR_NO_SPACE, "no_space"},
              {"io", HUTCH_ERR_SYSTEM, "sandbox_error"}};
  for (size_t i = 0; i < sizeof errs / sizeof errs[0]; i++) {
    char msg[128];
    ok(files_remove(&sb, "/tmp/d", "user", true, done, &s, &err) == 0, "a remove starts");
    json_decref(agent_open(&id));
    snprintf(msg, sizeof msg, "{\"code\":\"%s\",\"message\":\"no\"}", errs[i].code);
    agent_send(id, HUTCH_F_ERROR, HUTCH_FL_END, msg);
    ok(s.calls == 1 && s.failed && s.err.kind == errs[i].kind, "agent code %s: its kind",
       errs[i].code);
    is_str(s.err.code, errs[i].as, "... and code");
    seen_clear(&s);
  }

  ok(files_list(&sb, "/tmp", "user", 2, done, &s, &err) == 0, "a list starts");
  req = agent_open(&id);
  ok(json_integer_value(json_object_get(req, "depth")) == 2, "... with its depth");
  json_decref(req);
  agent_send(id, HUTCH_F_STDOUT, 0, "{\"name\":\"a\"}\n{\"name\":\"b\"}\n");
  agent_send(id, HUTCH_F_EVENT, HUTCH_FL_END, "{\"event\":\"done\"}");
  ok(s.calls == 1 && json_array_size(s.entries) == 2, "its lines are the entries");
  seen_clear(&s);

  ok(files_move(&sb, "/a", "/b", "user", done, &s, &err) == 0, "a move starts");
  json_decref(agent_open(&id));
  agent_send(id, HUTCH_F_EVENT, HUTCH_FL_END, "not json");
  ok(s.calls == 1 && s.failed && s.err.kind == HUTCH_ERR_SYSTEM,
     "an end that is not JSON: a failure");
  seen_clear(&s);

  ok(files_path_check("", &err) < 0 && err.kind == HUTCH_ERR_INVALID, "an empty path: invalid");
  ok(files_path_check("/tmp/\xff", &err) < 0, "a path that is not UTF-8: invalid");
  ok(files_path_check("/tmp/x", &err) == 0, "a path");
}

struct reader {
  size_t got;
  bool take, ended;
  struct hutch_err err;
  bool failed;
};

static bool rd_data(void *arg, const void *p, size_t n) {
  struct reader *r = arg;
  (void)p;
  r->got += n;
  return r->take;
}

static void rd_end(void *arg, const struct hutch_err *err) {
  struct reader *r = arg;
  r->ended = true;
  r->failed = err != NULL;
}

/* WINDOW increments the agent is given on stream id, until none come. */
static uint32_t agent_windows(uint32_t id) {
  struct hutch_frame f;
  uint32_t n = 0;
  while (agent_next(&f) == 1)
    if (f.type == HUTCH_F_WINDOW && f.stream == id)
      n += hutch_conn_window_increment(&f);
  return n;
}

static void read_flow(void) {
  struct reader r = {.take = false};
  struct files_sink sink = {.data = rd_data, .end = rd_end, .arg = &r};
  struct hutch_err err = {0};
  uint32_t id;
  struct files_op *op = files_read(&sb, "/f", "user", &sink, &err);
  ok(op != NULL, "a read starts");
  json_decref(agent_open(&id));
  is_int(agent_windows(id), HUTCH_FILE_WINDOW - HUTCH_WINDOW_INITIAL,
         "a read grants the rest of a file's window at open");
  agent_send(id, HUTCH_F_STDOUT, 0, "0123456789");
  ok(r.got == 10, "its bytes reach the sink");
  is_int(agent_windows(id), 0, "a sink that takes no more: no window for the agent");
  r.take = true;
  files_resume(op);
  is_int(agent_windows(id), 10, "resumed: the window it held back");
  agent_send(id, HUTCH_F_EVENT, HUTCH_FL_END, "{\"event\":\"done\"}");
  ok(r.ended && !r.failed, "the end, whole");

  struct reader r2 = {.take = true};
  sink.arg = &r2;
  op = files_read(&sb, "/f", "user", &sink, &err);
  json_decref(agent_open(&id));
  files_cancel(op);
  struct hutch_frame f;
  bool closed = false;
  while (agent_next(&f) == 1)
    closed |= f.type == HUTCH_F_CLOSE && f.stream == id;
  ok(closed, "a cancel tells the agent to end the stream");
  agent_send(id, HUTCH_F_STDOUT, 0, "late");
  ok(r2.got == 0 && !r2.ended, "... and the sink hears nothing more");
}

/* An agent that sends a stream more than its window (one broken, or
 * taken over by its sandbox) loses its connection: the server never holds
 * more of a stream's output than it granted, whatever its client takes. */
static void read_past_window(void) {
  static struct sbx sb2;
  struct hutch_conn bad;
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sv) < 0)
    return;
  ok(agentc_init(&sb2.ac, loop, sv[0]) == 0, "another agent connection");
  hutch_conn_init(&bad, sv[1]);
  struct reader r = {.take = false};
  struct files_sink sink = {.data = rd_data, .end = rd_end, .arg = &r};
  struct hutch_err err = {0};
  ok(files_read(&sb2, "/f", "user", &sink, &err) != NULL, "a read starts");
  uint32_t id = 0;
  struct hutch_frame f;
  for (int i = 0; i < 50 && !id; i++) {
    pump();
    if (hutch_conn_fill(&bad, &err) < 0)
      break;
    while (hutch_conn_next(&bad, &f, &err) == 1)
      if (f.type == HUTCH_F_OPEN)
        id = f.stream;
  }
  ok(id != 0, "... and is opened");
  static char chunk[HUTCH_DATA_CHUNK];
  for (int i = 0; i < 64 && !sb2.ac.dead; i++) { /* 4 MiB, 4 times the window */
    hutch_conn_send(&bad, HUTCH_F_STDOUT, 0, id, chunk, sizeof chunk);
    while (hutch_conn_flush(&bad, &err) == 1)
      pump();
    pump();
  }
  ok(sb2.ac.dead, "output past the window: the connection ends");
  ok(r.got <= HUTCH_FILE_WINDOW, "and the sink had no more than the read's window (%zu)", r.got);
  ok(r.ended && r.failed, "the read fails");
  hutch_conn_free(&bad);
}

int main(void) {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sv) < 0)
    return 1;
  loop = uv_default_loop();
  ok(agentc_init(&sb.ac, loop, sv[0]) == 0, "an agent connection");
  hutch_conn_init(&agent, sv[1]);
  unary();
  read_flow();
  read_past_window();

  struct seen s = {0};
  struct hutch_err err = {0};
  uint32_t id;
  ok(files_stat(&sb, "/x", "user", done, &s, &err) == 0, "a stat starts");
  json_decref(agent_open(&id));
  close(sv[1]); /* the agent is gone */
  for (int i = 0; i < 50 && !s.calls; i++)
    uv_run(loop, UV_RUN_NOWAIT);
  ok(s.calls == 1 && s.failed && s.err.kind == HUTCH_ERR_UNAVAILABLE,
     "the agent gone: unavailable");
  ok(files_stat(&sb, "/x", "user", done, &s, &err) < 0 && err.kind == HUTCH_ERR_UNAVAILABLE,
     "then no action starts");
  seen_clear(&s);
  hutch_conn_free(&agent);
  return done_testing();
}
