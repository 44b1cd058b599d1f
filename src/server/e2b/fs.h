/* envd's filesystem.Filesystem service over Connect RPC (fs.c): its
 * routes, the check of a path every envd file route makes, and a
 * sandbox's watchers freed when it ends. */
#ifndef HUTCH_E2B_FS_H
#define HUTCH_E2B_FS_H

#include <stdbool.h>

struct sbx;
struct http_conn;
struct principal;

/* Whether a path is usable, false after a 400. */
bool e2b_path_ok(struct http_conn *c, const char *path);
/* Route handlers (routes.c). */
void e2b_fs_stat(struct http_conn *c, const struct principal *p);
void e2b_fs_list(struct http_conn *c, const struct principal *p);
void e2b_fs_mkdir(struct http_conn *c, const struct principal *p);
void e2b_fs_move(struct http_conn *c, const struct principal *p);
void e2b_fs_remove(struct http_conn *c, const struct principal *p);
void e2b_fs_watch(struct http_conn *c, const struct principal *p);
void e2b_fs_watcher_create(struct http_conn *c, const struct principal *p);
void e2b_fs_watcher_events(struct http_conn *c, const struct principal *p);
void e2b_fs_watcher_remove(struct http_conn *c, const struct principal *p);
void e2b_watches_free(struct sbx *sb);

#endif
