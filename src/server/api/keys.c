/* POST /v1/keys, GET /v1/keys and DELETE /v1/keys/{id} (the admin's), and the caller's
 * key read from a request's headers, on core/keys.c. */
#include "api/keys.h"

#include <string.h>
#include <strings.h>

#include "core/tenancy/keys.h"
#include "core/base/server.h"
#include "http/body.h"
#include "http/errors.h"
#include "http/http.h"
#include "http/request.h"

#define WS_KEY_PROTOCOL "hutch.key." /* the key offered as a WebSocket subprotocol */
#define WS_KEY_MAX 128

/* A browser's WebSocket can set no header but Sec-WebSocket-Protocol, so
 * the web console offers its key as the subprotocol "hutch.key.KEY" beside
 * "hutch.v1" (api/ws.c answers with hutch.v1 alone: the key is never sent
 * back). It is taken only from a WebSocket handshake, where a page of
 * another site cannot put it without knowing it; never from a URL (which
 * ends in logs and histories) nor a cookie (which a browser sends for any
 * site that makes it ask: CSRF). The copy lands in buf. */
static const char *ws_key(const struct http_req *req, char buf[WS_KEY_MAX]) {
  const char *upgrade = http_header(req, "Upgrade");
  const char *offered = http_header(req, "Sec-WebSocket-Protocol");
  if (!upgrade || strcasecmp(upgrade, "websocket") != 0 || !offered)
    return NULL;
  for (const char *s = offered; *s;) {
    s += strspn(s, " \t,");
    size_t n = strcspn(s, " \t,");
    size_t k = sizeof WS_KEY_PROTOCOL - 1;
    if (n > k && n - k < WS_KEY_MAX && strncmp(s, WS_KEY_PROTOCOL, k) == 0) {
      memcpy(buf, s + k, n - k);
      buf[n - k] = '\0';
      return buf;
    }
    s += n;
  }
  return NULL;
}

int api_keys_authenticate(struct server *srv, const struct http_req *req, struct principal *p) {
  return keys_check(srv, http_header(req, "X-API-Key"), http_header(req, "Authorization"), p);
}

/* The subprotocol's key is the terminal's WebSocket's alone (routes.c):
 * anywhere else it would widen what a key in that header opens, and a
 * port's route passes the header on to the sandbox's service (ports.c
 * takes such a key off it). */
int api_keys_authenticate_ws(struct server *srv, const struct http_req *req, struct principal *p) {
  const char *key = http_header(req, "X-API-Key"), *auth = http_header(req, "Authorization");
  char buf[WS_KEY_MAX];
  if (!key && !auth)
    key = ws_key(req, buf);
  return keys_check(srv, key, auth, p);
}

bool api_keys_ws_protocol(const char *token, size_t n) {
  return n >= sizeof WS_KEY_PROTOCOL - 1 &&
         strncasecmp(token, WS_KEY_PROTOCOL, sizeof WS_KEY_PROTOCOL - 1) == 0;
}

/* A key request's {tenant, max_sandboxes, max_memory_mb, max_disk_mb}
 * into r (a limit not given stays as it was): 0, or -1 after a 400. */
static int key_fields(struct http_conn *c, json_t *o, struct key_request *r) {
  static const char *const known[] = {"tenant", "max_sandboxes", "max_memory_mb", "max_disk_mb",
                                      NULL};
  uint64_t max_sbx = 0, max_mem = 0, max_disk = 0;
  if (http_body_only(c, o, known) < 0)
    return -1;
  if (http_body_string(c, o, "tenant", SERVE_TENANT_LEN, &r->tenant) < 0)
    return -1;
  int has_sbx = http_body_uint(c, o, "max_sandboxes", 0, 100000, &max_sbx);
  if (has_sbx < 0)
    return -1;
  int has_mem = http_body_uint(c, o, "max_memory_mb", 0, 1ull << 30, &max_mem);
  if (has_mem < 0)
    return -1;
  /* The bound of --tenant-disk-mb: 1 EiB, which << 20 cannot overflow. */
  int has_disk = http_body_uint(c, o, "max_disk_mb", 0, 1ull << 40, &max_disk);
  if (has_disk < 0)
    return -1;

  if (has_sbx)
    r->max_sandboxes = (int64_t)max_sbx;
  if (has_mem)
    r->max_memory_mb = (int64_t)max_mem;
  if (has_disk)
    r->max_disk_mb = (int64_t)max_disk;
  return 0;
}

void api_keys_create(struct http_conn *c, const struct principal *p) {
  (void)p;
  json_t *o = http_body_object(c);
  if (!o)
    return;
  struct key_request r = {.max_sandboxes = -1, .max_memory_mb = -1, .max_disk_mb = -1};
  if (key_fields(c, o, &r) < 0) {
    json_decref(o);
    return;
  }

  struct key_made made;
  struct hutch_err err = {0};
  if (keys_create(c->srv, &r, &made, &err) < 0)
    http_fail(c, &err);
  else
    http_json(c, 201,
              json_pack("{s:s,s:s,s:s}", "id", made.id, "tenant", r.tenant, "key", made.key));
  json_decref(o);
}

void api_keys_delete(struct http_conn *c, const struct principal *p) {
  (void)p;
  struct hutch_err err = {0};
  if (keys_delete(c->srv, c->req.params[0], &err) < 0)
    http_fail(c, &err);
  else
    http_respond(c, 204, "application/json", "", 0, NULL);
}

/* The route is the admin's only (routes.c): a tenant's key must not
 * learn of other tenants. No secret is listed: the store keeps hashes. */
void api_keys_list(struct http_conn *c, const struct principal *p) {
  (void)p;
  struct hutch_err err = {0};
  json_t *keys = keys_list(c->srv, &err);
  if (!keys)
    http_fail(c, &err);
  else
    http_json(c, 200, json_pack("{s:o}", "keys", keys));
}
