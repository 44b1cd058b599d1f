/* Blocking work off the event loop (offload.h). */

#include "core/offload.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "layer.h"
#include "util.h"
#include "core/server.h"

static const unsigned lane_max[OFFLOAD_LANES] = {[OFFLOAD_CREATE] = 1,
                                                 [OFFLOAD_OTHER] = OFFLOAD_MAX - 1};

static void work(uv_work_t *w) {
  struct offload *o = w->data;
  o->run(o);
}

static void start(struct server *srv, struct offload *o);

static void after(uv_work_t *w, int status) {
  (void)status; /* never cancelled: uv_cancel is not used */
  struct offload *o = w->data;
  struct server *srv = o->srv;
  struct offload_queue *q = &srv->offload[o->lane];
  q->running--;
  struct offload *next = q->head;
  if (next) {
    q->head = next->next;
    q->waiting--;
    if (!q->head)
      q->tail = NULL;
    start(srv, next);
  }
  o->done(o);
}

static void start(struct server *srv, struct offload *o) {
  srv->offload[o->lane].running++;
  o->work.data = o;
  uv_queue_work(srv->loop, &o->work, work, after);
}

void offload(struct server *srv, enum offload_lane lane, struct offload *o,
             void (*run)(struct offload *o), void (*done)(struct offload *o)) {
  struct offload_queue *q = &srv->offload[lane];
  o->srv = srv;
  o->lane = lane;
  o->run = run;
  o->done = done;
  o->next = NULL;
  if (q->running < lane_max[lane]) {
    start(srv, o);
    return;
  }
  if (q->tail)
    q->tail->next = o;
  else
    q->head = o;
  q->tail = o;
  q->waiting++;
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
  if (rm->tree)
    rm->r = hutch_layer_remove(rm->path, &rm->err);
  else if ((rm->r = unlink(rm->path) < 0 && errno != ENOENT ? -1 : 0) < 0)
    hutch_err_set(&rm->err, errno, "%s", rm->path);
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
