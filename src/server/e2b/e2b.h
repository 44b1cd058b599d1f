/* The E2B-compatible API (docs/e2b.md): E2B's REST API and each sandbox's envd
 * and code interpreter, as front ends on the same core. */
#ifndef HUTCH_E2B_E2B_H
#define HUTCH_E2B_E2B_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

struct server;
struct sbx;
struct http_conn;
struct principal;

/* At stop: the ready sandboxes go; pool_free after the loop has ended. */
void pool_destroy_all(struct server *srv);
void pool_free(struct server *srv);
void pool_metrics(FILE *f, const struct server *srv);

/* The E2B-compatible API (docs/e2b.md): E2B's REST API beside the native
 * one, and, by the E2b-Sandbox-Id and E2b-Sandbox-Port headers, each
 * sandbox's envd and code interpreter. Each handler turns the E2B request
 * into the native core's and its answer back. */
#define E2B_ENVD_PORT "49983"
#define E2B_INTERPRETER_PORT "49999"
/* What envd version hutch answers as: the E2B SDKs switch features by it
 * (docs/e2b.md says which this one gives). */
#define E2B_ENVD_VERSION "0.6.4"
/* The create metadata key that picks a sandbox's isolation tier. */
#define E2B_ISOLATION_KEY "hutch.isolation"

/* e2b/control.c: /sandboxes, /v2/sandboxes */
void e2b_sandboxes_create(struct http_conn *c, const struct principal *p);
void e2b_sandboxes_get(struct http_conn *c, const struct principal *p);
void e2b_sandboxes_timeout(struct http_conn *c, const struct principal *p);
void e2b_sandboxes_pause(struct http_conn *c, const struct principal *p);
void e2b_sandboxes_connect(struct http_conn *c, const struct principal *p);
void e2b_sandboxes_refresh(struct http_conn *c, const struct principal *p);
void e2b_sandboxes_metrics(struct http_conn *c, const struct principal *p);
void e2b_sandboxes_fork(struct http_conn *c, const struct principal *p);
void e2b_snapshots_create(struct http_conn *c, const struct principal *p);
/* A sandbox as E2B lists it (ListedSandbox). */
json_t *e2b_listed_json(const struct sbx *sb);
/* e2b/lists.c: the lists, a page at a time */
void e2b_sandboxes_list(struct http_conn *c, const struct principal *p);
void e2b_snapshots_list(struct http_conn *c, const struct principal *p);
/* An RFC 3339 time, as JavaScript's toISOString writes it
 * ("2026-11-26T17:30:00.123Z", or with an offset), in ms since the epoch. */
bool e2b_parse_time(const char *s, int64_t *ms);
/* e2b/observe.c: metrics and logs */
void e2b_sandboxes_metrics_many(struct http_conn *c, const struct principal *p);
void e2b_team_metrics(struct http_conn *c, const struct principal *p);
void e2b_sandboxes_logs(struct http_conn *c, const struct principal *p);
void e2b_sandboxes_logs_v1(struct http_conn *c, const struct principal *p);
/* The sandbox of a data-plane request (routes.c checked it), or NULL once
 * it is gone. */
struct sbx *e2b_sandbox(struct http_conn *c);
/* End a stream whose sandbox was killed as E2B's proxy does: the
 * connection is cut, with no end message (the SDKs then check the
 * sandbox's health and say it was killed). The stream's owner lets go. */
void e2b_cut(struct http_conn *c);
/* The user a data-plane request acts as (Authorization: Basic, or the
 * username query): "user", "root" or sb's template's user; with neither,
 * the template's user (E2B's setUser), else "user". NULL after a 400. */
const char *e2b_user(struct http_conn *c, const struct sbx *sb);
/* An envd path: absolute as given, else under the user's home (malloc'd). */
char *e2b_path(const char *path, const char *user);

/* e2b/signing.c: envd's signed /files URLs (signature=). 1: the request's
 * signature is sb's and in time; 0: it has none; -1 after a 401. */
int e2b_signature_check(struct http_conn *c, const struct sbx *sb);
/* The sandbox whose access token signed the request (a URL that names no
 * sandbox), woken if paused; NULL after an answer. */
struct sbx *e2b_signed_sandbox(struct http_conn *c);

/* e2b/process.c: process.Process */
void e2b_envd_health(struct http_conn *c, const struct principal *p);
void e2b_process_start(struct http_conn *c, const struct principal *p);
void e2b_process_connect(struct http_conn *c, const struct principal *p);
void e2b_process_list(struct http_conn *c, const struct principal *p);
void e2b_process_input(struct http_conn *c, const struct principal *p);
void e2b_process_close_stdin(struct http_conn *c, const struct principal *p);
void e2b_process_signal(struct http_conn *c, const struct principal *p);
void e2b_process_update(struct http_conn *c, const struct principal *p);

/* e2b/fs.c: filesystem.Filesystem; e2b/files.c: GET and POST /files.
 * e2b_path_ok: whether a path is usable, false after a 400. */
bool e2b_path_ok(struct http_conn *c, const char *path);
void e2b_fs_stat(struct http_conn *c, const struct principal *p);
void e2b_fs_list(struct http_conn *c, const struct principal *p);
void e2b_fs_mkdir(struct http_conn *c, const struct principal *p);
void e2b_fs_move(struct http_conn *c, const struct principal *p);
void e2b_fs_remove(struct http_conn *c, const struct principal *p);
void e2b_fs_watch(struct http_conn *c, const struct principal *p);
void e2b_fs_watcher_create(struct http_conn *c, const struct principal *p);
void e2b_fs_watcher_events(struct http_conn *c, const struct principal *p);
void e2b_fs_watcher_remove(struct http_conn *c, const struct principal *p);
void e2b_files_read(struct http_conn *c, const struct principal *p);
void e2b_files_write(struct http_conn *c, const struct principal *p);
void e2b_watches_free(struct sbx *sb);

/* e2b/network.c: E2B's network settings. A create's as hutch's {network,
 * secrets} (NULL after a 400); a sandbox's as E2B shows them
 * {allowInternetAccess, network}; PUT /sandboxes/{id}/network. */
json_t *e2b_network_request(struct http_conn *c, const struct principal *p, json_t *o);
json_t *e2b_network_json(const struct sbx *sb);
void e2b_sandboxes_network(struct http_conn *c, const struct principal *p);

/* secrets.c: E2B's /secrets; and the value of the tenant's secret name
 * (malloc'd; NULL: none), which network rules name as ${e2b.secrets.NAME}. */
void e2b_secrets_list(struct http_conn *c, const struct principal *p);
void e2b_secrets_create(struct http_conn *c, const struct principal *p);
void e2b_secrets_get(struct http_conn *c, const struct principal *p);
void e2b_secrets_update(struct http_conn *c, const struct principal *p);
void e2b_secrets_delete(struct http_conn *c, const struct principal *p);
char *e2b_secret_value(struct server *srv, const char *tenant, const char *name);

/* e2b/templates.c: E2B's template API (Template.build and friends). */
void e2b_templates_request(struct http_conn *c, const struct principal *p);
void e2b_templates_file(struct http_conn *c, const struct principal *p);
void e2b_templates_upload(struct http_conn *c, const struct principal *p);
void e2b_templates_build(struct http_conn *c, const struct principal *p);
void e2b_templates_status(struct http_conn *c, const struct principal *p);
void e2b_templates_alias(struct http_conn *c, const struct principal *p);
/* e2b/control.c: whether name is one of E2B's template names that the
 * host template stands for when the store has none of that name. */
bool e2b_host_alias(const char *name);
void e2b_templates_list(struct http_conn *c, const struct principal *p);
void e2b_templates_tags(struct http_conn *c, const struct principal *p);
void e2b_templates_tags_assign(struct http_conn *c, const struct principal *p);
void e2b_templates_tags_remove(struct http_conn *c, const struct principal *p);
void e2b_templates_delete(struct http_conn *c, const struct principal *p);
/* e2b/volumes.c: E2B's volumes and their content */
void e2b_volumes_create(struct http_conn *c, const struct principal *p);
void e2b_volumes_list(struct http_conn *c, const struct principal *p);
void e2b_volumes_get(struct http_conn *c, const struct principal *p);
void e2b_volumes_delete(struct http_conn *c, const struct principal *p);
void e2b_volume_content(struct http_conn *c, const struct principal *p);
void e2b_volume_chmod(struct http_conn *c, const struct principal *p);
/* e2b/tplbuild.c: a build spec as a Dockerfile (malloc'd), base_user the
 * base's user (USER goes back to it after a RUN as another); the COPY
 * steps' file hashes appended to hashes. NULL and err when it cannot be. */
struct hutch_err;
char *e2b_dockerfile(json_t *spec, const char *base_user, json_t *hashes, struct hutch_err *err);

/* e2b/interp.c: the code interpreter */
void e2b_interp_health(struct http_conn *c, const struct principal *p);
void e2b_execute(struct http_conn *c, const struct principal *p);
void e2b_contexts_create(struct http_conn *c, const struct principal *p);
void e2b_contexts_list(struct http_conn *c, const struct principal *p);
void e2b_contexts_delete(struct http_conn *c, const struct principal *p);
void e2b_contexts_restart(struct http_conn *c, const struct principal *p);

#endif
