/* hutch create: a sandbox from every option POST /v1/sandboxes takes;
 * prints its ID, or with --json the API's object. */
#include <stdlib.h>
#include <string.h>

#include "ctl.h"
#include "util.h"

enum {
  OPT_CPUS = 256,
  OPT_PIDS,
  OPT_DISK,
  OPT_TIMEOUT,
  OPT_ON_TIMEOUT,
  OPT_NO_AUTO_RESUME,
  OPT_ISOLATION,
  OPT_ALLOW,
  OPT_DENY,
  OPT_PUBLIC_PORT,
  OPT_PUBLIC,
  OPT_SECRET,
  OPT_JSON,
};

static const struct ctl_opt opts[] = {
    {'m', "memory", "MB", "memory limit (default 1024)"},
    {OPT_CPUS, "cpus", "N", "CPU share, as 0.5 or 2 (default: no limit)"},
    {OPT_PIDS, "pids", "N", "process limit (default 512)"},
    {OPT_DISK, "disk", "MB", "size of its writable layer (default 1024)"},
    {OPT_TIMEOUT, "timeout", "S", "seconds to live (default 300)"},
    {OPT_ON_TIMEOUT, "on-timeout", "WHAT", "kill (default) or pause it when the time is up"},
    {OPT_NO_AUTO_RESUME, "no-auto-resume", NULL, "a request while paused fails, not resumes it"},
    {OPT_ISOLATION, "isolation", "TIER", "ns or gvisor (docs/isolation.md)"},
    {'e', "env", "K=V", "an environment variable of its commands; repeatable"},
    {'l', "metadata", "K=V", "a metadata entry (ps --filter metadata.K=V); repeatable"},
    {'v', "volume", "NAME:PATH[:ro]", "mount a volume of yours; repeatable"},
    {OPT_ALLOW, "allow", "HOST", "let the egress proxy reach HOST (pypi.org, *.github.com, *)"},
    {OPT_DENY, "deny", "HOST", "what --allow '*' still keeps out; repeatable"},
    {OPT_PUBLIC_PORT, "public-port", "PORT", "a port reached without a credential; repeatable"},
    {OPT_PUBLIC, "public", NULL, "every port reached without a credential"},
    {OPT_SECRET, "secret", "HOST:HEADER=VALUE", "a header the proxy adds for HOST (https only)"},
    {OPT_JSON, "json", NULL, "print the API's sandbox object"},
    {0},
};

/* K=V into the object o[field]. */
static int add_pair(struct ctl *ctl, json_t *body, const char *field, const char *kv) {
  const char *eq = strchr(kv, '=');
  if (!eq || eq == kv)
    return ctl_fail(ctl, CTL_EXIT_FAILED, "--%s wants KEY=VALUE, not '%s'",
                    strcmp(field, "env") == 0 ? "env" : "metadata", kv);
  json_t *map = json_object_get(body, field);
  if (!map) {
    map = json_object();
    json_object_set_new(body, field, map);
  }
  char *k = xasprintf("%.*s", (int)(eq - kv), kv);
  json_object_set_new(map, k, json_string(eq + 1));
  free(k);
  return 0;
}

/* An item appended to the array o[field], made if need be. */
static void append(json_t *o, const char *field, json_t *item) {
  json_t *a = json_object_get(o, field);
  if (!a) {
    a = json_array();
    json_object_set_new(o, field, a);
  }
  json_array_append_new(a, item);
}

static json_t *network_of(json_t *body) {
  json_t *n = json_object_get(body, "network");
  if (!n) {
    n = json_object();
    json_object_set_new(body, "network", n);
  }
  return n;
}

static int add_volume(struct ctl *ctl, json_t *body, const char *spec) {
  const char *colon = strchr(spec, ':');
  if (!colon || colon == spec || colon[1] != '/')
    return ctl_fail(ctl, CTL_EXIT_FAILED, "--volume wants NAME:/PATH[:ro], not '%s'", spec);
  char *path = xstrdup(colon + 1);
  size_t n = strlen(path);
  bool ro = n > 3 && strcmp(path + n - 3, ":ro") == 0;
  if (ro)
    path[n - 3] = '\0';
  char *name = xasprintf("%.*s", (int)(colon - spec), spec);
  append(body, "volumes", json_pack("{s:s,s:s,s:b}", "name", name, "path", path, "read_only", ro));
  free(name);
  free(path);
  return 0;
}

static int add_secret(struct ctl *ctl, json_t *body, const char *spec) {
  const char *colon = strchr(spec, ':');
  const char *eq = colon ? strchr(colon, '=') : NULL;
  if (!colon || !eq || colon == spec || eq == colon + 1)
    return ctl_fail(ctl, CTL_EXIT_FAILED, "--secret wants HOST:HEADER=VALUE");
  char *host = xasprintf("%.*s", (int)(colon - spec), spec);
  char *header = xasprintf("%.*s", (int)(eq - colon - 1), colon + 1);
  append(body, "secrets",
         json_pack("{s:s,s:s,s:s}", "host", host, "header", header, "value", eq + 1));
  free(host);
  free(header);
  return 0;
}

/* A number option's value into body[field] (the server checks ranges). */
static int add_number(struct ctl *ctl, json_t *body, const char *field, const char *opt,
                      const char *s, bool integer) {
  char *end;
  double d = strtod(s, &end);
  if (!*s || *end || d < 0 || (integer && d != (double)(long long)d))
    return ctl_fail(ctl, CTL_EXIT_FAILED, "--%s wants a %s number, not '%s'", opt,
                    integer ? "whole" : "", s);
  json_object_set_new(body, field, integer ? json_integer((json_int_t)d) : json_real(d));
  return 0;
}

static int port_of(struct ctl *ctl, const char *s, json_t **out) {
  uint64_t port;
  if (!parse_u64(s, &port) || port < 1 || port > 65535)
    return ctl_fail(ctl, CTL_EXIT_FAILED, "--public-port wants 1 to 65535, not '%s'", s);
  *out = json_integer((json_int_t)port);
  return 0;
}

static int option(struct ctl *ctl, json_t *body, int c, const char *arg) {
  json_t *port = NULL;
  switch (c) {
  case 'm':
    return add_number(ctl, body, "memory_mb", "memory", arg, true);
  case OPT_CPUS:
    return add_number(ctl, body, "cpus", "cpus", arg, false);
  case OPT_PIDS:
    return add_number(ctl, body, "pids", "pids", arg, true);
  case OPT_DISK:
    return add_number(ctl, body, "disk_mb", "disk", arg, true);
  case OPT_TIMEOUT:
    return add_number(ctl, body, "timeout_s", "timeout", arg, false);
  case OPT_ON_TIMEOUT:
    json_object_set_new(body, "on_timeout", json_string(arg));
    return 0;
  case OPT_NO_AUTO_RESUME:
    json_object_set_new(body, "auto_resume", json_false());
    return 0;
  case OPT_ISOLATION:
    json_object_set_new(body, "isolation", json_string(arg));
    return 0;
  case 'e':
    return add_pair(ctl, body, "env", arg);
  case 'l':
    return add_pair(ctl, body, "metadata", arg);
  case 'v':
    return add_volume(ctl, body, arg);
  case OPT_ALLOW:
    append(network_of(body), "allow", json_string(arg));
    return 0;
  case OPT_DENY:
    append(network_of(body), "deny", json_string(arg));
    return 0;
  case OPT_PUBLIC_PORT:
    if (port_of(ctl, arg, &port))
      return CTL_EXIT_FAILED;
    append(network_of(body), "public_ports", port);
    return 0;
  case OPT_PUBLIC:
    json_object_set_new(network_of(body), "public", json_true());
    return 0;
  case OPT_SECRET:
    return add_secret(ctl, body, arg);
  }
  return 0;
}

static int create_run(struct ctl *ctl, int argc, char **argv) {
  json_t *body = json_object();
  bool as_json = false;
  int c = CTL_OPT_END, rc = 0;
  const char *arg;
  while (rc == 0 && (c = ctl_opt_next(ctl, argc, argv, &arg)) >= 0) {
    if (c == OPT_JSON)
      as_json = true;
    else
      rc = option(ctl, body, c, arg);
  }
  json_t *sb = NULL;
  if (rc == 0 && ctl_opts_end(ctl, c, argc, argv, 0, 1, &rc)) {
    if (optind < argc)
      json_object_set_new(body, "template", json_string(argv[optind]));
    rc = ctl_api(ctl, "POST", "/v1/sandboxes", body, &sb);
  }
  json_decref(body);
  if (!sb) /* a failure, or --help */
    return rc;

  if (as_json)
    ctl_print_json(sb);
  else
    printf("%s\n", json_string_value(json_object_get(sb, "id")));
  json_decref(sb);
  return 0;
}

const struct ctl_verb ctl_verb_create = {
    "create", "[OPTIONS] [TEMPLATE]", "make a sandbox (of TEMPLATE, default host); prints its ID",
    opts, create_run};
