/* hutch template build (build.h): options, the Dockerfile and its context,
 * stages made by FROM, each instruction as a step with its progress, and
 * the template added at the end. Nothing is listed until every step has
 * succeeded: the record is written whole by hutch_images_add. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "build.h"
#include "cleanup.h"
#include "msg.h"
#include "util.h"

static const char usage[] =
    "usage: hutch template build [-f Dockerfile] -t NAME[:TAG]... [--no-cache] [--build-arg "
    "K=V]...\n"
    "         [--allow-out HOST,...] [--egress-permit CIDR[:PORT],...] [--memory MB] [--disk MB]\n"
    "         [--timeout S] [--insecure] [--ref REF] CONTEXT\n";

struct build_opts {
  const char *file, *context, *allow_out, *permit;
  const char *ref; /* --ref: what the record says it came from, or NULL */
  char *name;      /* of -t NAME[:TAG] (every -t names one template) */
  json_t *tags;    /* the -t's tags; empty: latest */
};

static int bad(const char *opt, const char *val, const char *why) {
  fprintf(stderr, "hutch template build: %s %s: %s\n", opt, val, why);
  return -1;
}

/* -t NAME[:TAG], repeatable as docker build's: one name, each tag. */
static int add_tag(struct build_opts *o, const char *arg) {
  _cleanup_free_ char *name = xstrdup(arg);
  const char *tag = hutch_images_split_tag(name);
  if (!hutch_images_name_ok(name))
    return bad("-t", arg, "a template name is 1-128 of a-z 0-9 . _ - (and / between parts)");
  if (tag && !hutch_images_tag_ok(tag))
    return bad("-t", arg, "a tag is 1-128 of A-Z a-z 0-9 . _ - (not first . or -)");
  if (o->name && strcmp(o->name, name) != 0)
    return bad("-t", arg, "every -t names the same template (with other tags)");
  if (!o->name)
    o->name = steal_pointer(&name);
  json_array_append_new(o->tags, json_string(tag ? tag : "latest"));
  return 0;
}

static int mb(const char *opt, const char *v, uint64_t *out) {
  uint64_t n;
  if (!parse_u64(v, &n) || n == 0 || n > (1u << 20))
    return bad(opt, v, "expected a number of MiB from 1 to 1048576");
  *out = n << 20;
  return 0;
}

/* --build-arg NAME=VALUE. */
static int add_build_arg(struct build *b, const char *arg) {
  const char *eq = strchr(arg, '=');
  if (!eq || eq == arg)
    return bad("--build-arg", arg, "expected NAME=VALUE");
  _cleanup_free_ char *k = xasprintf("%.*s", (int)(eq - arg), arg);
  json_object_set_new(b->build_args, k, json_string(eq + 1));
  return 0;
}

/* One option (getopt_long's c, its argument arg): 0, 1 when it was --help
 * (answered), -1 when it is wrong (said). */
static int parse_opt(struct build *b, struct build_opts *o, int c, const char *arg) {
  switch (c) {
  case 'f':
    o->file = arg;
    return 0;
  case 't':
    return add_tag(o, arg);
  case 'n':
    b->no_cache = true;
    return 0;
  case 'k':
    b->insecure = true;
    return 0;
  case 'a':
    return add_build_arg(b, arg);
  case 'o':
    o->allow_out = arg;
    return 0;
  case 'P':
    o->permit = arg;
    return 0;
  case 'R':
    o->ref = arg;
    return 0;
  case 'm':
    return mb("--memory", arg, &b->memory_bytes);
  case 'd':
    return mb("--disk", arg, &b->disk_bytes);
  case 'T':
    if (!parse_milli(arg, &b->timeout_ms) || b->timeout_ms == 0 ||
        b->timeout_ms > 7ull * 24 * 3600 * 1000)
      return bad("--timeout", arg, "expected seconds, more than 0 and at most a week");
    return 0;
  case 'h':
    fputs(usage, stdout);
    return 1;
  default:
    fputs(usage, stderr);
    return -1;
  }
}

static int parse_opts(struct build *b, struct build_opts *o, int argc, char **argv) {
  static const struct option opts[] = {{"file", required_argument, 0, 'f'},
                                       {"tag", required_argument, 0, 't'},
                                       {"no-cache", no_argument, 0, 'n'},
                                       {"build-arg", required_argument, 0, 'a'},
                                       {"allow-out", required_argument, 0, 'o'},
                                       {"memory", required_argument, 0, 'm'},
                                       {"disk", required_argument, 0, 'd'},
                                       {"timeout", required_argument, 0, 'T'},
                                       {"egress-permit", required_argument, 0, 'P'},
                                       {"insecure", no_argument, 0, 'k'},
                                       {"ref", required_argument, 0, 'R'},
                                       {"help", no_argument, 0, 'h'},
                                       {0, 0, 0, 0}};
  int c;
  while ((c = getopt_long(argc, argv, "f:t:h", opts, NULL)) != -1) {
    int r = parse_opt(b, o, c, optarg);
    if (r != 0)
      return r;
  }

  if (optind != argc - 1 || !o->name) {
    fputs(usage, stderr);
    return -1;
  }
  o->context = argv[optind];
  return 0;
}

uint64_t build_bytes_left(const struct build *b) {
  uint64_t cap = b->ctx->max_bytes;
  return b->made_bytes < cap ? cap - b->made_bytes : 1;
}

char *build_state_dir(const struct build *b) {
  _cleanup_free_ char *d = xstrdup(b->ctx->store.dir);
  return xstrdup(dirname(d));
}

/* ---- progress ---- */

/* Seconds since ns, to the millisecond. */
static double since(uint64_t ns) {
  return (double)((now_ns() - ns) / 1000000) / 1e3;
}

/* A person at a terminal sees one status line, redrawn, with the RUN
 * output scrolling above it; elsewhere plain lines. */
static void status_line(struct build *b, const char *what) {
  size_t n = strcspn(what, "\r\n"); /* one line: a here-document's stays below */
  if (b->tty)
    fprintf(stderr, "\r\033[K[%zu/%zu] %.*s (%.1f s)", b->step, b->nsteps, (int)(n > 100 ? 100 : n),
            what, since(b->started_ns));
}

static void emit(struct build *b, json_t *ev, const char *plain) {
  if (b->ctx->ndjson) {
    image_progress(b->ctx, ev);
    return;
  }
  json_decref(ev);
  if (b->ctx->quiet || !plain)
    return;
  if (b->tty)
    fprintf(stderr, "\r\033[K%s\n", plain);
  else
    fprintf(stderr, "%s\n", plain);
}

void build_log(struct build *b, const char *line, size_t n, bool err_stream) {
  _cleanup_free_ char *copy = xasprintf("%.*s", (int)n, line);
  json_t *s = hutch_json_text(copy);
  json_t *ev = json_pack("{s:s,s:i,s:s,s:o}", "event", "log", "step", (int)b->step, "stream",
                         err_stream ? "stderr" : "stdout", "line", s);
  _cleanup_free_ char *plain = xasprintf("  %.*s", (int)n, line);
  emit(b, ev, plain);
  build_tick(b);
}

void build_tick(struct build *b) {
  status_line(b, b->current ? b->current : "");
}

static char *instr_text(const struct df_instr *in) {
  char *s = xstrdup(df_kind_name(in->kind));
  for (size_t i = 0; i < in->nflags; i++) {
    char *n = xasprintf("%s --%s=%s", s, in->flags[i].name, in->flags[i].value);
    free(s);
    s = n;
  }
  char *n = xasprintf("%s %s", s, in->rest ? in->rest : "");
  free(s);
  return n;
}

/* ---- stages ---- */

static struct stage *stage_new(struct build *b) {
  b->stages = xrealloc(b->stages, (b->nstages + 1) * sizeof *b->stages);
  struct stage *st = &b->stages[b->nstages++];
  memset(st, 0, sizeof *st);
  st->layers = json_array();
  st->env = json_object();
  st->args = json_object();
  st->config = json_pack("{s:s,s:s,s:n,s:n,s:{},s:[],s:[ss]}", "workdir", "", "user", "",
                         "entrypoint", "cmd", "labels", "exposed_ports", "shell", "/bin/sh", "-c");
  return st;
}

static void stage_free(struct stage *st) {
  free(st->name);
  json_decref(st->layers);
  json_decref(st->env);
  json_decref(st->args);
  json_decref(st->config);
}

static struct stage *stage_named(struct build *b, const char *name) {
  uint64_t idx;
  if (parse_u64(name, &idx) && idx < b->nstages)
    return &b->stages[idx];
  for (size_t i = 0; i < b->nstages; i++)
    if (b->stages[i].name && strcasecmp(b->stages[i].name, name) == 0)
      return &b->stages[i];
  return NULL;
}

/* A template's layers and config as the base of st. */
static void stage_from_record(struct stage *st, json_t *rec) {
  json_array_extend(st->layers, json_object_get(rec, "layers"));
  json_t *cfg = json_object_get(rec, "config");
  size_t i;
  json_t *v;
  json_array_foreach(json_object_get(cfg, "env"), i, v) {
    const char *s = json_string_value(v), *eq = s ? strchr(s, '=') : NULL;
    if (eq && eq != s) {
      _cleanup_free_ char *k = xasprintf("%.*s", (int)(eq - s), s);
      json_object_set_new(st->env, k, json_string(eq + 1));
    }
  }
  static const char *const keys[] = {"workdir", "user",          "entrypoint", "cmd",
                                     "labels",  "exposed_ports", "shell"};
  for (size_t k = 0; k < ARRAY_SIZE(keys); k++)
    if ((v = json_object_get(cfg, keys[k])) && !json_is_null(v))
      json_object_set_new(st->config, keys[k], json_deep_copy(v));
}

/* FROM's template: the store's of that name, else for an image reference
 * the one pulled before under its name, else a pull now. */
static json_t *base_record(struct build *b, const char *base, struct hutch_err *err) {
  /* Looked up as the template being built will be owned: a tenant's own
   * or a public one for a tenant's build, only a public one for a public
   * build (the CLI's, the admin key's). Never NULL ("anyone's"): a public
   * template stacked on a tenant's private one would publish its files,
   * and a tenant could plant the base (a name, or the name an image
   * reference is pulled as) that a public template is built on. */
  const char *owner = b->ctx->owner;
  json_t *rec = hutch_images_find(&b->ctx->store, owner, base, err);
  if (rec || hutch_err_class(err) != HUTCH_ERR_NOT_FOUND)
    return rec;
  if (!build_is_image_ref(base)) {
    hutch_err_not_found(err, "FROM %s: no template of that name (pull or import it first)", base);
    return NULL;
  }

  _cleanup_free_ char *name = build_pulled_name(base);
  if (hutch_images_name_ok(name)) {
    struct hutch_err none = {0};
    rec = hutch_images_find(&b->ctx->store, owner, name, &none);
    if (rec)
      return rec;
  }
  return build_pull(b, base, err);
}

/* FROM's words (IMAGE [AS NAME]) and its --platform, checked. */
static int check_from(struct build *b, const struct df_instr *in, json_t *words,
                      struct hutch_err *err) {
  size_t n = json_array_size(words);
  const char *as = n == 3 ? json_string_value(json_array_get(words, 1)) : NULL;
  if (n != 1 && !(n == 3 && strcasecmp(as, "as") == 0))
    return hutch_err_invalid(err, "FROM takes IMAGE [AS NAME]");

  const char *flag = df_flag(in, "platform");
  if (!flag)
    return 0;
  _cleanup_free_ char *platform = df_word(flag, b->global_args, b->df.escape, err);
  if (!platform)
    return -1;
  if (strcmp(platform, "linux/amd64") != 0)
    return hutch_err_fail(err, HUTCH_ERR_UNSUPPORTED, "unsupported",
                          "FROM --platform=%s: only linux/amd64", platform);
  return 0;
}

/* What stage st starts from: nothing (scratch), the earlier stage prev,
 * or the template base. Returns a line saying which, for the chain
 * (malloc'd), or NULL with err set. */
static char *stage_base(struct build *b, struct stage *st, const struct stage *prev,
                        const char *base, struct hutch_err *err) {
  if (strcmp(base, "scratch") == 0)
    return xstrdup("scratch");

  if (prev) {
    json_array_extend(st->layers, prev->layers);
    json_object_update(st->env, prev->env);
    json_decref(st->config);
    st->config = json_deep_copy(prev->config);
    return xasprintf("stage %s", prev->chain);
  }

  json_t *rec = base_record(b, base, err);
  if (!rec)
    return NULL;
  stage_from_record(st, rec);
  _cleanup_free_ char *layers = json_dumps(json_object_get(rec, "layers"), JSON_COMPACT);
  char *origin = xasprintf("template %s", layers);
  json_decref(rec);
  return origin;
}

static int do_from(struct build *b, const struct df_instr *in, struct hutch_err *err) {
  json_t *words = df_words(in->rest, b->global_args, b->df.escape, err);
  if (!words)
    return -1;
  if (check_from(b, in, words, err) < 0) {
    json_decref(words);
    return -1;
  }

  const char *base = json_string_value(json_array_get(words, 0));
  struct stage *prev = stage_named(b, base);
  size_t prev_i = prev ? (size_t)(prev - b->stages) : 0;
  struct stage *st = stage_new(b);
  prev = prev ? &b->stages[prev_i] : NULL; /* stage_new may have moved them */
  if (json_array_size(words) == 3)
    st->name = xstrdup(json_string_value(json_array_get(words, 2)));
  _cleanup_free_ char *origin = stage_base(b, st, prev, base, err);
  json_decref(words);
  if (!origin)
    return -1;

  /* Each tenant's steps are cached apart: a hit would tell one tenant
   * what another built, and hand it what the other's step downloaded. */
  _cleanup_free_ char *start = xasprintf("%s owner=%s", origin, b->ctx->owner);
  build_chain(st, start, "");
  return 0;
}

/* COPY or ADD into st: from the context, an earlier stage, or a template. */
static int do_copy(struct build *b, struct stage *st, const struct df_instr *in,
                   struct step_result *res, struct hutch_err *err) {
  const char *f = df_flag(in, "from");
  const struct stage *from = f ? stage_named(b, f) : NULL;
  if (from == st)
    return hutch_err_invalid(err, "COPY --from=%s: a stage cannot copy from itself", f);
  if (!f || from)
    return build_step_copy(b, st, in, from, res, err);

  /* Not a stage: a template, or an image pulled as FROM would. */
  json_t *rec = base_record(b, f, err);
  if (!rec)
    return hutch_err_wrap(err, "COPY --from");
  struct stage image = {.name = (char *)f, .layers = json_object_get(rec, "layers")};
  _cleanup_free_ char *layers = json_dumps(image.layers, JSON_COMPACT);
  build_chain(&image, layers, "");
  int r = build_step_copy(b, st, in, &image, res, err);
  json_decref(rec);
  return r;
}

static int do_step(struct build *b, const struct df_instr *in, struct step_result *res,
                   struct hutch_err *err) {
  struct stage *st = b->nstages ? &b->stages[b->nstages - 1] : NULL;
  if (in->kind == DF_FROM)
    return do_from(b, in, err);
  if (!st && in->kind == DF_ARG)
    return build_arg(b, b->global_args, in, b->global_args, err);
  if (in->kind == DF_RUN)
    return build_step_run(b, st, in, res, err);
  if (in->kind != DF_COPY && in->kind != DF_ADD)
    return build_step_meta(b, st, in, res, err);
  return do_copy(b, st, in, res, err);
}

/* The "step" event of the step under way. */
static void emit_step(struct build *b, const struct df_instr *in, const char *text) {
  _cleanup_free_ char *plain = xasprintf("Step %zu/%zu : %s", b->step, b->nsteps, text);
  emit(b,
       json_pack("{s:s,s:i,s:i,s:i,s:o}", "event", "step", "step", (int)b->step, "steps",
                 (int)b->nsteps, "line", in->line, "instruction", hutch_json_text(text)),
       plain);
}

/* The "step_done" event of the step just made, secs long. */
static void emit_step_done(struct build *b, const struct step_result *res, double secs) {
  _cleanup_free_ char *done = NULL;
  if (res->hex[0])
    done = xasprintf(" ---> %s%.12s, %llu bytes, %.2f s", res->cached ? "cached " : "", res->hex,
                     (unsigned long long)res->bytes, secs);
  emit(b,
       json_pack("{s:s,s:i,s:i,s:b,s:I,s:f,s:s?}", "event", "step_done", "step", (int)b->step,
                 "steps", (int)b->nsteps, "cached", res->cached, "bytes", (json_int_t)res->bytes,
                 "seconds", secs, "layer", res->hex[0] ? res->hex : NULL),
       done);
}

static int run_steps(struct build *b, struct hutch_err *err) {
  b->nsteps = b->df.n;
  for (size_t i = 0; i < b->df.n; i++) {
    const struct df_instr *in = &b->df.v[i];
    b->step = i + 1;
    _cleanup_free_ char *text = instr_text(in);
    emit_step(b, in, text);
    b->current = text;
    build_tick(b);

    uint64_t t0 = now_ns();
    struct step_result res = {0};
    int r = do_step(b, in, &res, err);
    b->made_bytes += res.bytes;
    b->current = NULL;
    if (r < 0)
      return hutch_err_wrap(err, "step %zu/%zu (line %d, %s)", b->step, b->nsteps, in->line,
                            df_kind_name(in->kind));
    emit_step_done(b, &res, since(t0));
  }
  return 0;
}

static json_t *final_config(const struct stage *st) {
  json_t *cfg = json_deep_copy(st->config);
  json_t *env = json_array();
  const char *k;
  json_t *v;
  json_object_foreach(st->env, k, v)
    json_array_append_new(env, json_sprintf("%s=%s", k, json_string_value(v)));
  json_object_set_new(cfg, "env", env);
  const char *wd = json_string_value(json_object_get(cfg, "workdir"));
  if (!wd || !wd[0])
    json_object_set_new(cfg, "workdir", json_string("/"));
  return cfg;
}

static int add_template(struct build *b, const struct build_opts *o, struct hutch_err *err) {
  const struct stage *st = &b->stages[b->nstages - 1];
  /* hutch serve names the build (--ref): its context's path is the
   * host's, under the state directory, and no tenant's to see. */
  char ref[4096];
  if (o->ref)
    str_copy(ref, sizeof ref, o->ref);
  else if (!realpath(o->context, ref))
    str_copy(ref, sizeof ref, o->context);
  json_t *rec = json_pack("{s:s,s:s,s:s,s:s,s:O,s:o,s:O}", "name", o->name, "owner", b->ctx->owner,
                          "source", "build", "ref", ref, "layers", st->layers, "config",
                          final_config(st), "tags", o->tags);
  json_t *stored = hutch_images_add(&b->ctx->store, rec, true, err);
  json_decref(rec);
  if (!stored)
    return -1;
  return image_done(b->ctx, "built", stored);
}

/* The Dockerfile: stdin (in), -f's file, or CONTEXT/Dockerfile. */
static int open_dockerfile(const struct build *b, const struct build_opts *o, bool in) {
  if (in)
    return dup(0);
  if (o->file)
    return open(o->file, O_RDONLY | O_CLOEXEC);
  return openat(b->context_fd, "Dockerfile", O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
}

static int read_dockerfile(struct build *b, const struct build_opts *o, struct hutch_err *err) {
  /* "-f -": from stdin, as docker build takes it (read to its end, capped). */
  bool in = o->file && strcmp(o->file, "-") == 0;
  _cleanup_close_ int fd = open_dockerfile(b, o, in);
  if (fd < 0)
    return hutch_err_invalid(err, "%s: %s", o->file ? o->file : "CONTEXT/Dockerfile",
                             strerror(errno));
  struct stat st;
  if (fstat(fd, &st) < 0 || (!in && !S_ISREG(st.st_mode)))
    return hutch_err_invalid(err, "%s: not a regular file", o->file ? o->file : "Dockerfile");

  _cleanup_free_ char *text = xmalloc(DF_MAX_BYTES + 1);
  ssize_t n = read_all(fd, text, DF_MAX_BYTES + 1);
  if (n < 0)
    return hutch_err_invalid(err, "read the Dockerfile: %s", strerror(errno));
  if (dockerfile_parse(text, (size_t)n, &b->df, err) < 0)
    return hutch_err_wrap(err, "Dockerfile");
  return 0;
}

static int build(struct build *b, const struct build_opts *o, struct hutch_err *err) {
  if (geteuid() != 0)
    return hutch_err_fail(err, HUTCH_ERR_INVALID, "not_root",
                          "must run as root: RUN steps run in sandboxes");
  if (o->permit && !o->allow_out)
    return hutch_err_invalid(err, "--egress-permit lifts the deny floor of --allow-out: give both");
  if (o->allow_out && build_egress_policy(b, o->allow_out, o->permit, err) < 0)
    return -1;
  b->network = o->allow_out ? o->allow_out : "";
  b->context_fd = open(o->context, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (b->context_fd < 0)
    return hutch_err_invalid(err, "context %s: %s", o->context, strerror(errno));

  if (read_dockerfile(b, o, err) < 0)
    return -1;
  if (build_ignore_load(b->context_fd, &b->ignore, err) < 0)
    return -1;
  if (run_steps(b, err) < 0)
    return -1;

  if (b->tty)
    fprintf(stderr, "\r\033[K");
  return add_template(b, o, err);
}

static void build_free(struct build *b, struct build_opts *o) {
  for (size_t i = 0; i < b->nstages; i++)
    stage_free(&b->stages[i]);
  free(b->stages);
  dockerfile_free(&b->df);
  build_ignore_free(b->ignore);
  build_egress_free(b);
  json_decref(b->build_args);
  json_decref(b->global_args);
  free(o->name);
  json_decref(o->tags);
  if (b->context_fd >= 0)
    close(b->context_fd);
}

int cmd_build(struct image_ctx *ctx, int argc, char **argv) {
  struct build b = {.ctx = ctx,
                    .context_fd = -1,
                    .build_args = json_object(),
                    .timeout_ms = BUILD_DEFAULT_TIMEOUT_S * 1000ull,
                    .started_ns = now_ns()};
  /* Docker's platform ARGs, in the global scope: hutch builds for one. */
  b.global_args = json_pack("{s:s,s:s,s:s,s:s,s:s,s:s}", "BUILDPLATFORM", "linux/amd64",
                            "TARGETPLATFORM", "linux/amd64", "BUILDOS", "linux", "BUILDARCH",
                            "amd64", "TARGETOS", "linux", "TARGETARCH", "amd64");
  b.tty = !ctx->ndjson && !ctx->quiet && isatty(2);
  struct build_opts o = {.tags = json_array()};
  struct hutch_err err = {0};

  int r = parse_opts(&b, &o, argc, argv);
  int code = r > 0 ? 0 : EXIT_IMAGE_INPUT;
  if (r == 0) {
    code = 0;
    if (build(&b, &o, &err) < 0) {
      if (b.tty)
        fprintf(stderr, "\r\033[K");
      code = image_fail(ctx, "build", &err);
      if (err.code && strcmp(err.code, "step_failed") == 0 && err.kind == HUTCH_ERR_INVALID)
        code = EXIT_IMAGE_STEP;
    }
  }

  build_free(&b, &o);
  return code;
}
