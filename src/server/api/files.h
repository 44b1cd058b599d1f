/* The native API's file routes (files.c), and what both APIs do alike
 * with the file actions: unary actions waited on, downloads and uploads
 * streamed. */
#ifndef HUTCH_API_FILES_H
#define HUTCH_API_FILES_H

#include <stdbool.h>
#include "core/run/files.h"

struct sbx;
struct http_conn;
struct principal;
struct hutch_err;
struct files_result;

/* A request waiting for a unary file action (core/run/files.h): pass
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

/* The native API's route handlers (routes.c). */
void api_files_write(struct http_conn *c, const struct principal *p);
void api_files_read(struct http_conn *c, const struct principal *p);
void api_files_delete(struct http_conn *c, const struct principal *p);
void api_files_list(struct http_conn *c, const struct principal *p);
void api_files_stat(struct http_conn *c, const struct principal *p);
void api_files_mkdir(struct http_conn *c, const struct principal *p);
void api_files_move(struct http_conn *c, const struct principal *p);
void api_files_watch(struct http_conn *c, const struct principal *p);

#endif
