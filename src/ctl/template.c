/* hutch template ls|rm|pull|build|import over the API (/v1/templates,
 * docs/templates.md): a pull, build or import is a job on the server,
 * its events streamed here as it runs (Accept: application/x-ndjson),
 * uploads streamed from disk with a progress bar on a terminal. The
 * store's own tool, hutch-template, is `hutch template --local` (and
 * `--state-dir DIR`), which src/cli/serve.c runs instead. */
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "ctl.h"
#include "util.h"

#define DOCKERFILE_MAX (512u << 10) /* it goes in a JSON body of at most 1 MiB */

enum { OPT_JSON = 256, OPT_NAME, OPT_INSECURE, OPT_PUBLIC, OPT_NO_CACHE };

static const struct ctl_opt opts[] = {
    {OPT_NAME, "name", "NAME", "pull, build, import: the template's name"},
    {'f', "file", "DOCKERFILE", "build: the Dockerfile (default DIR/Dockerfile)"},
    {OPT_NO_CACHE, "no-cache", NULL, "build: no step from the cache"},
    {OPT_INSECURE, "insecure", NULL, "pull: plain http, from a registry on loopback"},
    {OPT_PUBLIC, "public", NULL, "publish it to every tenant (admin key)"},
    {OPT_JSON, "json", NULL, "ls: the API's objects; pull, build, import: the template's"},
    {0},
};

struct tpl_args {
  const char *name, *dockerfile;
  bool no_cache, insecure, public, json;
};

struct job {
  struct ctl *ctl;
  bool tty, json;
  uint64_t shown;   /* the upload's MiB last drawn (+1): a bar a MiB, not a chunk */
  json_t *done;     /* the template, once made */
  char failed[640]; /* "code: message" once it failed */
};

/* A bar of the upload or a layer's pull, on the terminal only. */
static void bar(const char *what, uint64_t done, uint64_t total) {
  int pct = total ? (int)(done * 100 / total) : 0;
  fprintf(stderr, "\r%s [%-30.*s] %3d%% %.1f/%.1f MiB", what, pct * 30 / 100,
          "##############################", pct, (double)done / (1 << 20),
          (double)total / (1 << 20));
  if (done >= total)
    fputc('\n', stderr);
}

static int on_event(void *arg, json_t *ev) {
  struct job *j = arg;
  const char *name = json_string_value(json_object_get(ev, "event"));
  const char *message = json_string_value(json_object_get(ev, "message"));
  const char *line = json_string_value(json_object_get(ev, "line"));
  if (!name)
    return HC_LINE_MORE;
  if (strcmp(name, "done") == 0) {
    j->done = json_incref(json_object_get(ev, "template"));
  } else if (strcmp(name, "failed") == 0) {
    snprintf(j->failed, sizeof j->failed, "%s: %s",
             json_string_value(json_object_get(ev, "code")) ?: "failed",
             message ?: "the job failed");
  } else if (strcmp(name, "error") == 0) {
    /* said once, by the "failed" that follows */
  } else if (strcmp(name, "step") == 0) {
    char *step = ctl_clean(json_string_value(json_object_get(ev, "instruction")) ?: "",
                           CTL_CLEAN_TEXT);
    fprintf(stderr, "%sStep %lld/%lld : %s%s\n", ctl_sgr(j->ctl, CTL_BOLD),
            (long long)json_integer_value(json_object_get(ev, "step")),
            (long long)json_integer_value(json_object_get(ev, "steps")), step,
            ctl_sgr(j->ctl, CTL_RESET));
    free(step);
  } else if (strcmp(name, "log") == 0 && line) {
    fprintf(stderr, "  %s\n", line); /* a RUN's own output, as it wrote it */
  } else if (strcmp(name, "pull_layer") == 0 && j->tty) {
    bar("layer", (uint64_t)json_integer_value(json_object_get(ev, "done")),
        (uint64_t)json_integer_value(json_object_get(ev, "total")));
  } else if (message) {
    char *said = ctl_clean(message, CTL_CLEAN_TEXT);
    fprintf(stderr, "%s\n", said);
    free(said);
  }
  return HC_LINE_MORE;
}

/* The job's answer: the template's name (or its JSON), or the failure. */
static int job_end(struct ctl *ctl, struct job *j, int rc) {
  if (rc == 0 && j->failed[0])
    rc = ctl_fail(ctl, CTL_EXIT_FAILED, "%s", j->failed);
  else if (rc == 0 && !j->done)
    rc = ctl_fail(ctl, CTL_EXIT_FAILED, "the job's events ended before it did");
  else if (rc == 0 && j->json)
    ctl_print_json(j->done);
  else if (rc == 0)
    printf("%s\n", json_string_value(json_object_get(j->done, "name")));
  json_decref(j->done);
  return rc;
}

static void sent(void *arg, uint64_t done, uint64_t total) {
  struct job *j = arg;
  if (j->tty && ((done >> 20) + 1 != j->shown || done == total)) {
    j->shown = (done >> 20) + 1;
    bar("upload", done, total);
  }
}

/* POST path with fd's size bytes of it; *out the JSON answer. */
static int upload(struct ctl *ctl, const char *path, int fd, struct job *j, bool job_events) {
  struct stat st;
  if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
    return ctl_fail(ctl, CTL_EXIT_FAILED, "the upload is not a regular file");
  struct hc_req req = {.method = "POST",
                       .path = path,
                       .ctype = "application/x-tar",
                       .upload = true,
                       .upload_fd = fd,
                       .upload_len = (uint64_t)st.st_size,
                       .sent = sent,
                       .arg = j};
  if (job_events) {
    req.accept = "application/x-ndjson";
    req.line = on_event;
  }
  struct hc_answer a;
  int rc = ctl_call(ctl, &req, &a);
  if (rc == 0 && !job_events) {
    j->done = a.json;
    a.json = NULL;
  }
  hc_answer_free(&a);
  return rc;
}

/* DIR as a tar in an unnamed temporary file (tar(1) makes it). */
static int tar_of(struct ctl *ctl, const char *dir, int *out) {
  const char *tmp = getenv("TMPDIR");
  int fd = open(tmp && *tmp ? tmp : "/tmp", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0)
    return ctl_fail(ctl, CTL_EXIT_FAILED, "a temporary file: %s", strerror(errno));
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, fd, STDOUT_FILENO);
  char *argv[] = {"tar", "-C", (char *)dir, "-cf", "-", ".", NULL};
  pid_t pid;
  int err = posix_spawnp(&pid, "tar", &fa, NULL, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  int status = 0;
  if (err == 0)
    waitpid(pid, &status, 0);
  if (err || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    close(fd);
    return ctl_fail(ctl, CTL_EXIT_FAILED, "tar of %s failed%s%s", dir, err ? ": " : "",
                    err ? strerror(err) : "");
  }
  lseek(fd, 0, SEEK_SET);
  *out = fd;
  return 0;
}

static char *read_small(struct ctl *ctl, const char *path) {
  FILE *f = fopen(path, "re");
  if (!f) {
    ctl_fail(ctl, 0, "%s: %s", path, strerror(errno));
    return NULL;
  }
  char *buf = xmalloc(DOCKERFILE_MAX + 1);
  size_t n = fread(buf, 1, DOCKERFILE_MAX + 1, f);
  fclose(f);
  if (n > DOCKERFILE_MAX || !utf8_valid(buf, n) || memchr(buf, '\0', n)) {
    ctl_fail(ctl, 0, "%s: not a Dockerfile of UTF-8 text up to %u KiB", path, DOCKERFILE_MAX >> 10);
    free(buf);
    return NULL;
  }
  buf[n] = '\0';
  return buf;
}

/* pull REF and build DIR: POST /v1/templates, the job's events streamed. */
static int make(struct ctl *ctl, const struct tpl_args *ta, json_t *body, struct job *j) {
  json_object_set_new(body, "name", json_string(ta->name));
  if (ta->public)
    json_object_set_new(body, "public", json_true());
  char *text = json_dumps(body, JSON_COMPACT);
  struct hc_req req = {.method = "POST",
                       .path = "/v1/templates",
                       .body = text,
                       .body_len = strlen(text),
                       .accept = "application/x-ndjson",
                       .line = on_event,
                       .arg = j};
  struct hc_answer a;
  int rc = ctl_call(ctl, &req, &a);
  hc_answer_free(&a);
  free(text);
  json_decref(body);
  return job_end(ctl, j, rc);
}

static int build(struct ctl *ctl, const struct tpl_args *ta, const char *dir, struct job *j) {
  char *df_path = ta->dockerfile ? xstrdup(ta->dockerfile) : xasprintf("%s/Dockerfile", dir);
  char *dockerfile = read_small(ctl, df_path);
  free(df_path);
  int fd = -1;
  if (!dockerfile || tar_of(ctl, dir, &fd)) {
    free(dockerfile);
    return CTL_EXIT_FAILED;
  }

  int rc = upload(ctl, "/v1/templates/contexts", fd, j, false);
  close(fd);
  json_t *ctx = j->done;
  j->done = NULL;
  if (rc) {
    free(dockerfile);
    return rc;
  }
  json_t *body = json_pack("{s:s,s:O,s:b}", "dockerfile", dockerfile, "context",
                           json_object_get(ctx, "id"), "no_cache", ta->no_cache);
  json_decref(ctx);
  free(dockerfile);
  return make(ctl, ta, body, j);
}

static int import(struct ctl *ctl, const struct tpl_args *ta, const char *file, struct job *j) {
  int fd = strcmp(file, "-") == 0 ? dup(STDIN_FILENO) : open(file, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return ctl_fail(ctl, CTL_EXIT_FAILED, "%s: %s", file, strerror(errno));
  char *path = ctl_path(ta->public ? "/v1/templates/import?name=%s&public=true"
                                   : "/v1/templates/import?name=%s",
                        ta->name);
  int rc = upload(ctl, path, fd, j, true);
  free(path);
  close(fd);
  return job_end(ctl, j, rc);
}

static void template_row(json_t *t, struct ctl_table *tab) {
  char size[32];
  snprintf(size, sizeof size, "%.1fM",
           (double)json_integer_value(json_object_get(t, "size_bytes")) / (1 << 20));
  const char *row[] = {json_string_value(json_object_get(t, "name")),
                       json_string_value(json_object_get(t, "id")),
                       json_string_value(json_object_get(t, "source")), size,
                       json_is_true(json_object_get(t, "public")) ? "yes" : "no"};
  ctl_table_row(tab, row);
}

static const char *const template_head[] = {"NAME", "ID", "SOURCE", "SIZE", "PUBLIC"};
static const struct ctl_columns template_cols = {ARRAY_SIZE(template_head), template_head,
                                                 template_row};

/* A pulled image's name by default: its repository's last part. */
static char *name_of_ref(const char *ref) {
  const char *slash = strrchr(ref, '/');
  const char *base = slash ? slash + 1 : ref;
  return xasprintf("%.*s", (int)strcspn(base, ":@"), base);
}

static void option(struct tpl_args *ta, int c, const char *arg) {
  if (c == OPT_NAME)
    ta->name = arg;
  else if (c == 'f')
    ta->dockerfile = arg;
  else if (c == OPT_NO_CACHE)
    ta->no_cache = true;
  else if (c == OPT_INSECURE)
    ta->insecure = true;
  else if (c == OPT_PUBLIC)
    ta->public = true;
  else if (c == OPT_JSON)
    ta->json = true;
}

static int template_run(struct ctl *ctl, int argc, char **argv) {
  struct tpl_args ta = {0};
  const char *what = ctl_sub(&argc, &argv);
  int c = CTL_OPT_END, rc = 0;
  const char *arg;
  while ((c = ctl_opt_next(ctl, argc, argv, &arg)) >= 0)
    option(&ta, c, arg);
  if (!ctl_opts_end(ctl, c, argc, argv, 0, -1, &rc))
    return rc;

  int n = argc - optind;
  const char *operand = n > 0 ? argv[optind] : NULL;
  struct job j = {.ctl = ctl, .tty = isatty(STDERR_FILENO), .json = ta.json};
  if (what && strcmp(what, "ls") == 0 && n == 0)
    return ctl_list(ctl, "/v1/templates", "templates", ta.json, &template_cols);
  if (what && strcmp(what, "rm") == 0 && n >= 1)
    return ctl_each(ctl, "DELETE", "/v1/templates/%s", argc, argv);
  if (what && n == 1 && !ta.name && (strcmp(what, "build") == 0 || strcmp(what, "import") == 0))
    return ctl_fail(ctl, CTL_EXIT_FAILED, "%s wants --name NAME", what);
  if (what && strcmp(what, "build") == 0 && n == 1)
    return build(ctl, &ta, operand, &j);
  if (what && strcmp(what, "import") == 0 && n == 1)
    return import(ctl, &ta, operand, &j);
  if (what && strcmp(what, "pull") == 0 && n == 1) {
    char *name = ta.name ? NULL : name_of_ref(operand);
    if (name)
      ta.name = name;
    json_t *body = json_pack("{s:s,s:b}", "from", operand, "insecure", ta.insecure);
    rc = make(ctl, &ta, body, &j);
    free(name);
    return rc;
  }
  return ctl_fail(ctl, CTL_EXIT_FAILED, "usage: hutch template %s", ctl->verb->args);
}

const struct ctl_verb ctl_verb_template = {
    "template",
    "ls | rm NAME... | pull [--name NAME] REF | build --name NAME DIR | import --name NAME FILE|-",
    "the templates over the API, builds' progress streamed (--local: the store's own tool)",
    opts,
    template_run,
    "ls rm pull build import"};
