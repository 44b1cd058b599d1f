/* Verbs not written yet (this file goes when each has its own). */
#include <stdio.h>

#include "image.h"

static int todo(const char *verb) {
  fprintf(stderr, "hutch template %s: not built yet\n", verb);
  return EXIT_IMAGE;
}
int cmd_bootstrap(struct image_ctx *ctx, int argc, char **argv) { (void)ctx, (void)argc, (void)argv; return todo("bootstrap"); }
int cmd_build(struct image_ctx *ctx, int argc, char **argv) { (void)ctx, (void)argc, (void)argv; return todo("build"); }
