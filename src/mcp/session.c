/* A session's shared state (session.h). */
#include "session.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

void mcp_session_init(struct mcp_session *s, const struct hc_client *n,
                      const struct mcp_hooks *hooks) {
  memset(s, 0, sizeof *s);
  pthread_mutex_init(&s->lock, NULL);
  pthread_cond_init(&s->changed, NULL);
  s->native = *n;
  s->native.handles = hc_handles_new(MCP_HANDLES_KEPT);
  if (hooks)
    s->hooks = *hooks;
  s->made = xmalloc(MCP_MADE_MAX * sizeof *s->made);
}

/* The sandboxes the session made go with it: an agent that forgets to
 * kill what it made, or whose client dies, leaves nothing running. */
static void kill_made(struct mcp_session *s) {
  for (unsigned i = 0; i < s->nmade; i++) {
    char path[64];
    snprintf(path, sizeof path, "/v1/sandboxes/%s", s->made[i]);
    struct hc_req call = {.method = "DELETE", .path = path, .timeout_ms = 30000};
    struct hc_answer a;
    if (hc_call(&s->native, &call, &a) && a.status >= 300 && a.status != 404)
      fprintf(stderr, "hutch mcp: session end: sandbox %s not killed: %s\n", s->made[i], a.message);
    hc_answer_free(&a);
  }
  s->nmade = 0;
}

void mcp_session_end(struct mcp_session *s) {
  pthread_mutex_lock(&s->lock);
  s->closing = true;
  pthread_cond_broadcast(&s->changed); /* tasks/result waiters */
  for (struct mcp_inflight *r = s->inflight; r; r = r->next)
    atomic_store(&r->cancel, true);
  for (struct mcp_task *t = s->tasks; t; t = t->next)
    atomic_store(&t->cancel, true);
  while (s->running)
    pthread_cond_wait(&s->changed, &s->lock);
  pthread_mutex_unlock(&s->lock);

  kill_made(s);
  while (s->tasks) {
    struct mcp_task *t = s->tasks;
    s->tasks = t->next;
    json_decref(t->result);
    free(t);
  }
  hc_handles_free(s->native.handles);
  free(s->made);
  pthread_cond_destroy(&s->changed);
  pthread_mutex_destroy(&s->lock);
}

void mcp_session_made(struct mcp_session *s, const char *id, bool keep) {
  if (keep || s->stateless)
    return;
  pthread_mutex_lock(&s->lock);
  if (s->nmade < MCP_MADE_MAX)
    str_copy(s->made[s->nmade++], sizeof s->made[0], id);
  pthread_mutex_unlock(&s->lock);
}

void mcp_session_forget(struct mcp_session *s, const char *id) {
  pthread_mutex_lock(&s->lock);
  for (unsigned i = 0; i < s->nmade; i++)
    if (strcmp(s->made[i], id) == 0) {
      memmove(s->made[i], s->made[s->nmade - 1], sizeof s->made[0]);
      s->nmade--;
      break;
    }
  pthread_mutex_unlock(&s->lock);
}

struct mcp_inflight *mcp_session_begin(struct mcp_session *s, json_t *id) {
  pthread_mutex_lock(&s->lock);
  if (s->closing || s->ninflight >= MCP_INFLIGHT_MAX) {
    pthread_mutex_unlock(&s->lock);
    return NULL;
  }
  struct mcp_inflight *r = xmalloc(sizeof *r);
  memset(r, 0, sizeof *r);
  r->id = json_incref(id);
  r->next = s->inflight;
  s->inflight = r;
  s->ninflight++;
  s->running++;
  pthread_mutex_unlock(&s->lock);
  return r;
}

void mcp_session_finish(struct mcp_session *s, struct mcp_inflight *r) {
  pthread_mutex_lock(&s->lock);
  for (struct mcp_inflight **pp = &s->inflight; *pp; pp = &(*pp)->next)
    if (*pp == r) {
      *pp = r->next;
      break;
    }
  s->ninflight--;
  s->running--;
  pthread_cond_broadcast(&s->changed);
  pthread_mutex_unlock(&s->lock);
  json_decref(r->id);
  free(r);
}

void mcp_session_cancel(struct mcp_session *s, json_t *id) {
  pthread_mutex_lock(&s->lock);
  for (struct mcp_inflight *r = s->inflight; r; r = r->next)
    if (json_equal(r->id, id))
      atomic_store(&r->cancel, true);
  pthread_mutex_unlock(&s->lock);
}

/* Tasks past their ttl since they ended are dropped (lock held). */
static void tasks_expire(struct mcp_session *s, int64_t now) {
  for (struct mcp_task **pp = &s->tasks; *pp;) {
    struct mcp_task *t = *pp;
    /* A cancelled task's thread may still run: it goes only once ended. */
    if (!t->running && now - t->updated_ms > t->ttl_ms) {
      *pp = t->next;
      json_decref(t->result);
      free(t);
      s->ntasks--;
      continue;
    }
    pp = &t->next;
  }
}

struct mcp_task *mcp_task_new(struct mcp_session *s, int64_t ttl_ms) {
  pthread_mutex_lock(&s->lock);
  int64_t now = wall_ms();
  tasks_expire(s, now);
  if (s->closing || s->ntasks >= MCP_TASKS_MAX) {
    pthread_mutex_unlock(&s->lock);
    return NULL;
  }
  struct mcp_task *t = xmalloc(sizeof *t);
  memset(t, 0, sizeof *t);
  random_hex(t->id, 32);
  t->status = TASK_WORKING;
  t->running = true;
  t->created_ms = t->updated_ms = now;
  t->ttl_ms = ttl_ms > 0 && ttl_ms < MCP_TASK_TTL_MS ? ttl_ms : MCP_TASK_TTL_MS;
  str_copy(t->message, sizeof t->message, "running");
  t->next = s->tasks;
  s->tasks = t;
  s->ntasks++;
  s->running++;
  pthread_mutex_unlock(&s->lock);
  return t;
}

void mcp_task_end(struct mcp_session *s, struct mcp_task *t, json_t *result,
                  const struct mcp_sink *out) {
  pthread_mutex_lock(&s->lock);
  bool is_error = json_is_true(json_object_get(result, "isError"));
  if (atomic_load(&t->cancel))
    t->status = TASK_CANCELLED;
  else
    t->status = is_error ? TASK_FAILED : TASK_COMPLETED;
  str_copy(t->message, sizeof t->message,
           t->status == TASK_CANCELLED ? "cancelled by request"
           : is_error                  ? "the tool call failed"
                                       : "done");
  t->result = result;
  t->running = false;
  t->updated_ms = wall_ms();
  json_t *note = out && out->send
                     ? json_pack("{s:s, s:s, s:o}", "jsonrpc", "2.0", "method",
                                 "notifications/tasks/status", "params", mcp_task_json(t))
                     : NULL;
  pthread_mutex_unlock(&s->lock);

  /* Sent while the task still counts as running: the session (and the
   * sink, which its front end keeps as long) cannot end under it. */
  if (note)
    out->send(out->arg, note);
  pthread_mutex_lock(&s->lock);
  s->running--;
  pthread_cond_broadcast(&s->changed);
  pthread_mutex_unlock(&s->lock);
}

struct mcp_task *mcp_task_find(struct mcp_session *s, const char *id) {
  tasks_expire(s, wall_ms());
  for (struct mcp_task *t = s->tasks; t; t = t->next)
    if (id && strcmp(t->id, id) == 0)
      return t;
  return NULL;
}

const char *mcp_task_status_name(enum mcp_task_status st) {
  static const char *const names[] = {"working", "completed", "failed", "cancelled"};
  return names[st];
}

json_t *mcp_task_json(const struct mcp_task *t) {
  char created[32], updated[32];
  iso8601(t->created_ms, created);
  iso8601(t->updated_ms, updated);
  return json_pack("{s:s, s:s, s:s, s:s, s:s, s:I, s:i}", "taskId", t->id, "status",
                   mcp_task_status_name(t->status), "statusMessage", t->message, "createdAt",
                   created, "lastUpdatedAt", updated, "ttl", (json_int_t)t->ttl_ms, "pollInterval",
                   1000);
}
