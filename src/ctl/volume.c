/* hutch volume create|ls|rm|inspect: the caller's volumes (/v1/volumes),
 * ext4 filesystems a sandbox mounts (hutch create -v NAME:/PATH). */
#include <stdlib.h>
#include <string.h>

#include "ctl.h"
#include "util.h"

enum { OPT_JSON = 256, OPT_SIZE };

static const struct ctl_opt opts[] = {
    {OPT_SIZE, "size", "MB", "create: its size (default 1024)"},
    {OPT_JSON, "json", NULL, "ls, create: the API's objects"},
    {0},
};

struct volume_args {
  bool json;
  uint64_t size_mb;
};

static int volume_create(struct ctl *ctl, const struct volume_args *va, const char *name) {
  json_t *body = json_pack("{s:s,s:I}", "name", name, "size_mb", (json_int_t)va->size_mb), *v;
  int rc = ctl_api(ctl, "POST", "/v1/volumes", body, &v);
  json_decref(body);
  if (rc == 0 && va->json)
    ctl_print_json(v);
  else if (rc == 0)
    printf("%s\n", json_string_value(json_object_get(v, "id")));
  json_decref(v);
  return rc;
}

static void volume_row(json_t *v, struct ctl_table *t) {
  char size[32], age[32];
  snprintf(size, sizeof size, "%lldM",
           (long long)json_integer_value(json_object_get(v, "size_mb")));
  ctl_age(json_string_value(json_object_get(v, "created_at")), age);
  const char *row[] = {json_string_value(json_object_get(v, "id")),
                       json_string_value(json_object_get(v, "name")), size, age};
  ctl_table_row(t, row);
}

static const char *const volume_head[] = {"ID", "NAME", "SIZE", "AGE"};
static const struct ctl_columns volume_cols = {ARRAY_SIZE(volume_head), volume_head, volume_row};

static int volume_inspect(struct ctl *ctl, int argc, char **argv) {
  int rc = 0;
  for (int i = optind; i < argc; i++) {
    char *path = ctl_path("/v1/volumes/%s", argv[i]);
    json_t *v = NULL;
    int one = ctl_api(ctl, "GET", path, NULL, &v);
    free(path);
    if (one)
      rc = one;
    else
      ctl_print_json(v);
    json_decref(v);
  }
  return rc;
}

static int volume_run(struct ctl *ctl, int argc, char **argv) {
  struct volume_args va = {.size_mb = 1024};
  const char *what = ctl_sub(&argc, &argv);
  int c = CTL_OPT_END, rc = 0;
  const char *arg;
  while (rc == 0 && (c = ctl_opt_next(ctl, argc, argv, &arg)) >= 0) {
    if (c == OPT_JSON)
      va.json = true;
    else if (c == OPT_SIZE && !parse_u64(arg, &va.size_mb))
      rc = ctl_fail(ctl, CTL_EXIT_FAILED, "--size wants MiB, not '%s'", arg);
  }
  if (rc || !ctl_opts_end(ctl, c, argc, argv, 0, -1, &rc))
    return rc;

  int n = argc - optind;
  if (what && strcmp(what, "ls") == 0 && n == 0)
    return ctl_list(ctl, "/v1/volumes", "volumes", va.json, &volume_cols);
  if (what && strcmp(what, "create") == 0 && n == 1)
    return volume_create(ctl, &va, argv[optind]);
  if (what && strcmp(what, "rm") == 0 && n >= 1)
    return ctl_each(ctl, "DELETE", "/v1/volumes/%s", argc, argv);
  if (what && strcmp(what, "inspect") == 0 && n >= 1)
    return volume_inspect(ctl, argc, argv);
  return ctl_fail(ctl, CTL_EXIT_FAILED, "usage: hutch volume %s", ctl->verb->args);
}

const struct ctl_verb ctl_verb_volume = {
    "volume",
    "create [--size MB] NAME | ls [--json] | rm NAME... | inspect NAME...",
    "make, list, remove and show your volumes",
    opts,
    volume_run,
    "create ls rm inspect"};
