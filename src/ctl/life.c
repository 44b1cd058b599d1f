/* A sandbox's life: hutch inspect, kill, pause, resume, snapshot, fork
 * and port, each one request of the native API. */
#include <stdlib.h>
#include <string.h>

#include "ctl.h"
#include "util.h"

enum { OPT_JSON = 256, OPT_NAME, OPT_TIMEOUT, OPT_HOST };

/* Options and operands of a verb that takes only them: false with *rc. */
static bool plain_args(struct ctl *ctl, int argc, char **argv, int min, int max, int *rc) {
  int c;
  const char *arg;
  while ((c = ctl_opt_next(ctl, argc, argv, &arg)) >= 0)
    ;
  return ctl_opts_end(ctl, c, argc, argv, min, max, rc);
}

/* method on fmt for each ID operand (ctl_each). */
static int each_id(struct ctl *ctl, int argc, char **argv, const char *method, const char *fmt) {
  int rc;
  if (!plain_args(ctl, argc, argv, 1, -1, &rc))
    return rc;
  return ctl_each(ctl, method, fmt, argc, argv);
}

static int kill_run(struct ctl *ctl, int argc, char **argv) {
  return each_id(ctl, argc, argv, "DELETE", "/v1/sandboxes/%s");
}

static int pause_run(struct ctl *ctl, int argc, char **argv) {
  return each_id(ctl, argc, argv, "POST", "/v1/sandboxes/%s/pause");
}

static int resume_run(struct ctl *ctl, int argc, char **argv) {
  return each_id(ctl, argc, argv, "POST", "/v1/sandboxes/%s/resume");
}

static int inspect_run(struct ctl *ctl, int argc, char **argv) {
  int rc;
  if (!plain_args(ctl, argc, argv, 1, 1, &rc))
    return rc;
  char *path = ctl_path("/v1/sandboxes/%s", argv[optind]);
  json_t *sb;
  rc = ctl_api(ctl, "GET", path, NULL, &sb);
  free(path);
  if (rc == 0)
    ctl_print_json(sb);
  json_decref(sb);
  return rc;
}

static const struct ctl_opt snapshot_opts[] = {
    {OPT_NAME, "name", "NAME", "a name for it"},
    {OPT_JSON, "json", NULL, "print the API's snapshot object"},
    {0},
};

static int snapshot_run(struct ctl *ctl, int argc, char **argv) {
  json_t *body = json_object();
  bool as_json = false;
  int c, rc;
  const char *arg;
  while ((c = ctl_opt_next(ctl, argc, argv, &arg)) >= 0) {
    if (c == OPT_NAME)
      json_object_set_new(body, "name", json_string(arg));
    else if (c == OPT_JSON)
      as_json = true;
  }
  json_t *snap = NULL;
  if (ctl_opts_end(ctl, c, argc, argv, 1, 1, &rc)) {
    char *path = ctl_path("/v1/sandboxes/%s/snapshots", argv[optind]);
    rc = ctl_api(ctl, "POST", path, body, &snap);
    free(path);
  }
  json_decref(body);
  if (snap && as_json)
    ctl_print_json(snap);
  else if (snap)
    printf("%s\n", json_string_value(json_object_get(snap, "id")));
  json_decref(snap);
  return rc;
}

static const struct ctl_opt fork_opts[] = {
    {'n', "count", "N", "how many sandboxes to make (default 1)"},
    {OPT_TIMEOUT, "timeout", "S", "their seconds to live"},
    {OPT_JSON, "json", NULL, "print the API's answer (snapshot_id, sandboxes)"},
    {0},
};

static int fork_option(struct ctl *ctl, json_t *body, int c, const char *arg, bool *as_json) {
  uint64_t n;
  char *end;
  if (c == 'n') {
    if (!parse_u64(arg, &n) || n < 1)
      return ctl_fail(ctl, CTL_EXIT_FAILED, "-n wants a count of 1 or more, not '%s'", arg);
    json_object_set_new(body, "count", json_integer((json_int_t)n));
  } else if (c == OPT_TIMEOUT) {
    double t = strtod(arg, &end);
    if (!*arg || *end || t <= 0)
      return ctl_fail(ctl, CTL_EXIT_FAILED, "--timeout wants seconds, not '%s'", arg);
    json_object_set_new(body, "timeout_s", json_real(t));
  } else if (c == OPT_JSON) {
    *as_json = true;
  }
  return 0;
}

static int fork_run(struct ctl *ctl, int argc, char **argv) {
  json_t *body = json_pack("{s:i}", "count", 1);
  bool as_json = false;
  int c = CTL_OPT_END, rc = 0;
  const char *arg;
  while (rc == 0 && (c = ctl_opt_next(ctl, argc, argv, &arg)) >= 0)
    rc = fork_option(ctl, body, c, arg, &as_json);
  json_t *made = NULL;
  if (rc == 0 && ctl_opts_end(ctl, c, argc, argv, 1, 1, &rc)) {
    char *path = ctl_path("/v1/sandboxes/%s/fork", argv[optind]);
    rc = ctl_api(ctl, "POST", path, body, &made);
    free(path);
  }
  json_decref(body);
  if (made && as_json) {
    ctl_print_json(made);
  } else if (made) {
    size_t i;
    json_t *sb;
    json_array_foreach(json_object_get(made, "sandboxes"), i, sb) {
      json_t *id = json_is_string(sb) ? sb : json_object_get(sb, "id");
      printf("%s\n", json_string_value(id));
    }
  }
  json_decref(made);
  return rc;
}

static const struct ctl_opt port_opts[] = {
    {OPT_HOST, "host", NULL, "the URL by host name (PORT-ID.DOMAIN), as E2B's getHost()"},
    {0},
};

/* The URL of a sandbox's port through the server (api/ports.c): by path,
 * or by the Host name the server's --domain makes. Either needs the key
 * or the sandbox's traffic token unless the port is public. */
static int port_run(struct ctl *ctl, int argc, char **argv) {
  bool by_host = false;
  int c, rc;
  const char *arg;
  while ((c = ctl_opt_next(ctl, argc, argv, &arg)) >= 0)
    by_host = c == OPT_HOST;
  if (!ctl_opts_end(ctl, c, argc, argv, 2, 2, &rc))
    return rc;
  uint64_t port;
  if (!parse_u64(argv[optind + 1], &port) || port < 1 || port > 65535)
    return ctl_fail(ctl, CTL_EXIT_FAILED, "PORT is 1 to 65535, not '%s'", argv[optind + 1]);

  char *path = ctl_path("/v1/sandboxes/%s", argv[optind]);
  json_t *sb;
  rc = ctl_api(ctl, "GET", path, NULL, &sb);
  free(path);
  if (rc)
    return rc;
  const char *id = json_string_value(json_object_get(sb, "id"));
  const char *domain = json_string_value(json_object_get(sb, "domain"));
  const char *url = ctl->client.url;
  if (by_host) {
    /* The server's own scheme and port, its host name replaced. */
    const char *host = strstr(url, "://") + 3;
    const char *hport = strchr(host, ':');
    printf("%.*s%ju-%s.%s%s/\n", (int)(host - url), url, port, id, domain ? domain : "localhost",
           hport ? hport : "");
  } else {
    printf("%s/v1/sandboxes/%s/ports/%ju/\n", url, id, port);
  }
  json_decref(sb);
  return 0;
}

const struct ctl_verb ctl_verb_inspect = {"inspect", "ID", "print sandbox ID as the API has it",
                                          NULL, inspect_run};
const struct ctl_verb ctl_verb_kill = {"kill", "ID...", "end sandboxes (their files go too)", NULL,
                                       kill_run};
const struct ctl_verb ctl_verb_pause = {"pause", "ID...", "pause sandboxes (frozen, kept)", NULL,
                                        pause_run};
const struct ctl_verb ctl_verb_resume = {"resume", "ID...", "resume paused sandboxes", NULL,
                                         resume_run};
const struct ctl_verb ctl_verb_snapshot = {"snapshot", "[OPTIONS] ID",
                                           "snapshot sandbox ID; prints the snapshot's ID (a "
                                           "template for create)",
                                           snapshot_opts, snapshot_run};
const struct ctl_verb ctl_verb_fork = {"fork", "[OPTIONS] ID",
                                       "new sandboxes holding ID's files; prints their IDs",
                                       fork_opts, fork_run};
const struct ctl_verb ctl_verb_port = {"port", "[--host] ID PORT",
                                       "print the URL of sandbox ID's PORT through the server",
                                       port_opts, port_run};
