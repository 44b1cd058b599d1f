/* The fake world of fake_server.h. Its state is the fuzz target's one
 * server context, kept static as a harness may. */
#include "fake_server.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "api/lifecycle.h"
#include "core/base/counters.h"
#include "core/events/events.h"
#include "e2b/control.h"
#include "e2b/fs.h"
#include "http/body.h"
#include "http/connect.h"
#include "http/errors.h"
#include "http/query.h"
#include "http/request.h"
#include "frame.h"
#include "util.h"

#define STREAMS_MAX 64 /* agent streams one request may open */

enum fake_state { F_HANDLING, F_BODY, F_STREAMING, F_RAW, F_DONE, F_CLOSED };

struct proc {
  struct sub *sub;
  json_t *cmd;
  bool ended, stdin_open, pty;
  procs_started_cb started; /* who waits for it to run */
  void *started_arg;
};

struct stdin_log {
  uint8_t *data;
  size_t n;
  bool eof;
};

static struct {
  struct server srv;
  struct sbx sb;
  struct principal p;
  struct http_conn c;
  struct fake_script script;
  const char *query;
  enum fake_state state;
  int status;
  const char *ctype;
  uint8_t *raw;
  size_t nraw;
  struct proc proc;
  struct stdin_log log[STREAMS_MAX];
  size_t nlog;
} w;

void fake_fail(const char *what) {
  fprintf(stderr, "fuzz: %s\n", what);
  abort();
}

static void reset(void) {
  e2b_watches_free(&w.sb);
  free(w.raw);
  json_decref(w.proc.cmd);
  json_decref(w.sb.env);
  json_decref(w.sb.artifacts_seen); /* as sbx.c frees a sandbox's */
  for (size_t i = 0; i < w.nlog; i++)
    free(w.log[i].data);
  memset(&w, 0, sizeof w);
}

/* The connection's side of a request: what it sends, how it is answered. */
static struct http_conn *begin(const struct fake_req *r) {
  free(w.raw);
  w.raw = NULL;
  w.nraw = 0;
  w.state = F_HANDLING;
  w.status = 0;
  w.ctype = NULL;
  w.query = r->query;
  memset(&w.c, 0, sizeof w.c);
  w.c.srv = &w.srv;
  w.c.dialect = r->dialect;
  w.c.req.method = HTTP_POST;
  w.c.req.body = (char *)r->body;
  w.c.req.body_len = r->body_len;
  w.c.req.headers = (struct http_header *)r->headers;
  w.c.req.nheaders = r->nheaders;
  w.c.req.params[0] = FAKE_SANDBOX_ID;
  w.c.req.nparams = 1;
  return &w.c;
}

struct http_conn *fake_request(const struct fake_req *r, const struct fake_script *s) {
  reset();
  w.script = *s;
  w.srv.sandboxes = &w.sb;
  w.sb.srv = &w.srv;
  memcpy(w.sb.id, FAKE_SANDBOX_ID, sizeof w.sb.id);
  w.sb.env = json_pack("{s:s}", "LANG", "C.UTF-8");
  w.sb.ac.next_id = 1;
  str_copy(w.p.tenant, sizeof w.p.tenant, "fuzz");
  w.proc.ended = s->proc_ended;
  w.proc.stdin_open = true;
  return begin(r);
}

struct http_conn *fake_request_again(const struct fake_req *r) {
  return begin(r);
}

const struct principal *fake_principal(void) {
  return &w.p;
}
struct sbx *fake_sandbox(void) {
  return &w.sb;
}
int fake_status(void) {
  return w.status;
}

const uint8_t *fake_raw(size_t *n) {
  *n = w.nraw;
  return w.raw;
}

const struct http_stream_ops *fake_ops(void **ctx) {
  *ctx = w.c.ctx;
  return w.state == F_DONE || w.state == F_CLOSED ? NULL : w.c.ops;
}

const uint8_t *fake_stdin(size_t i, size_t *n, bool *eof) {
  if (i >= w.nlog)
    return NULL;
  *n = w.log[i].n;
  *eof = w.log[i].eof;
  return w.log[i].data ? w.log[i].data : (const uint8_t *)"";
}

#define SEP "@@A@"

const uint8_t *fake_split(const uint8_t *data, size_t size, size_t *nbody, struct fake_script *s) {
  static const int stdin_results[4] = {0, -1, -2, 0};
  memset(s, 0, sizeof *s);
  s->end = (const uint8_t *)"{}";
  s->nend = 2;
  if (size == 0) {
    *nbody = 0;
    return data;
  }
  uint8_t b = data[0];
  s->error = b & 1;
  s->agent_dead = b & 2;
  s->proc_missing = b & 4;
  s->proc_ended = b & 8;
  s->stdin_result = stdin_results[(b >> 4) & 3];
  s->queued = b & 64 ? 16u << 20 : 0;
  s->held = b & 128 ? 2u << 20 : 0;
  const uint8_t *body = data + 1, *end = data + size;
  const uint8_t *sep = memmem(body, (size_t)(end - body), SEP, 4);
  *nbody = (size_t)((sep ? sep : end) - body);
  if (sep) {
    s->out = sep + 4;
    const uint8_t *sep2 = memmem(s->out, (size_t)(end - s->out), SEP, 4);
    s->nout = (size_t)((sep2 ? sep2 : end) - s->out);
    if (sep2) {
      s->end = sep2 + 4;
      s->nend = (size_t)(end - s->end);
    }
  }
  return body;
}

void fake_feed_body(const uint8_t *body, size_t n, size_t chunk) {
  for (size_t off = 0; w.state == F_BODY && off < n; off += chunk)
    w.c.ops->body(w.c.ctx, (const char *)body + off, n - off < chunk ? n - off : chunk);
  if (w.state == F_BODY) {
    w.state = F_HANDLING;
    w.c.ops->body_end(w.c.ctx);
  }
}

/* ---- http.h and request.h ---- */

const char *http_header(const struct http_req *req, const char *name) {
  for (size_t i = 0; i < req->nheaders; i++)
    if (strcasecmp(req->headers[i].name, name) == 0)
      return req->headers[i].value;
  return NULL;
}

char *http_query(const struct http_req *req, const char *name) {
  (void)req;
  return http_query_get(w.query, name);
}

/* The start of an answer: there is one per request. */
static bool answer(int status, const char *ctype) {
  if (w.state == F_CLOSED)
    return false;
  if (w.state != F_HANDLING && w.state != F_BODY)
    fake_fail("a second answer to one request");
  w.status = status;
  w.ctype = ctype;
  return true;
}

void http_respond(struct http_conn *c, int status, const char *ctype, const void *body, size_t len,
                  const char *extra) {
  (void)body, (void)len, (void)extra;
  if (!answer(status, ctype))
    return;
  w.state = F_DONE;
  c->ops = NULL;
  c->ctx = NULL;
}

void http_json(struct http_conn *c, int status, json_t *j) {
  char *s = json_dumps(j, SERVE_JSON_FLAGS);
  if (!s)
    fake_fail("an answer that is not JSON");
  json_decref(j);
  http_respond(c, status, "application/json", s, strlen(s), NULL);
  free(s);
}

char *http_json_line(json_t *j, size_t *len) {
  char *s = json_dumps(j, SERVE_JSON_FLAGS);
  json_decref(j);
  if (!s)
    fake_fail("a line that is not JSON");
  *len = strlen(s) + 1;
  char *line = xasprintf("%s\n", s);
  free(s);
  return line;
}

void http_own(struct http_conn *c, const struct http_stream_ops *ops, void *ctx) {
  c->ops = ops;
  c->ctx = ctx;
}

/* Watching for the client's end: the fake client leaves only at
 * fake_finish, through ops->abort. */
void http_watch(struct http_conn *c) {
  (void)c;
}

void http_body_start(struct http_conn *c, const struct http_stream_ops *ops, void *ctx) {
  if (w.state != F_HANDLING)
    fake_fail("a body taken after the answer");
  http_own(c, ops, ctx);
  w.state = F_BODY;
}

void http_body_pause(struct http_conn *c) {
  (void)c;
}

static void wait_gone(void *ctx) {
  struct http_wait *hw = ctx;
  hw->c = NULL;
}

static const struct http_stream_ops wait_ops = {.abort = wait_gone};

void http_wait_begin(struct http_wait *hw, struct http_conn *c) {
  if (w.state != F_HANDLING && w.state != F_BODY)
    fake_fail("a wait after the answer");
  hw->c = c;
  http_own(c, &wait_ops, hw);
}

struct http_conn *http_wait_end(struct http_wait *hw) {
  struct http_conn *c = hw->c;
  if (c)
    http_own(c, NULL, NULL);
  hw->c = NULL;
  return c;
}
void http_body_resume(struct http_conn *c) {
  (void)c;
}

void http_stream_start(struct http_conn *c, int status, const char *ctype,
                       const struct http_stream_ops *ops, void *ctx) {
  if (!answer(status, ctype))
    return;
  w.state = F_STREAMING;
  http_own(c, ops, ctx);
}

/* Connect's server stream: every message is one envelope of JSON. */
static void check_envelope(const uint8_t *p, size_t n) {
  size_t len = n >= 5 ? (size_t)p[1] << 24 | (size_t)p[2] << 16 | (size_t)p[3] << 8 | p[4] : 0;
  if (n < 5 || (p[0] & ~CONNECT_END_STREAM) != 0 || len != n - 5)
    fake_fail("a Connect stream message that is not one envelope");
  json_t *j = json_loadb((const char *)p + 5, len, 0, NULL);
  if (!json_is_object(j))
    fake_fail("a Connect envelope that holds no JSON object");
  json_decref(j);
}

void http_stream_send(struct http_conn *c, const void *data, size_t len) {
  (void)c;
  if (w.state != F_STREAMING || len == 0)
    return;
  if (strcmp(w.ctype, "application/connect+json") == 0)
    check_envelope(data, len);
}

void http_stream_end(struct http_conn *c) {
  if (w.state != F_STREAMING)
    return;
  w.state = F_DONE;
  c->ops = NULL;
  c->ctx = NULL;
}

void http_stream_end_with(struct http_conn *c, const void *data, size_t len) {
  http_stream_send(c, data, len);
  http_stream_end(c);
}

void http_raw_start(struct http_conn *c, const struct http_stream_ops *ops, void *ctx) {
  if (w.state == F_CLOSED)
    return;
  if (w.state != F_HANDLING)
    fake_fail("a switch of protocols after an answer");
  w.status = 101;
  w.state = F_RAW;
  http_own(c, ops, ctx);
}

void http_raw_send(struct http_conn *c, const void *data, size_t n) {
  (void)c;
  if (w.state == F_CLOSED || w.state == F_DONE)
    return;
  w.raw = xrealloc(w.raw, w.nraw + n);
  memcpy(w.raw + w.nraw, data, n);
  w.nraw += n;
}

void http_abort(struct http_conn *c) {
  if (w.state == F_CLOSED)
    return;
  const struct http_stream_ops *ops = c->ops;
  w.state = F_CLOSED;
  c->ops = NULL;
  if (ops && ops->abort)
    ops->abort(c->ctx);
}

size_t http_queued(const struct http_conn *c) {
  (void)c;
  return w.script.queued;
}

/* ---- agentc.h: one sandbox's agent ---- */

static struct astream *find_stream(uint32_t id) {
  for (struct astream *s = w.sb.ac.streams; s; s = s->next)
    if (s->id == id)
      return s;
  return NULL;
}

static void unlink_stream(struct astream *s) {
  for (struct astream **p = &w.sb.ac.streams; *p; p = &(*p)->next)
    if (*p == s) {
      *p = s->next;
      break;
    }
  free(s);
}

struct astream *agentc_open(struct agentc *ac, json_t *req, astream_cb cb, void *ctx) {
  if (ac != &w.sb.ac)
    fake_fail("a stream opened on another sandbox's agent");
  if (!json_is_object(req) || !json_is_string(json_object_get(req, "op")))
    fake_fail("an agent request that is not {\"op\": …}");
  if (w.script.agent_dead)
    return NULL;
  if (w.nlog == STREAMS_MAX)
    fake_fail("too many agent streams for one request");
  struct astream *s = xcalloc(1, sizeof *s);
  s->ac = ac;
  s->cb = cb;
  s->ctx = ctx;
  s->id = ac->next_id++;
  s->window = HUTCH_WINDOW_INITIAL;
  w.nlog++;
  struct astream **tail = &ac->streams; /* oldest first: they end in that order */
  while (*tail)
    tail = &(*tail)->next;
  *tail = s;
  return s;
}

void agentc_send_json(struct astream *s, uint8_t type, json_t *j) {
  (void)s, (void)type;
  json_decref(j);
}

void agentc_stdin(struct astream *s, const void *p, size_t n, bool eof) {
  struct stdin_log *l = &w.log[s->id - 1];
  if (l->eof && (n || eof))
    fake_fail("input sent on a stream after its end");
  if (n) {
    l->data = xrealloc(l->data, l->n + n);
    memcpy(l->data + l->n, p, n);
    l->n += n;
  }
  l->eof |= eof;
}

size_t agentc_stdin_pending(const struct astream *s) {
  (void)s;
  return w.script.held;
}

void agentc_window(struct astream *s, uint32_t n) {
  (void)s, (void)n;
}
void agentc_abandon(struct astream *s) {
  unlink_stream(s);
}

/* Each stream gets the script's STDOUT and END; a handler may open more
 * (a move stats its destination), which end in turn. */
static void end_streams(void) {
  for (int round = 0; w.sb.ac.streams; round++) {
    if (round == STREAMS_MAX)
      fake_fail("agent streams that never end");
    struct astream *s = w.sb.ac.streams;
    uint32_t id = s->id;
    if (w.script.nout) {
      struct hutch_frame f = {HUTCH_F_STDOUT, 0, id, (uint32_t)w.script.nout, w.script.out};
      s->cb(s, &f);
      if (!(s = find_stream(id)))
        continue;
    }
    struct hutch_frame f = {w.script.error ? HUTCH_F_ERROR : HUTCH_F_EVENT, HUTCH_FL_END, id,
                            (uint32_t)w.script.nend, w.script.end};
    s->cb(s, &f);
    if ((s = find_stream(id)))
      unlink_stream(s);
  }
}

/* ---- procs.c: one background process ---- */

struct proc *procs_start(struct sbx *sb, json_t *req, const char *in, bool keep_stdin,
                         procs_started_cb started, void *arg, struct hutch_err *err) {
  (void)sb;
  json_t *argv = json_object_get(req, "argv");
  if (!json_is_array(argv) || json_array_size(argv) == 0 ||
      !json_is_string(json_object_get(req, "user")))
    fake_fail("an exec request without argv or user");
  if (w.proc.cmd)
    fake_fail("a second process started by one request");
  if (w.script.agent_dead) {
    hutch_err_fail(err, HUTCH_ERR_UNAVAILABLE, "sandbox_error", "no agent");
    return NULL;
  }
  w.proc.cmd = json_incref(argv);
  w.proc.pty = json_object_get(req, "pty") != NULL;
  w.proc.stdin_open = keep_stdin || in;
  w.proc.ended = false;
  w.proc.started = started;
  w.proc.started_arg = arg;
  return &w.proc;
}

struct proc *procs_lookup(struct sbx *sb, const char *pid, struct hutch_err *err) {
  (void)sb, (void)pid;
  if (w.script.proc_missing) {
    hutch_err_fail(err, HUTCH_ERR_NOT_FOUND, "not_found", "no process");
    return NULL;
  }
  return &w.proc;
}

struct proc *procs_by_pid(struct sbx *sb, int pid) {
  (void)sb;
  return !w.script.proc_missing && pid == FAKE_PID ? &w.proc : NULL;
}

struct proc *procs_next(struct sbx *sb, struct proc *prev) {
  (void)sb;
  return prev || w.script.proc_missing ? NULL : &w.proc;
}

int procs_pid(const struct proc *pr) {
  (void)pr;
  return FAKE_PID;
}

json_t *procs_cmd(const struct proc *pr) {
  return pr->cmd;
}

bool procs_pty(const struct proc *pr) {
  return pr->pty;
}

/* One request has at most one reader of the process. */
struct sub *procs_subscribe(struct proc *pr,
                            void (*line)(struct sub *u, const char *line, size_t n),
                            void (*end)(struct sub *u, const char *line, size_t n), void *ctx) {
  if (pr->sub)
    fake_fail("a second reader of the process in one request");
  pr->sub = xmalloc(sizeof *pr->sub);
  *pr->sub = (struct sub){.pr = pr, .line = line, .end = end, .ctx = ctx};
  return pr->sub;
}

void procs_unsubscribe(struct sub *u) {
  if (u != u->pr->sub)
    fake_fail("a reader unsubscribed that is not the process's");
  u->pr->sub = NULL;
  free(u);
}

const char *procs_kept(const struct proc *pr, size_t *n) {
  (void)pr;
  static const char kept[] = "{\"type\":\"stdout\",\"data\":\"kept\\n\"}\n";
  *n = sizeof kept - 1;
  return kept;
}

json_t *procs_exit_line(const struct proc *pr) {
  static json_t *exit_line;
  if (!exit_line) /* one value for the whole run: not a leak */
    exit_line = json_pack("{s:s,s:s,s:i}", "type", "exit", "status", "exited", "exit_code", 0);
  return pr->ended ? exit_line : NULL;
}

void procs_info(const struct proc *pr, struct proc_info *out) {
  *out = (struct proc_info){FAKE_PID, pr->cmd, 0, procs_exit_line(pr)};
}

int procs_input(struct proc *pr, const void *data, size_t n, bool eof, struct hutch_err *err) {
  (void)data, (void)n;
  if (pr->ended || !pr->stdin_open || w.script.stdin_result == -1)
    return hutch_err_fail(err, HUTCH_ERR_CONFLICT, "stdin_closed", "no more input");
  if (w.script.stdin_result == -2)
    return hutch_err_fail(err, HUTCH_ERR_QUOTA, "stdin_full", "input unread");
  pr->stdin_open = !eof;
  return 0;
}

static int control(struct proc *pr, struct hutch_err *err) {
  if (pr->ended)
    return hutch_err_fail(err, HUTCH_ERR_CONFLICT, "not_running", "ended");
  return 0;
}

int procs_signal(struct proc *pr, int sig, struct hutch_err *err) {
  if (sig < 1 || sig > 64)
    fake_fail("a signal out of 1 to 64");
  return control(pr, err);
}

int procs_resize(struct proc *pr, int rows, int cols, struct hutch_err *err) {
  if (rows < 1 || rows > 9999 || cols < 1 || cols > 9999)
    fake_fail("a PTY size out of 1 to 9999");
  return control(pr, err);
}

int procs_kill(struct proc *pr, struct hutch_err *err) {
  return control(pr, err);
}

/* A line as procs.c writes one: a JSON object, from the script's bytes
 * when they are one, else dflt with the bytes as "data_b64" (if any). */
static char *proc_line(const uint8_t *p, size_t n, json_t *dflt, size_t *len) {
  json_t *j = json_loadb((const char *)p, n, 0, NULL);
  if (!json_is_object(j)) {
    json_decref(j);
    j = dflt;
    if (n) {
      char *b64 = http_b64_encode(p, n);
      json_object_set_new(j, "data_b64", json_string(b64));
      free(b64);
    }
  } else {
    json_decref(dflt);
  }
  return http_json_line(j, len);
}

/* The process prints the script's output as one line, then ends with the
 * script's end as its exit line. */
static void end_process(void) {
  size_t nline, nexit;
  char *line = proc_line(w.script.out, w.script.nout, json_pack("{s:s}", "type", "stdout"), &nline);
  char *exit_line = proc_line(
      w.script.end, w.script.nend,
      json_pack("{s:s,s:s,s:i}", "type", "exit", "status", "exited", "exit_code", 0), &nexit);
  procs_started_cb started = w.proc.started;
  w.proc.started = NULL;
  if (started)
    started(FAKE_PID, NULL, w.proc.started_arg);
  struct sub *u = w.proc.sub;
  if (u && u->start)
    u->start(u, FAKE_PID);
  if (u && w.proc.sub == u)
    u->line(u, line, nline);
  if (u && w.proc.sub == u) {
    w.proc.sub = NULL;
    w.proc.ended = true;
    u->end(u, exit_line, nexit); /* owns u */
  }
  free(line);
  free(exit_line);
}

/* ---- the sandbox and the rest of serve.h the handlers call ---- */

struct sbx *api_sbx_lookup(struct http_conn *c, const struct principal *p) {
  (void)p;
  str_copy(c->sandbox, sizeof c->sandbox, c->req.params[0]);
  return &w.sb;
}

struct sbx *api_sbx_lookup_live(struct http_conn *c, const struct principal *p) {
  return api_sbx_lookup(c, p);
}

bool api_sbx_wake(struct http_conn *c, struct sbx *sb) {
  (void)c, (void)sb;
  return true;
}

struct sbx *e2b_sandbox(struct http_conn *c) {
  (void)c;
  return &w.sb;
}

void e2b_cut(struct http_conn *c) {
  http_own(c, NULL, NULL);
  http_abort(c);
}

const char *e2b_user(struct http_conn *c, const struct sbx *sb) {
  (void)sb;
  char *q = http_query(&c->req, "username");
  const char *user = !q || strcmp(q, "user") == 0 ? "user" : strcmp(q, "root") == 0 ? "root" : NULL;
  free(q);
  if (!user)
    http_error(c, HUTCH_ERR_INVALID, "invalid_argument", "user or root");
  return user;
}

char *e2b_path(const char *path, const char *user) {
  if (path && path[0] == '/')
    return xstrdup(path);
  return xasprintf("%s/%s", strcmp(user, "root") == 0 ? "/root" : "/home/user", path ? path : "");
}

void counters_observe(uint64_t hist[16], double *sum, double seconds) {
  (void)hist, (void)sum, (void)seconds;
}

/* The event ring is not the handlers' business: what they report goes. */
void events_emit(struct server *srv, const char *type, const char *tenant, const char *sandbox,
                 json_t *data) {
  (void)srv, (void)type, (void)tenant, (void)sandbox;
  json_decref(data);
}

/* ---- the end of a request ---- */

void fake_finish(void) {
  end_streams();
  end_process();
  if (w.state == F_HANDLING && !w.c.ops)
    fake_fail("a request left with no answer and no owner");
  if (w.state != F_DONE && w.state != F_CLOSED) {
    http_abort(&w.c); /* the client goes; what it left running ends */
    end_streams();
    end_process();
  }
  if (w.sb.ac.streams || w.proc.sub || w.proc.started)
    fake_fail("streams or subscribers left after the client went");
}
