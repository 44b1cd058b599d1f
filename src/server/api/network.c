/* PATCH /v1/sandboxes/{id}/network {mode?, allow?, deny?, public_ports?, public?, mask_host?,
 * secrets?} (core/network.c): what is given replaces what was; the rest
 * stays. → 200 the sandbox. */
#include "api/network.h"

#include "util.h"
#include "api/lifecycle.h"
#include "core/egress/network.h"
#include "core/sandbox/sbx.h"
#include "http/body.h"
#include "http/errors.h"
#include "http/http.h"

json_t *api_network_request(struct http_conn *c, const struct principal *p,
                            const char *const *known, struct sbx **sb) {
  *sb = api_sbx_lookup(c, p);
  if (!*sb)
    return NULL;
  str_copy(c->sandbox, sizeof c->sandbox, (*sb)->id);
  json_t *o = http_body_object(c);
  if (o && http_body_only(c, o, known) < 0) {
    json_decref(o);
    o = NULL;
  }
  return o;
}

void api_sandboxes_network(struct http_conn *c, const struct principal *p) {
  static const char *const known[] = {"mode",   "allow",   "deny",      "public_ports",
                                      "public", "secrets", "mask_host", NULL};
  struct hutch_err err = {0};
  struct sbx *sb;
  json_t *o = api_network_request(c, p, known, &sb);
  if (!o)
    return;
  int rc = network_patch(sb, o, &err);
  json_decref(o);
  if (rc == 0)
    http_json(c, 200, sbx_json(sb));
  else
    http_fail(c, &err);
}
