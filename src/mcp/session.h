/* One MCP session: what its client agreed to at initialize, the native
 * API it reaches with which key, the requests in flight (to cancel), its
 * tasks, and the sandboxes it made (killed when it ends, unless made with
 * keep). A session is shared by the threads that run its requests: lock
 * guards everything here but the fields set before it is shared. */
#ifndef HUTCH_MCP_SESSION_H
#define HUTCH_MCP_SESSION_H

#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "client.h"

/* The limits that keep a model's context and the server whole. */
#define MCP_TEXT_MAX (32u << 10)      /* output shown in a result, head and tail */
#define MCP_IMAGE_MAX (2u << 20)      /* one image's bytes in a result */
#define MCP_FILE_MAX (8u << 20)       /* read_file's bytes, and write_file's */
#define MCP_TIMEOUT_S 900             /* a sandbox made without its own timeout */
#define MCP_TASKS_MAX 64              /* a session's tasks kept at once */
#define MCP_TASK_TTL_MS (3600 * 1000) /* a finished task's result is kept this long */
#define MCP_MADE_MAX 256              /* sandboxes a session tracks */
#define MCP_INFLIGHT_MAX 64           /* requests of one session running at once */
#define MCP_HANDLES_KEPT 8            /* connections to the native API kept open */

/* How a session's messages reach its client (serve_stdio.c: a line on stdout;
 * the HTTP front end: its request's stream). Called from any thread. */
struct mcp_sink {
  void (*send)(void *arg, json_t *msg); /* takes msg's reference */
  void *arg;
  bool lasting; /* outlives the request (stdio): tasks may notify on it */
};

/* What the front end learns of each tool call (its audit line). */
struct mcp_hooks {
  void (*tool_called)(void *arg, const char *tool, const char *sandbox, bool ok, const char *code);
  void *arg;
};

enum mcp_task_status { TASK_WORKING, TASK_COMPLETED, TASK_FAILED, TASK_CANCELLED };

struct mcp_task {
  char id[33];
  enum mcp_task_status status;
  char message[256];
  int64_t created_ms, updated_ms, ttl_ms;
  json_t *result; /* the tool's result, when it ended */
  bool running;   /* its thread runs: its memory stays, whatever its status says */
  atomic_bool cancel;
  struct mcp_task *next;
};

struct mcp_inflight {
  json_t *id; /* the request's id */
  atomic_bool cancel;
  struct mcp_inflight *next;
};

struct mcp_session {
  pthread_mutex_t lock;
  pthread_cond_t changed; /* a task ended, a request ended */
  struct hc_client native;
  struct mcp_hooks hooks;
  char version[16]; /* the protocol revision agreed; "" before initialize */
  bool initialized; /* notifications/initialized came */
  bool closing;     /* ended: new requests and tasks are refused */
  bool stateless;   /* the 2026-07-28 era's over HTTP: no end kills what it made */
  unsigned running; /* requests and tasks under way on threads */
  struct mcp_inflight *inflight;
  unsigned ninflight;
  struct mcp_task *tasks;
  unsigned ntasks;
  char (*made)[33]; /* sandboxes to kill at the end */
  unsigned nmade;
};

void mcp_session_init(struct mcp_session *s, const struct hc_client *n,
                      const struct mcp_hooks *hooks);
/* End it: cancel what runs, wait for it, kill the sandboxes it made
 * without keep; then free. */
void mcp_session_end(struct mcp_session *s);

/* A sandbox the session made (keep: it outlives the session). */
void mcp_session_made(struct mcp_session *s, const char *id, bool keep);
/* A sandbox killed by a tool: no longer the session's to kill. */
void mcp_session_forget(struct mcp_session *s, const char *id);

/* A request in flight, for notifications/cancelled; NULL when too many. */
struct mcp_inflight *mcp_session_begin(struct mcp_session *s, json_t *id);
void mcp_session_finish(struct mcp_session *s, struct mcp_inflight *r);
/* notifications/cancelled for id. */
void mcp_session_cancel(struct mcp_session *s, json_t *id);

/* Tasks (the 2025-11-25 revision's tasks utility). */
struct mcp_task *mcp_task_new(struct mcp_session *s, int64_t ttl_ms);
/* t ended with result (its reference taken); its status notification,
 * when out is given, goes out before the session may end. */
void mcp_task_end(struct mcp_session *s, struct mcp_task *t, json_t *result,
                  const struct mcp_sink *out);
/* With s->lock held. */
struct mcp_task *mcp_task_find(struct mcp_session *s, const char *id);
json_t *mcp_task_json(const struct mcp_task *t);
const char *mcp_task_status_name(enum mcp_task_status st);

#endif
