/* The route tables of hutch serve: every route the server answers, the key
 * it needs, and the handler. docs/openapi.yaml describes the native table
 * and docs/e2b.md the E2B-compatible ones; tests/integration/test_openapi.py
 * checks that each agrees with what the server serves.
 *
 * E2B clients reach a sandbox's own services (envd on port 49983, the code
 * interpreter on 49999) at one URL (E2B_SANDBOX_URL) and name the sandbox
 * and the port in the E2b-Sandbox-Id and E2b-Sandbox-Port headers: a
 * request with those is routed by the port's table and authenticated by
 * the sandbox's access token, not by an API key. */
#include "routes.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#include <openssl/crypto.h>

#include "util.h"
#include "api/console.h"
#include "api/contexts.h"
#include "api/events.h"
#include "api/exec.h"
#include "api/files.h"
#include "api/keys.h"
#include "api/lifecycle.h"
#include "api/metrics.h"
#include "api/network.h"
#include "api/ports.h"
#include "api/procs.h"
#include "api/sandboxes.h"
#include "api/snapshots.h"
#include "api/templates.h"
#include "api/usage.h"
#include "api/volumes.h"
#include "api/webhooks.h"
#include "api/ws.h"
#include "core/sandbox/audit.h"
#include "core/sandbox/fds.h"
#include "core/life/pool.h"
#include "core/sandbox/sbx.h"
#include "core/sandbox/tally.h"
#include "e2b/control.h"
#include "e2b/e2b.h"
#include "e2b/files.h"
#include "e2b/fs.h"
#include "e2b/interp.h"
#include "e2b/lists.h"
#include "e2b/network.h"
#include "e2b/observe.h"
#include "e2b/process.h"
#include "e2b/secrets.h"
#include "e2b/signing.h"
#include "e2b/templates.h"
#include "e2b/volumes.h"
#include "core/base/counters.h"
#include "http/errors.h"
#include "http/http.h"
#include "http/request.h"
#include "mcp/transport.h"

enum access {
  PUBLIC,      /* no key */
  TENANT,      /* any valid key; acts as the key's tenant */
  ADMIN,       /* the admin key only */
  SANDBOX,     /* the sandbox the headers name, with its access token */
  SANDBOX_ANY, /* the sandbox the headers name, without a token (health) */
  SIGNED,      /* the sandbox whose access token signed the URL (e2b/signing.c) */
};

struct route {
  enum http_method method;
  const char *pattern; /* "{name}" matches one path segment */
  enum access access;
  const char *action; /* as written in the audit log */
  void (*handler)(struct http_conn *c, const struct principal *p);
  bool stream_body;          /* dispatched after the headers; takes the body as it comes */
  enum http_dialect dialect; /* how its errors are written */
};

struct table {
  const char *name; /* for --routes */
  const struct route *routes;
  size_t n;
};

static void healthz(struct http_conn *c, const struct principal *p) {
  (void)p;
  static const char ok[] = "{\"status\":\"ok\",\"version\":\"" HUTCH_VERSION "\"}\n";
  http_respond(c, 200, "application/json", ok, sizeof ok - 1, NULL);
}

/* A sandbox's port (ports.c): any method, the rest of the path passed on
 * ({path} matches it whole, slashes and all, or nothing); the handler
 * checks the caller itself, as a port may be public. */
#define PORT(m) \
  { m, "/v1/sandboxes/{id}/ports/{port}/{path}", PUBLIC, NULL, api_ports_forward, true }
#define E2B_PORT(m) \
  { m, "/sandboxes/{id}/ports/{port}/{path}", PUBLIC, NULL, api_ports_forward, true, DIALECT_E2B }

static const struct route native[] = {
    {HTTP_GET, "/healthz", PUBLIC, NULL, healthz},
    {HTTP_GET, "/metrics", PUBLIC, NULL, api_metrics},
    /* The web console's files (api/console.c): a page, no key; it asks for one. */
    {HTTP_GET, "/ui", PUBLIC, NULL, api_console_file},
    {HTTP_GET, "/ui/{path}", PUBLIC, NULL, api_console_file},
    /* MCP (mcp/transport.c): its handlers check the key and the Origin. */
    {HTTP_POST, "/mcp", PUBLIC, NULL, mcp_transport_post},
    {HTTP_GET, "/mcp", PUBLIC, NULL, mcp_transport_get},
    {HTTP_DELETE, "/mcp", PUBLIC, NULL, mcp_transport_delete},
    {HTTP_POST, "/v1/keys", ADMIN, "key.create", api_keys_create},
    {HTTP_GET, "/v1/keys", ADMIN, NULL, api_keys_list},
    {HTTP_DELETE, "/v1/keys/{id}", ADMIN, "key.delete", api_keys_delete},
    {HTTP_POST, "/v1/sandboxes", TENANT, "sandbox.create", api_sandboxes_create},
    {HTTP_GET, "/v1/sandboxes", TENANT, NULL, api_sandboxes_list},
    /* before /v1/sandboxes/{id}, which would take "metrics" for an id */
    {HTTP_GET, "/v1/sandboxes/metrics", TENANT, NULL, api_sandboxes_metrics_all},
    {HTTP_GET, "/v1/sandboxes/{id}", TENANT, NULL, api_sandboxes_get},
    {HTTP_DELETE, "/v1/sandboxes/{id}", TENANT, "sandbox.delete", api_sandboxes_delete},
    {HTTP_POST, "/v1/sandboxes/{id}/timeout", TENANT, "sandbox.timeout", api_sandboxes_timeout},
    {HTTP_POST, "/v1/sandboxes/{id}/pause", TENANT, "sandbox.pause", api_sandboxes_pause},
    {HTTP_POST, "/v1/sandboxes/{id}/resume", TENANT, "sandbox.resume", api_sandboxes_resume},
    {HTTP_PATCH, "/v1/sandboxes/{id}/network", TENANT, "sandbox.network", api_sandboxes_network},
    PORT(HTTP_GET),
    PORT(HTTP_HEAD),
    PORT(HTTP_POST),
    PORT(HTTP_PUT),
    PORT(HTTP_PATCH),
    PORT(HTTP_DELETE),
    PORT(HTTP_OPTIONS),
    {HTTP_GET, "/v1/sandboxes/{id}/metrics", TENANT, NULL, api_sandboxes_metrics},
    {HTTP_GET, "/v1/usage", TENANT, NULL, api_usage},
    {HTTP_GET, "/v1/events", TENANT, NULL, api_events},
    {HTTP_POST, "/v1/webhooks", TENANT, "webhook.create", api_webhooks_create},
    {HTTP_GET, "/v1/webhooks", TENANT, NULL, api_webhooks_list},
    {HTTP_GET, "/v1/webhooks/{id}", TENANT, NULL, api_webhooks_get},
    {HTTP_DELETE, "/v1/webhooks/{id}", TENANT, "webhook.delete", api_webhooks_delete},
    {HTTP_POST, "/v1/sandboxes/{id}/snapshots", TENANT, "snapshot.create", api_snapshots_create},
    {HTTP_POST, "/v1/sandboxes/{id}/fork", TENANT, "sandbox.fork", api_sandboxes_fork},
    {HTTP_GET, "/v1/snapshots", TENANT, NULL, api_snapshots_list},
    {HTTP_GET, "/v1/snapshots/{id}", TENANT, NULL, api_snapshots_get},
    {HTTP_DELETE, "/v1/snapshots/{id}", TENANT, "snapshot.delete", api_snapshots_delete},
    {HTTP_POST, "/v1/volumes", TENANT, "volume.create", api_volumes_create},
    {HTTP_GET, "/v1/volumes", TENANT, NULL, api_volumes_list},
    {HTTP_GET, "/v1/volumes/{id}", TENANT, NULL, api_volumes_get},
    {HTTP_DELETE, "/v1/volumes/{id}", TENANT, "volume.delete", api_volumes_delete},
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
    {HTTP_POST, "/v1/sandboxes/{id}/contexts/{cid}/fork", TENANT, "context.fork",
     api_contexts_fork},
    {HTTP_PUT, "/v1/sandboxes/{id}/files", TENANT, "file.write", api_files_write, true},
    {HTTP_GET, "/v1/sandboxes/{id}/files", TENANT, NULL, api_files_read},
    {HTTP_DELETE, "/v1/sandboxes/{id}/files", TENANT, "file.remove", api_files_delete},
    {HTTP_GET, "/v1/sandboxes/{id}/files/list", TENANT, NULL, api_files_list},
    {HTTP_GET, "/v1/sandboxes/{id}/files/stat", TENANT, NULL, api_files_stat},
    {HTTP_POST, "/v1/sandboxes/{id}/files/mkdir", TENANT, "file.mkdir", api_files_mkdir},
    {HTTP_POST, "/v1/sandboxes/{id}/files/move", TENANT, "file.move", api_files_move},
    {HTTP_GET, "/v1/sandboxes/{id}/files/watch", TENANT, NULL, api_files_watch},
    {HTTP_GET, "/v1/templates", TENANT, NULL, api_templates_list},
    {HTTP_POST, "/v1/templates", TENANT, "template.create", api_templates_create},
    {HTTP_POST, "/v1/templates/import", TENANT, "template.import", api_templates_import, true},
    {HTTP_POST, "/v1/templates/contexts", TENANT, "template.context", api_templates_context, true},
    {HTTP_GET, "/v1/templates/jobs/{id}", TENANT, NULL, api_templates_job},
    {HTTP_DELETE, "/v1/templates/jobs/{id}", TENANT, "template.cancel", api_templates_job_cancel},
    {HTTP_GET, "/v1/templates/{name}", TENANT, NULL, api_templates_get},
    {HTTP_DELETE, "/v1/templates/{name}", TENANT, "template.delete", api_templates_delete},
};

/* E2B's REST API (its spec/openapi.yml), by X-API-Key as the native one. */
#define VOLUME(m, what, action, fn, stream) \
  { m, "/volumecontent/{id}/" what, PUBLIC, action, fn, stream, DIALECT_CONNECT }
static const struct route e2b_api[] = {
    {HTTP_POST, "/sandboxes", TENANT, "sandbox.create", e2b_sandboxes_create, false, DIALECT_E2B},
    {HTTP_POST, "/v2/sandboxes", TENANT, "sandbox.create", e2b_sandboxes_create, false,
     DIALECT_E2B},
    {HTTP_GET, "/sandboxes", TENANT, NULL, e2b_sandboxes_list, false, DIALECT_E2B},
    {HTTP_GET, "/v2/sandboxes", TENANT, NULL, e2b_sandboxes_list, false, DIALECT_E2B},
    /* before /sandboxes/{id}, which would take "metrics" for an id */
    {HTTP_GET, "/sandboxes/metrics", TENANT, NULL, e2b_sandboxes_metrics_many, false, DIALECT_E2B},
    {HTTP_GET, "/sandboxes/{id}", TENANT, NULL, e2b_sandboxes_get, false, DIALECT_E2B},
    {HTTP_DELETE, "/sandboxes/{id}", TENANT, "sandbox.delete", api_sandboxes_delete, false,
     DIALECT_E2B},
    {HTTP_POST, "/sandboxes/{id}/timeout", TENANT, "sandbox.timeout", e2b_sandboxes_timeout, false,
     DIALECT_E2B},
    {HTTP_POST, "/sandboxes/{id}/pause", TENANT, "sandbox.pause", e2b_sandboxes_pause, false,
     DIALECT_E2B},
    {HTTP_POST, "/sandboxes/{id}/connect", TENANT, "sandbox.connect", e2b_sandboxes_connect, false,
     DIALECT_E2B},
    {HTTP_POST, "/v2/sandboxes/{id}/connect", TENANT, "sandbox.connect", e2b_sandboxes_connect,
     false, DIALECT_E2B},
    {HTTP_GET, "/sandboxes/{id}/metrics", TENANT, NULL, e2b_sandboxes_metrics, false, DIALECT_E2B},
    {HTTP_POST, "/sandboxes/{id}/refreshes", TENANT, "sandbox.refresh", e2b_sandboxes_refresh,
     false, DIALECT_E2B},
    {HTTP_GET, "/sandboxes/{id}/logs", TENANT, NULL, e2b_sandboxes_logs_v1, false, DIALECT_E2B},
    {HTTP_GET, "/v2/sandboxes/{id}/logs", TENANT, NULL, e2b_sandboxes_logs, false, DIALECT_E2B},
    {HTTP_GET, "/teams/{id}/metrics", TENANT, NULL, e2b_team_metrics, false, DIALECT_E2B},
    E2B_PORT(HTTP_GET),
    E2B_PORT(HTTP_HEAD),
    E2B_PORT(HTTP_POST),
    E2B_PORT(HTTP_PUT),
    E2B_PORT(HTTP_PATCH),
    E2B_PORT(HTTP_DELETE),
    E2B_PORT(HTTP_OPTIONS),
    {HTTP_PUT, "/sandboxes/{id}/network", TENANT, "sandbox.network", e2b_sandboxes_network, false,
     DIALECT_E2B},
    {HTTP_POST, "/sandboxes/{id}/fork", TENANT, "sandbox.fork", e2b_sandboxes_fork, false,
     DIALECT_E2B},
    {HTTP_POST, "/sandboxes/{id}/snapshots", TENANT, "snapshot.create", e2b_snapshots_create, false,
     DIALECT_E2B},
    {HTTP_GET, "/snapshots", TENANT, NULL, e2b_snapshots_list, false, DIALECT_E2B},
    {HTTP_POST, "/v3/templates", TENANT, "template.create", e2b_templates_request, false,
     DIALECT_E2B},
    {HTTP_GET, "/templates", TENANT, NULL, e2b_templates_list, false, DIALECT_E2B},
    {HTTP_GET, "/templates/aliases/{alias}", TENANT, NULL, e2b_templates_alias, false, DIALECT_E2B},
    {HTTP_POST, "/templates/tags", TENANT, "template.tag", e2b_templates_tags_assign, false,
     DIALECT_E2B},
    {HTTP_DELETE, "/templates/tags", TENANT, "template.untag", e2b_templates_tags_remove, false,
     DIALECT_E2B},
    {HTTP_PUT, "/templates/uploads/{token}", PUBLIC, "template.upload", e2b_templates_upload, true,
     DIALECT_E2B},
    {HTTP_GET, "/templates/{id}/tags", TENANT, NULL, e2b_templates_tags, false, DIALECT_E2B},
    {HTTP_GET, "/templates/{id}/files/{hash}", TENANT, NULL, e2b_templates_file, false,
     DIALECT_E2B},
    {HTTP_POST, "/v2/templates/{id}/builds/{build}", TENANT, "template.build", e2b_templates_build,
     false, DIALECT_E2B},
    {HTTP_GET, "/templates/{id}/builds/{build}/status", TENANT, NULL, e2b_templates_status, false,
     DIALECT_E2B},
    {HTTP_POST, "/volumes", TENANT, "volume.create", e2b_volumes_create, false, DIALECT_E2B},
    {HTTP_GET, "/volumes", TENANT, NULL, e2b_volumes_list, false, DIALECT_E2B},
    {HTTP_GET, "/volumes/{id}", TENANT, NULL, e2b_volumes_get, false, DIALECT_E2B},
    {HTTP_DELETE, "/volumes/{id}", TENANT, "volume.delete", e2b_volumes_delete, false, DIALECT_E2B},
    /* A volume's content: its token (volworker.h) is the key. */
    VOLUME(HTTP_GET, "path", NULL, e2b_volume_content, false),
    VOLUME(HTTP_PATCH, "path", "volume.chmod", e2b_volume_chmod, false),
    VOLUME(HTTP_DELETE, "path", "volume.remove", e2b_volume_content, false),
    VOLUME(HTTP_GET, "dir", NULL, e2b_volume_content, false),
    VOLUME(HTTP_POST, "dir", "volume.mkdir", e2b_volume_content, false),
    VOLUME(HTTP_GET, "file", NULL, e2b_volume_content, false),
    VOLUME(HTTP_PUT, "file", "volume.write", e2b_volume_content, true),
    {HTTP_DELETE, "/templates/{id}", TENANT, "template.delete", e2b_templates_delete, false,
     DIALECT_E2B},
    /* envd's signed URLs as the SDKs make them with E2B_SANDBOX_URL: the
     * signature names the sandbox. */
    {HTTP_GET, "/files", SIGNED, NULL, e2b_files_read, false, DIALECT_E2B},
    {HTTP_POST, "/files", SIGNED, "file.write", e2b_files_write, true, DIALECT_E2B},
    {HTTP_GET, "/secrets", TENANT, NULL, e2b_secrets_list, false, DIALECT_E2B},
    {HTTP_POST, "/secrets", TENANT, "secret.create", e2b_secrets_create, false, DIALECT_E2B},
    {HTTP_GET, "/secrets/{id}", TENANT, NULL, e2b_secrets_get, false, DIALECT_E2B},
    {HTTP_POST, "/secrets/{id}", TENANT, "secret.update", e2b_secrets_update, false, DIALECT_E2B},
    {HTTP_DELETE, "/secrets/{id}", TENANT, "secret.delete", e2b_secrets_delete, false, DIALECT_E2B},
};

/* envd: Connect RPC (unary and server streams) and its HTTP file routes. */
#define RPC(name, handler, action) \
  { HTTP_POST, name, SANDBOX, action, handler, false, DIALECT_CONNECT }
#define STREAM(name, handler, action) \
  { HTTP_POST, name, SANDBOX, action, handler, false, DIALECT_CONNECT_STREAM }
static const struct route e2b_envd[] = {
    {HTTP_GET, "/health", SANDBOX_ANY, NULL, e2b_envd_health, false, DIALECT_E2B},
    {HTTP_GET, "/files", SANDBOX, NULL, e2b_files_read, false, DIALECT_E2B},
    {HTTP_POST, "/files", SANDBOX, "file.write", e2b_files_write, true, DIALECT_E2B},
    STREAM("/process.Process/Start", e2b_process_start, "sandbox.exec"),
    STREAM("/process.Process/Connect", e2b_process_connect, "process.attach"),
    RPC("/process.Process/List", e2b_process_list, NULL),
    RPC("/process.Process/SendInput", e2b_process_input, "process.stdin"),
    RPC("/process.Process/CloseStdin", e2b_process_close_stdin, "process.stdin"),
    RPC("/process.Process/SendSignal", e2b_process_signal, "process.signal"),
    RPC("/process.Process/Update", e2b_process_update, "process.resize"),
    RPC("/filesystem.Filesystem/Stat", e2b_fs_stat, NULL),
    RPC("/filesystem.Filesystem/ListDir", e2b_fs_list, NULL),
    RPC("/filesystem.Filesystem/MakeDir", e2b_fs_mkdir, "file.mkdir"),
    RPC("/filesystem.Filesystem/Move", e2b_fs_move, "file.move"),
    RPC("/filesystem.Filesystem/Remove", e2b_fs_remove, "file.remove"),
    STREAM("/filesystem.Filesystem/WatchDir", e2b_fs_watch, NULL),
    RPC("/filesystem.Filesystem/CreateWatcher", e2b_fs_watcher_create, NULL),
    RPC("/filesystem.Filesystem/GetWatcherEvents", e2b_fs_watcher_events, NULL),
    RPC("/filesystem.Filesystem/RemoveWatcher", e2b_fs_watcher_remove, NULL),
};
#undef RPC
#undef STREAM
#undef PORT
#undef E2B_PORT

/* The code interpreter (E2B's code-interpreter template server). */
static const struct route e2b_interp[] = {
    {HTTP_GET, "/health", SANDBOX_ANY, NULL, e2b_interp_health, false, DIALECT_TEXT},
    {HTTP_POST, "/execute", SANDBOX, "sandbox.code", e2b_execute, false, DIALECT_TEXT},
    {HTTP_POST, "/contexts", SANDBOX, "context.create", e2b_contexts_create, false, DIALECT_TEXT},
    {HTTP_GET, "/contexts", SANDBOX, NULL, e2b_contexts_list, false, DIALECT_TEXT},
    {HTTP_DELETE, "/contexts/{cid}", SANDBOX, "context.delete", e2b_contexts_delete, false,
     DIALECT_TEXT},
    {HTTP_POST, "/contexts/{cid}/restart", SANDBOX, "context.restart", e2b_contexts_restart, false,
     DIALECT_TEXT},
};

#define TABLE(name, t) \
  { name, t, ARRAY_SIZE(t) }
static const struct table tables[] = {
    TABLE("native", native),
    TABLE("e2b", e2b_api),
    TABLE("envd", e2b_envd),
    TABLE("interpreter", e2b_interp),
};
#undef TABLE

/* Match path against pattern; fills req->params. Both start with '/'. */
static bool match(const char *pattern, const char *path, struct http_req *req) {
  req->nparams = 0;
  const char *p = pattern;
  const char *s = path;
  while (*p && *s) {
    if (strcmp(p, "/{path}") == 0)
      return true; /* the rest of the path, whatever it holds */
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
  return (*p == '\0' || strcmp(p, "/{path}") == 0) && *s == '\0';
}

static void cut_params(struct http_req *req) {
  for (size_t i = 0; i < req->nparams; i++) {
    char *end = strchr((char *)req->params[i], '/');
    if (end)
      *end = '\0';
  }
}

/* The table a request is for: a sandbox port's by the E2B headers, else
 * the API's (native and E2B's REST API share one path space). NULL: the
 * headers name a port nothing serves. */
static const struct table *table_for(const struct http_req *req, size_t *ntables) {
  const char *port = http_header(req, "E2b-Sandbox-Port");
  *ntables = 1;
  if (!http_header(req, "E2b-Sandbox-Id")) {
    *ntables = 2; /* native and E2B's REST API */
    return &tables[0];
  }
  if (port && strcmp(port, E2B_ENVD_PORT) == 0)
    return &tables[2];
  if (port && strcmp(port, E2B_INTERPRETER_PORT) == 0)
    return &tables[3];
  return NULL;
}

static const struct route *find(const struct http_req *req, bool *path_known) {
  size_t n;
  const struct table *t = table_for(req, &n);
  struct http_req scratch = *req;
  *path_known = false;
  for (size_t k = 0; t && k < n; k++)
    for (size_t i = 0; i < t[k].n; i++) {
      if (!match(t[k].routes[i].pattern, req->path, &scratch))
        continue;
      *path_known = true;
      if (t[k].routes[i].method == req->method)
        return &t[k].routes[i];
    }
  return NULL;
}

/* The dialect of req's errors: its route's; a path no route has outside
 * the native API's is E2B's (its SDKs read {"code", "message"}, and show
 * another shape as "[object Object]"), as is a port reached by host. */
static enum http_dialect serve_dialect(struct server *srv, const struct http_req *req) {
  bool known;
  size_t n;
  const struct route *r = find(req, &known);
  if (api_ports_routed_by_host(srv, req))
    return DIALECT_E2B;
  if (r)
    return r->dialect;
  if (table_for(req, &n) == &tables[0] && strncmp(req->path, "/v1/", 4) != 0 &&
      strcmp(req->path, "/healthz") != 0 && strcmp(req->path, "/metrics") != 0)
    return DIALECT_E2B;
  return DIALECT_HUTCH;
}

bool routes_streams_body(struct server *srv, const struct http_req *req) {
  if (api_ports_routed_by_host(srv, req))
    return true;
  bool known;
  const struct route *r = find(req, &known);
  return r && r->stream_body;
}

static bool token_is(const char *given, const char *want) {
  return strlen(given) == SERVE_TOKEN_LEN && CRYPTO_memcmp(given, want, SERVE_TOKEN_LEN) == 0;
}

/* The sandbox a data-plane request names, checked: its access token,
 * compared in constant time. Answers (502 for a sandbox that is not
 * there, as E2B's proxy does, 401 for a wrong token) and returns NULL
 * otherwise. */
static struct sbx *sandbox_of(struct http_conn *c, enum access access) {
  const char *id = http_header(&c->req, "E2b-Sandbox-Id");
  struct sbx *sb = sbx_find(c->srv, id);
  if (!sb) {
    api_ports_sandbox_missing(c, id ? id : "");
    return NULL;
  }
  if (access == SANDBOX_ANY)
    return sb;

  /* envd wants its access token; the code interpreter, a port of the
   * sandbox's as any other, takes the traffic token too (E2B's SDKs send
   * only that for contexts). */
  const char *tok = http_header(&c->req, "X-Access-Token");
  const char *traffic = http_header(&c->req, "E2B-Traffic-Access-Token");
  const char *port = http_header(&c->req, "E2b-Sandbox-Port");
  bool interpreter = port && strcmp(port, E2B_INTERPRETER_PORT) == 0;
  bool ok;
  if (tok)
    ok = token_is(tok, sb->token);
  else
    ok = traffic &&
         (token_is(traffic, sb->token) || (interpreter && token_is(traffic, sb->traffic_token)));

  /* envd's /files also take a URL signed with the token instead. */
  int sig = 0;
  if (!ok && !tok && !traffic && !interpreter && strcmp(c->req.path, "/files") == 0)
    sig = e2b_signature_check(c, sb);
  if (sig < 0)
    return NULL;
  if (!ok && !sig) {
    http_error(c, HUTCH_ERR_UNAUTHENTICATED, "unauthorized",
               "the sandbox's access token is required (X-Access-Token: envdAccessToken)");
    return NULL;
  }
  /* Traffic to a paused sandbox resumes it, if it was made so (E2B's
   * autoResume); else 409. */
  return api_sbx_wake(c, sb) ? sb : NULL;
}

/* No route for the request: why, in the dialect its path's API speaks. */
static void no_route(struct server *srv, struct http_conn *c, bool path_known) {
  const struct http_req *req = &c->req;
  size_t n;
  c->dialect = serve_dialect(srv, req);
  if (!table_for(req, &n))
    http_error(c, HUTCH_ERR_UPSTREAM, "port_not_served",
               "nothing serves port %.16s of a sandbox here",
               http_header(req, "E2b-Sandbox-Port") ? http_header(req, "E2b-Sandbox-Port") : "");
  else if (path_known)
    http_error(c, HUTCH_ERR_METHOD, "method_not_allowed", "%s is not allowed on %s",
               http_method_str(req->method), req->path);
  else
    http_error(c, HUTCH_ERR_NOT_FOUND, "not_found", "no route %s", req->path);
}

/* A data-plane request (the sandbox's token, or a URL signed with it):
 * its sandbox's tenant into p, and the params as a native route's;
 * false after an error answer. */
static bool sandbox_route(struct http_conn *c, const struct route *found, struct principal *p) {
  struct http_req *req = &c->req;
  struct sbx *sb = found->access == SIGNED ? e2b_signed_sandbox(c) : sandbox_of(c, found->access);
  if (!sb)
    return false;

  /* The handlers find the sandbox as a native route's: params[0] is its
   * id (kept after the path in pbuf), the route's own follow. */
  size_t plen = strlen(req->path);
  req->pbuf = xmalloc(plen + 1 + sizeof sb->id);
  memcpy(req->pbuf, req->path, plen + 1);
  memcpy(req->pbuf + plen + 1, sb->id, sizeof sb->id);
  match(found->pattern, req->pbuf, req);
  cut_params(req);
  memmove(req->params + 1, req->params, req->nparams * sizeof *req->params);
  req->params[0] = req->pbuf + plen + 1;
  req->nparams++;

  str_copy(p->tenant, sizeof p->tenant, sb->tenant);
  return true;
}

/* A control-plane request: its params, and the caller's API key into p
 * (unless the route is public), an admin's where the route wants one;
 * false after an error answer. */
static bool key_route(struct server *srv, struct http_conn *c, const struct route *found,
                      struct principal *p) {
  struct http_req *req = &c->req;
  /* The params point into a copy of the path, cut at the slashes. */
  req->pbuf = xstrdup(req->path);
  match(found->pattern, req->pbuf, req);
  cut_params(req);

  /* The key as a WebSocket subprotocol: the terminal's route alone. */
  int (*authenticate)(struct server *, const struct http_req *, struct principal *) =
      found->handler == api_procs_ws ? api_keys_authenticate_ws : api_keys_authenticate;
  if (found->access != PUBLIC && !authenticate(srv, req, p)) {
    http_error(c, HUTCH_ERR_UNAUTHENTICATED, "unauthorized",
               "a valid API key is required (Authorization: Bearer KEY or X-API-Key: KEY)");
    return false;
  }
  if (found->access == ADMIN && !p->admin) {
    http_error(c, HUTCH_ERR_FORBIDDEN, "forbidden", "only the admin key may do this");
    return false;
  }
  return true;
}

void routes_dispatch(struct server *srv, struct http_conn *c) {
  struct http_req *req = &c->req;
  srv->metrics.requests++;
  pool_defer(srv);
  if (api_ports_routed_by_host(srv, req)) { /* {port}-{id}.DOMAIN: a sandbox's port */
    api_ports_forward(c, NULL);
    return;
  }

  bool path_known;
  const struct route *found = find(req, &path_known);
  if (!found) {
    no_route(srv, c, path_known);
    return;
  }
  c->dialect = found->dialect;

  /* What a handler reads of the request is text (a port's route relays
   * the rest untouched: a browser's cookie is the service's business). */
  const char *code = NULL;
  const char *why = found->handler == api_ports_forward ? NULL : http_request_text(req, &code);
  if (why) {
    http_error(c, HUTCH_ERR_INVALID, code, "%s", why);
    return;
  }

  struct principal p = {0};
  bool data_plane =
      found->access == SANDBOX || found->access == SANDBOX_ANY || found->access == SIGNED;
  bool ok = data_plane ? sandbox_route(c, found, &p) : key_route(srv, c, found, &p);
  if (!ok)
    return;
  c->action = found->action;

  /* A tenant's open streams and WebSockets hold descriptors past the
   * request: its share of them is bounded (fds.c), the admin's is not. */
  struct hutch_err err = {0};
  if (!p.admin && fds_check(srv, p.tenant, NULL, 1, &err) < 0) {
    http_fail(c, &err);
    return;
  }
  str_copy(c->tenant, sizeof c->tenant, p.tenant);
  found->handler(c, &p);
}

void routes_request_done(struct server *srv, struct http_conn *c) {
  int status = c->last_status;
  if (status >= 400 && status < 600)
    srv->metrics.errors_by_status[status]++;
  if (c->last_error)
    counters_error_code(&srv->metrics, c->last_error);
  if (!c->action || !srv->audit) {
    c->sandbox[0] = '\0';
    return;
  }
  /* One JSON line per API action: when, who, what, on which sandbox, how
   * it ended and how long it took. Reads (GET) are not actions. */
  double ms = (double)(now_ns() - c->req.started_ns) / 1e6;
  audit_record(srv,
               json_pack("{s:s,s:s,s:o,s:i,s:o,s:f}", "tenant", c->tenant, "action", c->action,
                         "sandbox", c->sandbox[0] ? json_string(c->sandbox) : json_null(), "status",
                         status, "error", c->last_error ? json_string(c->last_error) : json_null(),
                         "duration_ms", ms));
  c->action = NULL;
  c->sandbox[0] = '\0';
  c->tenant[0] = '\0';
}

int routes_print(FILE *out, const char *table) {
  for (size_t k = 0; k < ARRAY_SIZE(tables); k++) {
    if (strcmp(tables[k].name, table) != 0)
      continue;
    for (size_t i = 0; i < tables[k].n; i++)
      fprintf(out, "%s %s\n", http_method_str(tables[k].routes[i].method),
              tables[k].routes[i].pattern);
    return 0;
  }
  return -1;
}

static bool room(const struct server *srv) {
  return fds_server_used(srv) <= fds_pool(srv);
}

static void held(struct server *srv, const char *tenant, bool on) {
  tally_held(srv, tenant, on);
}

const struct http_handlers routes_http = {
    .dispatch = routes_dispatch,
    .streams_body = routes_streams_body,
    .dialect = serve_dialect,
    .done = routes_request_done,
    .room = room,
    .held = held,
};

const struct serve_fronts routes_fronts = {
    .sandbox_ending = api_ports_close_all,
    .sandbox_freed = e2b_watches_free,
    .sandbox_sweep = api_ports_sweep,
};
