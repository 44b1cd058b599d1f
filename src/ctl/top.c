/* hutch top [--once] [--json] [-d SECONDS] [ID...]: CPU and memory of
 * the caller's sandboxes (those named, else all), from each one's
 * GET /v1/sandboxes/{id}/metrics. On a terminal the table is redrawn in
 * place every -d seconds (2: the server's sampling period) until Ctrl-C;
 * with --once, or when stdout is not a terminal, it is printed once.
 * --json prints the API's answers ({id, state, current}) as one array,
 * a line per refresh. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <poll.h>
#include <time.h>
#include <unistd.h>

#include "ctl.h"
#include "util.h"

struct top {
  struct ctl *ctl;
  char **ids; /* NULL: every sandbox of the caller */
  int nids;
  bool json;
};

/* One sandbox's answer without its samples (start=now: none); NULL when
 * it failed (*code said) or, listed, is gone since. */
static json_t *metrics_of(const struct top *t, const char *id, int *code) {
  char *path = ctl_path("/v1/sandboxes/%s/metrics", id);
  char *query = xasprintf("%s?start=%lld", path, (long long)time(NULL));
  struct hc_req req = {.method = "GET", .path = query};
  struct hc_answer a = {0};
  json_t *m = NULL;
  bool answered = hc_call(&t->ctl->client, &req, &a);
  if (answered && a.status == 404 && !t->ids) {
    /* ended since the list was read: not shown */
  } else if (answered && a.status == 200) {
    m = json_pack("{s:O?,s:O?,s:O?}", "id", json_object_get(a.json, "id"), "state",
                  json_object_get(a.json, "state"), "current", json_object_get(a.json, "current"));
  } else {
    /* Said as every call says it (the client is set up: the list, or
     * the check of the named ones, came first). */
    hc_answer_free(&a);
    *code = ctl_call(t->ctl, &req, &a);
  }
  hc_answer_free(&a);
  free(query);
  free(path);
  return m;
}

/* The ids to show: those named, else the caller's sandboxes now. */
static json_t *ids_now(const struct top *t, int *code) {
  json_t *ids = json_array();
  json_t *list = NULL;
  *code = ctl_api(t->ctl, "GET", "/v1/sandboxes", NULL, &list);
  if (t->ids) {
    for (int i = 0; i < t->nids; i++)
      json_array_append_new(ids, json_string(t->ids[i]));
  } else {
    size_t i;
    json_t *sb;
    json_array_foreach(json_object_get(list, "sandboxes"), i, sb)
      json_array_append(ids, json_object_get(sb, "id"));
  }
  json_decref(list);
  return ids;
}

static json_t *sample(const struct top *t, int *code) {
  json_t *ids = ids_now(t, code), *rows = json_array();
  size_t i;
  json_t *id;
  json_array_foreach(ids, i, id) {
    json_t *m = *code ? NULL : metrics_of(t, json_string_value(id), code);
    if (m)
      json_array_append_new(rows, m);
  }
  json_decref(ids);
  return rows;
}

static void human(char *buf, size_t cap, double bytes) {
  const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024 && u < 4)
    bytes /= 1024, u++;
  snprintf(buf, cap, u ? "%.1f %s" : "%.0f %s", bytes, units[u]);
}

static void print_table(json_t *rows, bool live) {
  printf("%-28s %-8s %7s %11s %11s %6s %5s%s\n", "SANDBOX", "STATE", "CPU %", "MEM", "LIMIT",
         "MEM %", "PIDS", live ? "\033[K" : "");
  size_t i;
  json_t *r;
  json_array_foreach(rows, i, r) {
    json_t *cur = json_object_get(r, "current");
    double used = json_number_value(json_object_get(cur, "memory_used_bytes"));
    double limit = json_number_value(json_object_get(cur, "memory_limit_bytes"));
    char u[32], l[32];
    human(u, sizeof u, used);
    human(l, sizeof l, limit);
    printf("%-28s %-8s %7.1f %11s %11s %6.1f %5lld%s\n",
           json_string_value(json_object_get(r, "id")) ?: "?",
           json_string_value(json_object_get(r, "state")) ?: "?",
           json_number_value(json_object_get(cur, "cpu_pct")), u, l,
           limit > 0 ? used * 100 / limit : 0.0,
           (long long)json_integer_value(json_object_get(cur, "pids")), live ? "\033[K" : "");
  }
}

static void show(const struct top *t, json_t *rows, bool live) {
  if (t->json) {
    ctl_print_json_line(rows);
  } else {
    if (live)
      printf("\033[H");
    print_table(rows, live);
    if (live)
      printf("\033[J");
  }
  fflush(stdout);
}

/* Refresh until SIGINT, SIGTERM or SIGHUP (a signalfd: the screen is
 * left where the last table ends, never half drawn). */
static int live(const struct top *t, int interval_ms) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGHUP);
  sigprocmask(SIG_BLOCK, &set, NULL);
  int sfd = signalfd(-1, &set, SFD_CLOEXEC);
  bool tty = !t->json && isatty(1);
  if (tty)
    printf("\033[H\033[2J");
  for (;;) {
    int code = 0;
    json_t *rows = sample(t, &code);
    if (!code)
      show(t, rows, tty);
    json_decref(rows);
    if (code)
      return code;
    struct pollfd p = {.fd = sfd, .events = POLLIN};
    int r = poll(&p, 1, interval_ms);
    if (r > 0 || (r < 0 && errno != EINTR))
      break;
  }
  close(sfd);
  return 0;
}

enum { OPT_ONCE = 256, OPT_JSON };

static const struct ctl_opt opts[] = {
    {OPT_ONCE, "once", NULL, "print one table and end (what a non-terminal stdout gets)"},
    {OPT_JSON, "json", NULL, "the API's answers ({id, state, current}) as a JSON array"},
    {'d', "interval", "SECONDS", "between refreshes (default 2, the server's sampling period)"},
    {0},
};

static int top_run(struct ctl *ctl, int argc, char **argv) {
  struct top t = {.ctl = ctl};
  bool once = false;
  double interval = 2;
  const char *arg;
  int c, rc;
  while ((c = ctl_opt_next(ctl, argc, argv, &arg)) >= 0) {
    char *end;
    if (c == OPT_ONCE) {
      once = true;
    } else if (c == OPT_JSON) {
      t.json = true;
    } else if (c == 'd') {
      interval = strtod(arg, &end);
      if (*end || !(interval >= 0.1 && interval <= 3600))
        return ctl_fail(ctl, CTL_EXIT_FAILED, "-d takes seconds, from 0.1 to 3600: not %s", arg);
    }
  }
  if (!ctl_opts_end(ctl, c, argc, argv, 0, -1, &rc))
    return rc;
  if (optind < argc) {
    t.ids = argv + optind;
    t.nids = argc - optind;
  }

  if (!once && isatty(1))
    return live(&t, (int)(interval * 1000));
  int code = 0;
  json_t *rows = sample(&t, &code);
  if (!code)
    show(&t, rows, false);
  json_decref(rows);
  return code;
}

const struct ctl_verb ctl_verb_top = {
    "top", "[--once] [--json] [-d SECONDS] [ID...]",
    "CPU and memory of sandboxes, refreshed in place on a terminal", opts, top_run};
