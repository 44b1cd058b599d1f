/* Blocking work off the event loop (offload.h). */

#include "core/base/offload.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "layer.h"
#include "util.h"
#include "core/base/server.h"

void offload_init(struct server *srv, unsigned create_lanes) {
  srv->offload[OFFLOAD_CREATE].max = create_lanes;
  srv->offload[OFFLOAD_OTHER].max = OFFLOAD_OTHER_MAX;
}

static void work(uv_work_t *w) {
  struct offload *o = w->data;
  o->run(o);
}

static void start(struct server *srv, struct offload *o);

static void after(uv_work_t *w, int status) {
  (void)status; /* The job is never cancelled: uv_cancel is not used. */
  struct offload *o = w->data;
  struct server *srv = o->srv;
  struct offload_queue *q = &srv->offload[o->lane];
  q->running--;

  struct offload *next = q->head ? q->head : q->bg_head;
  if (next == q->head && next) {
    q->turn = next->turn;
    q->head = next->next;
    if (!q->head)
      q->tail = NULL;
  } else if (next) {
    q->bg_head = next->next;
    if (!q->bg_head)
      q->bg_tail = NULL;
  }
  if (next) {
    q->waiting--;
    start(srv, next);
  }

  o->done(o);
}

static void start(struct server *srv, struct offload *o) {
  srv->offload[o->lane].running++;
  o->work.data = o;
  uv_queue_work(srv->loop, &o->work, work, after);
}

/* Owners take turns: a job of an owner gets the turn after its owner's
 * last waiting one (or the next turn, with none waiting), and waits behind
 * every job of an earlier or the same turn. One tenant's burst of creates
 * therefore delays another tenant's by about one create per tenant
 * waiting, not by the whole burst (start-time fair queueing, one job a
 * turn). A job without owner goes last. */
static uint64_t turn_of(const struct offload_queue *q, const char *owner) {
  uint64_t turn = q->turn;
  if (!owner)
    return q->tail && q->tail->turn > turn ? q->tail->turn : turn;
  for (const struct offload *w = q->head; w; w = w->next)
    if (w->owner && strcmp(w->owner, owner) == 0)
      turn = w->turn;
  return turn + 1;
}

static void enqueue(struct server *srv, enum offload_lane lane, bool background, const char *owner,
                    struct offload *o, void (*run)(struct offload *o),
                    void (*done)(struct offload *o)) {
  struct offload_queue *q = &srv->offload[lane];
  o->srv = srv;
  o->lane = lane;
  o->run = run;
  o->done = done;
  o->owner = owner;
  o->next = NULL;

  if (q->running < q->max) {
    start(srv, o);
    return;
  }

  q->waiting++;
  if (background) {
    if (q->bg_tail)
      q->bg_tail->next = o;
    else
      q->bg_head = o;
    q->bg_tail = o;
    return;
  }

  o->turn = turn_of(q, owner);
  struct offload **at = &q->head;
  while (*at && (*at)->turn <= o->turn)
    at = &(*at)->next;
  o->next = *at;
  *at = o;
  if (!o->next)
    q->tail = o;
}

void offload(struct server *srv, enum offload_lane lane, struct offload *o,
             void (*run)(struct offload *o), void (*done)(struct offload *o)) {
  enqueue(srv, lane, false, NULL, o, run, done);
}

void offload_owned(struct server *srv, enum offload_lane lane, const char *owner, struct offload *o,
                   void (*run)(struct offload *o), void (*done)(struct offload *o)) {
  enqueue(srv, lane, false, owner, o, run, done);
}

void offload_background(struct server *srv, enum offload_lane lane, struct offload *o,
                        void (*run)(struct offload *o), void (*done)(struct offload *o)) {
  enqueue(srv, lane, true, NULL, o, run, done);
}

unsigned offload_ahead(const struct server *srv, enum offload_lane lane, const char *owner) {
  const struct offload_queue *q = &srv->offload[lane];
  uint64_t turn = turn_of(q, owner);
  unsigned n = q->running;
  for (const struct offload *w = q->head; w && w->turn <= turn; w = w->next)
    n++;
  return n;
}

/* A removal: a snapshot's tree or a volume's image. */
struct removal {
  struct offload o;
  char *path;
  bool tree;
  offload_done_fn done;
  void *arg;
  struct hutch_err err;
  int r;
};

static void removal_run(struct offload *o) {
  struct removal *rm = OFFLOAD_JOB(o, struct removal);
  if (rm->tree) {
    rm->r = hutch_layer_remove(rm->path, &rm->err);
    return;
  }

  /* An image already gone is removed. */
  rm->r = 0;
  if (unlink(rm->path) < 0 && errno != ENOENT) {
    rm->r = -1;
    hutch_err_set(&rm->err, errno, "%s", rm->path);
  }
}

static void removal_done(struct offload *o) {
  struct removal *rm = OFFLOAD_JOB(o, struct removal);
  struct hutch_err err = {0};

  if (rm->r < 0 && rm->done)
    hutch_err_fail(&err, HUTCH_ERR_SYSTEM, "internal", "%s", rm->err.msg);
  else if (rm->r < 0)
    fprintf(stderr, "hutch serve: %s\n", rm->err.msg);
  if (rm->done)
    rm->done(rm->r < 0 ? &err : NULL, rm->arg);

  free(rm->path);
  free(rm);
}

void offload_remove(struct server *srv, char *path, bool tree, offload_done_fn done, void *arg) {
  struct removal *rm = xcalloc(1, sizeof *rm);
  rm->path = path;
  rm->tree = tree;
  rm->done = done;
  rm->arg = arg;
  offload(srv, OFFLOAD_OTHER, &rm->o, removal_run, removal_done);
}
