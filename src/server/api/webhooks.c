/* /v1/webhooks (docs/events.md): POST {url, types?, secret?} → 201 with
 * the secret, shown this once; GET lists them (no secrets); GET one adds
 * its delivery log; DELETE. Each sees only the key's tenant's webhooks
 * (all of them for the admin key): core/hooks/webhooks.c judges. The
 * audit line of a create or delete is the router's, which logs no body:
 * the secret is never written anywhere but the sealed row. */
#include "api/webhooks.h"

#include <stdlib.h>

#include "util.h"
#include "core/hooks/webhooks.h"
#include "http/body.h"
#include "http/errors.h"
#include "http/http.h"

struct creating {
  struct http_wait w;
};

static void made(json_t *view, const struct hutch_err *err, void *arg) {
  struct creating *cr = arg;
  struct http_conn *c = http_wait_end(&cr->w);
  free(cr);
  if (!c)
    return; /* the client left: the webhook stands, as a create would */
  if (view)
    http_json(c, 201, json_incref(view));
  else
    http_fail(c, err);
}

void api_webhooks_create(struct http_conn *c, const struct principal *p) {
  static const char *const known[] = {"url", "types", "secret", NULL};
  const char *url = NULL, *secret = NULL;
  struct hutch_err err = {0};
  json_t *o = http_body_object(c);
  if (!o)
    return;
  if (http_body_only(c, o, known) < 0 || http_body_string(c, o, "url", WEBHOOK_URL_MAX, &url) < 0 ||
      http_body_string(c, o, "secret", 256, &secret) < 0)
    goto out;
  if (!url) {
    http_error(c, HUTCH_ERR_INVALID, "invalid_argument", "url: required (http or https)");
    goto out;
  }

  struct creating *cr = xcalloc(1, sizeof *cr);
  http_wait_begin(&cr->w, c);
  if (webhooks_create(c->srv, p, url, json_object_get(o, "types"), secret, made, cr, &err) < 0) {
    http_wait_end(&cr->w);
    free(cr);
    http_fail(c, &err);
  }
out:
  json_decref(o);
}

void api_webhooks_list(struct http_conn *c, const struct principal *p) {
  http_json(c, 200, json_pack("{s:o}", "webhooks", webhooks_list(c->srv, p)));
}

void api_webhooks_get(struct http_conn *c, const struct principal *p) {
  struct hutch_err err = {0};
  json_t *o = webhooks_get(c->srv, p, c->req.params[0], &err);
  if (o)
    http_json(c, 200, o);
  else
    http_fail(c, &err);
}

void api_webhooks_delete(struct http_conn *c, const struct principal *p) {
  struct hutch_err err = {0};
  if (webhooks_delete(c->srv, p, c->req.params[0], &err) < 0)
    http_fail(c, &err);
  else
    http_respond(c, 204, "application/json", "", 0, NULL);
}
