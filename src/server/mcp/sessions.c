/* The MCP sessions of hutch serve and their threads (sessions.h). */
#include "mcp/sessions.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine.h"
#include "client.h"
#include "util.h"
#include "core/base/server.h"
#include "core/sandbox/audit.h"

/* What a thread hands the loop. */
struct mcp_event {
  enum { EV_SEND, EV_FINAL, EV_AUDIT, EV_ENDED } kind;
  struct mcp_hreq *r;
  struct mcp_hsession *hs; /* EV_ENDED */
  json_t *msg;
  struct mcp_event *next;
};

static void post(struct mcp_front *f, struct mcp_event *ev) {
  pthread_mutex_lock(&f->lock);
  if (f->tail)
    f->tail->next = ev;
  else
    f->head = ev;
  f->tail = ev;
  pthread_mutex_unlock(&f->lock);
  uv_async_send(&f->wake);
}

static void post_new(struct mcp_front *f, int kind, struct mcp_hreq *r, struct mcp_hsession *hs,
                     json_t *msg) {
  struct mcp_event *ev = xmalloc(sizeof *ev);
  *ev = (struct mcp_event){.kind = kind, .r = r, .hs = hs, .msg = msg};
  post(f, ev);
}

static void session_free(struct mcp_hsession *hs) {
  free(hs);
}

/* The loop's side of the queue. */
static void on_wake(uv_async_t *a) {
  struct mcp_front *f = a->data;
  pthread_mutex_lock(&f->lock);
  struct mcp_event *ev = f->head;
  f->head = f->tail = NULL;
  pthread_mutex_unlock(&f->lock);
  while (ev) {
    struct mcp_event *next = ev->next;
    switch (ev->kind) {
    case EV_SEND:
      ev->r->deliver(ev->r, ev->msg, false);
      break;
    case EV_FINAL:
      ev->r->hs->busy--;
      ev->r->hs->last_ms = wall_ms();
      ev->r->deliver(ev->r, ev->msg, true);
      mcp_hreq_free(ev->r);
      break;
    case EV_AUDIT:
      audit_record(f->srv, ev->msg);
      break;
    case EV_ENDED:
      session_free(ev->hs);
      break;
    }
    free(ev);
    ev = next;
  }
}

static bool working_tasks(struct mcp_hsession *hs) {
  pthread_mutex_lock(&hs->s.lock);
  bool any = false;
  for (struct mcp_task *t = hs->s.tasks; t; t = t->next)
    any = any || t->status == TASK_WORKING;
  pthread_mutex_unlock(&hs->s.lock);
  return any;
}

/* Every MCP_KEEPALIVE_MS: a comment on each open stream (proxies keep it
 * open), and sessions idle past MCP_IDLE_MS end. */
static void on_sweep(uv_timer_t *t) {
  struct mcp_front *f = t->data;
  for (struct mcp_hreq *r = f->reqs; r; r = r->next)
    if (r->c && r->sse)
      r->deliver(r, NULL, false);
  int64_t now = wall_ms();
  for (struct mcp_hsession *hs = f->sessions, *next; hs; hs = next) {
    next = hs->next;
    if (!hs->busy && now - hs->last_ms > MCP_IDLE_MS && !working_tasks(hs))
      mcp_hsession_end(hs);
  }
}

struct mcp_front *mcp_front_get(struct server *srv) {
  if (srv->mcp)
    return srv->mcp;
  struct mcp_front *f = xmalloc(sizeof *f);
  memset(f, 0, sizeof *f);
  f->srv = srv;
  pthread_mutex_init(&f->lock, NULL);
  uv_async_init(srv->loop, &f->wake, on_wake);
  f->wake.data = f;
  uv_timer_init(srv->loop, &f->sweep);
  f->sweep.data = f;
  uv_timer_start(&f->sweep, on_sweep, MCP_KEEPALIVE_MS, MCP_KEEPALIVE_MS);
  hc_init();
  srv->mcp = f;
  return f;
}

/* The front's memory goes when both its handles are closed. */
static void closed(uv_handle_t *h) {
  struct mcp_front *f = h->data;
  if (--f->open_handles == 0) {
    pthread_mutex_destroy(&f->lock);
    free(f);
  }
}

void mcp_front_free(struct server *srv) {
  struct mcp_front *f = srv->mcp;
  if (!f)
    return;
  f->closing = true;
  for (struct mcp_hsession *hs = f->sessions; hs; hs = hs->next) {
    pthread_mutex_lock(&hs->s.lock);
    for (struct mcp_inflight *r = hs->s.inflight; r; r = r->next)
      atomic_store(&r->cancel, true);
    for (struct mcp_task *t = hs->s.tasks; t; t = t->next)
      atomic_store(&t->cancel, true);
    hs->s.closing = true;
    pthread_cond_broadcast(&hs->s.changed);
    pthread_mutex_unlock(&hs->s.lock);
  }
  /* The threads' calls to this server fail now that it listens no more;
   * a thread still running after 5 s keeps what it uses (the process
   * is ending). */
  for (int i = 0; i < 500 && atomic_load(&f->threads); i++)
    nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL);
  if (atomic_load(&f->threads)) {
    fprintf(stderr, "hutch serve: %u MCP requests still running at exit\n",
            atomic_load(&f->threads));
    return;
  }
  on_wake(&f->wake); /* what the threads left */
  while (f->sessions) {
    struct mcp_hsession *hs = f->sessions;
    f->sessions = hs->next;
    pthread_mutex_lock(&hs->s.lock);
    hs->s.nmade = 0; /* the sandboxes stay: a restarted server adopts them */
    pthread_mutex_unlock(&hs->s.lock);
    mcp_session_end(&hs->s);
    session_free(hs);
  }
  srv->mcp = NULL;
  f->open_handles = 2;
  uv_close((uv_handle_t *)&f->wake, closed);
  uv_close((uv_handle_t *)&f->sweep, closed);
}

/* Each tool call is an audit line, written on the loop. */
static void audit_tool(void *arg, const char *tool, const char *sandbox, bool ok,
                       const char *code) {
  struct mcp_hsession *hs = arg;
  json_t *j =
      json_pack("{s:s, s:s, s:s, s:s?, s:b, s:s?, s:s}", "tenant", hs->tenant, "action", "mcp.tool",
                "tool", tool, "sandbox", sandbox, "ok", ok, "error", code, "session", hs->id);
  if (j)
    post_new(hs->f, EV_AUDIT, NULL, NULL, j);
}

/* A session's start and end are audit lines, as its tool calls are. */
static void audit_session(struct mcp_hsession *hs, const char *action) {
  json_t *j = json_pack("{s:s, s:s, s:s, s:b}", "tenant", hs->tenant, "action", action, "session",
                        hs->s.stateless ? "" : hs->id, "stateless", hs->s.stateless);
  if (j)
    audit_record(hs->f->srv, j);
}

/* The loopback address of this server's listener: its tools call it. */
static void own_url(const struct server *srv, char *url, size_t n) {
  const struct sockaddr_storage *ss = &srv->listen_addr;
  if (ss->ss_family == AF_INET6) {
    const struct sockaddr_in6 *a = (const void *)ss;
    char host[64] = "::1";
    if (!IN6_IS_ADDR_UNSPECIFIED(&a->sin6_addr))
      inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof host);
    snprintf(url, n, "http://[%s]:%u", host, ntohs(a->sin6_port));
    return;
  }
  const struct sockaddr_in *a = (const void *)ss;
  char host[32] = "127.0.0.1";
  if (a->sin_addr.s_addr != htonl(INADDR_ANY))
    inet_ntop(AF_INET, &a->sin_addr, host, sizeof host);
  snprintf(url, n, "http://%s:%u", host, ntohs(a->sin_port));
}

struct mcp_hsession *mcp_hsession_new(struct mcp_front *f, const char *tenant, const char *key,
                                      bool stateless) {
  /* At the tenant's maximum, its own session idle longest makes room:
   * clients that close without DELETE (the SDK's close() sends none)
   * leave sessions behind, which must not lock their tenant out until
   * they expire. Sessions with requests under way are never taken, and
   * never another tenant's: at the server's maximum a new one is refused. */
  unsigned mine = 0;
  struct mcp_hsession *idlest = NULL;
  for (struct mcp_hsession *hs = f->sessions; hs; hs = hs->next) {
    if (strcmp(hs->tenant, tenant) != 0)
      continue;
    mine++;
    if (!hs->busy && !hs->s.stateless && (!idlest || hs->last_ms < idlest->last_ms))
      idlest = hs;
  }
  if (f->closing)
    return NULL;
  if (mine >= MCP_TENANT_SESSIONS_MAX || f->nsessions >= MCP_SESSIONS_MAX) {
    if (!idlest)
      return NULL;
    mcp_hsession_end(idlest);
    if (f->nsessions >= MCP_SESSIONS_MAX)
      return NULL;
  }

  struct mcp_hsession *hs = xmalloc(sizeof *hs);
  memset(hs, 0, sizeof *hs);
  random_hex(hs->id, 32);
  str_copy(hs->tenant, sizeof hs->tenant, tenant);
  hs->f = f;
  hs->last_ms = wall_ms();
  struct hc_client n = {0};
  own_url(f->srv, n.url, sizeof n.url);
  str_copy(n.key, sizeof n.key, key);
  struct mcp_hooks hooks = {.tool_called = audit_tool, .arg = hs};
  mcp_session_init(&hs->s, &n, &hooks);
  hs->s.stateless = stateless;
  audit_session(hs, "mcp.session");
  hs->next = f->sessions;
  f->sessions = hs;
  f->nsessions++;
  return hs;
}

struct mcp_hsession *mcp_hsession_stateless(struct mcp_front *f, const char *tenant,
                                            const char *key_id, const char *key) {
  for (struct mcp_hsession *hs = f->sessions; hs; hs = hs->next)
    if (hs->s.stateless && strcmp(hs->tenant, tenant) == 0 && strcmp(hs->key_id, key_id) == 0)
      return hs;
  struct mcp_hsession *hs = mcp_hsession_new(f, tenant, key, true);
  if (hs)
    str_copy(hs->key_id, sizeof hs->key_id, key_id);
  return hs;
}

struct mcp_hsession *mcp_hsession_find(struct mcp_front *f, const char *id, const char *tenant) {
  for (struct mcp_hsession *hs = f->sessions; id && hs; hs = hs->next)
    if (!hs->s.stateless && strcmp(hs->id, id) == 0)
      return strcmp(hs->tenant, tenant) == 0 ? hs : NULL;
  return NULL;
}

bool mcp_tenant_room(struct mcp_front *f, const char *tenant) {
  unsigned busy = 0;
  for (struct mcp_hsession *hs = f->sessions; hs; hs = hs->next)
    if (strcmp(hs->tenant, tenant) == 0)
      busy += hs->busy;
  return busy < MCP_TENANT_REQUESTS_MAX;
}

static void *end_main(void *arg) {
  struct mcp_hsession *hs = arg;
  struct mcp_front *f = hs->f;
  mcp_session_end(&hs->s);
  post_new(f, EV_ENDED, NULL, hs, NULL);
  atomic_fetch_sub(&f->threads, 1);
  return NULL;
}

static bool spawn(struct mcp_front *f, void *(*fn)(void *), void *arg) {
  if (atomic_load(&f->threads) >= MCP_THREADS_MAX)
    return false;
  pthread_attr_t attr;
  pthread_t th;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  pthread_attr_setstacksize(&attr, 512 << 10);
  atomic_fetch_add(&f->threads, 1);
  int rc = pthread_create(&th, &attr, fn, arg);
  pthread_attr_destroy(&attr);
  if (rc != 0)
    atomic_fetch_sub(&f->threads, 1);
  return rc == 0;
}

void mcp_hsession_end(struct mcp_hsession *hs) {
  struct mcp_front *f = hs->f;
  if (hs->ended)
    return;
  hs->ended = true;
  for (struct mcp_hsession **pp = &f->sessions; *pp; pp = &(*pp)->next)
    if (*pp == hs) {
      *pp = hs->next;
      break;
    }
  f->nsessions--;
  audit_session(hs, "mcp.session_end");
  if (!spawn(f, end_main, hs)) {
    /* No thread: the sandboxes it made end with their timeout. */
    pthread_mutex_lock(&hs->s.lock);
    hs->s.nmade = 0;
    pthread_mutex_unlock(&hs->s.lock);
    fprintf(stderr, "hutch serve: MCP session %s ended without a thread to clean up\n", hs->id);
    mcp_session_end(&hs->s);
    session_free(hs);
  }
}

static void sink_send(void *arg, json_t *msg) {
  struct mcp_hreq *r = arg;
  post_new(r->f, EV_SEND, r, NULL, msg);
}

struct mcp_hreq *mcp_hreq_new(struct mcp_hsession *hs, json_t *msg,
                              void (*deliver)(struct mcp_hreq *r, json_t *msg, bool final)) {
  struct mcp_hreq *r = xmalloc(sizeof *r);
  memset(r, 0, sizeof *r);
  r->f = hs->f;
  r->hs = hs;
  r->msg = msg;
  r->id = json_object_get(msg, "id");
  r->deliver = deliver;
  r->sink = (struct mcp_sink){.send = sink_send, .arg = r};
  r->next = r->f->reqs;
  if (r->next)
    r->next->prev = r;
  r->f->reqs = r;
  return r;
}

void mcp_hreq_free(struct mcp_hreq *r) {
  if (r->prev)
    r->prev->next = r->next;
  else
    r->f->reqs = r->next;
  if (r->next)
    r->next->prev = r->prev;
  json_decref(r->msg);
  free(r);
}

static void *req_main(void *arg) {
  struct mcp_hreq *r = arg;
  struct mcp_front *f = r->f;
  struct mcp_session *s = &r->hs->s;
  json_t *res = mcp_handle(s, r->msg, &r->sink);
  post_new(f, EV_FINAL, r, NULL, res);
  /* After the final event: the session's end (which waits for this)
   * is queued behind it. */
  pthread_mutex_lock(&s->lock);
  s->running--;
  pthread_cond_broadcast(&s->changed);
  pthread_mutex_unlock(&s->lock);
  atomic_fetch_sub(&f->threads, 1);
  return NULL;
}

bool mcp_hreq_run(struct mcp_hreq *r) {
  struct mcp_session *s = &r->hs->s;
  pthread_mutex_lock(&s->lock);
  s->running++;
  pthread_mutex_unlock(&s->lock);
  if (!spawn(r->f, req_main, r)) {
    pthread_mutex_lock(&s->lock);
    s->running--;
    pthread_mutex_unlock(&s->lock);
    return false;
  }
  r->hs->busy++;
  r->hs->last_ms = wall_ms();
  return true;
}

void mcp_hreq_gone(struct mcp_hreq *r) {
  r->c = NULL;
  if (r->id)
    mcp_session_cancel(&r->hs->s, r->id);
}
