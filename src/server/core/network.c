/* A sandbox's network settings: its egress policy and secrets (netpolicy.h),
 * the ports it makes public (those listed, or all), and PATCH
 * /v1/sandboxes/{id}/network. */
#include "core/network.h"

#include <stdio.h>
#include <string.h>

#include "util.h"
#include "api/api.h"
#include "api/handlers.h"
#include "core/sbx.h"
#include "http/body.h"
#include "state/store.h"

#define MAX_PUBLIC_PORTS 64

/* public_ports: a list of distinct ports, or NULL for none. */
static int check_ports(json_t *ports, char *why, size_t whylen) {
  if (!ports || json_is_null(ports))
    return 0;
  if (!json_is_array(ports) || json_array_size(ports) > MAX_PUBLIC_PORTS) {
    snprintf(why, whylen, "network.public_ports must be a list of at most %d ports",
             MAX_PUBLIC_PORTS);
    return -1;
  }
  size_t i;
  json_t *v;
  json_array_foreach(ports, i, v) {
    if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > 65535) {
      snprintf(why, whylen, "network.public_ports[%zu] must be a port 1..65535", i);
      return -1;
    }
  }
  return 0;
}

/* Apply network (a whole {mode, allow, public_ports, public}) and secrets
 * to sb. */
static int apply(struct sbx *sb, json_t *network, json_t *secrets, char *why, size_t whylen) {
  static const char *const known[] = {"mode", "allow", "public_ports", "public", NULL};
  if (network && !json_is_null(network)) {
    if (!json_is_object(network)) {
      snprintf(why, whylen, "network must be an object {mode, allow, public_ports}");
      return -1;
    }
    const char *k = body_unknown(network, known);
    if (k) {
      snprintf(why, whylen, "network: unknown field '%.64s'", k);
      return -1;
    }
  }
  json_t *ports = json_object_get(network, "public_ports");
  json_t *public = json_object_get(network, "public");
  if (check_ports(ports, why, whylen) < 0)
    return -1;
  if (public && !json_is_boolean(public)) {
    snprintf(why, whylen, "network.public must be true or false");
    return -1;
  }
  struct netpolicy pol;
  if (netpolicy_parse(network, secrets, &pol, why, whylen) < 0)
    return -1;
  netpolicy_free(&sb->policy);
  sb->policy = pol;
  json_decref(sb->network);
  sb->network = json_pack("{s:s,s:o,s:o,s:b}", "mode", pol.allowlist ? "allowlist" : "none",
                          "allow", netpolicy_allow_json(&pol), "public_ports",
                          json_is_array(ports) ? json_deep_copy(ports) : json_array(), "public",
                          json_is_true(public));
  /* Copied before the old goes: secrets may be sb->secrets itself (a
   * change that leaves them as they were). */
  json_t *kept = json_array_size(secrets) ? json_deep_copy(secrets) : NULL;
  json_decref(sb->secrets);
  sb->secrets = kept;
  return 0;
}

int network_set(struct http_conn *c, struct sbx *sb, json_t *network, json_t *secrets) {
  char why[512];
  if (apply(sb, network, secrets, why, sizeof why) < 0) {
    http_error(c, HUTCH_ERR_INVALID, "invalid_argument", "%s", why);
    return -1;
  }
  return 0;
}

int network_check(struct http_conn *c, json_t *network, json_t *secrets) {
  struct sbx scratch = {0};
  int rc = network_set(c, &scratch, network, secrets);
  network_free(&scratch);
  return rc;
}

int network_restore(struct sbx *sb, json_t *network, json_t *secrets, struct hutch_err *err) {
  char why[512];
  if (apply(sb, network, secrets, why, sizeof why) < 0)
    return hutch_err_set(err, 0, "its stored network policy: %s", why);
  return 0;
}

void network_free(struct sbx *sb) {
  netpolicy_free(&sb->policy);
  json_decref(sb->network);
  json_decref(sb->secrets);
  sb->network = sb->secrets = NULL;
}

json_t *network_request(struct http_conn *c, const struct principal *p, const char *const *known,
                        struct sbx **sb) {
  *sb = sbx_lookup(c, p);
  if (!*sb)
    return NULL;
  str_copy(c->sandbox, sizeof c->sandbox, (*sb)->id);
  json_t *o = body_object(c);
  if (o && body_only(c, o, known) < 0) {
    json_decref(o);
    o = NULL;
  }
  return o;
}

int network_change(struct http_conn *c, struct sbx *sb, json_t *network, json_t *secrets) {
  if (network_set(c, sb, network, secrets) < 0)
    return -1;
  egress_recheck(sb);
  struct hutch_err err = {0};
  if (sbx_store(sb, false, &err) < 0) {
    http_error(c, HUTCH_ERR_SYSTEM, "internal", "%s", err.msg);
    return -1;
  }
  return 0;
}

/* PATCH /v1/sandboxes/{id}/network {mode?, allow?, public_ports?, public?,
 * secrets?}: what is given replaces what was; the rest stays. */
void api_sandboxes_network(struct http_conn *c, const struct principal *p) {
  static const char *const known[] = {"mode", "allow", "public_ports", "public", "secrets", NULL};
  struct sbx *sb;
  json_t *o = network_request(c, p, known, &sb);
  if (!o)
    return;
  json_t *network = json_deep_copy(sb->network);
  json_t *mode = json_object_get(o, "mode"), *allow = json_object_get(o, "allow");
  if (mode)
    json_object_set(network, "mode", mode);
  if (allow)
    json_object_set(network, "allow", allow);
  else if (json_is_string(mode) && strcmp(json_string_value(mode), "none") == 0)
    json_object_set_new(network, "allow", json_array());
  if (json_object_get(o, "public_ports"))
    json_object_set(network, "public_ports", json_object_get(o, "public_ports"));
  if (json_object_get(o, "public"))
    json_object_set(network, "public", json_object_get(o, "public"));
  json_t *secrets = json_object_get(o, "secrets");
  int rc = network_change(c, sb, network, secrets ? secrets : sb->secrets);
  json_decref(network);
  json_decref(o);
  if (rc == 0)
    http_json(c, 200, sbx_json(sb));
}
