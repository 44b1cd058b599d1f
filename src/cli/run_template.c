/* hutch run --template NAME: the template's layers under the sandbox and
 * its config under the command (images.h): its environment below the
 * caller's --env, its working directory and user unless --cwd and --user
 * say otherwise, and its entrypoint and command when none is given. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "images.h"
#include "util.h"

static bool env_given(const struct run_opts *o, const char *kv) {
  size_t klen = strcspn(kv, "=") + 1;
  for (size_t i = 0; i < o->nenv; i++)
    if (strncmp(o->req.env[i], kv, klen) == 0)
      return true;
  return false;
}

static void take_env(struct run_opts *o, json_t *env) {
  size_t i, n = 0;
  json_t *v;
  char **all = xcalloc(json_array_size(env) + o->nenv + 1, sizeof *all);
  json_array_foreach(env, i, v) {
    const char *kv = json_string_value(v);
    if (kv && strchr(kv, '=') && kv[0] != '=' && !env_given(o, kv))
      all[n++] = xstrdup(kv);
  }
  for (size_t k = 0; k < o->nenv; k++)
    all[n++] = o->req.env[k];
  free(o->req.env);
  o->req.env = all;
  o->nenv = n;
}

/* The image's ENTRYPOINT then CMD, as the command. */
static int take_command(struct run_opts *o, json_t *cfg, struct hutch_err *err) {
  json_t *parts[] = {json_object_get(cfg, "entrypoint"), json_object_get(cfg, "cmd")};
  size_t n = json_array_size(parts[0]) + json_array_size(parts[1]), k = 0;
  if (n == 0)
    return hutch_err_invalid(err,
                             "no command given, and template %s has none "
                             "(no ENTRYPOINT or CMD)",
                             o->template_name);
  o->req.argv = xcalloc(n + 1, sizeof(char *));
  for (size_t p = 0; p < 2; p++) {
    size_t i;
    json_t *v;
    json_array_foreach(parts[p], i, v)
      o->req.argv[k++] = xstrdup(json_string_value(v) ?: "");
  }
  return 0;
}

int run_template(struct run_opts *o, struct hutch_err *err) {
  struct hutch_images store;
  if (hutch_images_open(&store, o->cfg.state_dir ? o->cfg.state_dir : hutch_config_default_state_dir(),
                        err) < 0)
    return -1;

  int r = -1;
  json_t *rec = hutch_images_find(&store, NULL, o->template_name, err);
  if (!rec)
    goto out;
  if (hutch_images_stack(&store, rec, &o->tmpl_rootfs, &o->tmpl_layers, &o->tmpl_nlayers, err) < 0)
    goto out;
  /* Held until this process ends, with the sandbox: the template may be
   * removed meanwhile, its layers stay. */
  o->tmpl_pin = hutch_images_pin(&store, rec, err);
  if (o->tmpl_pin < 0)
    goto out;

  o->cfg.rootfs = o->tmpl_rootfs;
  o->cfg.layers = (const char *const *)o->tmpl_layers;
  o->cfg.nlayers = o->tmpl_nlayers;

  struct hutch_image_config ic;
  hutch_images_config(rec, &ic);
  if (ic.env)
    take_env(o, ic.env);
  if (!o->req.cwd && ic.workdir)
    o->req.cwd = xstrdup(ic.workdir);
  if (!o->req.user && ic.user)
    o->req.user = xstrdup(ic.user);

  r = o->req.argv ? 0 : take_command(o, json_object_get(rec, "config"), err);
out:
  json_decref(rec);
  hutch_images_close(&store);
  return r;
}
