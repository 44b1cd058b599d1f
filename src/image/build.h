/* hutch template build: what its files share (docs/templates.md,
 * "Building from a Dockerfile"). build.c runs the Dockerfile's
 * instructions stage by stage; build_run.c carries out a RUN step in a
 * sandbox; build_copy.c writes COPY and ADD layers from the context or
 * another stage (build_from.c reads stages); build_ignore.c matches
 * .dockerignore patterns. */
#ifndef HUTCH_BUILD_H
#define HUTCH_BUILD_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "dockerfile.h"
#include "image.h"
#include "layertar.h"

struct hutch_sandbox;

/* Seconds a RUN step may take unless --timeout says otherwise. */
#define BUILD_DEFAULT_TIMEOUT_S 600

/* One stage: its layers so far and the config its instructions set. */
struct stage {
  char *name;     /* AS NAME, or NULL */
  json_t *layers; /* hex strings, bottom first */
  json_t *env;    /* object NAME -> value, in the order set */
  json_t *args;   /* ARG values in scope (object) */
  json_t *config; /* workdir, user, entrypoint, cmd, labels, exposed_ports, shell */
  char chain[65]; /* digest of everything this stage did so far (the cache's parent) */
  bool cmd_set;   /* CMD given in this stage (ENTRYPOINT resets an inherited one) */
};

struct build {
  struct image_ctx *ctx;
  struct dockerfile df;
  int context_fd; /* the context directory */
  const char *context_path;
  struct build_ignore *ignore;
  json_t *build_args;  /* --build-arg K=V */
  json_t *global_args; /* ARGs before the first FROM */
  bool no_cache;
  bool insecure; /* --insecure: FROM may pull over http from loopback */
  uint64_t memory_bytes, disk_bytes, timeout_ms;
  struct egress *egress; /* --allow-out: RUN steps' proxy; NULL: no network */
  const char *network;   /* what RUN steps may reach, for their cache key: "" for none */
  struct stage *stages;
  size_t nstages;
  size_t step, nsteps; /* for progress */
  uint64_t made_bytes; /* file bytes of the layers made so far */
  uint64_t started_ns;
  bool tty;            /* progress redrawn on a terminal */
  const char *current; /* the step's instruction, for the status line */
};

/* --allow-out (build_egress.c): the policy of RUN steps' proxy, from the
 * allow-list (netpolicy.h's forms, comma-separated) and --egress-permit
 * blocks lifted from the deny floor. */
int build_egress_policy(struct build *b, const char *allow, const char *permit,
                        struct hutch_err *err);
void build_egress_free(struct build *b);
/* The proxy, listening at 127.0.0.1:3128 in sb's network namespace until
 * build_egress_stop (which ends every connection). */
int build_egress_start(struct build *b, struct hutch_sandbox *sb, struct hutch_err *err);
void build_egress_stop(struct build *b);
/* env (NULL-terminated, malloc'd) with the proxy variables added where
 * unset; the same array, grown. */
char **build_egress_env(char **env);

/* What the template's cap (--max-bytes) leaves for the next layer, after
 * the layers the build made so far. */
uint64_t build_bytes_left(const struct build *b);
/* The state directory the store is in (malloc'd). */
char *build_state_dir(const struct build *b);
/* FROM (build_pull.c): whether a base names an image (REGISTRY/NAME:TAG,
 * NAME@DIGEST) rather than a template; the template name a pulled
 * reference is kept under (lower case, ':' and '@' as '-'), malloc'd; and
 * the pull into it, giving its record. */
bool build_is_image_ref(const char *s);
char *build_pulled_name(const char *ref);
json_t *build_pull(struct build *b, const char *ref, struct hutch_err *err);

/* What a step that makes a layer made. */
struct step_result {
  char hex[65];
  uint64_t bytes;
  bool cached; /* the layer was there already: the cache's, or the same files' */
};

/* A layer on top of st: only its topmost copy stays (overlayfs refuses a
 * directory twice among its lowers, and a layer again higher up hides all
 * its lower copy shows: steps that change nothing make the same layer). */
void build_add_layer(struct stage *st, const char *hex);
/* The steps (build_steps.c). build_chain folds an instruction's text and
 * the layer it made (or "") into st->chain. */
void build_chain(struct stage *st, const char *text, const char *hex);
int build_step_run(struct build *b, struct stage *st, const struct df_instr *in,
                   struct step_result *res, struct hutch_err *err);
int build_step_copy(struct build *b, struct stage *st, const struct df_instr *in,
                    const struct stage *from, struct step_result *res, struct hutch_err *err);
/* ENV, ARG, LABEL, USER, EXPOSE, ENTRYPOINT, CMD, SHELL, WORKDIR
 * (build_meta.c); res->hex is set when WORKDIR made a layer. */
int build_step_meta(struct build *b, struct stage *st, const struct df_instr *in,
                    struct step_result *res, struct hutch_err *err);
/* ARG's NAME[=DEFAULT] words, substituted from scope, into into: the
 * --build-arg value, else the default, else the global ARG's value. */
int build_arg(struct build *b, json_t *scope, const struct df_instr *in, json_t *into,
              struct hutch_err *err);
/* p in the image: absolute or relative to st's workdir, "." and ".."
 * resolved (stopping at the root); a trailing '/' kept. malloc'd. */
char *build_image_path(const struct stage *st, const char *p);

/* The variables substitution sees in a stage: its ARGs, then its ENV. */
json_t *build_vars(const struct stage *st);
/* The environment a RUN step gets, "K=V" strings: ENV, then ARGs not
 * shadowed, then PATH when neither sets it. */
char **build_run_env(const struct stage *st);
/* Run cmd (argv, NULL-terminated) as a RUN step over st's layers; on
 * success the step's layer is committed and its hex put in hex. Failures
 * of the command itself are HUTCH_ERR_INVALID with code "step_failed". */
int build_run(struct build *b, struct stage *st, char **argv, struct step_result *res,
              struct hutch_err *err);

/* COPY or ADD: the files of srcs (from the context, or from stage from)
 * into a new layer at dest. */
struct copy_req {
  json_t *srcs;             /* strings, substituted */
  const char *dest;         /* absolute, substituted */
  const char *chown;        /* as written after substitution, or NULL */
  int chmod;                /* --chmod's mode, or -1 */
  const struct stage *from; /* NULL: the context */
  bool add;                 /* ADD: a local tar archive is unpacked */
};
int build_copy(struct build *b, const struct stage *st, const struct copy_req *req,
               struct step_result *res, struct hutch_err *err);

/* A copy under way: where from, where to, as whom. */
struct copier {
  struct build *b;
  int src_root;      /* the context, or a stage's root */
  bool from_context; /* .dockerignore and the link check apply */
  bool add;          /* ADD: local archives are unpacked */
  bool chown;
  uid_t uid;
  gid_t gid;
  int chmod;    /* --chmod: the mode of every file and directory copied; -1: theirs */
  int dst_root; /* the new layer's root */
  uint64_t bytes, files;
};
/* Copy every source of req (already checked) to req->dest. */
int build_copy_sources(struct copier *c, const struct copy_req *req, struct hutch_err *err);
/* The same, from stage req->from: in a child that mounts the stage's
 * layers as a read-only overlay under work (a directory of tmp/) in a
 * mount namespace of its own. */
int build_copy_from_stage(struct copier *c, const struct copy_req *req, const char *work,
                          struct hutch_err *err);
/* --chown's USER[:GROUP], names looked up in st's /etc/passwd and
 * /etc/group (read from its layers, nothing followed). */
int build_chown(struct build *b, const struct stage *st, const char *spec, uid_t *uid, gid_t *gid,
                struct hutch_err *err);

/* What path (absolute in the image) is in st's merged layers: its type
 * (S_IFREG, S_IFDIR, ...), or -1 when absent or hidden. The topmost layer
 * that holds it or hides it (a whiteout, an opaque parent, a parent that
 * is no directory) decides; no link is followed. content: a regular
 * file's text (malloc'd, up to 4 MiB), or NULL. */
int build_stage_lookup(struct build *b, const struct stage *st, const char *path, char **content);
/* A layer holding the directory path (WORKDIR's), with its parents. */
int build_mkdir_layer(struct build *b, const char *path, struct step_result *res,
                      struct hutch_err *err);

/* .dockerignore of the context (none: everything is included). */
struct build_ignore;
int build_ignore_load(int context_fd, struct build_ignore **out, struct hutch_err *err);
/* Whether path (relative to the context, no leading "./") is excluded. */
bool build_ignored(const struct build_ignore *ig, const char *path);
/* Whether it has `!` exceptions (which may bring back what an excluded
 * directory holds). */
bool build_ignore_has_exceptions(const struct build_ignore *ig);
void build_ignore_free(struct build_ignore *ig);
/* Match a cleaned path against a .dockerignore or COPY pattern: `*`, `?`
 * and `[...]` within one name, `**` across names. */
bool build_match(const char *pattern, const char *path);

/* Progress: a "log" line of a RUN step; the status line redrawn (on a
 * terminal, about once a second while a step runs). */
void build_log(struct build *b, const char *line, size_t n, bool err_stream);
void build_tick(struct build *b);

#endif
