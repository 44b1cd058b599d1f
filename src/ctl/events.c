/* hutch events and hutch logs: the server's event stream (GET /v1/events,
 * NDJSON: {seq, time, type, tenant, sandbox, data}; docs/events.md), all
 * of the caller's, or one sandbox's as its log. -f keeps following. */
#include <stdlib.h>
#include <string.h>

#include "ctl.h"
#include "util.h"

enum { OPT_JSON = 256, OPT_SINCE, OPT_SANDBOX, OPT_FILTER };

static const struct ctl_opt events_opts[] = {
    {'f', "follow", NULL, "keep the stream open: events as they happen"},
    {OPT_SINCE, "since", "SEQ", "only events after number SEQ"},
    {OPT_SANDBOX, "sandbox", "ID", "only sandbox ID's"},
    {OPT_JSON, "json", NULL, "each event as the API's JSON line"},
    {OPT_FILTER, "filter", "type=T", "only types T (a,b or a prefix sandbox.*); repeatable"},
    {0},
};

/* logs': events' but --sandbox (its ID is the operand) and --filter. */
static const struct ctl_opt logs_opts[] = {
    {'f', "follow", NULL, "keep the stream open: events as they happen"},
    {OPT_SINCE, "since", "SEQ", "only events after number SEQ"},
    {OPT_JSON, "json", NULL, "each event as the API's JSON line"},
    {0},
};

struct stream {
  struct ctl *ctl;
  bool json, one_sandbox;
};

static int on_event(void *arg, json_t *ev) {
  struct stream *s = arg;
  const char *type = json_string_value(json_object_get(ev, "type"));
  if (!type || strcmp(type, "heartbeat") == 0)
    return HC_LINE_MORE;
  if (s->json) {
    ctl_print_json_line(ev);
  } else if (strcmp(type, "events.gap") == 0) {
    fprintf(stderr, "hutch %s: events missed here (no longer kept)\n", s->ctl->verb->name);
  } else {
    /* An event's data holds what the sandbox or a tenant said (labels,
     * commands, paths): ctl_clean'd, as all of the line. */
    char *data = json_dumps(json_object_get(ev, "data"), JSON_COMPACT | JSON_ENCODE_ANY);
    const char *sandbox = json_string_value(json_object_get(ev, "sandbox"));
    char *time = ctl_clean(json_string_value(json_object_get(ev, "time")) ?: "-", CTL_CLEAN_TEXT);
    char *t = ctl_clean(type, CTL_CLEAN_TEXT);
    char *sb = ctl_clean(sandbox ? sandbox : "-", CTL_CLEAN_TEXT);
    char *d = ctl_clean(data ? data : "", CTL_CLEAN_JSON);
    printf("%s %s%-22s%s", time, ctl_sgr(s->ctl, CTL_BOLD), t, ctl_sgr(s->ctl, CTL_RESET));
    if (!s->one_sandbox)
      printf(" %-16s", sb);
    printf(" %s\n", d);
    free(d);
    free(sb);
    free(t);
    free(time);
    free(data);
  }
  /* Lines appear as they come, even into a pipe. */
  return fflush(stdout) == 0 ? HC_LINE_MORE : HC_LINE_STOP;
}

/* The query's parts: "&k=v" each, the first '&' made '?' at the end. */
static void add_query(char **q, const char *key, const char *value) {
  char *part = ctl_path("&%s=%s", key, value);
  str_append(q, part, strlen(part));
  free(part);
}

static int stream_run(struct ctl *ctl, int argc, char **argv, bool logs) {
  struct stream s = {.ctl = ctl, .one_sandbox = logs};
  char *q = NULL, *types = NULL;
  const char *sandbox = NULL;
  int c = CTL_OPT_END, rc = 0;
  const char *arg;
  while (rc == 0 && (c = ctl_opt_next(ctl, argc, argv, &arg)) >= 0) {
    if (c == 'f') {
      add_query(&q, "follow", "1");
    } else if (c == OPT_SINCE) {
      add_query(&q, "since", arg);
    } else if (c == OPT_SANDBOX) {
      sandbox = arg;
    } else if (c == OPT_JSON) {
      s.json = true;
    } else if (c == OPT_FILTER && strncmp(arg, "type=", 5) == 0) {
      if (types)
        str_append(&types, ",", 1);
      str_append(&types, arg + 5, strlen(arg + 5));
    } else if (c == OPT_FILTER) {
      rc = ctl_fail(ctl, CTL_EXIT_FAILED, "--filter knows type=, not '%s'", arg);
    }
  }
  if (rc == 0 && ctl_opts_end(ctl, c, argc, argv, logs ? 1 : 0, logs ? 1 : 0, &rc)) {
    if (logs)
      sandbox = argv[optind];
    if (sandbox)
      add_query(&q, "sandbox", sandbox);
    if (types)
      add_query(&q, "type", types);
    if (q)
      q[0] = '?';
    char *path = xasprintf("/v1/events%s", q ? q : "");
    rc = ctl_stream(ctl, "GET", path, NULL, on_event, &s);
    free(path);
  }
  free(q);
  free(types);
  return rc;
}

static int events_run(struct ctl *ctl, int argc, char **argv) {
  return stream_run(ctl, argc, argv, false);
}

static int logs_run(struct ctl *ctl, int argc, char **argv) {
  return stream_run(ctl, argc, argv, true);
}

const struct ctl_verb ctl_verb_events = {"events", "[OPTIONS]",
                                         "the server's events for you: creates, execs, kills, ...",
                                         events_opts, events_run};
const struct ctl_verb ctl_verb_logs = {"logs", "[-f] [--since SEQ] [--json] ID",
                                       "sandbox ID's events, oldest first (-f: and on)", logs_opts,
                                       logs_run};
