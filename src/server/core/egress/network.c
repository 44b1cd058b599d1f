/* A sandbox's network settings: its egress policy and secrets (netpolicy.h),
 * the ports it makes public (those listed, or all), and their changes
 * (api/network.c's PATCH /v1/sandboxes/{id}/network, e2b/network.c's PUT). */
#include "core/egress/network.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "core/sandbox/sbx.h"
#include "http/body.h"
#include "state/store.h"
#include "core/egress/egress.h"
#include "core/egress/egress_ca.h"
#include "core/egress/egress_trust.h"

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

/* mask_host: the Host a port's service gets (E2B's maskRequestHost):
 * absent, or a host[:port] of at most 261 bytes, ${PORT} standing for the
 * port reached. It goes into a request head: nothing but what a host
 * holds. */
static int check_mask(json_t *mask, char *why, size_t whylen) {
  if (!mask || json_is_null(mask))
    return 0;
  const char *s = json_string_value(mask);
  size_t n = s ? strlen(s) : 0;
  bool ok = s && n && n <= NETPOLICY_HOST_MAX + 8 && json_string_length(mask) == n;
  const char *port = ok ? strstr(s, "${PORT}") : NULL;
  for (size_t i = 0; ok && i < n; i++) {
    if (port && s + i == port)
      i += 6; /* the one ${PORT} */
    else
      ok = isalnum((unsigned char)s[i]) || strchr("-._:[]", s[i]);
  }
  if (!ok) {
    snprintf(why, whylen, "network.mask_host must be a host[:port] (${PORT}: the port reached)");
    return -1;
  }
  return 0;
}

/* Apply network (a whole {mode, allow, public_ports, public}) and secrets
 * to sb. */
static int apply(struct sbx *sb, json_t *network, json_t *secrets, char *why, size_t whylen) {
  static const char *const known[] = {"mode",   "allow",     "deny", "public_ports",
                                      "public", "mask_host", NULL};
  if (network && !json_is_null(network)) {
    if (!json_is_object(network)) {
      snprintf(why, whylen, "network must be an object {mode, allow, public_ports}");
      return -1;
    }
    const char *k = http_body_unknown(network, known);
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
  json_t *mask = json_object_get(network, "mask_host");
  if (check_mask(mask, why, whylen) < 0)
    return -1;

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
  if (pol.ndeny)
    json_object_set_new(sb->network, "deny", netpolicy_deny_json(&pol));
  if (json_is_string(mask))
    json_object_set(sb->network, "mask_host", mask);

  /* Copied before the old goes: secrets may be sb->secrets itself (a
   * change that leaves them as they were). */
  json_t *kept = json_array_size(secrets) ? json_deep_copy(secrets) : NULL;
  json_decref(sb->secrets);
  sb->secrets = kept;
  return 0;
}

int network_set(struct sbx *sb, json_t *network, json_t *secrets, struct hutch_err *err) {
  char why[512];
  if (apply(sb, network, secrets, why, sizeof why) < 0)
    return hutch_err_fail(err, HUTCH_ERR_INVALID, "invalid_argument", "%s", why);
  return 0;
}

int network_check(json_t *network, json_t *secrets, struct hutch_err *err) {
  struct sbx scratch = {0};
  int rc = network_set(&scratch, network, secrets, err);
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
  egress_ca_free(sb->tls_ca);
  sb->tls_ca = NULL;
  sb->tls_trusted = false;
  json_decref(sb->network);
  json_decref(sb->secrets);
  sb->network = sb->secrets = NULL;
}

int network_change(struct sbx *sb, json_t *network, json_t *secrets, struct hutch_err *err) {
  if (network_set(sb, network, secrets, err) < 0)
    return -1;
  egress_recheck(sb);
  egress_trust(sb, NULL, NULL);

  if (sbx_store(sb, false, err) < 0) {
    err->kind = HUTCH_ERR_SYSTEM; /* a 500 whatever its errno, as it always was */
    err->errnum = 0;
    err->code = "internal";
    return -1;
  }
  return 0;
}

int network_patch(struct sbx *sb, json_t *o, struct hutch_err *err) {
  json_t *network = json_deep_copy(sb->network);
  json_t *mode = json_object_get(o, "mode"), *allow = json_object_get(o, "allow");

  if (mode)
    json_object_set(network, "mode", mode);
  if (allow)
    json_object_set(network, "allow", allow);
  else if (json_is_string(mode) && strcmp(json_string_value(mode), "none") == 0)
    json_object_set_new(network, "allow", json_array());
  if (json_object_get(o, "mask_host"))
    json_object_set(network, "mask_host", json_object_get(o, "mask_host"));
  if (json_object_get(o, "deny"))
    json_object_set(network, "deny", json_object_get(o, "deny"));
  if (json_object_get(o, "public_ports"))
    json_object_set(network, "public_ports", json_object_get(o, "public_ports"));
  if (json_object_get(o, "public"))
    json_object_set(network, "public", json_object_get(o, "public"));

  json_t *secrets = json_object_get(o, "secrets");
  int rc = network_change(sb, network, secrets ? secrets : sb->secrets, err);
  json_decref(network);
  return rc;
}

int network_socket(struct sbx *sb, int family, struct hutch_err *err) {
  return hutch_sandbox_socket(sb->hs, sb->srv->netns_fd, family, SOCK_STREAM | SOCK_NONBLOCK, err);
}
