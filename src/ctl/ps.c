/* hutch ps: the caller's sandboxes (GET /v1/sandboxes) as a table, IDs
 * or JSON. state= and metadata.K=V filters are the server's; template=
 * and tier= are applied here, as the list route has none for them. */
#include <stdlib.h>
#include <string.h>

#include "ctl.h"
#include "util.h"

enum { OPT_JSON = 256 };

static const struct ctl_opt opts[] = {
    {'a', "all", NULL, "paused sandboxes too (by default only running ones)"},
    {'q', "quiet", NULL, "only the IDs, one a line"},
    {'f', "filter", "K=V", "state=, template=, tier= (ns, gvisor) or metadata.K=; repeatable"},
    {OPT_JSON, "json", NULL, "the API's sandbox objects as a JSON array"},
    {0},
};

struct ps {
  bool all, quiet, json;
  char *query; /* the server's filters, "?state=...&metadata.k=v" */
  const char *template_is, *tier_is;
  bool state_given;
};

/* One --filter K=V: to the server's query, or kept for here. */
static int add_filter(struct ctl *ctl, struct ps *ps, const char *kv) {
  const char *eq = strchr(kv, '=');
  if (!eq || eq == kv)
    return ctl_fail(ctl, CTL_EXIT_FAILED, "--filter wants KEY=VALUE, not '%s'", kv);
  size_t klen = (size_t)(eq - kv);
  const char *value = eq + 1;

  if (klen == 8 && strncmp(kv, "template", 8) == 0) {
    ps->template_is = value;
    return 0;
  }
  if (klen == 4 && strncmp(kv, "tier", 4) == 0) {
    ps->tier_is = value;
    return 0;
  }
  bool state = klen == 5 && strncmp(kv, "state", 5) == 0;
  if (!state && strncmp(kv, "metadata.", 9) != 0)
    return ctl_fail(ctl, CTL_EXIT_FAILED,
                    "--filter knows state=, template=, tier= and metadata.K=, not '%.*s'",
                    (int)klen, kv);
  ps->state_given |= state;

  char *k = xasprintf("%.*s", (int)klen, kv);
  char *q = ctl_path(ps->query ? "&%s=%s" : "?%s=%s", k, value);
  str_append(&ps->query, q, strlen(q));
  free(q);
  free(k);
  return 0;
}

static bool wanted(const struct ps *ps, json_t *sb) {
  const char *state = json_string_value(json_object_get(sb, "state"));
  const char *tmpl = json_string_value(json_object_get(sb, "template"));
  const char *tier = json_string_value(json_object_get(sb, "isolation"));
  if (!ps->all && !ps->state_given && state && strcmp(state, "running") != 0)
    return false;
  if (ps->template_is && (!tmpl || strcmp(tmpl, ps->template_is) != 0))
    return false;
  return !ps->tier_is || (tier && strcmp(tier, ps->tier_is) == 0);
}

static void print_table(struct ctl *ctl, json_t *list) {
  static const char *const head[] = {"ID", "STATE", "TEMPLATE", "TIER", "AGE", "MEMORY", "CPUS"};
  struct ctl_table *t = ctl_table_new(ARRAY_SIZE(head), head);
  size_t i;
  json_t *sb;
  json_array_foreach(list, i, sb) {
    char age[32], mem[32], cpus[32] = "all";
    ctl_age(json_string_value(json_object_get(sb, "created_at")), age);
    snprintf(mem, sizeof mem, "%lldM",
             (long long)json_integer_value(json_object_get(sb, "memory_mb")));
    json_t *c = json_object_get(sb, "cpus");
    if (json_is_number(c))
      snprintf(cpus, sizeof cpus, "%g", json_number_value(c));
    const char *row[] = {json_string_value(json_object_get(sb, "id")),
                         json_string_value(json_object_get(sb, "state")),
                         json_string_value(json_object_get(sb, "template")),
                         json_string_value(json_object_get(sb, "isolation")),
                         age,
                         mem,
                         cpus};
    ctl_table_row(t, row);
  }
  ctl_table_print(ctl, t);
}

static int ps_run(struct ctl *ctl, int argc, char **argv) {
  struct ps ps = {0};
  int c = CTL_OPT_END, rc = 0;
  const char *arg;
  while (rc == 0 && (c = ctl_opt_next(ctl, argc, argv, &arg)) >= 0) {
    if (c == 'a')
      ps.all = true;
    else if (c == 'q')
      ps.quiet = true;
    else if (c == OPT_JSON)
      ps.json = true;
    else if (c == 'f')
      rc = add_filter(ctl, &ps, arg);
  }
  json_t *answer = NULL;
  if (rc == 0 && ctl_opts_end(ctl, c, argc, argv, 0, 0, &rc)) {
    char *path = xasprintf("/v1/sandboxes%s", ps.query ? ps.query : "");
    rc = ctl_api(ctl, "GET", path, NULL, &answer);
    free(path);
  }
  free(ps.query);
  if (!answer) /* a failure, or --help */
    return rc;

  json_t *list = json_array(), *sb;
  size_t i;
  json_array_foreach(json_object_get(answer, "sandboxes"), i, sb) {
    if (wanted(&ps, sb))
      json_array_append(list, sb);
  }

  if (ps.json)
    ctl_print_json(list);
  else if (ps.quiet)
    json_array_foreach(list, i, sb)
      printf("%s\n", json_string_value(json_object_get(sb, "id")));
  else
    print_table(ctl, list);
  json_decref(list);
  json_decref(answer);
  return 0;
}

const struct ctl_verb ctl_verb_ps = {"ps", "[OPTIONS]", "list your sandboxes", opts, ps_run};
