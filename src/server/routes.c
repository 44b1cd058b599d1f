/* The route table of hutch serve: every route the server answers, the key
 * it needs, and the handler. docs/openapi.yaml describes the same table;
 * tests/integration/test_openapi.py checks that the two agree. */
#include <stdio.h>
#include <string.h>

#include "serve.h"
#include "util.h"

enum access {
  PUBLIC, /* no key */
  TENANT, /* any valid key; acts as the key's tenant */
  ADMIN,  /* the admin key only */
};

struct route {
  enum http_method method;
  const char *pattern; /* "{name}" matches one path segment */
  enum access access;
  const char *action;  /* as written in the audit log */
  void (*handler)(struct http_conn *c, const struct principal *p);
  bool stream_body;    /* dispatched after the headers; takes the body as it comes */
};

static void healthz(struct http_conn *c, const struct principal *p) {
  (void)p;
  http_respond(c, 200, "application/json", "{\"status\":\"ok\"}\n", 16, NULL);
}

static const struct route routes[] = {
    {HTTP_GET, "/healthz", PUBLIC, NULL, healthz},
    {HTTP_GET, "/metrics", PUBLIC, NULL, api_metrics},
    {HTTP_POST, "/v1/keys", ADMIN, "key.create", api_keys_create},
    {HTTP_DELETE, "/v1/keys/{id}", ADMIN, "key.delete", api_keys_delete},
    {HTTP_POST, "/v1/sandboxes", TENANT, "sandbox.create", api_sandboxes_create},
    {HTTP_GET, "/v1/sandboxes", TENANT, NULL, api_sandboxes_list},
    {HTTP_GET, "/v1/sandboxes/{id}", TENANT, NULL, api_sandboxes_get},
    {HTTP_DELETE, "/v1/sandboxes/{id}", TENANT, "sandbox.delete", api_sandboxes_delete},
    {HTTP_POST, "/v1/sandboxes/{id}/timeout", TENANT, "sandbox.timeout", api_sandboxes_timeout},
    {HTTP_POST, "/v1/sandboxes/{id}/exec", TENANT, "sandbox.exec", api_exec},
    {HTTP_GET, "/v1/sandboxes/{id}/processes", TENANT, NULL, api_procs_list},
    {HTTP_GET, "/v1/sandboxes/{id}/processes/{pid}/output", TENANT, NULL, api_procs_output},
    {HTTP_POST, "/v1/sandboxes/{id}/processes/{pid}/signal", TENANT, "process.signal",
     api_procs_signal},
    {HTTP_POST, "/v1/sandboxes/{id}/processes/{pid}/stdin", TENANT, "process.stdin",
     api_procs_stdin},
    {HTTP_DELETE, "/v1/sandboxes/{id}/processes/{pid}", TENANT, "process.kill", api_procs_kill},
    {HTTP_GET, "/v1/sandboxes/{id}/exec/{pid}/ws", TENANT, "process.attach", api_procs_ws},
    {HTTP_POST, "/v1/sandboxes/{id}/code", TENANT, "sandbox.code", api_code},
    {HTTP_POST, "/v1/sandboxes/{id}/contexts", TENANT, "context.create", api_contexts_create},
    {HTTP_GET, "/v1/sandboxes/{id}/contexts", TENANT, NULL, api_contexts_list},
    {HTTP_DELETE, "/v1/sandboxes/{id}/contexts/{cid}", TENANT, "context.delete",
     api_contexts_delete},
    {HTTP_POST, "/v1/sandboxes/{id}/contexts/{cid}/restart", TENANT, "context.restart",
     api_contexts_restart},
    {HTTP_POST, "/v1/sandboxes/{id}/contexts/{cid}/interrupt", TENANT, "context.interrupt",
     api_contexts_interrupt},
    {HTTP_PUT, "/v1/sandboxes/{id}/files", TENANT, "file.write", api_files_write, true},
    {HTTP_GET, "/v1/sandboxes/{id}/files", TENANT, NULL, api_files_read},
    {HTTP_DELETE, "/v1/sandboxes/{id}/files", TENANT, "file.remove", api_files_delete},
    {HTTP_GET, "/v1/sandboxes/{id}/files/list", TENANT, NULL, api_files_list},
    {HTTP_GET, "/v1/sandboxes/{id}/files/stat", TENANT, NULL, api_files_stat},
    {HTTP_POST, "/v1/sandboxes/{id}/files/mkdir", TENANT, "file.mkdir", api_files_mkdir},
    {HTTP_POST, "/v1/sandboxes/{id}/files/move", TENANT, "file.move", api_files_move},
    {HTTP_GET, "/v1/sandboxes/{id}/files/watch", TENANT, NULL, api_files_watch},
};

/* Match path against pattern; fills req->params. Both start with '/'. */
static bool match(const char *pattern, const char *path, struct http_req *req) {
  req->nparams = 0;
  const char *p = pattern;
  const char *s = path;
  while (*p && *s) {
    if (*p != '/' || *s != '/')
      return false;
    p++, s++;
    const char *pend = strchrnul(p, '/');
    const char *send = strchrnul(s, '/');
    if (*p == '{') {
      if (send == s || req->nparams == HTTP_MAX_PARAMS)
        return false;
      req->params[req->nparams++] = s;
    } else if ((size_t)(pend - p) != (size_t)(send - s) || memcmp(p, s, (size_t)(pend - p)) != 0) {
      return false;
    }
    p = pend, s = send;
  }
  return *p == '\0' && *s == '\0';
}

static void cut_params(struct http_req *req) {
  for (size_t i = 0; i < req->nparams; i++) {
    char *end = strchr((char *)req->params[i], '/');
    if (end)
      *end = '\0';
  }
}

bool serve_streams_body(struct server *srv, const struct http_req *req) {
  (void)srv;
  struct http_req scratch = {0};
  for (size_t i = 0; i < ARRAY_SIZE(routes); i++)
    if (routes[i].stream_body && routes[i].method == req->method &&
        match(routes[i].pattern, req->path, &scratch))
      return true;
  return false;
}

void serve_dispatch(struct server *srv, struct http_conn *c) {
  struct http_req *req = &c->req;
  srv->metrics.requests++;
  pool_defer(srv);
  const struct route *found = NULL;
  bool path_known = false;
  for (size_t i = 0; i < ARRAY_SIZE(routes); i++) {
    if (!match(routes[i].pattern, req->path, req))
      continue;
    path_known = true;
    if (routes[i].method == req->method) {
      found = &routes[i];
      break;
    }
  }
  if (!found) {
    if (path_known)
      http_error(c, 405, "method_not_allowed", "%s is not allowed on %s",
                 http_method_str(req->method), req->path);
    else
      http_error(c, 404, "not_found", "no route %s", req->path);
    return;
  }
  /* The params point into a copy of the path, cut at the slashes. */
  req->pbuf = xstrdup(req->path);
  match(found->pattern, req->pbuf, req);
  cut_params(req);
  struct principal p = {0};
  if (found->access != PUBLIC) {
    if (!keys_authenticate(srv, req, &p)) {
      http_error(c, 401, "unauthorized",
                 "a valid API key is required (Authorization: Bearer KEY or X-API-Key: KEY)");
      return;
    }
    if (found->access == ADMIN && !p.admin) {
      http_error(c, 403, "forbidden", "only the admin key may do this");
      return;
    }
  }
  c->action = found->action;
  str_copy(c->tenant, sizeof c->tenant, p.tenant);
  found->handler(c, &p);
}

void serve_request_done(struct server *srv, struct http_conn *c) {
  int status = c->last_status;
  if (status >= 400 && status < 600)
    srv->metrics.errors_by_status[status]++;
  if (c->last_error)
    metrics_error_code(&srv->metrics, c->last_error);
  if (!c->action || !srv->audit) {
    c->sandbox[0] = '\0';
    return;
  }
  /* One JSON line per API action: when, who, what, on which sandbox, how
   * it ended and how long it took. Reads (GET) are not actions. */
  char when[32];
  iso8601(wall_ms(), when);
  double ms = (double)(now_ns() - c->req.started_ns) / 1e6;
  json_t *j = json_pack("{s:s,s:s,s:s,s:o,s:i,s:o,s:f}", "time", when, "tenant", c->tenant,
                        "action", c->action, "sandbox",
                        c->sandbox[0] ? json_string(c->sandbox) : json_null(), "status", status,
                        "error", c->last_error ? json_string(c->last_error) : json_null(),
                        "duration_ms", ms);
  if (j) {
    json_dumpf(j, srv->audit, SERVE_JSON_FLAGS);
    fputc('\n', srv->audit);
    fflush(srv->audit);
    json_decref(j);
  }
  c->action = NULL;
  c->sandbox[0] = '\0';
  c->tenant[0] = '\0';
}

void serve_print_routes(FILE *out) {
  for (size_t i = 0; i < ARRAY_SIZE(routes); i++)
    fprintf(out, "%s %s\n", http_method_str(routes[i].method), routes[i].pattern);
}
