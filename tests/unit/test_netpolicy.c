/* Egress policies (src/server/netpolicy.c): what an allow-list lets
 * through, which addresses a name may lead to, and what it refuses to
 * parse. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>

#include "netpolicy.h"
#include "tap.h"

static struct netpolicy policy(const char *allow_json, const char *secrets_json) {
  struct netpolicy p;
  char why[512] = "";
  json_t *allow = allow_json ? json_loads(allow_json, 0, NULL) : NULL;
  json_t *net = allow ? json_pack("{s:o}", "allow", allow) : NULL;
  json_t *sec = secrets_json ? json_loads(secrets_json, 0, NULL) : NULL;
  int rc = netpolicy_parse(net, sec, &p, why, sizeof why);
  ok(rc == 0, "parse %s %s %s", allow_json ? allow_json : "-", secrets_json ? secrets_json : "",
     why);
  json_decref(net);
  json_decref(sec);
  return p;
}

static void refused(const char *network_json, const char *secrets_json) {
  struct netpolicy p;
  char why[512] = "";
  json_t *net = network_json ? json_loads(network_json, 0, NULL) : NULL;
  json_t *sec = secrets_json ? json_loads(secrets_json, 0, NULL) : NULL;
  int rc = netpolicy_parse(net, sec, &p, why, sizeof why);
  ok(rc < 0 && why[0], "refused %s %s (%s)", network_json ? network_json : "-",
     secrets_json ? secrets_json : "", why);
  if (rc == 0)
    netpolicy_free(&p);
  json_decref(net);
  json_decref(sec);
}

static void host_is(const struct netpolicy *p, const char *host, unsigned port, enum np_match m) {
  is_int(netpolicy_check_host(p, host, (uint16_t)port), m, "%s:%u", host, port);
}

static bool addr_ok(const struct netpolicy *p, enum np_match m, const char *ip, unsigned port) {
  struct sockaddr_storage ss = {0};
  if (strchr(ip, ':')) {
    struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
    a->sin6_family = AF_INET6;
    inet_pton(AF_INET6, ip, &a->sin6_addr);
  } else {
    struct sockaddr_in *a = (struct sockaddr_in *)&ss;
    a->sin_family = AF_INET;
    inet_pton(AF_INET, ip, &a->sin_addr);
  }
  char why[256];
  return netpolicy_check_addr(p, m, (struct sockaddr *)&ss, (uint16_t)port, false, why, sizeof why);
}

static void class_is(const char *ip, enum np_class want) {
  unsigned char a[16] = {0};
  int family = strchr(ip, ':') ? AF_INET6 : AF_INET;
  inet_pton(family, ip, a);
  is_int(netpolicy_classify(family, a), want, "%s is class %d", ip, want);
}

int main(void) {
  /* Mode none: nothing at all. */
  struct netpolicy none = policy(NULL, NULL);
  ok(!none.allowlist, "no network object: mode none");
  host_is(&none, "pypi.org", 443, NP_DENIED);
  netpolicy_free(&none);

  struct netpolicy p = policy("[\"PyPI.org.\", \"*.github.com\", \"localhost:8080\", "
                              "\"10.1.0.0/16:5432\", \"[fd00::1]\", \"192.168.1.7\"]",
                              NULL);
  json_t *norm = netpolicy_allow_json(&p);
  char *text = json_dumps(norm, JSON_COMPACT);
  is_str(text,
         "[\"pypi.org\",\"*.github.com\",\"localhost:8080\",\"10.1.0.0/16:5432\","
         "\"[fd00::1]\",\"192.168.1.7\"]",
         "the allow-list, normalised");
  free(text);
  json_decref(norm);
  host_is(&p, "pypi.org", 443, NP_BY_NAME);
  host_is(&p, "pypi.org", 80, NP_BY_NAME);
  host_is(&p, "files.pypi.org", 443, NP_DENIED);
  host_is(&p, "api.github.com", 443, NP_BY_PATTERN);
  host_is(&p, "a.b.github.com", 443, NP_BY_PATTERN);
  host_is(&p, "github.com", 443, NP_DENIED);
  host_is(&p, "evilgithub.com", 443, NP_DENIED);
  host_is(&p, "localhost", 8080, NP_BY_NAME);
  host_is(&p, "localhost", 8081, NP_DENIED);
  host_is(&p, "10.1.2.3", 5432, NP_BY_ADDR);
  host_is(&p, "10.1.2.3", 5433, NP_DENIED);
  host_is(&p, "10.2.0.1", 5432, NP_DENIED);
  host_is(&p, "fd00::1", 1, NP_BY_ADDR);
  host_is(&p, "fd00::2", 1, NP_DENIED);
  host_is(&p, "192.168.1.7", 22, NP_BY_ADDR);

  /* Where a name may lead. */
  ok(addr_ok(&p, NP_BY_PATTERN, "140.82.112.3", 443), "a wildcard reaches a public address");
  ok(!addr_ok(&p, NP_BY_PATTERN, "10.9.9.9", 443), "... not a private one");
  ok(!addr_ok(&p, NP_BY_PATTERN, "127.0.0.1", 443), "... nor loopback");
  ok(addr_ok(&p, NP_BY_NAME, "127.0.0.1", 8080), "a name listed exactly reaches loopback");
  ok(!addr_ok(&p, NP_BY_NAME, "169.254.169.254", 80), "... never the metadata service");
  ok(!addr_ok(&p, NP_BY_NAME, "::ffff:169.254.169.254", 80), "... nor it mapped in IPv6");
  ok(!addr_ok(&p, NP_BY_NAME, "fe80::1", 80), "... nor IPv6 link-local");
  ok(addr_ok(&p, NP_BY_NAME, "10.1.9.9", 5432), "a listed block is reached by any name");
  ok(!addr_ok(&p, NP_DENIED, "8.8.8.8", 53), "nothing after a denied host");
  netpolicy_free(&p);

  struct netpolicy meta = policy("[\"*\", \"169.254.169.254:80\"]", NULL);
  host_is(&meta, "anything.example", 443, NP_BY_PATTERN);
  host_is(&meta, "8.8.8.8", 53, NP_DENIED);
  host_is(&meta, "169.254.169.254", 80, NP_BY_ADDR);
  ok(addr_ok(&meta, NP_BY_ADDR, "169.254.169.254", 80), "metadata when listed as an address");
  netpolicy_free(&meta);

  /* IPv4 in IPv6 is matched as IPv4: an IPv6 block lets none through. */
  struct netpolicy v6 = policy("[\"[::/0]\", \"127.0.0.1:80\"]", NULL);
  host_is(&v6, "::ffff:127.0.0.1", 7420, NP_DENIED);
  host_is(&v6, "::ffff:169.254.169.254", 80, NP_DENIED);
  host_is(&v6, "::ffff:127.0.0.1", 80, NP_BY_ADDR);
  host_is(&v6, "2606:4700::1111", 443, NP_BY_ADDR);
  ok(!addr_ok(&v6, NP_BY_NAME, "::ffff:169.254.169.254", 80), "mapped metadata, by a block");
  netpolicy_free(&v6);

  /* The server's own host at a public address counts as private. */
  struct netpolicy own = policy("[\"*\", \"myhost.example\"]", NULL);
  struct sockaddr_in pub = {.sin_family = AF_INET};
  inet_pton(AF_INET, "203.0.114.5", &pub.sin_addr);
  char why[256];
  ok(netpolicy_check_addr(&own, NP_BY_PATTERN, (struct sockaddr *)&pub, 80, false, why,
                          sizeof why),
     "a public address through a wildcard");
  ok(!netpolicy_check_addr(&own, NP_BY_PATTERN, (struct sockaddr *)&pub, 80, true, why,
                           sizeof why),
     "... not when it is the host's own: %s", why);
  ok(netpolicy_check_addr(&own, NP_BY_NAME, (struct sockaddr *)&pub, 80, true, why, sizeof why),
     "... unless named exactly");
  netpolicy_free(&own);

  class_is("8.8.8.8", NP_PUBLIC);
  class_is("10.0.0.1", NP_PRIVATE);
  class_is("172.16.0.1", NP_PRIVATE);
  class_is("172.32.0.1", NP_PUBLIC);
  class_is("100.64.0.1", NP_PRIVATE);
  class_is("127.0.0.53", NP_PRIVATE);
  class_is("169.254.169.254", NP_SPECIAL);
  class_is("0.0.0.0", NP_SPECIAL);
  class_is("224.0.0.1", NP_SPECIAL);
  class_is("255.255.255.255", NP_SPECIAL);
  class_is("2606:4700::1111", NP_PUBLIC);
  class_is("::1", NP_PRIVATE);
  class_is("fd00:ec2::254", NP_PRIVATE);
  class_is("fe80::1", NP_SPECIAL);
  class_is("::", NP_SPECIAL);
  class_is("2001:db8::1", NP_SPECIAL);
  class_is("64:ff9b::a9fe:a9fe", NP_SPECIAL);
  class_is("2002:a9fe:a9fe::", NP_SPECIAL);

  /* Host names as clients give them. */
  char out[NETPOLICY_HOST_MAX + 1];
  ok(netpolicy_host_ok("Example.COM.", out) && strcmp(out, "example.com") == 0, "canonical");
  ok(netpolicy_host_ok("[::1]", out) && strcmp(out, "::1") == 0, "bracketed IPv6");
  ok(!netpolicy_host_ok("a..b", out), "empty label");
  ok(!netpolicy_host_ok("-a.b", out), "label starting with -");
  ok(!netpolicy_host_ok("a b", out), "space");
  ok(!netpolicy_host_ok("", out), "empty");
  ok(!netpolicy_host_ok("134744072", out), "a number the resolver takes for an address");
  ok(!netpolicy_host_ok("010.0.0.1", out), "an octal address");
  ok(!netpolicy_host_ok("a.0x1f", out), "a hex last label");
  ok(netpolicy_host_ok("1password.com", out), "digits first in a label");

  /* Secrets: by exact host, in order. */
  struct netpolicy s =
      policy("[\"api.example.com\"]", "[{\"host\":\"API.example.com\",\"header\":\"Authorization\","
                                      "\"value\":\"Bearer x\"},{\"host\":\"api.example.com\","
                                      "\"header\":\"X-Two\",\"value\":\"2\"}]");
  const struct np_secret *sec = netpolicy_next_secret(&s, "api.example.com", NULL);
  ok(sec && strcmp(sec->header, "Authorization") == 0, "first secret");
  sec = sec ? netpolicy_next_secret(&s, "api.example.com", sec) : NULL;
  ok(sec && strcmp(sec->value, "2") == 0, "second secret");
  ok(!netpolicy_next_secret(&s, "example.com", NULL), "no secret for another host");
  netpolicy_free(&s);

  refused("{\"mode\":\"open\"}", NULL);
  refused("{\"mode\":\"none\",\"allow\":[\"a.org\"]}", NULL);
  refused("{\"allow\":\"a.org\"}", NULL);
  refused("{\"allow\":[1]}", NULL);
  refused("{\"allow\":[\"a.org:0\"]}", NULL);
  refused("{\"allow\":[\"a.org:65536\"]}", NULL);
  refused("{\"allow\":[\"a.org:\"]}", NULL);
  refused("{\"allow\":[\"::1\"]}", NULL);
  refused("{\"allow\":[\"[a.org]\"]}", NULL);
  refused("{\"allow\":[\"*.*.org\"]}", NULL);
  refused("{\"allow\":[\"a*.org\"]}", NULL);
  refused("{\"allow\":[\"10.0.0.0/33\"]}", NULL);
  refused("{\"allow\":[\"[::ffff:10.0.0.1]\"]}", NULL);
  refused("{\"allow\":[\"[2002::/16]\"]}", NULL);
  refused("{\"allow\":[\"a.org/8\"]}", NULL);
  refused("[]", NULL);
  refused(NULL, "{}");
  refused(NULL, "[{\"host\":\"a.org\",\"header\":\"Host\",\"value\":\"x\"}]");
  refused(NULL, "[{\"host\":\"a.org\",\"header\":\"Bad Header\",\"value\":\"x\"}]");
  refused(NULL, "[{\"host\":\"a.org\",\"header\":\"X\",\"value\":\"a\\nb\"}]");
  refused(NULL, "[{\"host\":\"1.2.3.4\",\"header\":\"X\",\"value\":\"v\"}]");
  refused(NULL, "[{\"host\":\"a.org\",\"header\":\"X\"}]");
  refused(NULL, "[{\"host\":\"a.org\",\"header\":\"X\",\"value\":\"v\",\"more\":1}]");
  return done_testing();
}
