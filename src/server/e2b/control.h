/* E2B's REST control plane (control.c): the sandbox routes, and what the
 * other E2B modules share of it: a data-plane request's sandbox and user,
 * its paths, a sandbox as E2B lists it, and the host template's aliases. */
#ifndef HUTCH_E2B_CONTROL_H
#define HUTCH_E2B_CONTROL_H

#include <jansson.h>
#include <stdbool.h>

struct sbx;
struct http_conn;
struct principal;

/* The create metadata key that picks a sandbox's isolation tier. */
#define E2B_ISOLATION_KEY "hutch.isolation"

/* /sandboxes, /v2/sandboxes: route handlers (routes.c). */
void e2b_sandboxes_create(struct http_conn *c, const struct principal *p);
void e2b_sandboxes_get(struct http_conn *c, const struct principal *p);
void e2b_sandboxes_timeout(struct http_conn *c, const struct principal *p);
void e2b_sandboxes_pause(struct http_conn *c, const struct principal *p);
void e2b_sandboxes_connect(struct http_conn *c, const struct principal *p);
void e2b_sandboxes_refresh(struct http_conn *c, const struct principal *p);
void e2b_sandboxes_fork(struct http_conn *c, const struct principal *p);
void e2b_snapshots_create(struct http_conn *c, const struct principal *p);
/* A sandbox as E2B lists it (ListedSandbox). */
json_t *e2b_listed_json(const struct sbx *sb);
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
/* Whether name is one of E2B's template names that the host template
 * stands for when the store has none of that name. */
bool e2b_host_alias(const char *name);

#endif
