/* E2B's /secrets (secrets.c); and the value of the tenant's secret name
 * (malloc'd; NULL: none), which network rules name as
 * ${e2b.secrets.NAME}. */
#ifndef HUTCH_E2B_SECRETS_H
#define HUTCH_E2B_SECRETS_H

struct server;
struct http_conn;
struct principal;

void e2b_secrets_list(struct http_conn *c, const struct principal *p);
void e2b_secrets_create(struct http_conn *c, const struct principal *p);
void e2b_secrets_get(struct http_conn *c, const struct principal *p);
void e2b_secrets_update(struct http_conn *c, const struct principal *p);
void e2b_secrets_delete(struct http_conn *c, const struct principal *p);
char *e2b_secret_value(struct server *srv, const char *tenant, const char *name);

#endif
