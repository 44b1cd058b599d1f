/* hutch-template: the template tools (docs/templates.md). Its own program,
 * as hutch-serve is: it links libarchive, libcurl and libcrypto, which the
 * static `hutch` does not. `hutch template VERB` runs it; hutch serve runs
 * it as a child for imports, pulls and builds, reading its progress as
 * NDJSON on stdout (--progress ndjson). One function per verb, each in
 * its own file. */
#ifndef HUTCH_IMAGE_H
#define HUTCH_IMAGE_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "err.h"
#include "images.h"

/* Exit codes: 0 done; EXIT_IMAGE_INPUT the input (an archive, a
 * reference, a Dockerfile, a name) is wrong, the one line on stderr says
 * how; EXIT_IMAGE_STEP a build's RUN step failed; EXIT_IMAGE hutch failed. */
#define EXIT_IMAGE 125
#define EXIT_IMAGE_INPUT 2
#define EXIT_IMAGE_STEP 3

/* What every verb shares: the store, who owns what it makes, and where
 * progress goes. */
struct image_ctx {
  struct hutch_images store;
  const char *owner; /* --owner TENANT (hutch serve); "" : public, the CLI's */
  bool ndjson;       /* --progress ndjson: one JSON object per line on stdout */
  bool quiet;
  /* --public-registries: no pull (nor a build's FROM) from a registry on
   * loopback, which would reach the host's own services (hutch serve, for
   * a tenant). */
  bool public_registries;
  /* Caps on what one template may unpack to (--max-bytes, --max-files). */
  uint64_t max_bytes, max_files;
  /* --replace: a template of the same name and owner is replaced. */
  bool replace;
};

/* Progress: an event {"event": NAME, ...} as one NDJSON line, or a line
 * (redrawn in place on a terminal) for a person. Takes ev. */
void image_progress(struct image_ctx *ctx, json_t *ev);
/* A verb's end: {"event":"done","name","id"} (and, without --progress
 * ndjson, "NAME ID" on stdout) for the record a verb made, which it
 * takes; did says how ("imported"). Returns 0, the exit code. */
int image_done(struct image_ctx *ctx, const char *did, json_t *record);
/* Whether name is free for a new template of ctx->owner: a taken one
 * fails (HUTCH_ERR_CONFLICT, "template_exists") before any work is done;
 * the store checks again as it adds the template. */
int image_name_free(struct image_ctx *ctx, const char *name, struct hutch_err *err);
/* The exit code an error gives (EXIT_IMAGE_INPUT for the caller's fault),
 * after printing it: one line on stderr, and an {"event":"error"} line
 * with --progress ndjson. */
int image_fail(struct image_ctx *ctx, const char *verb, const struct hutch_err *err);

int cmd_import(struct image_ctx *ctx, int argc, char **argv);
int cmd_pull(struct image_ctx *ctx, int argc, char **argv);
int cmd_bootstrap(struct image_ctx *ctx, int argc, char **argv);
int cmd_build(struct image_ctx *ctx, int argc, char **argv);
int cmd_export(struct image_ctx *ctx, int argc, char **argv);
int cmd_ls(struct image_ctx *ctx, int argc, char **argv);
int cmd_inspect(struct image_ctx *ctx, int argc, char **argv);
int cmd_rm(struct image_ctx *ctx, int argc, char **argv);
/* context.c: unpack build-context tars into a directory (hutch serve's builds). */
int cmd_context(struct image_ctx *ctx, int argc, char **argv);

#endif
