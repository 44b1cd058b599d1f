/* Egress policies (netpolicy.h): parsing a sandbox's (its secrets in
 * npsecrets.c), matching a host and an address against it, what an
 * address is, and the operator's floor. */

#include "net/netpolicy.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "net/npsecrets.h"
#include "util.h"

static bool label_char(char ch) {
  return isalnum((unsigned char)ch) || ch == '-' || ch == '_';
}

/* A DNS name: labels of 1..63 of [A-Za-z0-9_-], not starting or ending with
 * '-', 253 in all. Lower-cased into out. */
static bool name_ok(const char *s, size_t n, char *out) {
  if (n == 0 || n > NETPOLICY_HOST_MAX)
    return false;
  size_t label = 0;
  for (size_t i = 0; i < n; i++) {
    char ch = s[i];
    if (ch == '.') {
      if (label == 0 || s[i - 1] == '-')
        return false;
      label = 0;
    } else if (label_char(ch)) {
      if (label == 0 && ch == '-')
        return false;
      if (++label > 63)
        return false;
    } else {
      return false;
    }
    out[i] = (char)tolower((unsigned char)ch);
  }
  out[n] = '\0';
  return label > 0 && s[n - 1] != '-';
}

/* IPv4 addresses carried in IPv6 ones (mapped, NAT64, 6to4) are what they
 * carry: [::ffff:169.254.169.254] is the metadata service. */
static const unsigned char *embedded_v4(const unsigned char *a) {
  static const unsigned char mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  static const unsigned char nat64[12] = {0, 0x64, 0xff, 0x9b};
  if (memcmp(a, mapped, 12) == 0 || memcmp(a, nat64, 12) == 0)
    return a + 12;
  if (a[0] == 0x20 && a[1] == 0x02)
    return a + 2;
  return NULL;
}

/* An IPv6 address that carries an IPv4 one becomes that: blocks of
 * either family are matched against what is really reached. */
static void unwrap(int *family, unsigned char a[16]) {
  const unsigned char *v4 = *family == AF_INET6 ? embedded_v4(a) : NULL;
  if (!v4)
    return;
  unsigned char b[4];
  memcpy(b, v4, 4);
  memset(a, 0, 16);
  memcpy(a, b, 4);
  *family = AF_INET;
}

static bool parse_addr(const char *s, int *family, unsigned char addr[16]) {
  memset(addr, 0, 16);
  if (inet_pton(AF_INET, s, addr) == 1) {
    *family = AF_INET;
    return true;
  }
  if (inet_pton(AF_INET6, s, addr) == 1) {
    *family = AF_INET6;
    return true;
  }
  return false;
}

bool netpolicy_host_ok(const char *host, char out[NETPOLICY_HOST_MAX + 1]) {
  size_t n = strlen(host);
  if (n >= 2 && host[0] == '[' && host[n - 1] == ']') {
    char tmp[64];
    int family;
    unsigned char a[16];
    if (n - 2 >= sizeof tmp)
      return false;
    memcpy(tmp, host + 1, n - 2);
    tmp[n - 2] = '\0';
    if (!parse_addr(tmp, &family, a) || family != AF_INET6)
      return false;
    inet_ntop(AF_INET6, a, out, NETPOLICY_HOST_MAX + 1);
    return true;
  }

  int family;
  unsigned char a[16];
  if (parse_addr(host, &family, a)) {
    inet_ntop(family, a, out, NETPOLICY_HOST_MAX + 1);
    return true;
  }

  if (n > 1 && host[n - 1] == '.')
    n--; /* the root's dot: "pypi.org." is "pypi.org" */
  if (!name_ok(host, n, out))
    return false;

  /* A last label of digits (or 0x…) is no name: the resolver would read
   * "134744072" or "010.0.0.1" as an address. */
  const char *last = strrchr(out, '.');
  last = last ? last + 1 : out;
  bool hex = last[0] == '0' && last[1] == 'x';
  const char *digits = hex ? last + 2 : last;
  return strspn(digits, hex ? "0123456789abcdef" : "0123456789") != strlen(digits);
}

/* "HOST[:PORT]" with HOST one of the forms in netpolicy.h. */
static int parse_entry(const char *s, struct np_entry *e, char *why, size_t whylen) {
  memset(e, 0, sizeof *e);
  char host[NETPOLICY_HOST_MAX + 8];
  size_t n = strlen(s);
  const char *colon = NULL;

  if (s[0] == '[') {
    const char *close = strchr(s, ']');
    if (!close)
      goto bad;
    colon = close[1] == ':' ? close + 1 : NULL;
    if (close[1] && !colon)
      goto bad;
    n = (size_t)(close - s - 1);
    if (n >= sizeof host)
      goto bad;
    memcpy(host, s + 1, n);
  } else {
    colon = strrchr(s, ':');
    n = colon ? (size_t)(colon - s) : n;
    if (n >= sizeof host)
      goto bad;
    memcpy(host, s, n);
  }
  host[n] = '\0';

  if (colon) {
    char *end;
    unsigned long port = strtoul(colon + 1, &end, 10);
    if (!isdigit((unsigned char)colon[1]) || *end || port == 0 || port > 65535) {
      snprintf(why, whylen, "allow entry '%.300s': the port must be 1..65535", s);
      return -1;
    }
    e->port = (uint16_t)port;
  }

  char *slash = strchr(host, '/');
  if (slash) {
    char *end;
    unsigned long prefix = strtoul(slash + 1, &end, 10);
    *slash = '\0';
    if (!isdigit((unsigned char)slash[1]) || *end)
      goto bad;
    if (!parse_addr(host, &e->family, e->addr))
      goto bad;
    if (prefix > (e->family == AF_INET ? 32u : 128u))
      goto bad;
    if (e->family == AF_INET6 && (s[0] != '[' || embedded_v4(e->addr)))
      goto bad;
    e->kind = NP_ADDR;
    e->prefix = (unsigned)prefix;
    return 0;
  }

  if (parse_addr(host, &e->family, e->addr)) {
    /* "::1:80" would be ambiguous: IPv6 goes in brackets; and an IPv4
     * address is written as one (matching unwraps them, see unwrap). */
    if (e->family == AF_INET6 && (s[0] != '[' || embedded_v4(e->addr)))
      goto bad;
    e->kind = NP_ADDR;
    e->prefix = e->family == AF_INET ? 32 : 128;
    return 0;
  }

  if (s[0] == '[')
    goto bad;
  if (strcmp(host, "*") == 0) {
    e->kind = NP_ANY;
    return 0;
  }
  if (strncmp(host, "*.", 2) == 0) {
    e->kind = NP_SUFFIX;
    e->name[0] = '.';
    if (!name_ok(host + 2, strlen(host + 2), e->name + 1))
      goto bad;
    return 0;
  }

  e->kind = NP_NAME;
  n = strlen(host);
  if (n > 1 && host[n - 1] == '.')
    n--;
  if (!name_ok(host, n, e->name))
    goto bad;
  return 0;

bad:
  snprintf(why, whylen,
           "allow entry '%.300s' is not a name, '*.' wildcard, address or address block "
           "(IPv6 in brackets, IPv4 as IPv4), with an optional :port",
           s);
  return -1;
}

/* The entries of network.<what> (a list; may be NULL when what is
 * "deny"), into *list (allocated). */
static int parse_list(json_t *arr, const char *what, struct np_entry **list, size_t *n, char *why,
                      size_t whylen) {
  bool optional = strcmp(what, "deny") == 0;
  if ((arr || !optional) && (!json_is_array(arr) || json_array_size(arr) > NETPOLICY_MAX_ENTRIES)) {
    snprintf(why, whylen, "network.%s must be a list of at most %d entries", what,
             NETPOLICY_MAX_ENTRIES);
    return -1;
  }
  *list = xcalloc(json_array_size(arr) + 1, sizeof **list);
  size_t i;
  json_t *v;
  json_array_foreach(arr, i, v) {
    const char *s = json_string_value(v);
    if (!s || strlen(s) > NETPOLICY_HOST_MAX + 8) {
      snprintf(why, whylen, "network.%s[%zu] must be a string of at most %d bytes", what, i,
               NETPOLICY_HOST_MAX + 8);
      return -1;
    }
    if (parse_entry(s, &(*list)[*n], why, whylen) < 0)
      return -1;
    (*n)++;
  }
  return 0;
}

int netpolicy_parse(json_t *network, json_t *secrets, struct netpolicy *out, char *why,
                    size_t whylen) {
  memset(out, 0, sizeof *out);
  if (npsecrets_parse(secrets, out, why, whylen) < 0)
    goto fail;
  if (!network || json_is_null(network))
    return 0;

  const char *mode = json_string_value(json_object_get(network, "mode"));
  json_t *allow = json_object_get(network, "allow");
  if (!json_is_object(network) || (json_object_get(network, "mode") && !mode)) {
    snprintf(why, whylen, "network must be an object {mode, allow}");
    goto fail;
  }

  if (!mode)
    mode = allow ? "allowlist" : "none";
  if (strcmp(mode, "none") == 0) {
    if (json_array_size(allow)) {
      snprintf(why, whylen, "network: mode \"none\" takes no allow-list");
      goto fail;
    }
    return 0;
  }
  if (strcmp(mode, "allowlist") != 0) {
    snprintf(why, whylen, "network.mode must be \"none\" or \"allowlist\"");
    goto fail;
  }

  out->allowlist = true;
  json_t *deny = json_object_get(network, "deny");
  if (parse_list(allow, "allow", &out->entries, &out->n, why, whylen) < 0)
    goto fail;
  if (json_is_null(deny))
    deny = NULL;
  if (parse_list(deny, "deny", &out->deny, &out->ndeny, why, whylen) < 0)
    goto fail;
  for (size_t i = 0; i < out->ndeny; i++)
    if (out->deny[i].kind == NP_ANY) {
      snprintf(why, whylen, "network.deny[%zu]: to deny all, leave \"*\" out of the allow-list", i);
      goto fail;
    }
  return 0;

fail:
  netpolicy_free(out);
  return -1;
}

void netpolicy_free(struct netpolicy *p) {
  for (size_t i = 0; i < p->nsecrets; i++) {
    free(p->secrets[i].header);
    /* The value is a credential: it does not linger in freed memory. */
    explicit_bzero(p->secrets[i].value, strlen(p->secrets[i].value));
    free(p->secrets[i].value);
  }
  free(p->secrets);
  free(p->entries);
  free(p->deny);
  memset(p, 0, sizeof *p);
}

static json_t *entries_json(const struct np_entry *list, size_t n) {
  json_t *a = json_array();
  for (size_t i = 0; i < n; i++) {
    const struct np_entry *e = &list[i];
    char host[NETPOLICY_HOST_MAX + 64], port[8] = "";
    switch (e->kind) {
    case NP_NAME:
      snprintf(host, sizeof host, "%s", e->name);
      break;
    case NP_SUFFIX:
      snprintf(host, sizeof host, "*%s", e->name);
      break;
    case NP_ANY:
      snprintf(host, sizeof host, "*");
      break;
    case NP_ADDR: {
      char addr[INET6_ADDRSTRLEN];
      inet_ntop(e->family, e->addr, addr, sizeof addr);
      bool whole = e->prefix == (e->family == AF_INET ? 32u : 128u);
      if (e->family == AF_INET6)
        snprintf(host, sizeof host, whole ? "[%s]" : "[%s/%u]", addr, e->prefix);
      else
        snprintf(host, sizeof host, whole ? "%s" : "%s/%u", addr, e->prefix);
      break;
    }
    }

    if (e->port)
      snprintf(port, sizeof port, ":%u", e->port);
    json_array_append_new(a, json_sprintf("%s%s", host, port));
  }
  return a;
}

json_t *netpolicy_allow_json(const struct netpolicy *p) {
  return entries_json(p->entries, p->n);
}

json_t *netpolicy_deny_json(const struct netpolicy *p) {
  return entries_json(p->deny, p->ndeny);
}

static bool in_block(const unsigned char *addr, const unsigned char *block, unsigned prefix) {
  unsigned whole = prefix / 8, rest = prefix % 8;
  if (memcmp(addr, block, whole) != 0)
    return false;
  if (!rest)
    return true;
  unsigned char mask = (unsigned char)(0xff << (8 - rest));
  return (addr[whole] & mask) == (block[whole] & mask);
}

static bool port_ok(const struct np_entry *e, uint16_t port) {
  return !e->port || e->port == port;
}

/* An address entry of list holding a:port; with exact_port, only one
 * that names that port. */
static bool listed(const struct np_entry *list, size_t n, int family, const unsigned char *a,
                   uint16_t port, bool exact_port) {
  for (size_t i = 0; i < n; i++) {
    const struct np_entry *e = &list[i];
    if (e->kind == NP_ADDR && e->family == family && in_block(a, e->addr, e->prefix) &&
        (exact_port ? e->port == port : port_ok(e, port)))
      return true;
  }
  return false;
}

static bool has_any(const struct netpolicy *p, uint16_t port) {
  for (size_t i = 0; i < p->n; i++)
    if (p->entries[i].kind == NP_ANY && port_ok(&p->entries[i], port))
      return true;
  return false;
}

enum np_match netpolicy_check_host(const struct netpolicy *p, const char *host, uint16_t port) {
  if (!p->allowlist)
    return NP_DENIED;

  int family;
  unsigned char a[16];
  if (parse_addr(host, &family, a)) {
    unwrap(&family, a);
    /* An address is reached when a listed block holds it, or through "*"
     * (then a public one only: netpolicy_check_addr) unless denied. */
    if (listed(p->entries, p->n, family, a, port, false))
      return NP_BY_ADDR;
    if (has_any(p, port) && !listed(p->deny, p->ndeny, family, a, port, false))
      return NP_BY_ANY;
    return NP_DENIED;
  }

  enum np_match best = NP_DENIED;
  size_t n = strlen(host);
  for (size_t i = 0; i < p->n; i++) {
    const struct np_entry *e = &p->entries[i];
    if (!port_ok(e, port))
      continue;
    if (e->kind == NP_NAME && strcmp(e->name, host) == 0)
      return NP_BY_NAME;
    size_t sl = strlen(e->name);
    if (e->kind == NP_SUFFIX && n > sl && strcmp(host + n - sl, e->name) == 0)
      best = NP_BY_PATTERN;
    else if (e->kind == NP_ANY && best == NP_DENIED)
      best = NP_BY_ANY;
  }

  /* What "*" alone lets through, the deny list's names take back. */
  for (size_t i = 0; best == NP_BY_ANY && i < p->ndeny; i++) {
    const struct np_entry *e = &p->deny[i];
    size_t sl = strlen(e->name);
    if (port_ok(e, port) &&
        ((e->kind == NP_NAME && strcmp(e->name, host) == 0) ||
         (e->kind == NP_SUFFIX && n > sl && strcmp(host + n - sl, e->name) == 0)))
      best = NP_DENIED;
  }
  return best;
}

/* What the floor holds an address for (none: it does not). */
enum floor_kind {
  F_NONE,
  F_PRIVATE,
  F_LOOPBACK,
  F_UNSPECIFIED,
  F_LINK_LOCAL,
  F_METADATA,
  F_MULTICAST,
  F_RESERVED,
  F_COMPAT,
};

static const char *const floor_names[] = {
    [F_PRIVATE] = "a private network",
    [F_LOOPBACK] = "the host's loopback",
    [F_UNSPECIFIED] = "unspecified, which reaches the host's loopback",
    [F_LINK_LOCAL] = "link-local, where cloud metadata services answer",
    [F_METADATA] = "a cloud metadata service",
    [F_MULTICAST] = "multicast",
    [F_RESERVED] = "reserved or broadcast",
    [F_COMPAT] = "IPv6 that leads to IPv4 the proxy cannot see",
};

/* What each block of addresses is, to a tenant's allow-list (class) and
 * to the operator's floor; the first that holds an address says. IPv4
 * carried in IPv6 is unwrapped before (embedded_v4). The metadata
 * services that sit inside other blocks are listed before them: AWS's
 * IPv6 one in fc00::/7, Alibaba's in 100.64/10, Oracle Classic's in
 * 192.0.0/24; the others answer at 169.254.169.254 (link-local). */
static const struct block {
  int family;
  unsigned char addr[16];
  unsigned prefix;
  enum np_class class;
  enum floor_kind floor;
} blocks[] = {
    {AF_INET, {0}, 8, NP_SPECIAL, F_UNSPECIFIED}, /* "this network"; 0.0.0.0 is lo */
    {AF_INET, {10}, 8, NP_PRIVATE, F_PRIVATE},    /* RFC 1918 */
    {AF_INET, {100, 100, 100, 200}, 32, NP_SPECIAL, F_METADATA},
    {AF_INET, {100, 64}, 10, NP_PRIVATE, F_PRIVATE}, /* shared address space (CGNAT) */
    {AF_INET, {127}, 8, NP_PRIVATE, F_LOOPBACK},
    {AF_INET, {169, 254}, 16, NP_SPECIAL, F_LINK_LOCAL}, /* holds 169.254.169.254 */
    {AF_INET, {172, 16}, 12, NP_PRIVATE, F_PRIVATE},
    {AF_INET, {192, 0, 0, 192}, 32, NP_SPECIAL, F_METADATA},
    {AF_INET, {192, 0, 0}, 24, NP_SPECIAL, F_NONE}, /* protocol assignments */
    {AF_INET, {192, 0, 2}, 24, NP_SPECIAL, F_NONE}, /* documentation */
    {AF_INET, {192, 168}, 16, NP_PRIVATE, F_PRIVATE},
    {AF_INET, {198, 18}, 15, NP_SPECIAL, F_NONE},      /* benchmarking */
    {AF_INET, {198, 51, 100}, 24, NP_SPECIAL, F_NONE}, /* documentation */
    {AF_INET, {203, 0, 113}, 24, NP_SPECIAL, F_NONE},  /* documentation */
    {AF_INET, {224}, 4, NP_SPECIAL, F_MULTICAST},
    {AF_INET, {240}, 4, NP_SPECIAL, F_RESERVED}, /* and 255.255.255.255 */
    {AF_INET, {0}, 0, NP_PUBLIC, F_NONE},
    {AF_INET6, {0}, 128, NP_SPECIAL, F_UNSPECIFIED},     /* ::, which is ::1 to connect(2) */
    {AF_INET6, {[15] = 1}, 128, NP_PRIVATE, F_LOOPBACK}, /* ::1 */
    {AF_INET6, {0}, 96, NP_SPECIAL, F_COMPAT},           /* IPv4-compatible ::a.b.c.d */
    {AF_INET6, {0, 0x64, 0xff, 0x9b, 0, 1}, 48, NP_SPECIAL, F_COMPAT}, /* local-use NAT64 */
    {AF_INET6, {0xfd, 0, 0x0e, 0xc2, [14] = 0x02, 0x54}, 128, NP_SPECIAL, F_METADATA},
    {AF_INET6, {0xfc}, 7, NP_PRIVATE, F_PRIVATE}, /* unique local */
    {AF_INET6, {0xfe, 0x80}, 10, NP_SPECIAL, F_LINK_LOCAL},
    {AF_INET6, {0xfe, 0xc0}, 10, NP_SPECIAL, F_PRIVATE}, /* site-local, deprecated */
    {AF_INET6, {0xff}, 8, NP_SPECIAL, F_MULTICAST},
    {AF_INET6, {0x20, 0x01, 0x0d, 0xb8}, 32, NP_SPECIAL, F_NONE}, /* documentation */
    {AF_INET6, {0x20}, 3, NP_PUBLIC, F_NONE},                     /* global unicast */
    {AF_INET6, {0}, 0, NP_SPECIAL, F_NONE},                       /* the unassigned rest */
};

static const struct block *block_of(int family, const unsigned char *a) {
  const unsigned char *v4 = family == AF_INET6 ? embedded_v4(a) : NULL;
  if (v4)
    return block_of(AF_INET, v4);
  for (size_t i = 0; i < ARRAY_SIZE(blocks); i++)
    if (blocks[i].family == family && in_block(a, blocks[i].addr, blocks[i].prefix))
      return &blocks[i];
  abort(); /* each family's list ends with its whole space */
}

enum np_class netpolicy_classify(int family, const unsigned char *a) {
  return block_of(family, a)->class;
}

bool netpolicy_addr_of(const struct sockaddr *sa, int *family, unsigned char a[16]) {
  memset(a, 0, 16);
  *family = sa->sa_family;
  if (*family == AF_INET)
    memcpy(a, &((const struct sockaddr_in *)sa)->sin_addr, 4);
  else if (*family == AF_INET6)
    memcpy(a, &((const struct sockaddr_in6 *)sa)->sin6_addr, 16);
  else
    return false;
  unwrap(family, a);
  return true;
}

bool netpolicy_check_addr(const struct netpolicy *p, enum np_match m, const struct sockaddr *sa,
                          uint16_t port, bool host_own, char *why, size_t whylen) {
  int family;
  unsigned char a[16];
  if (!netpolicy_addr_of(sa, &family, a)) {
    snprintf(why, whylen, "not an IP address");
    return false;
  }
  if (m == NP_DENIED)
    return false;

  char text[INET6_ADDRSTRLEN];
  inet_ntop(family, a, text, sizeof text);
  /* A listed block holding the address lets it through, whatever it is. */
  if (listed(p->entries, p->n, family, a, port, false))
    return true;
  if (m == NP_BY_ANY && listed(p->deny, p->ndeny, family, a, port, false)) {
    snprintf(why, whylen, "it resolves to %s, which the sandbox's deny list holds", text);
    return false;
  }

  enum np_class class = netpolicy_classify(family, a);
  bool own = class == NP_PUBLIC && host_own;
  if (own)
    class = NP_PRIVATE; /* the server's own host, at a public address */
  switch (class) {
  case NP_PUBLIC:
    return true;
  case NP_PRIVATE:
    if (m == NP_BY_NAME)
      return true;
    snprintf(why, whylen,
             "it resolves to %s, an address %s, reached only by a name listed exactly or by "
             "the address itself",
             text, own ? "of the server's own host" : "of a private network");
    return false;
  case NP_SPECIAL:
  default:
    snprintf(why, whylen,
             "it resolves to %s (link-local, metadata or reserved), reached only when that "
             "address is listed",
             text);
    return false;
  }
}

const struct np_secret *netpolicy_next_secret(const struct netpolicy *p, const char *host,
                                              uint16_t port, bool tls,
                                              const struct np_secret *prev) {
  size_t i = prev ? (size_t)(prev - p->secrets) + 1 : 0;
  for (; i < p->nsecrets; i++) {
    const struct np_secret *sec = &p->secrets[i];
    bool on_port = tls ? npsecrets_port_in(sec->https_ports, sec->nhttps, port)
                       : npsecrets_port_in(sec->http_ports, sec->nhttp, port);
    if (on_port && strcmp(sec->host, host) == 0)
      return sec;
  }
  return NULL;
}

/* ---- the operator's deny floor ---- */

int netpolicy_floor_add(struct np_floor *f, bool permit, const char *spec, char *why,
                        size_t whylen) {
  struct np_entry e;
  char scratch[512];
  const char *opt = permit ? "--egress-permit" : "--egress-deny";
  if (strlen(spec) > NETPOLICY_HOST_MAX + 8 || parse_entry(spec, &e, scratch, sizeof scratch) < 0 ||
      (permit && e.kind != NP_ADDR)) {
    snprintf(why, whylen, "%s wants %s with an optional :PORT (IPv6 in brackets), not '%.300s'",
             opt, permit ? "an address or CIDR block" : "an address, CIDR block or host name",
             spec);
    return -1;
  }
  struct np_entry **list = permit ? &f->permit : &f->deny;
  size_t *n = permit ? &f->npermit : &f->ndeny;
  *list = xrealloc(*list, (*n + 1) * sizeof **list);
  (*list)[(*n)++] = e;
  return 0;
}

void netpolicy_floor_free(struct np_floor *f) {
  free(f->deny);
  free(f->permit);
  memset(f, 0, sizeof *f);
}

/* Whether a:port reaches hutch serve's own listening socket. connect(2)
 * to the unspecified address reaches the loopback, and a server on every
 * address is reached at each of the host's. */
static bool reaches_server(int family, const unsigned char *a, uint16_t port,
                           const struct np_target *t) {
  int sf;
  unsigned char s[16];
  static const unsigned char zero[16];
  if (!t->server || !netpolicy_addr_of(t->server, &sf, s))
    return false;
  uint16_t sport = ntohs(sf == AF_INET ? ((const struct sockaddr_in *)t->server)->sin_port
                                       : ((const struct sockaddr_in6 *)t->server)->sin6_port);
  if (sport != port)
    return false;
  size_t len = family == AF_INET ? 4 : 16;
  enum floor_kind kind = block_of(family, a)->floor;
  bool local =
      t->host_own || kind == F_LOOPBACK || (kind == F_UNSPECIFIED && memcmp(a, zero, len) == 0);
  if (memcmp(s, zero, sf == AF_INET ? 4 : 16) == 0)
    return local;
  if (sf == family && memcmp(s, a, len) == 0)
    return true;
  /* The unspecified address is the loopback of its family. */
  return memcmp(a, zero, len) == 0 && sf == family && block_of(sf, s)->floor == F_LOOPBACK;
}

bool netpolicy_floor_denies(const struct np_floor *f, const char *host, uint16_t port,
                            const struct sockaddr *addr, char *why, size_t whylen) {
  struct netpolicy deny = {.allowlist = true, .entries = f->deny, .n = f->ndeny};
  if (host && f->ndeny && netpolicy_check_host(&deny, host, port) != NP_DENIED) {
    snprintf(why, whylen,
             "it is in the server's deny floor (--egress-deny), which no allow-list "
             "lifts");
    return true;
  }

  int family;
  unsigned char a[16];
  if (!addr || !netpolicy_addr_of(addr, &family, a))
    return false;
  if (!listed(f->deny, f->ndeny, family, a, port, false) ||
      listed(f->permit, f->npermit, family, a, port, false))
    return false;
  char text[INET6_ADDRSTRLEN];
  inet_ntop(family, a, text, sizeof text);
  snprintf(why, whylen, "%s is in the server's deny floor (listed by --egress-deny), which no "
                        "allow-list lifts", text);
  return true;
}

/* Every connection out of a sandbox is checked here, on the address
 * really connected to (after DNS: a name that resolves to a floor
 * address is refused, whatever the allow-list says, so rebinding a
 * listed name gains nothing), with IPv4 in IPv6 unwrapped. Only the
 * operator's permits lift an entry: the tenant's policy is checked
 * before, apart, and can only narrow. hutch serve's own socket is lifted
 * only by a permit that names its port: a permit for a block of
 * services on the loopback does not open the API (and with it the port
 * forwarder, which would lead the sandbox back into sandboxes). */
bool netpolicy_floor_check(const struct np_floor *f, const char *host, uint16_t port,
                           const struct np_target *t, char *why, size_t whylen) {
  if (netpolicy_floor_denies(f, host, port, NULL, why, whylen))
    return false;
  if (!t)
    return true;

  int family;
  unsigned char a[16];
  if (!netpolicy_addr_of(t->addr, &family, a)) {
    snprintf(why, whylen, "not an IP address");
    return false;
  }
  char text[INET6_ADDRSTRLEN];
  inet_ntop(family, a, text, sizeof text);
  if (reaches_server(family, a, port, t)) {
    if (listed(f->permit, f->npermit, family, a, port, true))
      return true;
    snprintf(why, whylen,
             "%s:%u is hutch serve itself, in the server's deny floor, which no allow-list "
             "lifts",
             text, port);
    return false;
  }

  const char *what = NULL;
  enum floor_kind kind = block_of(family, a)->floor;
  if (listed(f->deny, f->ndeny, family, a, port, false))
    what = "listed by --egress-deny";
  else if (kind != F_NONE && !(kind == F_PRIVATE && f->allow_private))
    what = floor_names[kind];
  else if (t->host_own)
    what = "an address of the server's own host";

  if (!what || listed(f->permit, f->npermit, family, a, port, false))
    return true;
  snprintf(why, whylen, "%s is in the server's deny floor (%s), which no allow-list lifts", text,
           what);
  return false;
}
