/* The admin's verbs: hutch key create|ls|rm (/v1/keys) and hutch tenant
 * ls|usage. A tenant is made by its first key and named by its keys, so
 * tenant ls is the keys grouped by tenant, with each one's quotas and
 * what it has used (/v1/usage?tenant=). */
#include <stdlib.h>
#include <string.h>

#include "ctl.h"
#include "util.h"

enum { OPT_JSON = 256, OPT_TENANT, OPT_MAX_SBX, OPT_MAX_MEM, OPT_MAX_DISK };

static const struct ctl_opt key_opts[] = {
    {OPT_TENANT, "tenant", "NAME", "create: the tenant it is for (made by its first key)"},
    {OPT_MAX_SBX, "max-sandboxes", "N", "create: the tenant's quota of sandboxes at once"},
    {OPT_MAX_MEM, "max-memory", "MB", "create: of memory, all its sandboxes together"},
    {OPT_MAX_DISK, "max-disk", "MB", "create: of disk, volumes, snapshots and templates"},
    {OPT_JSON, "json", NULL, "the API's objects"},
    {0},
};

struct key_args {
  json_t *body; /* create's */
  bool json;
};

static int key_option(struct ctl *ctl, struct key_args *ka, int c, const char *arg) {
  static const struct {
    int id;
    const char *field;
  } quota[] = {{OPT_MAX_SBX, "max_sandboxes"},
               {OPT_MAX_MEM, "max_memory_mb"},
               {OPT_MAX_DISK, "max_disk_mb"}};
  if (c == OPT_JSON)
    ka->json = true;
  if (c == OPT_TENANT)
    json_object_set_new(ka->body, "tenant", json_string(arg));
  for (size_t i = 0; i < ARRAY_SIZE(quota); i++) {
    uint64_t n;
    if (c != quota[i].id)
      continue;
    if (!parse_u64(arg, &n))
      return ctl_fail(ctl, CTL_EXIT_FAILED, "a quota is a whole number, not '%s'", arg);
    json_object_set_new(ka->body, quota[i].field, json_integer((json_int_t)n));
  }
  return 0;
}

/* A quota's cell: the number, or "default". */
static void quota_cell(json_t *k, const char *field, char out[32]) {
  json_t *v = json_object_get(k, field);
  if (json_is_integer(v))
    snprintf(out, 32, "%lld", (long long)json_integer_value(v));
  else
    str_copy(out, 32, "default");
}

static void key_row(json_t *k, struct ctl_table *t) {
  char age[32];
  ctl_age(json_string_value(json_object_get(k, "created_at")), age);
  const char *row[] = {json_string_value(json_object_get(k, "id")),
                       json_string_value(json_object_get(k, "tenant")),
                       json_is_true(json_object_get(k, "admin")) ? "yes" : "no", age};
  ctl_table_row(t, row);
}

static const char *const key_head[] = {"ID", "TENANT", "ADMIN", "AGE"};
static const struct ctl_columns key_cols = {ARRAY_SIZE(key_head), key_head, key_row};

static int key_run(struct ctl *ctl, int argc, char **argv) {
  struct key_args ka = {.body = json_object()};
  const char *what = ctl_sub(&argc, &argv);
  int c = CTL_OPT_END, rc = 0;
  const char *arg;
  while (rc == 0 && (c = ctl_opt_next(ctl, argc, argv, &arg)) >= 0)
    rc = key_option(ctl, &ka, c, arg);
  int n = argc - optind;
  if (rc || !ctl_opts_end(ctl, c, argc, argv, 0, -1, &rc)) {
    /* the error is said */
  } else if (what && strcmp(what, "ls") == 0 && n == 0) {
    rc = ctl_list(ctl, "/v1/keys", "keys", ka.json, &key_cols);
  } else if (what && strcmp(what, "create") == 0 && n == 0) {
    json_t *made;
    rc = ctl_api(ctl, "POST", "/v1/keys", ka.body, &made);
    if (rc == 0 && ka.json)
      ctl_print_json(made);
    else if (rc == 0)
      printf("%s\n", json_string_value(json_object_get(made, "key")));
    json_decref(made);
  } else if (what && strcmp(what, "rm") == 0 && n >= 1) {
    rc = ctl_each(ctl, "DELETE", "/v1/keys/%s", argc, argv);
  } else {
    rc = ctl_fail(ctl, CTL_EXIT_FAILED, "usage: hutch key %s", ctl->verb->args);
  }
  json_decref(ka.body);
  return rc;
}

/* GET /v1/usage?tenant=NAME into *out. */
static int usage_of(struct ctl *ctl, const char *tenant, json_t **out) {
  char *path = tenant ? ctl_path("/v1/usage?tenant=%s", tenant) : xstrdup("/v1/usage");
  int rc = ctl_api(ctl, "GET", path, NULL, out);
  free(path);
  return rc;
}

/* The tenants of the keys, in the order their first keys came, each once
 * with its quotas and key count, and its use. */
static json_t *tenants_of(struct ctl *ctl, json_t *keys, int *rc) {
  json_t *tenants = json_array(), *k;
  size_t i;
  json_array_foreach(keys, i, k) {
    const char *name = json_string_value(json_object_get(k, "tenant"));
    json_t *t = NULL, *one;
    size_t j;
    json_array_foreach(tenants, j, one)
      if (strcmp(json_string_value(json_object_get(one, "tenant")), name) == 0)
        t = one;
    if (t) {
      json_object_set_new(t, "keys",
                          json_integer(json_integer_value(json_object_get(t, "keys")) + 1));
      continue;
    }
    json_t *usage = NULL;
    *rc = usage_of(ctl, name, &usage);
    if (*rc) {
      json_decref(tenants);
      return NULL;
    }
    json_object_set_new(usage, "keys", json_integer(1));
    json_object_set(usage, "max_sandboxes", json_object_get(k, "max_sandboxes"));
    json_object_set(usage, "max_memory_mb", json_object_get(k, "max_memory_mb"));
    json_object_set(usage, "max_disk_mb", json_object_get(k, "max_disk_mb"));
    json_array_append_new(tenants, usage);
  }
  return tenants;
}

static void tenants_table(struct ctl *ctl, json_t *tenants) {
  static const char *const head[] = {"TENANT",  "KEYS",     "RUNNING", "PAUSED",   "MAX SBX",
                                     "MAX MEM", "MAX DISK", "CPU-S",   "SANDBOX-S"};
  struct ctl_table *t = ctl_table_new(ARRAY_SIZE(head), head);
  size_t i;
  json_t *u;
  json_array_foreach(tenants, i, u) {
    char keys[32], run[32], paused[32], sbx[32], mem[32], disk[32], cpu[32], life[32];
    snprintf(keys, sizeof keys, "%lld", (long long)json_integer_value(json_object_get(u, "keys")));
    snprintf(run, sizeof run, "%lld", (long long)json_integer_value(json_object_get(u, "running")));
    snprintf(paused, sizeof paused, "%lld",
             (long long)json_integer_value(json_object_get(u, "paused")));
    quota_cell(u, "max_sandboxes", sbx);
    quota_cell(u, "max_memory_mb", mem);
    quota_cell(u, "max_disk_mb", disk);
    snprintf(cpu, sizeof cpu, "%.1f", json_number_value(json_object_get(u, "cpu_seconds")));
    snprintf(life, sizeof life, "%.0f", json_number_value(json_object_get(u, "sandbox_seconds")));
    const char *row[] = {json_string_value(json_object_get(u, "tenant")),
                         keys,
                         run,
                         paused,
                         sbx,
                         mem,
                         disk,
                         cpu,
                         life};
    ctl_table_row(t, row);
  }
  ctl_table_print(ctl, t);
}

static int tenant_run(struct ctl *ctl, int argc, char **argv) {
  bool as_json = false;
  const char *what = ctl_sub(&argc, &argv);
  int c, rc;
  const char *arg;
  while ((c = ctl_opt_next(ctl, argc, argv, &arg)) >= 0)
    as_json = as_json || c == OPT_JSON;
  if (!ctl_opts_end(ctl, c, argc, argv, 0, 1, &rc))
    return rc;
  const char *name = optind < argc ? argv[optind] : NULL;

  json_t *out = NULL;
  if (what && strcmp(what, "usage") == 0) {
    rc = usage_of(ctl, name, &out);
  } else if (what && strcmp(what, "ls") == 0 && !name) {
    json_t *answer;
    rc = ctl_api(ctl, "GET", "/v1/keys", NULL, &answer);
    if (rc == 0)
      out = tenants_of(ctl, json_object_get(answer, "keys"), &rc);
    json_decref(answer);
  } else {
    return ctl_fail(ctl, CTL_EXIT_FAILED, "usage: hutch tenant %s", ctl->verb->args);
  }
  if (rc == 0 && (as_json || strcmp(what, "usage") == 0))
    ctl_print_json(out);
  else if (rc == 0)
    tenants_table(ctl, out);
  json_decref(out);
  return rc;
}

static const struct ctl_opt tenant_opts[] = {
    {OPT_JSON, "json", NULL, "ls: the tenants as JSON"},
    {0},
};

const struct ctl_verb ctl_verb_key = {
    "key",
    "create --tenant NAME [--max-...] | ls | rm ID...",
    "make (prints its secret, shown once), list and remove API keys (admin)",
    key_opts,
    key_run,
    "create ls rm"};
const struct ctl_verb ctl_verb_tenant = {"tenant",
                                         "ls | usage [TENANT]",
                                         "the tenants, their quotas and use (admin; usage: "
                                         "your own without TENANT)",
                                         tenant_opts,
                                         tenant_run,
                                         "ls usage"};
