/* hutch-template: dispatch to each verb (image.h). */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "image.h"
#include "sandbox.h"
#include "util.h"

static const char usage[] =
    "usage: hutch template [--state-dir DIR] [--owner TENANT] [--progress plain|ndjson]\n"
    "                      [--max-bytes N] [--max-files N] [--public-registries] VERB ...\n\n"
    "  import FILE|DIR --name NAME [--ref REF]  an OCI layout, oci-archive or docker-archive\n"
    "  pull [--insecure] REF [--name NAME]  from an OCI registry (REGISTRY/NAME:TAG)\n"
    "  bootstrap NAME [--suite S] [--include PKG,...]  a Debian base (mmdebstrap)\n"
    "  build [-f Dockerfile] -t NAME[:TAG]... [--no-cache] [--allow-out HOST,...] CONTEXT\n"
    "  ls [--json]                     the templates\n"
    "  inspect NAME                    a template's record, as JSON\n"
    "  rm NAME                         remove a template (its layers when unused)\n"
    "  export NAME FILE                write an OCI archive\n"
    "  context TAR... DIR              unpack build-context tars into DIR\n";

static const struct verb {
  const char *name;
  int (*fn)(struct image_ctx *, int, char **);
} verbs[] = {
    {"import", cmd_import}, {"pull", cmd_pull},     {"bootstrap", cmd_bootstrap},
    {"build", cmd_build},   {"ls", cmd_ls},         {"inspect", cmd_inspect},
    {"rm", cmd_rm},         {"export", cmd_export}, {"context", cmd_context},
};

/* One option before the verb (getopt_long's c, its argument arg): 0, 1
 * for --help (answered), -1 when it is wrong (said). */
static int parse_opt(struct image_ctx *ctx, const char **state_dir, int c, const char *arg) {
  switch (c) {
  case 's':
    *state_dir = arg;
    return 0;
  case 'o':
    ctx->owner = arg;
    return 0;
  case 'q':
    ctx->quiet = true;
    return 0;
  case 'R':
    ctx->public_registries = true;
    return 0;
  case 'B':
  case 'F':
    if (!parse_u64(arg, c == 'B' ? &ctx->max_bytes : &ctx->max_files)) {
      fprintf(stderr, "hutch template: --max-%s takes a count\n", c == 'B' ? "bytes" : "files");
      return -1;
    }
    return 0;
  case 'p':
    if (strcmp(arg, "ndjson") != 0 && strcmp(arg, "plain") != 0) {
      fprintf(stderr, "hutch template: --progress takes plain or ndjson\n");
      return -1;
    }
    ctx->ndjson = strcmp(arg, "ndjson") == 0;
    return 0;
  case 'h':
    fputs(usage, stdout);
    return 1;
  default:
    fputs(usage, stderr);
    return -1;
  }
}

/* The verb v run on the store at state_dir, with its own arguments (argv
 * from at); what a failed one left, collected. */
static int run_verb(struct image_ctx *ctx, const char *state_dir, const struct verb *v, int argc,
                    char **argv, int at) {
  struct hutch_err err = {0};
  if (hutch_images_open(&ctx->store, state_dir, &err) < 0)
    return image_fail(ctx, v->name, &err);

  /* Each verb parses its own arguments, its name as argv[0] (optind 0
   * starts glibc's getopt afresh). */
  optind = 0;
  int rc = v->fn(ctx, argc - at, argv + at);

  /* What a failed import or build committed is in no template: gone
   * now, unless another process is at work (images_gc.c). */
  if (rc != 0 && ctx->store.work_lock >= 0) {
    close(ctx->store.work_lock);
    ctx->store.work_lock = -1;
    struct hutch_err gc_err = {0};
    if (hutch_images_gc(&ctx->store, &gc_err) < 0)
      fprintf(stderr, "hutch template: collecting unused layers: %s\n", gc_err.msg);
  }
  hutch_images_close(&ctx->store);
  return rc;
}

int main(int argc, char **argv) {
  signal(SIGPIPE, SIG_IGN);
  struct image_ctx ctx = {.owner = "", .max_bytes = 16ull << 30, .max_files = 4000000};
  const char *state_dir = hutch_config_default_state_dir();
  static const struct option opts[] = {{"state-dir", required_argument, 0, 's'},
                                       {"owner", required_argument, 0, 'o'},
                                       {"progress", required_argument, 0, 'p'},
                                       {"quiet", no_argument, 0, 'q'},
                                       {"max-bytes", required_argument, 0, 'B'},
                                       {"public-registries", no_argument, 0, 'R'},
                                       {"max-files", required_argument, 0, 'F'},
                                       {"help", no_argument, 0, 'h'},
                                       {0, 0, 0, 0}};
  int c;
  /* '+': options after the verb are the verb's. */
  while ((c = getopt_long(argc, argv, "+qh", opts, NULL)) != -1) {
    int r = parse_opt(&ctx, &state_dir, c, optarg);
    if (r > 0)
      return 0;
    if (r < 0)
      return EXIT_IMAGE_INPUT;
  }
  if (optind >= argc) {
    fprintf(stderr, "hutch template: no verb given (see hutch template --help)\n");
    return EXIT_IMAGE_INPUT;
  }

  const char *verb = argv[optind];
  for (size_t i = 0; i < sizeof verbs / sizeof verbs[0]; i++)
    if (strcmp(verbs[i].name, verb) == 0)
      return run_verb(&ctx, state_dir, &verbs[i], argc, argv, optind);
  fprintf(stderr, "hutch template: unknown verb '%s' (see hutch template --help)\n", verb);
  return EXIT_IMAGE_INPUT;
}
