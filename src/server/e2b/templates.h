/* E2B's template API (templates.c): Template.build and friends. */
#ifndef HUTCH_E2B_TEMPLATES_H
#define HUTCH_E2B_TEMPLATES_H

struct http_conn;
struct principal;

/* Route handlers (routes.c). */
void e2b_templates_request(struct http_conn *c, const struct principal *p);
void e2b_templates_file(struct http_conn *c, const struct principal *p);
void e2b_templates_upload(struct http_conn *c, const struct principal *p);
void e2b_templates_build(struct http_conn *c, const struct principal *p);
void e2b_templates_status(struct http_conn *c, const struct principal *p);
void e2b_templates_alias(struct http_conn *c, const struct principal *p);
void e2b_templates_list(struct http_conn *c, const struct principal *p);
void e2b_templates_tags(struct http_conn *c, const struct principal *p);
void e2b_templates_tags_assign(struct http_conn *c, const struct principal *p);
void e2b_templates_tags_remove(struct http_conn *c, const struct principal *p);
void e2b_templates_delete(struct http_conn *c, const struct principal *p);

#endif
