/* The native API's templates (templates.c), and what both APIs do with
 * templates: a record as a tenant sees it, a started job answered, an
 * upload taken into a file. */
#ifndef HUTCH_API_TEMPLATES_H
#define HUTCH_API_TEMPLATES_H

#include <jansson.h>

struct http_conn;
struct principal;
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

/* The native API's route handlers (routes.c). */
void api_templates_list(struct http_conn *c, const struct principal *p);
void api_templates_get(struct http_conn *c, const struct principal *p);
void api_templates_delete(struct http_conn *c, const struct principal *p);
void api_templates_create(struct http_conn *c, const struct principal *p);
void api_templates_import(struct http_conn *c, const struct principal *p);
void api_templates_context(struct http_conn *c, const struct principal *p);
void api_templates_job(struct http_conn *c, const struct principal *p);
void api_templates_job_cancel(struct http_conn *c, const struct principal *p);

#endif
