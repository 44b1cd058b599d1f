/* HTTP/1.1 connections of hutch serve: libuv moves the bytes, http-parser
 * parses the requests, this file holds one connection's state between them
 * and writes responses (whole, or streamed in chunks).
 *
 * One request at a time per connection: after a request is read the
 * connection stops reading until its response has ended, then reads the
 * next (keep-alive) or closes. */
#ifndef HUTCH_HTTP_H
#define HUTCH_HTTP_H

#include <http_parser.h>
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#define HTTP_HEADER_MAX (16u << 10)  /* request line and headers */
#define HTTP_MAX_HEADERS 100         /* header lines in a request */
#define HTTP_BODY_MAX (1u << 20)     /* a request body held in memory */
#define HTTP_HEADER_TIMEOUT_MS 10000 /* to send the request line and headers */
#define HTTP_BODY_TIMEOUT_MS 30000   /* to send the rest of a held body */
#define HTTP_IDLE_TIMEOUT_MS 60000   /* between requests on a kept-alive connection */
#define HTTP_LINGER_MS 5000          /* reading what follows a request answered early */
#define HTTP_MAX_PARAMS 4
#define HTTP_STREAM_HIGH (256u << 10) /* queued bytes above which a stream waits */

struct server;
struct http_conn;
struct http_req;

/* How http_error writes an error: the API the request came in by decides
 * (routes.c: http_handlers.dialect when the headers are read, then
 * the route's own before the handler runs). */
enum http_dialect {
  DIALECT_HUTCH,          /* {"error":{"code","message"}} */
  DIALECT_E2B,            /* E2B's REST API and envd's HTTP routes: {"code":STATUS,"message"} */
  DIALECT_CONNECT,        /* Connect RPC, unary: {"code":"not_found","message"} */
  DIALECT_CONNECT_STREAM, /* Connect RPC, server stream: 200 and an end-of-stream error */
  DIALECT_TEXT,           /* E2B's code interpreter: the message as text/plain */
};

/* What the transport asks of the server it serves (routes.c, fds.c). */
struct http_handlers {
  /* A request is read: answer it. */
  void (*dispatch)(struct server *srv, struct http_conn *c);
  /* Whether the route for req takes its body streamed (file uploads). */
  bool (*streams_body)(struct server *srv, const struct http_req *req);
  /* How req's errors are written before its route answers (a body too
   * large): its front end's dialect. */
  enum http_dialect (*dialect)(struct server *srv, const struct http_req *req);
  /* A response has ended (audit line, metrics). */
  void (*done)(struct server *srv, struct http_conn *c);
  /* Whether the server has descriptors to spare for one more client. */
  bool (*room)(const struct server *srv);
  /* A tenant's connection is held by a handler past its request (a
   * stream, a WebSocket, a wait) from now on (on), or no longer: the
   * server counts them per tenant, so that no request walks the list of
   * every tenant's connections to learn its own. */
  void (*held)(struct server *srv, const char *tenant, bool on);
};

/* The transport's state: the listening socket (accept.c) and the open
 * connections. The server embeds one; nothing here knows what it serves. */
struct http_server {
  uv_loop_t *loop;
  struct server *owner; /* handed to the handlers, and as each connection's srv */
  const struct http_handlers *h;
  const char *private_dir; /* no error answer names it (the state directory): errors.c */
  unsigned max_conns;
  bool stopping;
  struct http_conn *conns;
  unsigned nconns;
  uint64_t refused;   /* clients answered 503 at accept, out of descriptors */
  uv_poll_t listener; /* listen_fd readable (accept.c) */
  uv_timer_t accept_retry;
  int listen_fd, spare_fd; /* spare_fd: for answering 503 when out of descriptors */
  char overloaded[256];    /* that answer (accept.c) */
  size_t noverloaded;
  char rbuf[256 << 10]; /* every connection reads into this, one at a time */
};

struct http_header {
  char *name, *value;
};

struct http_req {
  enum http_method method;
  char *target; /* as sent: path and query */
  char *path;   /* the path part (not decoded: routes match it as is) */
  char *query;  /* the query part without '?', or NULL */
  struct http_header *headers;
  size_t nheaders;
  char *body;
  size_t body_len;
  char *pbuf;                          /* a copy of path the params point into */
  const char *params[HTTP_MAX_PARAMS]; /* {name} segments the route matched */
  size_t nparams;
  uint64_t started_ns;
};

/* What a handler that owns its request past its own return hears. */
struct http_stream_ops {
  /* The client went away or the connection failed: the handler drops its
   * reference to the connection, which is freed after this returns. */
  void (*abort)(void *ctx);
  /* Queued output fell below HTTP_STREAM_HIGH after being above it. */
  void (*drain)(void *ctx);
  /* A streamed request body (http_body_start): the next piece; the end. */
  void (*body)(void *ctx, const char *data, size_t n);
  void (*body_end)(void *ctx);
  /* After http_raw_start: bytes the client sent. */
  void (*raw)(void *ctx, const char *data, size_t n);
};

enum http_conn_state {
  HC_READING,   /* reading a request */
  HC_BODY,      /* a handler takes the request body as it comes */
  HC_HANDLING,  /* the request is read; its handler has it */
  HC_STREAMING, /* the response is being streamed */
  HC_DRAINING,  /* answered early: dropping the rest of the request, then closing */
  HC_RAW,       /* switched protocols (WebSocket): bytes both ways, no HTTP */
  HC_CLOSING,
};

struct http_conn {
  uv_tcp_t tcp;
  uv_timer_t timer;
  struct http_server *hs;
  struct server *srv;            /* hs->owner, for the front ends */
  struct http_conn *prev, *next; /* the server's list of connections */
  http_parser parser;
  struct http_req req;
  enum http_conn_state state;
  int open_handles; /* while closing: tcp and timer not yet closed */
  size_t header_bytes;
  bool in_value;        /* http-parser: the last piece was a header value */
  bool headers_done;    /* a route that streams its body was found */
  bool complete;        /* a whole request has been read */
  int fail_status;      /* a parse callback refused the request with this status */
  const char *fail_why; /* ... and why, when http-parser's name for it says too little */
  char *leftover;       /* bytes read after the request, parsed after the response */
  size_t leftover_len;
  bool keep_alive;
  bool linger;     /* answered before the request was read whole */
  bool want_next;  /* kept alive: read the next request on the next turn */
  bool wait_drain; /* ... once the client has taken what it was sent */
  bool failed;     /* a write failed: closing on the next turn */
  bool watching;   /* http_watch: reading only for the client's end */
  size_t queued;   /* bytes handed to libuv not yet written */
  bool above_high;
  const struct http_stream_ops *ops;
  void *ctx;
  /* For the audit log: the response's status and error code, and what the
   * request was (set by the router and the handler). */
  int last_status;
  const char *last_error;
  enum http_dialect dialect;
  const char *action;
  char tenant[65];
  char sandbox[17];
  /* The tenant a handler holds the connection for (handlers.held), "" when
   * none does: kept apart from tenant, which the audit line clears. */
  char holder[65];
};

/* A transport with no socket yet, for owner. */
void http_server_init(struct http_server *hs, uv_loop_t *loop, struct server *owner,
                      const struct http_handlers *h, unsigned max_conns);
/* Accept a connection from the listening socket and start reading it. */
void http_accept(struct http_server *hs, int fd);
/* Stop: no more connections, and every open one closed. */
void http_close_all(struct http_server *hs);

/* Whole responses; each ends the request. extra: more header lines, each
 * ending in CRLF, or NULL. */
void http_respond(struct http_conn *c, int status, const char *ctype, const void *body, size_t len,
                  const char *extra);
/* Takes a reference of j. */
void http_json(struct http_conn *c, int status, json_t *j);
/* j as one line of JSON ending in a newline (malloc'd); takes its reference. */
char *http_json_line(json_t *j, size_t *len);

/* A handler keeps the request after it returns (it waits for a sandbox):
 * ops->abort tells it that the connection is gone. */
void http_own(struct http_conn *c, const struct http_stream_ops *ops, void *ctx);
/* While such a handler waits for work off the loop, read on only to learn
 * that the client went away (ops->abort); what it sends meanwhile is kept
 * for the next request. */
void http_watch(struct http_conn *c);

/* A handler that waits for an action (work off the loop, an agent's
 * answer) holds its connection in a struct http_wait, which must live
 * until http_wait_end: meanwhile the client's end is watched for, and
 * w->c becomes NULL if it goes. http_wait_end gives the connection back
 * to be answered (NULL: its client left). The action itself never sees
 * the connection. */
struct http_wait {
  struct http_conn *c;
};
void http_wait_begin(struct http_wait *w, struct http_conn *c);
struct http_conn *http_wait_end(struct http_wait *w);

/* Routes that stream their request body (routes_streams_body) are
 * dispatched once the headers are read; the handler calls http_body_start
 * to take the body piece by piece (ops->body, then ops->body_end), or
 * answers at once to refuse it. Pausing stops reading from the client. */
void http_body_start(struct http_conn *c, const struct http_stream_ops *ops, void *ctx);
void http_body_pause(struct http_conn *c);
void http_body_resume(struct http_conn *c);

/* Streamed responses (chunked): start, send any number of pieces, end.
 * The handler owns the connection until http_stream_end or ops->abort. */
void http_stream_start(struct http_conn *c, int status, const char *ctype,
                       const struct http_stream_ops *ops, void *ctx);
/* The same with more header lines (each ending in CRLF). */
void http_stream_start_with(struct http_conn *c, int status, const char *ctype, const char *extra,
                            const struct http_stream_ops *ops, void *ctx);
void http_stream_send(struct http_conn *c, const void *data, size_t len);
void http_stream_end(struct http_conn *c);
/* The last chunk (data, len) and the end, in one write. */
void http_stream_end_with(struct http_conn *c, const void *data, size_t len);
/* Switch the connection to another protocol after the request (the
 * handler has sent its 101 with http_raw_send): from now on what the client
 * sends goes to ops->raw, and the handler writes with http_raw_send until
 * it closes with http_abort (or the client goes: ops->abort). */
void http_raw_start(struct http_conn *c, const struct http_stream_ops *ops, void *ctx);
void http_raw_send(struct http_conn *c, const void *data, size_t n);

/* A request head for another server (egress.c, ports.c): line (without
 * its CRLF), each header drop() does not drop, extra (whole header lines,
 * or NULL), and the blank line; malloc'd, its length in *len. */
char *http_head_write(const char *line, const struct http_header *h, size_t n,
                      bool (*drop)(const struct http_header *h, void *arg), void *arg,
                      const char *extra, size_t *len);

/* Hand the connection's socket over (a relay takes it, ports.c): a
 * duplicate of it, and in *rest what the client sent after the request's
 * head (malloc'd). The connection itself is closed. -1 when it failed. */
int http_detach(struct http_conn *c, char **rest, size_t *nrest);

/* End a response that cannot be finished (its source failed mid-way):
 * the connection is closed, so the client sees it cut short. */
void http_abort(struct http_conn *c);
/* Output queued for the client (flow control for the stream's source). */
size_t http_queued(const struct http_conn *c);

#endif
