/* A sandbox's egress policy: which hosts and ports its proxy (egress.c)
 * lets it reach, and what counts as an address it may never reach by
 * name. Pure functions, no I/O: tests/unit/test_netpolicy.c covers them.
 *
 * An allow-list entry is one of (each with an optional ":PORT"; without
 * one, any port):
 *   pypi.org        that name exactly
 *   *.github.com    any name under github.com (not github.com itself)
 *   *               any name, or address, that is public
 * A deny list (entries of the same forms but "*") takes back from what
 * "*" alone lets through: what another allow entry names is let through
 * whatever the deny list says (E2B's allowOut over denyOut).
 *   10.1.2.3        that address; 10.0.0.0/8 the block
 *   [::1] [fd00::/8]  IPv6, in brackets
 * docs/network.md says which addresses a name may resolve to. */
#ifndef HUTCH_NETPOLICY_H
#define HUTCH_NETPOLICY_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#define NETPOLICY_MAX_ENTRIES 256
#define NETPOLICY_MAX_SECRETS 32
#define NETPOLICY_HOST_MAX 253

enum np_kind {
  NP_NAME,   /* exact name */
  NP_SUFFIX, /* "*.suffix": name holds ".suffix" */
  NP_ANY,    /* "*" */
  NP_ADDR,   /* address block */
};

struct np_entry {
  enum np_kind kind;
  char name[NETPOLICY_HOST_MAX + 2]; /* NP_NAME: the name; NP_SUFFIX: ".suffix" */
  int family;                        /* NP_ADDR: AF_INET or AF_INET6 */
  unsigned char addr[16];
  unsigned prefix;
  uint16_t port; /* 0: any */
};

/* A secret goes to its host only on the ports its rule names: over TLS
 * to a server that proved the host's name (https_ports, 443 unless the
 * rule says otherwise), and in clear only where the rule opts in with a
 * port (http_ports, none unless it says). */
#define NETPOLICY_SECRET_PORTS 16
struct np_secret {
  char host[NETPOLICY_HOST_MAX + 1];
  char *header, *value;
  uint16_t https_ports[NETPOLICY_SECRET_PORTS], http_ports[NETPOLICY_SECRET_PORTS];
  size_t nhttps, nhttp;
};

struct netpolicy {
  bool allowlist; /* false: mode "none", nothing passes */
  struct np_entry *entries;
  size_t n;
  struct np_entry *deny; /* what "*" does not let through */
  size_t ndeny;
  struct np_secret *secrets;
  size_t nsecrets;
};

/* What a host let through, and so which addresses it may go on to. */
enum np_match {
  NP_DENIED,
  NP_BY_ANY,     /* "*" alone: public addresses only, none the deny list holds */
  NP_BY_PATTERN, /* a wildcard: public addresses only */
  NP_BY_NAME,    /* named exactly: private ones too */
  NP_BY_ADDR,    /* an address literal within a listed block */
};

/* The policy a request's "network" object {mode, allow, deny} and "secrets"
 * list ask for (either may be NULL: mode none, no secrets). -1 with why
 * filled when one is malformed. */
int netpolicy_parse(json_t *network, json_t *secrets, struct netpolicy *out, char *why,
                    size_t whylen);
void netpolicy_free(struct netpolicy *p);
/* The normalised allow-list as given back to clients: a new array. */
json_t *netpolicy_allow_json(const struct netpolicy *p);
/* The deny list, likewise. */
json_t *netpolicy_deny_json(const struct netpolicy *p);

/* host: as the client named it (a name, or an address; lower-cased,
 * without brackets); port: its port. */
enum np_match netpolicy_check_host(const struct netpolicy *p, const char *host, uint16_t port);
/* Whether host, let through as m, may be reached at address sa (one of
 * the server's own host's when host_own: then as a private one). why gets
 * the reason when not. IPv4 carried in IPv6 is matched as IPv4. */
bool netpolicy_check_addr(const struct netpolicy *p, enum np_match m, const struct sockaddr *sa,
                          uint16_t port, bool host_own, char *why, size_t whylen);

/* Addresses by what they are: the public Internet; private networks and
 * loopback; and the rest (link-local, cloud metadata, multicast,
 * unspecified, reserved), never reached by name. */
enum np_class { NP_PUBLIC, NP_PRIVATE, NP_SPECIAL };
enum np_class netpolicy_classify(int family, const unsigned char *addr);

/* The operator's deny floor (docs/network.md, "The deny floor"): what no
 * sandbox reaches, whatever its allow-list says. Built in: the host's
 * loopback, unspecified, link-local and cloud metadata, multicast,
 * broadcast and reserved addresses, IPv4-compatible IPv6, the host's own
 * addresses, where hutch serve listens, and private networks (unless
 * allow_private). On top: the operator's deny entries (any allow-list
 * form: names are matched as a sandbox asks for them, addresses and
 * blocks as connected to). Permit entries (address blocks, optional
 * port) lift what they hold, built-in or denied; where hutch serve
 * listens only a permit naming its port lifts. */
struct np_floor {
  struct np_entry *deny, *permit;
  size_t ndeny, npermit;
  bool allow_private;
};

/* Add an --egress-deny (permit false) or --egress-permit entry; -1 with
 * why filled when it is malformed. */
int netpolicy_floor_add(struct np_floor *f, bool permit, const char *spec, char *why,
                        size_t whylen);
void netpolicy_floor_free(struct np_floor *f);

/* The address a connection out would go to, and what the server knows of
 * it. */
struct np_target {
  const struct sockaddr *addr;   /* the address to be connected to */
  bool host_own;                 /* one of the host's interface addresses */
  const struct sockaddr *server; /* where hutch serve listens; NULL: nowhere */
};

/* Whether the floor lets a sandbox reach host (as it named it; NULL: not
 * checked) at port, and at t (NULL: not yet resolved). why gets the
 * reason when not. IPv4 carried in IPv6 counts as the IPv4 address. */
bool netpolicy_floor_check(const struct np_floor *f, const char *host, uint16_t port,
                           const struct np_target *t, char *why, size_t whylen);

/* Whether the operator's own --egress-deny entries in f (not the
 * built-in floor) hold host (as named; NULL: not checked) or addr (NULL:
 * not yet resolved) at port, an address unless f's --egress-permit
 * entries lift it, as netpolicy_floor_check judges them. why gets the
 * reason when they do. What else connects out for the server (webhooks)
 * is bound by them too, whatever its own floor permits. */
bool netpolicy_floor_denies(const struct np_floor *f, const char *host, uint16_t port,
                            const struct sockaddr *addr, char *why, size_t whylen);

/* The address in sa (AF_INET or AF_INET6; else false), IPv4 carried in
 * IPv6 unwrapped: what it really reaches. */
bool netpolicy_addr_of(const struct sockaddr *sa, int *family, unsigned char a[16]);

/* A host as a client may name it, made canonical in out (lower case, no
 * trailing dot, an address without brackets): false when it is no valid
 * name or address. */
bool netpolicy_host_ok(const char *host, char out[NETPOLICY_HOST_MAX + 1]);

/* The secrets for a request to host (exact name) at port, over TLS to a
 * server that must prove the name (tls) or in clear, in order; prev NULL
 * for the first. */
const struct np_secret *netpolicy_next_secret(const struct netpolicy *p, const char *host,
                                              uint16_t port, bool tls,
                                              const struct np_secret *prev);

#endif
