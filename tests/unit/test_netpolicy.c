/* Egress policies (src/server/netpolicy.c): what an allow-list lets
 * through, which addresses a name may lead to, and what it refuses to
 * parse. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>

#include "net/netpolicy.h"
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

static void sockaddr_of(const char *ip, unsigned port, struct sockaddr_storage *ss) {
  memset(ss, 0, sizeof *ss);
  if (strchr(ip, ':')) {
    struct sockaddr_in6 *a = (struct sockaddr_in6 *)ss;
    a->sin6_family = AF_INET6;
    a->sin6_port = htons((uint16_t)port);
    inet_pton(AF_INET6, ip, &a->sin6_addr);
  } else {
    struct sockaddr_in *a = (struct sockaddr_in *)ss;
    a->sin_family = AF_INET;
    a->sin_port = htons((uint16_t)port);
    inet_pton(AF_INET, ip, &a->sin_addr);
  }
}

static bool addr_ok(const struct netpolicy *p, enum np_match m, const char *ip, unsigned port) {
  struct sockaddr_storage ss;
  sockaddr_of(ip, port, &ss);
  char why[256];
  return netpolicy_check_addr(p, m, (struct sockaddr *)&ss, (uint16_t)port, false, why, sizeof why);
}

static void class_is(const char *ip, enum np_class want) {
  unsigned char a[16] = {0};
  int family = strchr(ip, ':') ? AF_INET6 : AF_INET;
  inet_pton(family, ip, a);
  is_int(netpolicy_classify(family, a), want, "%s is class %d", ip, want);
}

/* The floor's verdict on ip:port; host_own: one of the host's addresses;
 * server: where hutch serve listens ("" for nowhere). */
static bool floor_ok(const struct np_floor *f, const char *ip, unsigned port, bool host_own,
                     const char *server, unsigned server_port) {
  struct sockaddr_storage ss = {0}, srv = {0};
  sockaddr_of(ip, 0, &ss);
  if (*server)
    sockaddr_of(server, server_port, &srv);
  struct np_target t = {.addr = (struct sockaddr *)&ss,
                        .host_own = host_own,
                        .server = *server ? (struct sockaddr *)&srv : NULL};
  char why[512] = "";
  bool r = netpolicy_floor_check(f, NULL, (uint16_t)port, &t, why, sizeof why);
  ok(r || strstr(why, "deny floor"), "%s:%u: %s", ip, port, r ? "let through" : why);
  return r;
}

static void floor_add(struct np_floor *f, bool permit, const char *spec) {
  char why[512] = "";
  ok(netpolicy_floor_add(f, permit, spec, why, sizeof why) == 0, "%s %s %s",
     permit ? "permit" : "deny", spec, why);
}

static void floor_tests(void) {
  struct np_floor f = {0};
  /* What no allow-list reaches. */
  static const char *const held[] = {
      "127.0.0.1",
      "127.255.255.254",
      "::1",
      "::ffff:127.0.0.1",
      "64:ff9b::7f00:1",
      "2002:7f00:1::",
      "::127.0.0.1",
      "0.0.0.0",
      "0.1.2.3",
      "::",
      "169.254.169.254",
      "169.254.0.1",
      "fe80::1",
      "fd00:ec2::254",
      "100.100.100.200",
      "192.0.0.192",
      "::ffff:169.254.169.254",
      "224.0.0.1",
      "239.255.255.250",
      "ff02::1",
      "255.255.255.255",
      "240.0.0.1",
      "10.0.0.1",
      "172.16.0.1",
      "172.31.255.255",
      "192.168.1.1",
      "100.64.0.1",
      "fd00::1",
      "fc00::1",
      "fec0::1",
      "::ffff:10.1.2.3",
      "64:ff9b:1::a00:1",
  };
  for (size_t i = 0; i < sizeof held / sizeof *held; i++)
    ok(!floor_ok(&f, held[i], 80, false, "", 0), "the floor holds %s", held[i]);
  static const char *const passed[] = {"8.8.8.8",       "2606:4700::1111", "172.32.0.1",
                                       "100.128.0.1",   "192.0.2.1",       "::ffff:1.1.1.1",
                                       "2002:808:808::"};
  for (size_t i = 0; i < sizeof passed / sizeof *passed; i++)
    ok(floor_ok(&f, passed[i], 443, false, "", 0), "the floor lets %s through", passed[i]);
  ok(!floor_ok(&f, "203.0.114.5", 80, true, "", 0), "the host's own public address is held");

  /* --egress-allow-private lifts private ranges, not loopback, link-local
   * or metadata, nor the host's own addresses. */
  f.allow_private = true;
  ok(floor_ok(&f, "10.0.0.1", 5432, false, "", 0), "allow-private: 10/8");
  ok(floor_ok(&f, "fd00::1", 5432, false, "", 0), "allow-private: fc00::/7");
  ok(floor_ok(&f, "100.64.0.1", 80, false, "", 0), "allow-private: 100.64/10");
  ok(!floor_ok(&f, "127.0.0.1", 80, false, "", 0), "allow-private: not loopback");
  ok(!floor_ok(&f, "169.254.169.254", 80, false, "", 0), "allow-private: not metadata");
  ok(!floor_ok(&f, "fd00:ec2::254", 80, false, "", 0), "allow-private: not AWS's IPv6 metadata");
  ok(!floor_ok(&f, "100.100.100.200", 80, false, "", 0), "allow-private: not Alibaba's");
  ok(!floor_ok(&f, "10.0.0.5", 22, true, "", 0), "allow-private: not the host's own");
  f.allow_private = false;

  /* --egress-permit lifts exactly what it names. */
  floor_add(&f, true, "127.0.0.1:8080");
  floor_add(&f, true, "[fd00::/8]:5432");
  floor_add(&f, true, "169.254.169.254");
  ok(floor_ok(&f, "127.0.0.1", 8080, false, "", 0), "permitted 127.0.0.1:8080");
  ok(floor_ok(&f, "::ffff:127.0.0.1", 8080, false, "", 0), "... mapped too");
  ok(!floor_ok(&f, "127.0.0.1", 8081, false, "", 0), "... not another port");
  ok(!floor_ok(&f, "127.0.0.2", 8080, false, "", 0), "... nor another address");
  ok(!floor_ok(&f, "0.0.0.0", 8080, false, "", 0), "... nor 0.0.0.0, which reaches it");
  ok(floor_ok(&f, "fd12::3", 5432, false, "", 0), "a permitted IPv6 block");
  ok(!floor_ok(&f, "fd12::3", 5433, false, "", 0), "... at its port only");
  ok(floor_ok(&f, "169.254.169.254", 80, false, "", 0), "a permitted metadata address");

  /* hutch serve itself: only a permit naming its port lifts it. */
  ok(!floor_ok(&f, "127.0.0.1", 7420, false, "127.0.0.1", 7420), "the server's own port");
  ok(!floor_ok(&f, "0.0.0.0", 7420, false, "127.0.0.1", 7420), "... through 0.0.0.0");
  ok(!floor_ok(&f, "::ffff:127.0.0.1", 7420, false, "127.0.0.1", 7420), "... mapped");
  ok(!floor_ok(&f, "203.0.114.5", 7420, true, "0.0.0.0", 7420),
     "a server on every address, at a public address of the host");
  ok(floor_ok(&f, "203.0.114.5", 7421, false, "0.0.0.0", 7420), "... not another host's");
  floor_add(&f, true, "127.0.0.0/8");
  ok(floor_ok(&f, "127.0.0.9", 22, false, "127.0.0.1", 7420), "a portless permit of a block");
  ok(!floor_ok(&f, "127.0.0.1", 7420, false, "127.0.0.1", 7420), "... not the server's port");
  floor_add(&f, true, "127.0.0.1:7420");
  ok(floor_ok(&f, "127.0.0.1", 7420, false, "127.0.0.1", 7420), "... unless named with it");

  /* --egress-deny: addresses and names, which permits do not lift by
   * name. */
  floor_add(&f, false, "198.51.100.0/24");
  floor_add(&f, false, "8.8.8.8:53");
  floor_add(&f, false, "*.evil.example");
  floor_add(&f, false, "exact.example:443");
  ok(!floor_ok(&f, "198.51.100.7", 80, false, "", 0), "a denied block");
  ok(!floor_ok(&f, "8.8.8.8", 53, false, "", 0), "a denied address and port");
  ok(floor_ok(&f, "8.8.8.8", 443, false, "", 0), "... not at another port");
  char why[512];
  ok(!netpolicy_floor_check(&f, "a.evil.example", 443, NULL, why, sizeof why) &&
         strstr(why, "--egress-deny"),
     "a denied name, before it is looked up: %s", why);
  ok(!netpolicy_floor_check(&f, "exact.example", 443, NULL, why, sizeof why), "an exact name");
  ok(netpolicy_floor_check(&f, "exact.example", 80, NULL, why, sizeof why), "... at its port");
  ok(netpolicy_floor_check(&f, "evil.example", 443, NULL, why, sizeof why), "not the suffix");

  /* Malformed options. */
  static const char *const bad_permit[] = {
      "localhost", "*.a.org", "::1", "10.0.0.0/33", "127.0.0.1:0", "", "[::ffff:127.0.0.1]"};
  for (size_t i = 0; i < sizeof bad_permit / sizeof *bad_permit; i++)
    ok(netpolicy_floor_add(&f, true, bad_permit[i], why, sizeof why) < 0 &&
           strstr(why, "--egress-permit"),
       "--egress-permit '%s' refused: %s", bad_permit[i], why);
  ok(netpolicy_floor_add(&f, false, "a b", why, sizeof why) < 0, "--egress-deny 'a b' refused");
  netpolicy_floor_free(&f);
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
  host_is(&meta, "anything.example", 443, NP_BY_ANY);
  host_is(&meta, "8.8.8.8", 53, NP_BY_ANY); /* "*": a public address too */
  ok(addr_ok(&meta, NP_BY_ANY, "8.8.8.8", 53), "\"*\" reaches a public address literal");
  ok(!addr_ok(&meta, NP_BY_ANY, "10.0.0.1", 53), "... never a private one");
  ok(!addr_ok(&meta, NP_BY_ANY, "169.254.169.254", 81), "... nor the metadata service");
  host_is(&meta, "169.254.169.254", 80, NP_BY_ADDR);
  ok(addr_ok(&meta, NP_BY_ADDR, "169.254.169.254", 80), "metadata when listed as an address");
  netpolicy_free(&meta);

  /* A deny list takes back from "*" alone; other allow entries win. */
  struct netpolicy den;
  char dwhy[256];
  json_t *dn = json_loads("{\"allow\": [\"*\", \"1.1.1.1\", \"*.ok.example\"],"
                          " \"deny\": [\"8.8.8.0/24\", \"1.0.0.0/8\", \"bad.example\","
                          " \"*.ok.example\", \"[2606:4700::/32]:443\"]}",
                          0, NULL);
  ok(netpolicy_parse(dn, NULL, &den, dwhy, sizeof dwhy) == 0, "a deny list parses (%s)", dwhy);
  json_decref(dn);
  host_is(&den, "8.8.8.8", 443, NP_DENIED);
  host_is(&den, "8.8.4.4", 443, NP_BY_ANY);
  host_is(&den, "1.1.1.1", 443, NP_BY_ADDR); /* allowOut over denyOut */
  host_is(&den, "1.0.0.1", 443, NP_DENIED);
  host_is(&den, "bad.example", 443, NP_DENIED);
  host_is(&den, "good.example", 443, NP_BY_ANY);
  host_is(&den, "a.ok.example", 443, NP_BY_PATTERN); /* an allow pattern wins */
  ok(!addr_ok(&den, NP_BY_ANY, "8.8.8.9", 443), "a name resolving into a denied block is not");
  ok(addr_ok(&den, NP_BY_PATTERN, "8.8.8.9", 443), "... unless an allow pattern named it");
  ok(addr_ok(&den, NP_BY_ANY, "2606:4700::1111", 80), "a denied block's port only");
  ok(!addr_ok(&den, NP_BY_ANY, "2606:4700::1111", 443), "... is denied");
  json_t *dj = netpolicy_deny_json(&den);
  char *dtext = json_dumps(dj, JSON_COMPACT);
  is_str(dtext,
         "[\"8.8.8.0/24\",\"1.0.0.0/8\",\"bad.example\",\"*.ok.example\","
         "\"[2606:4700::/32]:443\"]",
         "the deny list, normalised");
  free(dtext);
  json_decref(dj);
  netpolicy_free(&den);
  refused("{\"allow\": [\"*\"], \"deny\": [\"*\"]}", NULL);
  refused("{\"allow\": [\"*\"], \"deny\": \"x\"}", NULL);
  refused("{\"allow\": [\"*\"], \"deny\": [\"bad_host!\"]}", NULL);

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
  ok(netpolicy_check_addr(&own, NP_BY_PATTERN, (struct sockaddr *)&pub, 80, false, why, sizeof why),
     "a public address through a wildcard");
  ok(!netpolicy_check_addr(&own, NP_BY_PATTERN, (struct sockaddr *)&pub, 80, true, why, sizeof why),
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
  class_is("fd00:ec2::254", NP_SPECIAL); /* AWS's metadata service, inside fc00::/7 */
  class_is("fd00:ec2::253", NP_PRIVATE);
  class_is("100.100.100.200", NP_SPECIAL); /* Alibaba's */
  class_is("::127.0.0.1", NP_SPECIAL);     /* IPv4-compatible */
  class_is("fe80::1", NP_SPECIAL);
  class_is("::", NP_SPECIAL);
  class_is("2001:db8::1", NP_SPECIAL);
  class_is("64:ff9b::a9fe:a9fe", NP_SPECIAL);
  class_is("2002:a9fe:a9fe::", NP_SPECIAL);

  floor_tests();

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
  const struct np_secret *sec = netpolicy_next_secret(&s, "api.example.com", 443, true, NULL);
  ok(sec && strcmp(sec->header, "Authorization") == 0, "first secret");
  sec = sec ? netpolicy_next_secret(&s, "api.example.com", 443, true, sec) : NULL;
  ok(sec && strcmp(sec->value, "2") == 0, "second secret");
  ok(!netpolicy_next_secret(&s, "example.com", 443, true, NULL), "no secret for another host");
  /* Where a secret goes: TLS on 443 unless its rule says, plain HTTP
   * only on the ports its rule opts in for. */
  ok(!netpolicy_next_secret(&s, "api.example.com", 80, false, NULL), "none in clear by default");
  ok(!netpolicy_next_secret(&s, "api.example.com", 443, false, NULL), "none in clear on 443");
  ok(!netpolicy_next_secret(&s, "api.example.com", 8443, true, NULL), "none over TLS elsewhere");
  netpolicy_free(&s);
  s = policy(NULL, "[{\"host\":\"a.org\",\"header\":\"X-K\",\"value\":\"v\","
                   "\"https_ports\":[8443],\"http_ports\":[8080]}]");
  ok(netpolicy_next_secret(&s, "a.org", 8443, true, NULL), "TLS on a port the rule names");
  ok(!netpolicy_next_secret(&s, "a.org", 443, true, NULL), "not on 443 when it names others");
  ok(netpolicy_next_secret(&s, "a.org", 8080, false, NULL), "in clear where it opts in");
  ok(!netpolicy_next_secret(&s, "a.org", 8080, true, NULL), "an http port is no TLS port");
  ok(!netpolicy_next_secret(&s, "a.org", 8443, false, NULL), "a TLS port is no plain one");
  netpolicy_free(&s);
  refused(NULL, "[{\"host\":\"a.org\",\"header\":\"X\",\"value\":\"v\",\"https_ports\":[]}]");
  refused(NULL, "[{\"host\":\"a.org\",\"header\":\"X\",\"value\":\"v\",\"http_ports\":[0]}]");
  refused(NULL, "[{\"host\":\"a.org\",\"header\":\"X\",\"value\":\"v\",\"http_ports\":[443]}]");
  refused(NULL, "[{\"host\":\"a.org\",\"header\":\"X\",\"value\":\"v\",\"http_ports\":80}]");
  refused(NULL, "[{\"host\":\"a.org\",\"header\":\"X\",\"value\":\"v\",\"plain\":true}]");

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
