/* What the native API (api/) shares with E2B's (e2b/): the sandbox a
 * request names, and the creates, execs, snapshots, forks, file streams,
 * volumes, templates and usage both front ends answer alike. */
#ifndef HUTCH_API_API_H
#define HUTCH_API_API_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "core/run/files.h"
#include "core/sandbox/sbx.h"
#include "http/http.h"

struct server;
struct sbx;
struct http_conn;
struct principal;

/* api/sandboxes.c and api/exec.c: the handlers of /v1/sandboxes. */
/* The agent's exec request from a native exec body o, or NULL after a
 * 400; *in: the stdin it gives, if any. */
json_t *api_exec_request(struct http_conn *c, const struct sbx *sb, json_t *o, const char **in);
/* api/procs.c: the background process of the route's {id} and {pid}, or
 * NULL after a 404. */
struct proc *api_proc(struct http_conn *c, const struct principal *p);

/* A create both APIs make (core/sandboxes.h): c waits for the sandbox,
 * render answers with it; an error is answered as the request's dialect
 * writes it. A client that leaves meanwhile leaves no sandbox behind. */
struct create_req;
/* volumes.c: make p's volume of size_mb for the request c; render answers
 * with it (the caller's for the call), unless the client left: then the
 * volume goes too. */
typedef void (*volume_render_fn)(struct http_conn *c, json_t *vol, const struct principal *p);
void api_volumes_make(struct http_conn *c, const struct principal *p, const char *name,
                      uint64_t size_mb, volume_render_fn render);
typedef void (*sandbox_render_fn)(struct http_conn *c, struct sbx *sb);
void api_sandboxes_make(struct http_conn *c, const struct principal *p, const struct create_req *r,
                        sandbox_render_fn render);
/* The sandbox and the optional {timeout_s} of its request body (t < 0
 * when absent); NULL after an error answer. */
struct sbx *api_sandboxes_timeout_body(struct http_conn *c, const struct principal *p, double *t);

/* api/snapshots.c: what both APIs do with snapshots and forks. */
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

/* api/files.c: what both APIs do alike with the file actions. */
struct files_result;
/* A request waiting for a unary file action (core/files.h): pass
 * api_files_waited and the wait as its done and arg; answer(c, r, err) is
 * called with the result, unless the client left. api_files_wait_started
 * ends the wait with err when the action did not start (r < 0). */
struct files_wait;
typedef void (*files_answer_fn)(struct http_conn *c, const struct files_result *r,
                                const struct hutch_err *err);
struct files_wait *api_files_wait(struct http_conn *c, files_answer_fn answer);
void api_files_waited(const struct files_result *r, const struct hutch_err *err, void *arg);
void api_files_wait_started(struct files_wait *k, int r, const struct hutch_err *err);
/* Stream the file at path to c: 200 and its bytes, or the error. */
void api_files_download(struct http_conn *c, struct sbx *sb, const char *path, const char *user);
/* The same, and ended(arg) once it is over, however it ended. */
void api_files_download_then(struct http_conn *c, struct sbx *sb, const char *path,
                             const char *user, void (*ended)(void *arg), void *arg);
/* Write c's body, as it comes, to path; answer renders the result. o
 * (may be NULL): the body is gzip, inflated as it comes; the file's
 * metadata (files_write). */
typedef void (*files_written_fn)(struct http_conn *c, const struct files_result *r);
struct files_upload_opts {
  bool gzip;
  struct files_write_opts write;
};
void api_files_upload(struct http_conn *c, struct sbx *sb, const char *path, const char *user,
                      const struct files_upload_opts *o, files_written_fn answer);
/* The same in two steps, for a handler that finds its sandbox later: the
 * body is taken (and held, reading paused) at once; api_files_upload_into
 * writes it to sb, or answers why (sb NULL) — always, even after the
 * client left (then it only frees). over(arg), if given, is told once the
 * upload is over, however it ended. */
struct upload;
struct upload *api_files_upload_later(struct http_conn *c, files_written_fn answer,
                                      void (*over)(void *arg), void *arg);
void api_files_upload_into(struct upload *up, struct sbx *sb, const char *path, const char *user,
                           const struct files_upload_opts *o, const struct hutch_err *why);

/* keys.c: 1 and *p filled when the request carries a valid key, 0 otherwise. */
int api_keys_authenticate(struct server *srv, const struct http_req *req, struct principal *p);

/* lifecycle.c: the sandbox the route's {id} names, for the caller; NULL
 * after a 404. */
struct sbx *api_sbx_lookup(struct http_conn *c, const struct principal *p);
/* The same for a request that needs it running: a paused sandbox is
 * resumed (auto_resume) or NULL after a 409. */
struct sbx *api_sbx_lookup_live(struct http_conn *c, const struct principal *p);
/* A paused sandbox a request needs running: resumed, or false after an
 * answer (409 when it may not be resumed by traffic). */
bool api_sbx_wake(struct http_conn *c, struct sbx *sb);

/* api/contexts.c: run the cell of a native /code body o on c (NDJSON);
 * e2b: only the lines E2B's interpreter sends (no "artifacts"). */
void api_contexts_code(struct http_conn *c, struct sbx *sb, json_t *o, bool e2b);

/* api/network.c: the sandbox and the body object of a request that
 * changes its network (fields of known only); NULL after an error answer. */
json_t *api_network_request(struct http_conn *c, const struct principal *p,
                            const char *const *known, struct sbx **sb);

/* api/templates.c: what both APIs do with templates. */
struct template_job;
struct tpl_upload;
/* A template record as a tenant sees it (new reference). */
json_t *api_templates_view(json_t *rec);
/* Answer a started job: NDJSON events to its end when the client asks
 * (Accept: application/x-ndjson); 202 and the job to poll with Prefer:
 * respond-async; else, once it ends, 201 and the template or its error. */
void api_templates_answer(struct http_conn *c, struct template_job *j);
/* Take c's body into a file (a streamed route), then done(c, p, u, arg)
 * answers; arg is freed after. Errors are answered. */
typedef void (*receive_fn)(struct http_conn *c, const struct principal *p, struct tpl_upload *u,
                           char *arg);
void api_templates_receive(struct http_conn *c, const struct principal *p, receive_fn done,
                           char *arg);

/* api/usage.c: a metrics request's ?start=&end= (seconds since the epoch,
 * as E2B's) in ms; -1 after a 400. */
int api_usage_range(struct http_conn *c, int64_t *start_ms, int64_t *end_ms);

#endif
