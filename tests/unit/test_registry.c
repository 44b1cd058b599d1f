/* Image references and the address guard of the registry client
 * (src/image/registry_ref.c). Addresses are only classified here: no
 * connection is made to any of them. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>

#include "registry.h"
#include "tap.h"
#include "util.h"

static void ref_is(const char *s, const char *host, const char *name, const char *tag,
                   const char *digest, const char *canonical, bool loopback) {
  struct registry_ref r;
  struct hutch_err err = {0};
  int rc = registry_ref_parse(s, &r, &err);
  ok(rc == 0, "'%s' parses (%s)", s, err.msg);
  if (rc < 0)
    return;
  is_str(r.host, host, "'%s': host", s);
  is_str(r.name, name, "'%s': name", s);
  is_str(r.tag, tag, "'%s': tag", s);
  is_str(r.digest, digest, "'%s': digest", s);
  is_str(r.canonical, canonical, "'%s': canonical", s);
  ok(r.loopback == loopback, "'%s': loopback %d", s, loopback);
}

static void ref_bad(const char *s) {
  struct registry_ref r;
  struct hutch_err err = {0};
  ok(registry_ref_parse(s, &r, &err) < 0 && err.kind == HUTCH_ERR_INVALID, "'%s' refused (%s)", s,
     err.msg);
}

static bool allowed(enum registry_scope scope, const char *addr) {
  struct sockaddr_storage ss = {0};
  if (strchr(addr, ':')) {
    struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
    a->sin6_family = AF_INET6;
    inet_pton(AF_INET6, addr, &a->sin6_addr);
  } else {
    struct sockaddr_in *a = (struct sockaddr_in *)&ss;
    a->sin_family = AF_INET;
    inet_pton(AF_INET, addr, &a->sin_addr);
  }
  return registry_addr_allowed(scope, (struct sockaddr *)&ss);
}

#define H "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

static void references(void) {
  ref_is("busybox", "registry-1.docker.io", "library/busybox", "latest", "",
         "docker.io/library/busybox:latest", false);
  ref_is("busybox:1.36", "registry-1.docker.io", "library/busybox", "1.36", "",
         "docker.io/library/busybox:1.36", false);
  ref_is("docker.io/foo/bar", "registry-1.docker.io", "foo/bar", "latest", "",
         "docker.io/foo/bar:latest", false);
  ref_is("index.docker.io/python:3.12", "registry-1.docker.io", "library/python", "3.12", "",
         "docker.io/library/python:3.12", false);
  ref_is("ghcr.io/org/team/app@" H, "ghcr.io", "org/team/app", "", H, "ghcr.io/org/team/app@" H,
         false);
  ref_is("quay.io/a/b:v1@" H, "quay.io", "a/b", "v1", H, "quay.io/a/b:v1@" H, false);
  ref_is("127.0.0.1:5000/x/y:t", "127.0.0.1:5000", "x/y", "t", "", "127.0.0.1:5000/x/y:t", true);
  ref_is("127.9.9.9:5000/x", "127.9.9.9:5000", "x", "latest", "", "127.9.9.9:5000/x:latest", true);
  ref_is("localhost/x", "localhost", "x", "latest", "", "localhost/x:latest", true);
  ref_is("localhost:80/a.b_c__d--e", "localhost:80", "a.b_c__d--e", "latest", "",
         "localhost:80/a.b_c__d--e:latest", true);
  ref_is("[::1]:5000/x", "[::1]:5000", "x", "latest", "", "[::1]:5000/x:latest", true);
  ref_is("[2001:db8::1]:5000/x", "[2001:db8::1]:5000", "x", "latest", "",
         "[2001:db8::1]:5000/x:latest", false);
  /* Not loopback by name, so held to the rules of any registry. */
  ref_is("127.1:5000/x", "127.1:5000", "x", "latest", "", "127.1:5000/x:latest", false);
  ref_is("localhost.example/x", "localhost.example", "x", "latest", "",
         "localhost.example/x:latest", false);

  ref_bad("");
  ref_bad("Busybox");
  ref_bad("a//b");
  ref_bad("/a");
  ref_bad("a/");
  ref_bad("a/../b");
  ref_bad("a..b");
  ref_bad("a-.b");
  ref_bad("a___b");
  ref_bad("busybox:");
  ref_bad("busybox:-x");
  ref_bad("busybox:a/b");
  ref_bad("busybox@sha256:abc");
  ref_bad("busybox@sha512:"
          "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef");
  ref_bad("busybox@"
          "sha256:0123456789ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef");
  ref_bad("host:0/x");
  ref_bad("host:65536/x");
  ref_bad("host:port/x");
  ref_bad("-host.io/x");
  ref_bad("ho_st.io/x");
  ref_bad("[::1/x");
  ref_bad("[nonsense]:5000/x");
  ref_bad("a b");
  ref_bad("a\nb");
  char longname[400];
  memset(longname, 'a', sizeof longname - 1);
  longname[sizeof longname - 1] = '\0';
  ref_bad(longname);
}

static void guard(void) {
  static const char *const loop[] = {"127.0.0.1", "127.255.0.1", "::1", "::ffff:127.0.0.1"};
  static const char *const priv[] = {
      "10.0.0.1", "172.16.0.1", "172.31.255.255",  "192.168.1.1",    "100.64.0.1",
      "fd00::1",  "fc12::1",    "::ffff:10.1.2.3", "64:ff9b::a00:1", "2002:c0a8:101::1"};
  static const char *const never[] = {"169.254.169.254",
                                      "169.254.0.1",
                                      "0.0.0.0",
                                      "0.1.2.3",
                                      "224.0.0.1",
                                      "255.255.255.255",
                                      "240.0.0.1",
                                      "192.0.2.1",
                                      "198.18.0.1",
                                      "::",
                                      "fe80::1",
                                      "fec0::1",
                                      "ff02::1",
                                      "::ffff:169.254.169.254",
                                      "64:ff9b::a9fe:a9fe",
                                      "2002:a9fe:a9fe::1",
                                      "2001:db8::1",
                                      "2001::1",
                                      "::127.0.0.1"};
  static const char *const pub[] = {"8.8.8.8",         "1.1.1.1",         "172.32.0.1",
                                    "100.128.0.1",     "2606:4700::1111", "::ffff:8.8.8.8",
                                    "64:ff9b::808:808"};
  for (size_t i = 0; i < ARRAY_SIZE(loop); i++) {
    ok(allowed(REGISTRY_SCOPE_LOOPBACK, loop[i]), "loopback registry may reach %s", loop[i]);
    ok(!allowed(REGISTRY_SCOPE_PUBLIC, loop[i]), "public registry may not reach %s", loop[i]);
    ok(!allowed(REGISTRY_SCOPE_PRIVATE, loop[i]), "private registry may not reach %s", loop[i]);
  }
  for (size_t i = 0; i < ARRAY_SIZE(priv); i++) {
    ok(!allowed(REGISTRY_SCOPE_LOOPBACK, priv[i]), "loopback registry may not reach %s", priv[i]);
    ok(!allowed(REGISTRY_SCOPE_PUBLIC, priv[i]), "public registry may not reach %s", priv[i]);
    ok(allowed(REGISTRY_SCOPE_PRIVATE, priv[i]), "--allow-private may reach %s", priv[i]);
  }
  for (size_t i = 0; i < ARRAY_SIZE(never); i++)
    ok(!allowed(REGISTRY_SCOPE_LOOPBACK, never[i]) && !allowed(REGISTRY_SCOPE_PUBLIC, never[i]) &&
           !allowed(REGISTRY_SCOPE_PRIVATE, never[i]),
       "no registry may reach %s", never[i]);
  for (size_t i = 0; i < ARRAY_SIZE(pub); i++)
    ok(!allowed(REGISTRY_SCOPE_LOOPBACK, pub[i]) && allowed(REGISTRY_SCOPE_PUBLIC, pub[i]) &&
           allowed(REGISTRY_SCOPE_PRIVATE, pub[i]),
       "a non-loopback registry may reach %s, a loopback one not", pub[i]);
  struct sockaddr unix_addr = {.sa_family = AF_UNIX};
  ok(!registry_addr_allowed(REGISTRY_SCOPE_PRIVATE, &unix_addr), "no other family");
}

int main(void) {
  references();
  guard();
  return done_testing();
}
