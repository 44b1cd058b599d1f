/* What a template job is asked to do (tplspec.h): its spec checked, and
 * the hutch-template command lines it runs, one child a step, with a
 * build's files written to its workdir first. templates.c runs them. */
#include "core/disk/tplspec.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cleanup.h"
#include "images.h"
#include "util.h"
#include "core/disk/tplqueue.h"

void tplspec_steps_free(struct template_job *j) {
  for (size_t i = 0; i < j->nsteps; i++) {
    for (char **a = j->steps[i]; *a; a++)
      free(*a);
    free(j->steps[i]);
  }
  free(j->steps);
  j->steps = NULL;
  j->nsteps = 0;
}

static char **argv_of(const char *first, ...) {
  char **v = xcalloc(16, sizeof *v);
  size_t n = 0;
  va_list ap;
  va_start(ap, first);
  for (const char *s = first; s && n < 15; s = va_arg(ap, const char *))
    v[n++] = xstrdup(s);
  va_end(ap);
  return v;
}

/* A build's workdir could not be written: err says why, else errno. */
static int workdir_failed(const char *workdir, struct hutch_err *err) {
  return err->msg[0] ? -1 : hutch_err_set(err, errno, "%s", workdir);
}

int tplspec_steps(struct template_job *j, const struct template_spec *s, const char *workdir,
                  struct hutch_err *err) {
  j->steps = xcalloc(3, sizeof *j->steps);

  if (strcmp(s->kind, "import") == 0) {
    j->steps[j->nsteps++] = argv_of("import", s->source, "--ref", s->ref, "--name", s->name, NULL);
  } else if (strcmp(s->kind, "pull") == 0) {
    if (s->insecure)
      j->steps[j->nsteps++] = argv_of("pull", "--insecure", s->source, "--name", s->name, NULL);
    else
      j->steps[j->nsteps++] = argv_of("pull", s->source, "--name", s->name, NULL);
  } else if (strcmp(s->kind, "build") == 0 && workdir) {
    /* The Dockerfile and the context's directory, in workdir. */
    _cleanup_free_ char *df = xasprintf("%s/Dockerfile", workdir);
    _cleanup_free_ char *ctx = xasprintf("%s/context", workdir);
    _cleanup_close_ int dir = open(workdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir < 0)
      return workdir_failed(workdir, err);
    if (create_file_at(dir, "Dockerfile", s->dockerfile, 0600, err) < 0)
      return workdir_failed(workdir, err);
    if (mkdirat(dir, "context", 0700) < 0)
      return workdir_failed(workdir, err);

    /* The uploaded tars, unpacked into the context first. */
    if (s->contexts && s->contexts[0]) {
      size_t n = 0;
      while (s->contexts[n])
        n++;
      char **v = xcalloc(n + 3, sizeof *v);
      v[0] = xstrdup("context");
      for (size_t i = 0; i < n; i++)
        v[i + 1] = xstrdup(s->contexts[i]);
      v[n + 1] = xstrdup(ctx);
      j->steps[j->nsteps++] = v;
    }

    /* build -f DF -t NAME[:TAG]... [--no-cache] --ref Dockerfile CONTEXT: the
     * record says the template came from a Dockerfile, not from the
     * context's path, which is the host's. */
    size_t ntags = json_array_size(s->tags);
    /* build, --ref and -f with theirs, --no-cache, --memory N, the
     * context and the NULL: 10, and each -t NAME (one when no tags). */
    char **v = xcalloc(2 * (ntags ? ntags : 1) + 10, sizeof *v);
    size_t n = 0;

    v[n++] = xstrdup("build");
    v[n++] = xstrdup("--ref");
    v[n++] = xstrdup("Dockerfile");
    v[n++] = xstrdup("-f");
    v[n++] = xstrdup(df);
    for (size_t i = 0; i < (ntags ? ntags : 1); i++) {
      const char *tag = json_string_value(json_array_get(s->tags, i));
      v[n++] = xstrdup("-t");
      v[n++] = tag ? xasprintf("%s:%s", s->name, tag) : xstrdup(s->name);
    }
    if (s->no_cache)
      v[n++] = xstrdup("--no-cache");
    /* Its RUN sandbox has the memory its tenant is counted for. */
    j->run_memory_mb = tplqueue_run_memory_mb();
    v[n++] = xstrdup("--memory");
    v[n++] = xasprintf("%llu", (unsigned long long)j->run_memory_mb);
    v[n++] = xstrdup(ctx);
    j->steps[j->nsteps++] = v;
  } else {
    return hutch_err_invalid(err, "no such template job: %s", s->kind);
  }
  return 0;
}

/* Whether an image reference names a registry on loopback by its
 * spelling (what hutch-template's pull takes as one: localhost, 127.x,
 * [::1]; a name that resolves there otherwise is refused by the pull). */
static bool ref_loopback(const char *ref) {
  const char *slash = strchr(ref, '/');
  size_t n = slash ? (size_t)(slash - ref) : 0;
  char host[256];
  if (!n || n >= sizeof host)
    return false;
  memcpy(host, ref, n);
  host[n] = '\0';
  if (host[0] != '[') /* a port after the name */
    host[strcspn(host, ":")] = '\0';
  else if (strchr(host, ']'))
    strchr(host, ']')[1] = '\0';

  return strcmp(host, "localhost") == 0 || strncmp(host, "127.", 4) == 0 ||
         strcmp(host, "[::1]") == 0;
}

bool tplspec_ok(const struct template_spec *s, const struct principal *p, struct hutch_err *err) {
  if (!hutch_images_name_ok(s->name))
    return hutch_err_invalid(err, "template name '%s': 1 to %d of a-z, 0-9, '.', '_', '-' and '/'",
                             s->name, HUTCH_IMAGE_NAME_MAX) == 0;
  /* A pull from a loopback registry reaches the host's own loopback
   * services: the operator's (the admin key) only, never a tenant's. */
  if (s->kind && strcmp(s->kind, "pull") == 0 && ref_loopback(s->source) && !p->admin)
    return hutch_err_fail(err, HUTCH_ERR_FORBIDDEN, "forbidden",
                          "a registry on the server's loopback is the admin key's to pull from") ==
           0;
  return true;
}
