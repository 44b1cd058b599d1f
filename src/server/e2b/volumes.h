/* E2B's volumes and their content (volumes.c). */
#ifndef HUTCH_E2B_VOLUMES_H
#define HUTCH_E2B_VOLUMES_H

struct http_conn;
struct principal;

/* Route handlers (routes.c). */
void e2b_volumes_create(struct http_conn *c, const struct principal *p);
void e2b_volumes_list(struct http_conn *c, const struct principal *p);
void e2b_volumes_get(struct http_conn *c, const struct principal *p);
void e2b_volumes_delete(struct http_conn *c, const struct principal *p);
void e2b_volume_content(struct http_conn *c, const struct principal *p);
void e2b_volume_chmod(struct http_conn *c, const struct principal *p);

#endif
