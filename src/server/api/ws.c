/* GET /v1/sandboxes/{id}/exec/{pid}/ws: a WebSocket on a background
 * process, for interactive sessions (a shell on a PTY). wslay does the
 * framing; the handshake is the few lines of RFC 6455 section 4.2.
 *
 * Server to client, text frames: the process's NDJSON lines, one per
 * frame: what was kept of its output first, then what comes, then its
 * exit line, after which the server closes the socket (status 1000).
 * Client to server: binary frames are stdin bytes; text frames are JSON
 * commands: {"type":"stdin","data":"…"}, {"type":"eof"},
 * {"type":"resize","rows":R,"cols":C}, {"type":"signal","signal":N}. A
 * command that cannot be followed gets {"type":"error","code","message"}. */
#include "api/ws.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <wslay/wslay.h>

#include "digest.h"
#include "util.h"
#include "api/procs.h"
#include "core/run/procs.h"
#include "http/errors.h"
#include "http/http.h"
#include "http/request.h"

#define WS_MSG_MAX (1u << 20) /* largest message taken from a client */
#define WS_BACKLOG (8u << 20) /* output queued for a client before it is dropped */

struct ws {
  struct http_conn *c; /* NULL once the connection is gone */
  struct proc *pr;
  struct sub *sub; /* NULL once the process has ended */
  wslay_event_context_ptr ctx;
  const char *in; /* bytes read, not yet taken by wslay */
  size_t in_len;
  bool ending;  /* close once the queued messages are out */
  bool closing; /* the close frame is queued: end after it */
  int busy;     /* calls under way that may lose the connection: free after */
};

static void ws_free(struct ws *w) {
  if (w->sub)
    procs_unsubscribe(w->sub);
  wslay_event_context_free(w->ctx);
  free(w);
}

static ssize_t recv_cb(wslay_event_context_ptr ctx, uint8_t *buf, size_t len, int flags,
                       void *user) {
  (void)flags;
  struct ws *w = user;
  if (w->in_len == 0) {
    wslay_event_set_error(ctx, WSLAY_ERR_WOULDBLOCK);
    return -1;
  }
  size_t n = len < w->in_len ? len : w->in_len;
  memcpy(buf, w->in, n);
  w->in += n;
  w->in_len -= n;
  return (ssize_t)n;
}

static ssize_t send_cb(wslay_event_context_ptr ctx, const uint8_t *data, size_t len, int flags,
                       void *user) {
  (void)ctx, (void)flags;
  struct ws *w = user;
  if (w->c)
    http_raw_send(w->c, data, len);
  return (ssize_t)len;
}

static void queue_text(struct ws *w, const char *text, size_t n) {
  struct wslay_event_msg m = {WSLAY_TEXT_FRAME, (const uint8_t *)text, n};
  wslay_event_queue_msg(w->ctx, &m);
}

static void reply_error(struct ws *w, const char *code, const char *msg) {
  size_t n;
  char *line =
      http_json_line(json_pack("{s:s,s:s,s:s}", "type", "error", "code", code, "message", msg), &n);
  queue_text(w, line, n - 1); /* without the newline: a frame is a message */
  free(line);
}

static void reply_fail(struct ws *w, const struct hutch_err *err) {
  reply_error(w, err->code, err->msg);
}

/* Send what wslay has queued; close when it is done with the socket.
 * wslay sends control frames before queued messages: the close frame is
 * queued only once the messages before it (the exit line) are out. */
static void pump(struct ws *w) {
  if (!w->c)
    return;
  wslay_event_send(w->ctx);
  if (w->ending && !wslay_event_want_write(w->ctx)) {
    w->ending = false;
    w->closing = true;
    wslay_event_queue_close(w->ctx, WSLAY_CODE_NORMAL_CLOSURE, NULL, 0);
    wslay_event_send(w->ctx);
  }
  if (w->closing && !wslay_event_want_write(w->ctx)) {
    struct http_conn *c = w->c;
    http_abort(c); /* calls on_abort, which frees w */
    return;
  }
  if (http_queued(w->c) > WS_BACKLOG)
    http_abort(w->c);
}

#define BAD_NUMBERS "resize needs rows and cols (1 to 9999); signal a number from 1 to 64"

static void command(struct ws *w, const uint8_t *msg, size_t len) {
  json_t *j = json_loadb((const char *)msg, len, 0, NULL);
  const char *type = json_string_value(json_object_get(j, "type"));
  struct hutch_err err;

  if (!type) {
    reply_error(w, "invalid_argument", "a command is a JSON object with a \"type\"");
  } else if (strcmp(type, "stdin") == 0 || strcmp(type, "eof") == 0) {
    const char *data = json_string_value(json_object_get(j, "data"));
    bool eof = strcmp(type, "eof") == 0;
    if (!eof && !data)
      reply_error(w, "invalid_argument", "stdin needs \"data\", a string");
    else if (procs_input(w->pr, data ? data : "", data ? strlen(data) : 0, eof, &err) < 0)
      reply_fail(w, &err);
  } else if (strcmp(type, "resize") == 0) {
    json_int_t rows = json_integer_value(json_object_get(j, "rows"));
    json_int_t cols = json_integer_value(json_object_get(j, "cols"));
    if (rows < 1 || rows > 9999 || cols < 1 || cols > 9999)
      reply_error(w, "invalid_argument", BAD_NUMBERS);
    else if (procs_resize(w->pr, (int)rows, (int)cols, &err) < 0)
      reply_fail(w, &err);
  } else if (strcmp(type, "signal") == 0) {
    json_int_t sig = json_integer_value(json_object_get(j, "signal"));
    if (sig < 1 || sig > 64)
      reply_error(w, "invalid_argument", BAD_NUMBERS);
    else if (procs_signal(w->pr, (int)sig, &err) < 0)
      reply_fail(w, &err);
  } else {
    reply_error(w, "invalid_argument", "unknown command type");
  }
  json_decref(j);
}

static void on_msg(wslay_event_context_ptr ctx, const struct wslay_event_on_msg_recv_arg *arg,
                   void *user) {
  (void)ctx;
  struct ws *w = user;
  if (arg->opcode == WSLAY_BINARY_FRAME) {
    struct hutch_err err;
    if (procs_input(w->pr, arg->msg, arg->msg_length, false, &err) < 0)
      reply_fail(w, &err);
  } else if (arg->opcode == WSLAY_TEXT_FRAME) {
    command(w, arg->msg, arg->msg_length);
  }
  /* Close frames: wslay answers them; pump() closes once that is sent. */
}

static const struct wslay_event_callbacks callbacks = {
    .recv_callback = recv_cb, .send_callback = send_cb, .on_msg_recv_callback = on_msg};

/* ---- the process's side ---- */

static void on_line(struct sub *u, const char *line, size_t n) {
  struct ws *w = u->ctx;
  queue_text(w, line, n - 1);
  pump(w);
}

static void on_end(struct sub *u, const char *line, size_t n) {
  struct ws *w = u->ctx;
  free(u); /* already unlinked */
  w->sub = NULL;
  queue_text(w, line, n - 1);
  w->ending = true;
  pump(w);
}

/* ---- the connection's side ---- */

static void on_raw(void *ctx, const char *data, size_t n) {
  struct ws *w = ctx;
  w->busy++;
  w->in = data;
  w->in_len = n;
  if (wslay_event_recv(w->ctx) != 0) { /* a client that breaks the protocol */
    w->in_len = 0;
    http_abort(w->c);
  } else {
    w->in_len = 0;
    if (wslay_event_get_close_received(w->ctx))
      w->closing = true;
    pump(w);
  }
  if (--w->busy == 0 && !w->c)
    ws_free(w);
}

static void on_abort(void *ctx) {
  struct ws *w = ctx;
  w->c = NULL;
  if (!w->busy)
    ws_free(w);
}

static const struct http_stream_ops ws_ops = {.abort = on_abort, .raw = on_raw};

static bool has_token(const char *header, const char *token) {
  size_t n = strlen(token);
  for (const char *p = header; p && *p;) {
    p += strspn(p, " \t,");
    size_t len = strcspn(p, " \t,");
    if (len == n && strncasecmp(p, token, n) == 0)
      return true;
    p += len;
  }
  return false;
}

/* The request's WebSocket key, when it asks for a WebSocket as RFC 6455
 * says; else NULL. */
static const char *handshake_key(const struct http_req *r) {
  const char *upgrade = http_header(r, "Upgrade"), *conn = http_header(r, "Connection");
  const char *key = http_header(r, "Sec-WebSocket-Key");
  const char *version = http_header(r, "Sec-WebSocket-Version");
  if (!upgrade || strcasecmp(upgrade, "websocket") != 0 || !has_token(conn, "upgrade") || !key ||
      strlen(key) != 24 || !version || strcmp(version, "13") != 0)
    return NULL;
  return key;
}

/* The lines the process kept, queued for the client before what comes. */
static void queue_kept(struct ws *w, struct proc *pr) {
  size_t n;
  const char *kept = procs_kept(pr, &n);
  for (const char *line = kept, *end; line < kept + n; line = end + 1) {
    end = memchr(line, '\n', (size_t)(kept + n - line));
    if (!end)
      break;
    queue_text(w, line, (size_t)(end - line));
  }
}

/* A browser opens a WebSocket from any page, to any server, and no
 * same-origin rule stops it: the page's own Origin is all the server
 * learns. Only the console's own pages (the Origin this server's Host
 * names) may open one; clients that are not browsers send no Origin.
 * The key is still needed, so this guards a key a page got hold of. */
static bool same_origin(const struct http_req *r) {
  const char *origin = http_header(r, "Origin"), *host = http_header(r, "Host");
  if (!origin)
    return true;
  const char *rest = strncmp(origin, "http://", 7) == 0    ? origin + 7
                     : strncmp(origin, "https://", 8) == 0 ? origin + 8
                                                           : NULL;
  return rest && host && strcasecmp(rest, host) == 0;
}

void api_procs_ws(struct http_conn *c, const struct principal *p) {
  const char *key = handshake_key(&c->req);
  if (!key) {
    http_error(c, HUTCH_ERR_INVALID, "invalid_argument",
               "a WebSocket handshake is needed (Upgrade: websocket, Connection: Upgrade, "
               "Sec-WebSocket-Key, Sec-WebSocket-Version: 13)");
    return;
  }
  if (!same_origin(&c->req)) {
    http_error(c, HUTCH_ERR_FORBIDDEN, "forbidden",
               "a WebSocket from a page of another origin than this server's");
    return;
  }
  struct proc *pr = api_proc(c, p);
  if (!pr)
    return;

  char accept[32];
  digest_ws_accept(key, accept);
  struct ws *w = xcalloc(1, sizeof *w);
  w->c = c;
  w->pr = pr;
  if (wslay_event_context_server_init(&w->ctx, &callbacks, w) != 0)
    abort();
  wslay_event_config_set_max_recv_msg_length(w->ctx, WS_MSG_MAX);

  /* The console offers "hutch.v1" and its key (api/keys.c): the answer
   * names only the first. */
  bool v1 = has_token(http_header(&c->req, "Sec-WebSocket-Protocol"), "hutch.v1");
  char *head = xasprintf("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                         "Connection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n%s\r\n",
                         accept, v1 ? "Sec-WebSocket-Protocol: hutch.v1\r\n" : "");
  w->busy++;
  http_own(c, &ws_ops, w);
  http_raw_send(c, head, strlen(head));
  free(head);

  queue_kept(w, pr);
  json_t *exit_line = procs_exit_line(pr);
  if (exit_line) { /* ended already: the record, then close */
    size_t n;
    char *line = http_json_line(json_incref(exit_line), &n);
    queue_text(w, line, n - 1);
    free(line);
    w->ending = true;
  } else {
    w->sub = procs_subscribe(pr, on_line, on_end, w);
  }

  pump(w);
  if (w->c)
    http_raw_start(c, &ws_ops, w); /* may read what the client sent already */
  if (--w->busy == 0 && !w->c)
    ws_free(w);
}
