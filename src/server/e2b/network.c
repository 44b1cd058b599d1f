/* E2B's network settings on hutch's (docs/network.md, docs/e2b.md):
 *
 *   allow_internet_access   true (E2B's default): any public host, "*"
 *   network.allowOut        allow-list entries (CIDRs, addresses, names, *.names)
 *   network.denyOut         addresses and blocks "*" does not reach; all traffic
 *                           (0.0.0.0/0): nothing but allowOut
 *   network.allowPublicTraffic  every port public (E2B's default) or private
 *   network.rules           {host: [{transform: {headers}}]}: secrets
 *   PUT /sandboxes/{id}/network  the egress part replaced; 204
 *
 * What E2B can say and hutch cannot (an egress proxy of one's own, a host
 * mask, HTTPS ports) is refused with 400 not_supported. */
#include "e2b/network.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>

#include "util.h"
#include "api/network.h"
#include "core/egress/network.h"
#include "core/sandbox/sbx.h"
#include "e2b/secrets.h"
#include "http/errors.h"
#include "http/http.h"

static bool all_traffic(const char *s) {
  return strcmp(s, "0.0.0.0/0") == 0 || strcmp(s, "::/0") == 0;
}

/* An allowOut entry as hutch writes it: IPv6 in brackets. */
static json_t *entry(const char *s) {
  char addr[64];
  const char *slash = strchr(s, '/');
  size_t n = slash ? (size_t)(slash - s) : strlen(s);
  unsigned char buf[16];
  if (n < sizeof addr && strchr(s, ':') && s[0] != '[') {
    memcpy(addr, s, n);
    addr[n] = '\0';
    if (inet_pton(AF_INET6, addr, buf) == 1)
      return json_sprintf("[%s]", s);
  }
  return json_string(s);
}

/* A header's value with each ${e2b.secrets.NAME} replaced by the value
 * of the tenant's secret NAME (secrets.c); NULL after a 400. */
static json_t *resolve(struct http_conn *c, const char *tenant, json_t *value) {
  static const char mark[] = "${e2b.secrets.";
  const char *s = json_string_value(value);
  if (!s || !strstr(s, mark))
    return json_incref(value);

  char *out = xstrdup("");
  for (const char *at; (at = strstr(s, mark));) {
    const char *name = at + sizeof mark - 1, *end = strchr(name, '}');
    char *v = NULL;
    if (end && end - name <= 128) {
      char *n = xasprintf("%.*s", (int)(end - name), name);
      v = e2b_secret_value(c->srv, tenant, n);
      free(n);
    }
    if (!v) {
      http_error(c, HUTCH_ERR_INVALID, "invalid_argument",
                 "network.rules: %.*s names no secret of the team", end ? (int)(end - at + 1) : 64,
                 at);
      explicit_bzero(out, strlen(out));
      free(out);
      return NULL;
    }

    char *more = xasprintf("%s%.*s%s", out, (int)(at - s), s, v);
    explicit_bzero(out, strlen(out));
    free(out);
    explicit_bzero(v, strlen(v));
    free(v);
    out = more;
    s = end + 1;
  }

  char *more = xasprintf("%s%s", out, s);
  explicit_bzero(out, strlen(out));
  free(out);
  json_t *j = json_string(more);
  explicit_bzero(more, strlen(more));
  free(more);
  return j;
}

/* The secrets E2B's rules ask for, added to secrets; -1 after a 400. */
static int rules_secrets(struct http_conn *c, const char *tenant, json_t *rules, json_t *secrets) {
  if (!rules || json_is_null(rules))
    return 0;
  if (!json_is_object(rules)) {
    http_error(c, HUTCH_ERR_INVALID, "invalid_argument", "network.rules must be {host: [rule, …]}");
    return -1;
  }

  const char *host;
  json_t *list;
  json_object_foreach(rules, host, list) {
    size_t i;
    json_t *rule;
    if (!json_is_array(list)) {
      http_error(c, HUTCH_ERR_INVALID, "invalid_argument", "network.rules[%s] must be a list",
                 host);
      return -1;
    }
    json_array_foreach(list, i, rule) {
      if (json_is_object(rule) && json_object_size(rule) == 0)
        continue; /* a rule without a transform: nothing to do */
      json_t *transform = json_object_get(rule, "transform");
      json_t *headers = json_object_get(transform, "headers");
      if (!json_is_object(rule) || json_object_size(rule) != 1 || !json_is_object(transform) ||
          json_object_size(transform) != 1 || !json_is_object(headers)) {
        http_error(c, HUTCH_ERR_UNSUPPORTED, "not_supported",
                   "network.rules: hutch applies {transform: {headers}} rules only");
        return -1;
      }

      const char *name;
      json_t *value;
      json_object_foreach(headers, name, value) {
        json_t *v = resolve(c, tenant, value);
        if (!v)
          return -1;
        json_array_append_new(secrets,
                              json_pack("{s:s,s:s,s:o}", "host", host, "header", name, "value", v));
      }
    }
  }
  return 0;
}

/* Whether E2B's allow_internet_access and network are of the shapes
 * hutch takes; false after a 400. */
static bool network_ok(struct http_conn *c, json_t *internet, json_t *network) {
  static const char *const unsupported[] = {"egressProxy", "httpsPorts", NULL};
  if (internet && !json_is_boolean(internet)) {
    http_error(c, HUTCH_ERR_INVALID, "invalid_argument",
               "allow_internet_access must be true or false");
    return false;
  }
  if (network && !json_is_null(network) && !json_is_object(network)) {
    http_error(c, HUTCH_ERR_INVALID, "invalid_argument", "network must be an object");
    return false;
  }
  for (size_t i = 0; unsupported[i]; i++) {
    json_t *v = json_object_get(network, unsupported[i]);
    if (v && !json_is_null(v) && !(json_is_array(v) && json_array_size(v) == 0)) {
      http_error(c, HUTCH_ERR_UNSUPPORTED, "not_supported", "network.%s is not available in hutch",
                 unsupported[i]);
      return false;
    }
  }
  return true;
}

/* network.denyOut into deny (*deny_all when it denies all traffic) and
 * network.allowOut into allow; -1 after a 400. */
static int out_lists(struct http_conn *c, json_t *network, json_t *allow, json_t *deny,
                     bool *deny_all) {
  size_t i;
  json_t *v;
  json_array_foreach(json_object_get(network, "denyOut"), i, v) {
    if (!json_is_string(v)) {
      http_error(c, HUTCH_ERR_INVALID, "invalid_argument",
                 "network.denyOut must be a list of strings");
      return -1;
    }
    if (all_traffic(json_string_value(v)))
      *deny_all = true;
    else
      json_array_append_new(deny, entry(json_string_value(v)));
  }
  json_array_foreach(json_object_get(network, "allowOut"), i, v) {
    if (!json_is_string(v)) {
      http_error(c, HUTCH_ERR_INVALID, "invalid_argument",
                 "network.allowOut must be a list of strings");
      return -1;
    }
    json_array_append_new(allow, entry(json_string_value(v)));
  }
  return 0;
}

/* hutch's {network, secrets} for E2B's allow_internet_access (absent:
 * NULL) and network (NULL: none); public: whether ports are public, or
 * -1 to leave it out. NULL after a 400. */
static json_t *translate(struct http_conn *c, const char *tenant, json_t *internet, json_t *network,
                         int public) {
  if (!network_ok(c, internet, network))
    return NULL;

  json_t *allow = json_array(), *deny = json_array(), *secrets = json_array();
  json_t *out =
      json_pack("{s:{s:o,s:o},s:o}", "network", "allow", allow, "deny", deny, "secrets", secrets);
  bool deny_all = internet && json_is_false(internet);
  if (out_lists(c, network, allow, deny, &deny_all) < 0) {
    json_decref(out);
    return NULL;
  }
  if (!deny_all) /* E2B's default: the Internet (hutch's proxy: its public part) */
    json_array_append_new(allow, json_string("*"));
  else
    json_array_clear(deny); /* nothing but allowOut: the rest says nothing more */

  json_t *hutch = json_object_get(out, "network");
  json_object_set_new(hutch, "mode", json_string(json_array_size(allow) ? "allowlist" : "none"));
  if (public >= 0)
    json_object_set_new(hutch, "public", json_boolean(public));
  json_t *mask = json_object_get(network, "maskRequestHost");
  if (mask && !json_is_null(mask))
    json_object_set(hutch, "mask_host", mask);

  if (rules_secrets(c, tenant, json_object_get(network, "rules"), secrets) < 0) {
    json_decref(out);
    return NULL;
  }
  return out;
}

json_t *e2b_network_request(struct http_conn *c, const struct principal *p, json_t *o) {
  json_t *network = json_object_get(o, "network");
  json_t *pub = json_object_get(network, "allowPublicTraffic");
  if (pub && !json_is_boolean(pub)) {
    http_error(c, HUTCH_ERR_INVALID, "invalid_argument",
               "network.allowPublicTraffic must be true or false");
    return NULL;
  }
  /* E2B's ports are public unless asked otherwise. */
  return translate(c, p->tenant, json_object_get(o, "allow_internet_access"), network,
                   !json_is_false(pub));
}

json_t *e2b_network_json(const struct sbx *sb) {
  json_t *out = json_array(), *denied = json_array();
  bool internet = false;
  size_t i;
  json_t *v;

  for (int list = 0; list < 2; list++)
    json_array_foreach(json_object_get(sb->network, list ? "deny" : "allow"), i, v) {
      const char *e = json_string_value(v);
      size_t n = strlen(e);
      json_t *to = list ? denied : out;
      if (strcmp(e, "*") == 0)
        internet = true;
      else if (e[0] == '[' && e[n - 1] == ']') /* E2B writes IPv6 bare */
        json_array_append_new(to, json_stringn(e + 1, n - 2));
      else
        json_array_append(to, v);
    }
  if (!internet)
    json_array_append_new(denied, json_string("0.0.0.0/0"));

  json_t *j = json_pack("{s:b,s:{s:o,s:o,s:b}}", "allowInternetAccess", internet, "network",
                        "allowOut", out, "denyOut", denied, "allowPublicTraffic",
                        json_is_true(json_object_get(sb->network, "public")));
  json_t *mask = json_object_get(sb->network, "mask_host");
  if (j && mask)
    json_object_set(json_object_get(j, "network"), "maskRequestHost", mask);
  return j;
}

/* PUT /sandboxes/{id}/network: E2B's egress settings replace the
 * sandbox's (what is left out is cleared); its ports stay as they were. */
void e2b_sandboxes_network(struct http_conn *c, const struct principal *p) {
  static const char *const known[] = {
      "allowOut", "denyOut", "egressProxy", "rules", "allow_internet_access", NULL};
  struct sbx *sb;
  json_t *o = api_network_request(c, p, known, &sb);
  if (!o)
    return;
  json_t *t = translate(c, p->tenant, json_object_get(o, "allow_internet_access"), o, -1);
  json_decref(o);
  if (!t)
    return;
  json_t *network = json_object_get(t, "network");
  json_object_set(network, "public_ports", json_object_get(sb->network, "public_ports"));
  json_object_set(network, "public", json_object_get(sb->network, "public"));
  if (json_object_get(sb->network, "mask_host"))
    json_object_set(network, "mask_host", json_object_get(sb->network, "mask_host"));
  struct hutch_err err = {0};
  int rc = network_change(sb, network, json_object_get(t, "secrets"), &err);
  json_decref(t);
  if (rc == 0)
    http_respond(c, 204, "application/json", "", 0, NULL);
  else
    http_fail(c, &err);
}
