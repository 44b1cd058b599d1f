/* The native API's snapshots and forks (snapshots.c), and what both APIs
 * do with them: a request held until an action ends, a snapshot taken,
 * one dropped, forks made. */
#ifndef HUTCH_API_SNAPSHOTS_H
#define HUTCH_API_SNAPSHOTS_H

#include <jansson.h>
#include <stdint.h>

struct sbx;
struct http_conn;
struct http_wait;
struct hutch_err;
struct principal;

/* A request held until an action ends: api_answer_204 (an offload_done_fn
 * whose arg is api_wait's) answers 204 or the action's error, and frees
 * it. */
struct http_wait *api_wait(struct http_conn *c);
void api_answer_204(const struct hutch_err *err, void *arg);
/* A snapshot of sb, answered by render once it is made (or the error). */
typedef void (*snapshot_render_fn)(struct http_conn *c, json_t *snap);
void api_snapshots_take(struct http_conn *c, const struct principal *p, struct sbx *sb,
                        const char *name, snapshot_render_fn render);
/* A snapshot of the route's sandbox named by the request body's {name?}
 * (the create of both APIs), answered by render. */
void api_snapshots_request(struct http_conn *c, const struct principal *p,
                           snapshot_render_fn render);
/* Delete the tenant's snapshot id: 204 once its files are gone. */
void api_snapshots_drop(struct http_conn *c, const struct principal *p, const char *id);
/* count sandboxes holding sb's files; answer gets the snapshot's id and
 * the forks' sbx_json (errors are answered). */
typedef void (*fork_answer_fn)(struct http_conn *c, json_t *snapshot_id, json_t *made);
void api_forks_make(struct http_conn *c, const struct principal *p, struct sbx *sb, uint64_t count,
                    double timeout_s, fork_answer_fn answer);

/* The native API's route handlers (routes.c). */
void api_snapshots_create(struct http_conn *c, const struct principal *p);
void api_snapshots_list(struct http_conn *c, const struct principal *p);
void api_snapshots_get(struct http_conn *c, const struct principal *p);
void api_snapshots_delete(struct http_conn *c, const struct principal *p);
void api_sandboxes_fork(struct http_conn *c, const struct principal *p);

#endif
