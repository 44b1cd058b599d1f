/* One connection through a sandbox's egress proxy (egress_conn.c): what
 * the proxy holds of it, from its request head to its audit line, and the
 * steps egress.c takes it through. */
#ifndef HUTCH_CORE_EGRESS_EGRESS_CONN_H
#define HUTCH_CORE_EGRESS_EGRESS_CONN_H

#include <netdb.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>
#include "err.h"
#include "http/http.h"
#include "net/netpolicy.h"
#include "net/relay.h"
#include "state/store.h"

struct server;
struct sbx;
struct egress_mitm;

/* A sandbox's proxy: its listener and its connections. */
struct egress {
  uv_tcp_t listener;
  struct sbx *sb; /* NULL once the sandbox has gone and the listener closes */
  struct relay_set conns;
  unsigned lookups; /* name lookups under way */
  unsigned mitms;   /* intercepted connections (EGRESS_MITMS) */
};

enum econn_phase { E_HEAD, E_RESOLVING, E_CONNECTING, E_RELAYING, E_ENDING };

struct econn {
  struct relay relay; /* side 0: the sandbox's client; side 1: the host out there */
  struct egress *eg;  /* NULL once the sandbox has gone */
  struct server *srv;
  char tenant[SERVE_TENANT_LEN + 1], sandbox[17];
  uv_timer_t timer;
  uv_getaddrinfo_t gai;
  bool resolving, relay_done, ended, audited;
  bool mitm_counted;        /* in eg->mitms */
  struct egress_mitm *mitm; /* its TLS, terminated for the host's secrets (egress_tls.h) */
  enum econn_phase phase;
  http_parser parser;
  size_t head_bytes, head_read; /* counted for the cap; read from the client */
  char *url;
  struct http_header *headers;
  size_t nheaders;
  bool in_value, head_done, upgrade;
  char *rest; /* what followed the head */
  size_t nrest;
  /* What the head asked for. */
  bool tunnel; /* CONNECT */
  char method[16];
  char host[NETPOLICY_HOST_MAX + 1];
  uint16_t port;
  char *target; /* a plain request's origin-form target */
  char authority[NETPOLICY_HOST_MAX + 16];
  enum np_match match;
  struct addrinfo *ai, *next_ai;
  /* How it ended, for the audit log. */
  int status;
  char *reason;
  uint64_t started_ns;
};

/* A new connection of eg's sandbox, in eg's set, its client not yet
 * accepted on its relay's side 0. */
struct econn *egress_conn_new(struct egress *eg);
/* Answer the sandbox's client with the status of kind and why (text),
 * then close. */
void egress_conn_refuse(struct econn *e, enum hutch_errkind kind, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The connection is refused if in ms its head has not been read, or its
 * host has not been resolved and connected. */
void egress_conn_deadline(struct econn *e, uint64_t ms);
/* Its request allowed: its host is resolved (or is an address) and
 * connected out, within EGRESS_CONNECT_TIMEOUT_MS. */
void egress_conn_resolve(struct econn *e);
/* The connection leaves its sandbox's set (as the sandbox goes). */
void egress_conn_unlink(struct econn *e);

#endif
