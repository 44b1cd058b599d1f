/* A sandbox's egress secrets (npsecrets.h):
 * which headers they may set, their values, hosts and ports, checked as
 * netpolicy_parse reads them. */
#include "net/npsecrets.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "util.h"

#define SECRET_VALUE_MAX 8192

/* A header name a secret may set: an HTTP token, and none that frames the
 * request or routes it. */
static bool secret_header_ok(const char *h) {
  static const char *const refused[] = {"host",
                                        "content-length",
                                        "transfer-encoding",
                                        "connection",
                                        "proxy-connection",
                                        "keep-alive",
                                        "upgrade",
                                        "te",
                                        "trailer",
                                        NULL};
  if (!*h || strlen(h) > 128)
    return false;
  for (const char *p = h; *p; p++)
    if (!isalnum((unsigned char)*p) && !strchr("!#$%&'*+-.^_`|~", *p))
      return false;
  for (size_t i = 0; refused[i]; i++)
    if (strcasecmp(h, refused[i]) == 0)
      return false;
  return true;
}

static bool secret_value_ok(const char *v) {
  if (strlen(v) > SECRET_VALUE_MAX)
    return false;
  for (const unsigned char *p = (const unsigned char *)v; *p; p++)
    if ((*p < 0x20 && *p != '\t') || *p == 0x7f)
      return false;
  return true;
}

/* A secret's port list, key of secrets[i] (absent: def, ndef ports),
 * into ports; -1 with why filled when it is no list of 0..16 ports. */
static int secret_ports(json_t *s, size_t i, const char *key, const uint16_t *def, size_t ndef,
                        uint16_t *ports, size_t *n, char *why, size_t whylen) {
  json_t *list = json_object_get(s, key);
  *n = 0;
  if (!list) {
    for (; *n < ndef; (*n)++)
      ports[*n] = def[*n];
    return 0;
  }
  if (!json_is_array(list) || json_array_size(list) > NETPOLICY_SECRET_PORTS)
    goto bad;
  size_t j;
  json_t *v;
  json_array_foreach(list, j, v) {
    json_int_t port = json_integer_value(v);
    if (!json_is_integer(v) || port < 1 || port > 65535)
      goto bad;
    ports[(*n)++] = (uint16_t)port;
  }
  return 0;
bad:
  snprintf(why, whylen, "secrets[%zu].%s must be a list of at most %d ports (1-65535)", i, key,
           NETPOLICY_SECRET_PORTS);
  return -1;
}

bool npsecrets_port_in(const uint16_t *ports, size_t n, uint16_t port) {
  for (size_t i = 0; i < n; i++)
    if (ports[i] == port)
      return true;
  return false;
}

/* Where secrets[i] may go: https_ports (443 unless given), and plain HTTP
 * only on the http_ports the rule names itself. A secret sent in clear
 * can be read by anyone between the proxy and the host, and handed back
 * by whatever answers at that address (the certificate check is what
 * keeps a secret from a server that does not own the name): a rule has
 * to ask for that, port by port. */
static int secret_where(json_t *s, size_t i, struct np_secret *sec, char *why, size_t whylen) {
  static const uint16_t https_default[] = {443};
  if (secret_ports(s, i, "https_ports", https_default, 1, sec->https_ports, &sec->nhttps, why,
                   whylen) < 0)
    return -1;
  if (secret_ports(s, i, "http_ports", NULL, 0, sec->http_ports, &sec->nhttp, why, whylen) < 0)
    return -1;

  if (!sec->nhttps && !sec->nhttp) {
    snprintf(why, whylen, "secrets[%zu] goes nowhere: https_ports and http_ports are empty", i);
    return -1;
  }
  for (size_t j = 0; j < sec->nhttp; j++)
    if (npsecrets_port_in(sec->https_ports, sec->nhttps, sec->http_ports[j])) {
      snprintf(why, whylen, "secrets[%zu]: port %u is in both https_ports and http_ports", i,
               sec->http_ports[j]);
      return -1;
    }
  return 0;
}

/* One {host, header, value, https_ports?, http_ports?}: nothing else. */
static bool secret_keys_ok(json_t *s) {
  static const char *const known[] = {"host", "header", "value", "https_ports", "http_ports"};
  const char *key;
  json_t *v;
  json_object_foreach(s, key, v) {
    size_t k = 0;
    while (k < ARRAY_SIZE(known) && strcmp(key, known[k]) != 0)
      k++;
    if (k == ARRAY_SIZE(known))
      return false;
  }
  return true;
}

int npsecrets_parse(json_t *secrets, struct netpolicy *out, char *why, size_t whylen) {
  if (!secrets || json_is_null(secrets))
    return 0;
  if (!json_is_array(secrets) || json_array_size(secrets) > NETPOLICY_MAX_SECRETS) {
    snprintf(why, whylen, "secrets must be a list of at most %d {host, header, value}",
             NETPOLICY_MAX_SECRETS);
    return -1;
  }

  out->secrets = xcalloc(json_array_size(secrets) + 1, sizeof *out->secrets);
  size_t i;
  json_t *s;
  json_array_foreach(secrets, i, s) {
    const char *host = json_string_value(json_object_get(s, "host"));
    const char *header = json_string_value(json_object_get(s, "header"));
    const char *value = json_string_value(json_object_get(s, "value"));
    if (!json_is_object(s) || !secret_keys_ok(s) || !host || !header || !value) {
      snprintf(why, whylen,
               "secrets[%zu] must be {host, header, value} (strings) with optional "
               "https_ports and http_ports",
               i);
      return -1;
    }

    struct np_secret *sec = &out->secrets[out->nsecrets];
    unsigned char a[16];
    if (!netpolicy_host_ok(host, sec->host) || inet_pton(AF_INET, sec->host, a) == 1 ||
        inet_pton(AF_INET6, sec->host, a) == 1) {
      snprintf(why, whylen, "secrets[%zu].host must be a host name", i);
      return -1;
    }
    if (!secret_header_ok(header)) {
      snprintf(why, whylen, "secrets[%zu].header is no header a secret may set", i);
      return -1;
    }
    if (!secret_value_ok(value)) {
      snprintf(why, whylen,
               "secrets[%zu].value must be at most %d bytes without control "
               "characters",
               i, SECRET_VALUE_MAX);
      return -1;
    }
    if (secret_where(s, i, sec, why, whylen) < 0)
      return -1;

    sec->header = xstrdup(header);
    sec->value = xstrdup(value);
    out->nsecrets++;
  }
  return 0;
}
