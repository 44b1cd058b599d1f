/* Progress and errors of hutch-template (image.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "image.h"

void image_progress(struct image_ctx *ctx, json_t *ev) {
  if (ctx->ndjson) {
    char *s = json_dumps(ev, JSON_COMPACT);
    if (s) {
      fprintf(stdout, "%s\n", s);
      fflush(stdout);
    }
    free(s);
  } else if (!ctx->quiet) {
    const char *msg = json_string_value(json_object_get(ev, "message"));
    if (msg)
      fprintf(stderr, "%s\n", msg);
  }
  json_decref(ev);
}

int image_fail(struct image_ctx *ctx, const char *verb, const struct hutch_err *err) {
  enum hutch_errkind kind = hutch_err_class(err);
  bool input = kind != HUTCH_ERR_SYSTEM && kind != HUTCH_ERR_NO_SPACE;
  fprintf(stderr, "hutch template %s: %s\n", verb, err->msg);
  if (ctx->ndjson) {
    const char *code = err->code;
    if (!code)
      code = input ? "invalid_argument" : "internal";
    image_progress(ctx, json_pack("{s:s,s:i,s:s,s:s}", "event", "error", "kind", (int)kind, "code",
                                  code, "message", err->msg));
  }
  return input ? EXIT_IMAGE_INPUT : EXIT_IMAGE;
}

int image_done(struct image_ctx *ctx, const char *did, json_t *record) {
  const char *name = json_string_value(json_object_get(record, "name"));
  const char *id = json_string_value(json_object_get(record, "id"));
  image_progress(ctx, json_pack("{s:s,s:s,s:s,s:s++}", "event", "done", "name", name ? name : "",
                                "id", id ? id : "", "message", did, " ", name ? name : ""));
  if (!ctx->ndjson)
    printf("%s %s\n", name ? name : "", id ? id : "");
  json_decref(record);
  return 0;
}

int image_name_free(struct image_ctx *ctx, const char *name, struct hutch_err *err) {
  struct hutch_err none = {0};
  json_t *old = hutch_images_find(&ctx->store, ctx->owner, name, &none);
  bool taken = old && strcmp(json_string_value(json_object_get(old, "owner")), ctx->owner) == 0 &&
               strcmp(json_string_value(json_object_get(old, "name")), name) == 0;
  json_decref(old);
  return taken ? hutch_err_fail(err, HUTCH_ERR_CONFLICT, "template_exists",
                                "a template '%s' exists (--replace replaces it)", name)
               : 0;
}
