/* The native API's route handlers (routes.c). */
#ifndef HUTCH_API_HANDLERS_H
#define HUTCH_API_HANDLERS_H

struct http_conn;
struct principal;

void api_sandboxes_pause(struct http_conn *c, const struct principal *p);
void api_sandboxes_resume(struct http_conn *c, const struct principal *p);
void api_keys_create(struct http_conn *c, const struct principal *p);
void api_keys_delete(struct http_conn *c, const struct principal *p);
void api_sandboxes_create(struct http_conn *c, const struct principal *p);
void api_sandboxes_list(struct http_conn *c, const struct principal *p);
void api_sandboxes_get(struct http_conn *c, const struct principal *p);
void api_sandboxes_delete(struct http_conn *c, const struct principal *p);
void api_sandboxes_timeout(struct http_conn *c, const struct principal *p);
void api_exec(struct http_conn *c, const struct principal *p);
void api_files_write(struct http_conn *c, const struct principal *p);
void api_files_read(struct http_conn *c, const struct principal *p);
void api_files_delete(struct http_conn *c, const struct principal *p);
void api_files_list(struct http_conn *c, const struct principal *p);
void api_files_stat(struct http_conn *c, const struct principal *p);
void api_files_mkdir(struct http_conn *c, const struct principal *p);
void api_files_move(struct http_conn *c, const struct principal *p);
void api_files_watch(struct http_conn *c, const struct principal *p);
void api_procs_list(struct http_conn *c, const struct principal *p);
void api_procs_output(struct http_conn *c, const struct principal *p);
void api_procs_signal(struct http_conn *c, const struct principal *p);
void api_procs_stdin(struct http_conn *c, const struct principal *p);
void api_procs_kill(struct http_conn *c, const struct principal *p);
void api_procs_ws(struct http_conn *c, const struct principal *p);
void api_contexts_create(struct http_conn *c, const struct principal *p);
void api_contexts_list(struct http_conn *c, const struct principal *p);
void api_contexts_delete(struct http_conn *c, const struct principal *p);
void api_contexts_restart(struct http_conn *c, const struct principal *p);
void api_contexts_interrupt(struct http_conn *c, const struct principal *p);
void api_contexts_fork(struct http_conn *c, const struct principal *p);
void api_code(struct http_conn *c, const struct principal *p);
void api_snapshots_create(struct http_conn *c, const struct principal *p);
void api_snapshots_list(struct http_conn *c, const struct principal *p);
void api_snapshots_get(struct http_conn *c, const struct principal *p);
void api_snapshots_delete(struct http_conn *c, const struct principal *p);
void api_sandboxes_fork(struct http_conn *c, const struct principal *p);
void api_volumes_create(struct http_conn *c, const struct principal *p);
void api_volumes_list(struct http_conn *c, const struct principal *p);
void api_volumes_get(struct http_conn *c, const struct principal *p);
void api_volumes_delete(struct http_conn *c, const struct principal *p);
void api_sandboxes_metrics(struct http_conn *c, const struct principal *p);
void api_usage(struct http_conn *c, const struct principal *p);
void api_sandboxes_network(struct http_conn *c, const struct principal *p);
void api_metrics(struct http_conn *c, const struct principal *p);
void api_templates_list(struct http_conn *c, const struct principal *p);
void api_templates_get(struct http_conn *c, const struct principal *p);
void api_templates_delete(struct http_conn *c, const struct principal *p);
void api_templates_create(struct http_conn *c, const struct principal *p);
void api_templates_import(struct http_conn *c, const struct principal *p);
void api_templates_context(struct http_conn *c, const struct principal *p);
void api_templates_job(struct http_conn *c, const struct principal *p);
void api_templates_job_cancel(struct http_conn *c, const struct principal *p);

#endif
