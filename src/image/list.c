/* hutch template ls / inspect / rm. */
#include <stdio.h>
#include <string.h>

#include "image.h"

int cmd_ls(struct image_ctx *ctx, int argc, char **argv) {
  (void)ctx, (void)argc, (void)argv;
  return EXIT_IMAGE;
}
int cmd_inspect(struct image_ctx *ctx, int argc, char **argv) {
  (void)ctx, (void)argc, (void)argv;
  return EXIT_IMAGE;
}
int cmd_rm(struct image_ctx *ctx, int argc, char **argv) {
  (void)ctx, (void)argc, (void)argv;
  return EXIT_IMAGE;
}
