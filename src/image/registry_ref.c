/* The registry client's parts that need no network (registry.h): image
 * references parsed (registry_ref_parse) and the addresses a registry
 * client may connect to (registry_addr_allowed). */
#include <arpa/inet.h>
#include <ctype.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

#include "images.h"
#include "registry.h"
#include "util.h"

#define DOCKER_HUB "docker.io"
#define DOCKER_HUB_API "registry-1.docker.io"

static bool alnum_lower(char c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

/* A path component: [a-z0-9]+ joined by '.', '_', "__" or runs of '-'. */
static bool component_ok(const char *s, size_t n) {
  if (n == 0 || !alnum_lower(s[0]) || !alnum_lower(s[n - 1]))
    return false;
  for (size_t i = 1; i < n; i++) {
    if (alnum_lower(s[i]))
      continue;
    if (s[i] == '.' || s[i] == '_') {
      if (!alnum_lower(s[i - 1]))
        return false;
      size_t run = 1;
      while (i + run < n && s[i + run] == s[i])
        run++;
      if (!alnum_lower(s[i + run]) || (s[i] == '.' && run > 1) || run > 2)
        return false;
      i += run - 1;
    } else if (s[i] != '-') {
      return false;
    }
  }
  return true;
}

static bool name_ok(const char *name) {
  size_t len = strlen(name);
  if (len == 0 || len > 255)
    return false;
  for (const char *p = name;;) {
    const char *slash = strchr(p, '/');
    size_t n = slash ? (size_t)(slash - p) : strlen(p);
    if (!component_ok(p, n))
      return false;
    if (!slash)
      return true;
    p = slash + 1;
  }
}

static bool tag_ok(const char *t) {
  size_t n = strlen(t);
  if (n == 0 || n > 128 || !(isalnum((unsigned char)t[0]) || t[0] == '_'))
    return false;
  for (size_t i = 1; i < n; i++)
    if (!isalnum((unsigned char)t[i]) && !strchr("_.-", t[i]))
      return false;
  return true;
}

/* A registry host: a DNS name or IPv4 literal, or a bracketed IPv6
 * literal, then an optional :port. Sets *loopback when it names
 * loopback (localhost, 127.0.0.0/8, ::1): such a registry may be plain
 * http with --insecure. Names like "127.1" are not taken as loopback, so
 * they get the stricter rules of a public registry. */
/* host_ok's bracketed IPv6 literal; *port is what follows "]:" ("" when
 * something else follows, which no port is; NULL when nothing does). */
static bool host_v6(const char *h, bool *loopback, const char **port) {
  char addr[256];
  const char *end = strchr(h, ']');
  if (!end || (size_t)(end - h - 1) >= sizeof addr)
    return false;
  memcpy(addr, h + 1, end - h - 1);
  addr[end - h - 1] = '\0';
  struct in6_addr a6;
  if (inet_pton(AF_INET6, addr, &a6) != 1)
    return false;
  *loopback = IN6_IS_ADDR_LOOPBACK(&a6);

  if (end[1] == ':')
    *port = end + 2;
  else if (end[1])
    *port = "";
  else
    *port = NULL;
  return true;
}

/* host_ok's DNS name or IPv4 literal, up to an optional ":port". */
static bool host_name(const char *h, bool *loopback, const char **port) {
  char addr[256];
  const char *colon = strchr(h, ':');
  size_t n = colon ? (size_t)(colon - h) : strlen(h);
  if (n == 0 || n >= sizeof addr)
    return false;
  memcpy(addr, h, n);
  addr[n] = '\0';
  for (size_t i = 0; i < n; i++)
    if (!isalnum((unsigned char)addr[i]) && addr[i] != '.' && addr[i] != '-')
      return false;
  if (addr[0] == '.' || addr[0] == '-' || addr[n - 1] == '.' || addr[n - 1] == '-' ||
      strstr(addr, ".."))
    return false;

  struct in_addr a4;
  *loopback = strcmp(addr, "localhost") == 0 ||
              (inet_pton(AF_INET, addr, &a4) == 1 && (ntohl(a4.s_addr) >> 24) == 127);
  *port = colon ? colon + 1 : NULL;
  return true;
}

static bool host_ok(const char *h, bool *loopback) {
  const char *port;
  bool ok = h[0] == '[' ? host_v6(h, loopback, &port) : host_name(h, loopback, &port);
  if (!ok)
    return false;
  if (port) {
    uint64_t p;
    if (!parse_u64(port, &p) || p == 0 || p > 65535)
      return false;
  }
  return true;
}

/* The reference is shown in the one-line error as far as it is printable. */
static int bad_ref(const char *s, const char *why, struct hutch_err *err) {
  size_t n = 0;
  while (n < 300 && s[n] >= 0x20 && s[n] < 0x7f)
    n++;
  return hutch_err_fail(err, HUTCH_ERR_INVALID, "bad_reference",
                        "'%.*s%s' is no image reference: %s", (int)n, s, s[n] ? "..." : "", why);
}

/* The reference s's "@sha256:..." and ":tag" cut off its copy buf, into
 * out (the tag latest when it has neither). */
static int ref_suffixes(char *buf, const char *s, struct registry_ref *out, struct hutch_err *err) {
  char *at = strchr(buf, '@');
  if (at) {
    *at = '\0';
    if (strncmp(at + 1, "sha256:", 7) != 0 || !hutch_images_hex_ok(at + 8))
      return bad_ref(s, "a digest is sha256: and 64 lowercase hex digits", err);
    str_copy(out->digest, sizeof out->digest, at + 1);
  }
  char *slash = strrchr(buf, '/');
  char *colon = strrchr(slash ? slash : buf, ':');
  if (colon) {
    *colon = '\0';
    if (!tag_ok(colon + 1))
      return bad_ref(s, "a tag is 1..128 of [A-Za-z0-9_.-]", err);
    str_copy(out->tag, sizeof out->tag, colon + 1);
  } else if (!at) {
    str_copy(out->tag, sizeof out->tag, "latest");
  }
  return 0;
}

/* The registry and the name of buf (s without its suffixes). The first
 * part is a registry when it looks like a host (a dot, a port, localhost,
 * an IPv6 literal), else the name is Docker Hub's. */
static int ref_domain(char *buf, const char *s, const char **domain, const char **name,
                      struct registry_ref *out, struct hutch_err *err) {
  char *first = strchr(buf, '/');
  *domain = DOCKER_HUB;
  *name = buf;
  if (first && (memchr(buf, '.', first - buf) || memchr(buf, ':', first - buf) || buf[0] == '[' ||
                (first - buf == 9 && strncmp(buf, "localhost", 9) == 0))) {
    *first = '\0';
    *domain = buf;
    *name = first + 1;
    if (!host_ok(*domain, &out->loopback))
      return bad_ref(s, "the registry is no host[:port]", err);
  }
  return 0;
}

int registry_ref_parse(const char *s, struct registry_ref *out, struct hutch_err *err) {
  memset(out, 0, sizeof *out);
  char buf[720];
  if (strlen(s) >= sizeof buf)
    return bad_ref(s, "too long", err);
  str_copy(buf, sizeof buf, s);
  if (ref_suffixes(buf, s, out, err) < 0)
    return -1;
  const char *domain, *name;
  if (ref_domain(buf, s, &domain, &name, out, err) < 0)
    return -1;

  if (strcmp(domain, "index.docker.io") == 0)
    domain = DOCKER_HUB;
  bool hub = strcmp(domain, DOCKER_HUB) == 0;
  if ((size_t)snprintf(out->name, sizeof out->name, "%s%s",
                       hub && !strchr(name, '/') ? "library/" : "", name) >= sizeof out->name)
    return bad_ref(s, "the name is longer than 255", err);
  if (!name_ok(out->name))
    return bad_ref(s, "a name is parts of [a-z0-9] joined by '.', '_', '__' or '-', split by '/'",
                   err);

  str_copy(out->host, sizeof out->host, hub ? DOCKER_HUB_API : domain);
  snprintf(out->canonical, sizeof out->canonical, "%s/%s%s%s%s%s", domain, out->name,
           out->tag[0] ? ":" : "", out->tag, out->digest[0] ? "@" : "", out->digest);
  return 0;
}

enum addr_class { ADDR_PUBLIC, ADDR_PRIVATE, ADDR_LOOPBACK, ADDR_NEVER };

static const struct v4_range {
  uint32_t net;
  int bits;
  enum addr_class cls;
} v4_ranges[] = {
    {0x00000000, 8, ADDR_NEVER},    /* "this network" */
    {0x0a000000, 8, ADDR_PRIVATE},  /* 10/8 */
    {0x64400000, 10, ADDR_PRIVATE}, /* 100.64/10, carrier-grade NAT */
    {0x7f000000, 8, ADDR_LOOPBACK},
    {0xa9fe0000, 16, ADDR_NEVER},   /* 169.254/16 link-local: cloud metadata */
    {0xac100000, 12, ADDR_PRIVATE}, /* 172.16/12 */
    {0xc0000000, 24, ADDR_NEVER},   /* 192.0.0/24 protocol assignments */
    {0xc0000200, 24, ADDR_NEVER},   /* documentation */
    {0xc0a80000, 16, ADDR_PRIVATE}, /* 192.168/16 */
    {0xc6120000, 15, ADDR_NEVER},   /* 198.18/15 benchmarking */
    {0xc6336400, 24, ADDR_NEVER},   /* documentation */
    {0xcb007100, 24, ADDR_NEVER},   /* documentation */
    {0xe0000000, 3, ADDR_NEVER},    /* multicast, reserved, broadcast */
};

static enum addr_class class_v4(uint32_t a) {
  for (size_t i = 0; i < ARRAY_SIZE(v4_ranges); i++)
    if ((a >> (32 - v4_ranges[i].bits)) == (v4_ranges[i].net >> (32 - v4_ranges[i].bits)))
      return v4_ranges[i].cls;
  return ADDR_PUBLIC;
}

static uint32_t v4_at(const uint8_t *b) {
  return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
}

/* IPv6 forms that carry an IPv4 address (mapped, NAT64, 6to4) are judged
 * by that address, so none of them is a way around the IPv4 rules. */
static enum addr_class class_v6(const struct in6_addr *a) {
  const uint8_t *b = a->s6_addr;
  static const uint8_t nat64[12] = {0x00, 0x64, 0xff, 0x9b};
  if (IN6_IS_ADDR_LOOPBACK(a))
    return ADDR_LOOPBACK;
  if (IN6_IS_ADDR_V4MAPPED(a) || memcmp(b, nat64, 12) == 0)
    return class_v4(v4_at(b + 12));
  if (b[0] == 0x20 && b[1] == 0x02)
    return class_v4(v4_at(b + 2));
  if ((b[0] & 0xfe) == 0xfc)
    return ADDR_PRIVATE; /* fc00::/7 unique local */
  if (b[0] == 0 || b[0] == 0xff || (b[0] == 0xfe && (b[1] & 0x80)) ||
      (b[0] == 0x20 && b[1] == 0x01 && b[2] == 0x0d && b[3] == 0xb8) ||
      (b[0] == 0x20 && b[1] == 0x01 && b[2] == 0 && b[3] == 0))
    return ADDR_NEVER; /* ::/8 (unspecified, compatible), multicast, link- and
                          site-local, documentation, Teredo */
  return ADDR_PUBLIC;
}

bool registry_addr_allowed(enum registry_scope scope, const struct sockaddr *sa) {
  enum addr_class c;
  if (sa->sa_family == AF_INET)
    c = class_v4(ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr));
  else if (sa->sa_family == AF_INET6)
    c = class_v6(&((const struct sockaddr_in6 *)sa)->sin6_addr);
  else
    return false;
  switch (scope) {
  case REGISTRY_SCOPE_LOOPBACK:
    return c == ADDR_LOOPBACK;
  case REGISTRY_SCOPE_PUBLIC:
    return c == ADDR_PUBLIC;
  case REGISTRY_SCOPE_PRIVATE:
    return c == ADDR_PUBLIC || c == ADDR_PRIVATE;
  }
  return false;
}
