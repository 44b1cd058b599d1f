/* hutch serve's MCP sessions (Streamable HTTP, /mcp): the table of them,
 * and the bridge between the loop and the threads their requests run on.
 *
 * A request's tools make native API calls that block (src/client/client.h),
 * to this same server over loopback with the caller's own key: they run on
 * a thread per request, never on the loop, and what they send (progress,
 * the response, audit lines) comes back to the loop through one queue and
 * one uv_async. A session is its tenant's: a request that presents another
 * tenant's key finds no such session (404), as it would find no such
 * sandbox. */
#ifndef HUTCH_SERVER_MCP_SESSIONS_H
#define HUTCH_SERVER_MCP_SESSIONS_H

#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "session.h"

#define MCP_SESSIONS_MAX 1024        /* on the server */
#define MCP_TENANT_SESSIONS_MAX 64   /* per tenant */
#define MCP_THREADS_MAX 512          /* requests running at once, every session's */
#define MCP_TENANT_REQUESTS_MAX 128  /* ... and one tenant's, every session of it */
#define MCP_IDLE_MS (30 * 60 * 1000) /* a session with no request this long ends */
#define MCP_KEEPALIVE_MS 15000       /* a comment on each open SSE stream */

struct server;
struct http_conn;
struct mcp_front;

struct mcp_hsession {
  char id[33];
  char tenant[65];
  char key_id[65]; /* stateless: the key whose requests it holds */
  struct mcp_session s;
  int64_t last_ms; /* its last request began or ended */
  unsigned busy;   /* its requests under way */
  bool ended;      /* out of the table; freed once its end ran */
  struct mcp_front *f;
  struct mcp_hsession *next;
};

/* One HTTP request to /mcp being answered. */
struct mcp_hreq {
  struct mcp_front *f;
  struct mcp_hsession *hs;
  struct http_conn *c; /* NULL once its client went */
  json_t *msg;
  json_t *id;
  bool sse;        /* answered as an event stream */
  bool initialize; /* its answer names the session */
  bool modern;     /* a 2026-07-28 request: errors carry their HTTP status */
  struct mcp_sink sink;
  /* On the loop: a message for the client (final: the response, or NULL
   * when none is due; r is freed after). */
  void (*deliver)(struct mcp_hreq *r, json_t *msg, bool final);
  struct mcp_hreq *prev, *next; /* the front's list, for keep-alives */
};

/* The front end's state, hung on the server (srv->mcp). */
struct mcp_front {
  struct server *srv;
  uv_async_t wake;
  uv_timer_t sweep;
  pthread_mutex_t lock; /* the queue */
  struct mcp_event *head, *tail;
  struct mcp_hsession *sessions;
  unsigned nsessions;
  struct mcp_hreq *reqs; /* open requests */
  atomic_uint threads;   /* requests and session ends running on threads */
  bool closing;
  int open_handles; /* while closing: wake and sweep not yet closed */
};

/* srv's front end, made at its first request. */
struct mcp_front *mcp_front_get(struct server *srv);
/* At the server's stop: cancel what runs, wait a little for it, free. */
void mcp_front_free(struct server *srv);

/* A new session for tenant, calling the native API with key; at a
 * maximum the tenant's own session idle longest ends to make room; NULL
 * when none can (all busy, or the server full of other tenants'). */
struct mcp_hsession *mcp_hsession_new(struct mcp_front *f, const char *tenant, const char *key,
                                      bool stateless);
/* The 2026-07-28 era's requests over HTTP carry no session: those of one
 * key share one (its tasks), made at the first; NULL as for new. */
struct mcp_hsession *mcp_hsession_stateless(struct mcp_front *f, const char *tenant,
                                            const char *key_id, const char *key);
/* The session id names, if it is tenant's and has not ended. */
struct mcp_hsession *mcp_hsession_find(struct mcp_front *f, const char *id, const char *tenant);
/* End it (DELETE, or idle too long): out of the table now; its requests
 * are cancelled and the sandboxes it made killed on a thread. */
void mcp_hsession_end(struct mcp_hsession *hs);

/* A request for hs's message msg (its reference taken), in the front's
 * list; deliver gets what it sends. */
struct mcp_hreq *mcp_hreq_new(struct mcp_hsession *hs, json_t *msg,
                              void (*deliver)(struct mcp_hreq *r, json_t *msg, bool final));
/* Whether tenant may start one more request now. */
bool mcp_tenant_room(struct mcp_front *f, const char *tenant);
/* Run r's message on a thread; what it sends reaches r->deliver on the
 * loop. false: no thread to spare (r is untouched: the caller answers
 * and frees it with mcp_hreq_free). */
bool mcp_hreq_run(struct mcp_hreq *r);
void mcp_hreq_free(struct mcp_hreq *r);
/* r's client went: cancel its request. */
void mcp_hreq_gone(struct mcp_hreq *r);

#endif
