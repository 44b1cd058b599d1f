/* hutch template ls / inspect / rm: the store as it is. */
#include <stdio.h>
#include <string.h>

#include "image.h"

/* One template of `ls`, as a row. */
static void print_row(json_t *rec) {
  double mb = (double)json_integer_value(json_object_get(rec, "size_bytes")) / (1 << 20);
  const char *ref = json_string_value(json_object_get(rec, "ref"));
  char tags[256] = "";
  size_t k, n = 0;
  json_t *t;
  json_array_foreach(json_object_get(rec, "tags"), k, t)
    if (n < sizeof tags)
      n += (size_t)snprintf(tags + n, sizeof tags - n, "%s%s", k ? "," : "",
                            json_string_value(t) ?: "");
  printf("%-32s %-16s %-16s %8.1fMB  %-9s %s\n", json_string_value(json_object_get(rec, "name")),
         tags, json_string_value(json_object_get(rec, "id")), mb,
         json_string_value(json_object_get(rec, "source")) ?: "", ref ? ref : "");
}

int cmd_ls(struct image_ctx *ctx, int argc, char **argv) {
  bool as_json = argc == 2 && strcmp(argv[1], "--json") == 0;
  if (argc > 1 && !as_json) {
    fprintf(stderr, "hutch template ls: takes only --json\n");
    return EXIT_IMAGE_INPUT;
  }

  json_t *all = hutch_images_list(&ctx->store, ctx->owner[0] ? ctx->owner : NULL);
  if (as_json) {
    json_dumpf(all, stdout, JSON_INDENT(2));
    fputc('\n', stdout);
  } else {
    printf("%-32s %-16s %-16s %10s  %-9s %s\n", "NAME", "TAGS", "ID", "SIZE", "SOURCE", "FROM");
    size_t i;
    json_t *rec;
    json_array_foreach(all, i, rec)
      print_row(rec);
  }
  json_decref(all);
  return 0;
}

int cmd_inspect(struct image_ctx *ctx, int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "hutch template inspect: takes one template name\n");
    return EXIT_IMAGE_INPUT;
  }
  struct hutch_err err = {0};
  json_t *rec = hutch_images_find(&ctx->store, ctx->owner[0] ? ctx->owner : NULL, argv[1], &err);
  if (!rec)
    return image_fail(ctx, "inspect", &err);
  json_dumpf(rec, stdout, JSON_INDENT(2));
  fputc('\n', stdout);
  json_decref(rec);
  return 0;
}

int cmd_rm(struct image_ctx *ctx, int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "hutch template rm: takes one template name\n");
    return EXIT_IMAGE_INPUT;
  }
  struct hutch_err err = {0};
  if (hutch_images_remove(&ctx->store, ctx->owner[0] ? ctx->owner : NULL, argv[1], &err) < 0)
    return image_fail(ctx, "rm", &err);
  if (!ctx->quiet)
    printf("removed %s\n", argv[1]);
  return 0;
}
