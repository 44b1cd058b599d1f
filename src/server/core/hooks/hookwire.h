/* Webhook deliveries on the wire: one thread of its own runs every
 * attempt under way at once with libcurl's multi interface, so a
 * receiver that hangs holds only its own attempt (until its timeout),
 * never the loop, libuv's pool or another webhook's delivery.
 *
 * The egress deny floor binds the address each attempt connects to:
 * curl resolves the host, and its open-socket callback checks the very
 * address it is about to connect to (the server's floor for webhooks,
 * the host's own addresses, where hutch listens) and refuses it there.
 * So a name that resolved to a public address at create time and to
 * 127.0.0.1 now (DNS rebinding) is refused now: there is no second
 * lookup between the check and the connect for it to move. No proxy
 * from the environment is used, and redirects are not followed. */
#ifndef HUTCH_CORE_HOOKS_HOOKWIRE_H
#define HUTCH_CORE_HOOKS_HOOKWIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <uv.h>

#include "net/netpolicy.h"

#define HOOKWIRE_HEADERS 8

/* One POST: what the loop fills, then what the thread found. The thread
 * touches nothing else: floor is the server's configuration, unchanged
 * while it runs; own and server are copies. */
struct hook_attempt {
  struct hook_attempt *next;
  void *owner; /* the loop's, untouched by the thread */
  char *url;
  char *headers[HOOKWIRE_HEADERS]; /* "Name: value", NULL-terminated */
  char *body;
  size_t len;
  long timeout_ms;
  const struct np_floor *floor;   /* the webhooks' floor */
  const struct np_floor *deny;    /* the egress floor: its --egress-deny entries bind too */
  char *host;                     /* the URL's, as named (for deny entries naming it) */
  struct sockaddr_storage *own; /* the host's addresses */
  size_t nown;
  struct sockaddr_storage server; /* where hutch listens (family 0: nowhere) */
  bool permitted; /* the operator named its host (--webhook-allow HOST): floor not checked */
  uint64_t t0_ns;
  /* The outcome: the HTTP status (0: none came), how long it took, and
   * why it failed (the floor's reason when refused). */
  long status;
  double ms;
  bool refused;
  char error[256];
};

struct hookwire;

/* The thread, started; done(a, arg) hears each attempt's end on the loop. */
struct hookwire *hookwire_start(uv_loop_t *loop, void (*done)(struct hook_attempt *a, void *arg),
                                void *arg);
/* Start a (the thread owns it until done). */
void hookwire_send(struct hookwire *w, struct hook_attempt *a);
/* The thread stopped: attempts not ended are ended now, "the server is
 * stopping", done hearing each; w goes with the loop's next turn. */
void hookwire_stop(struct hookwire *w);
void hook_attempt_free(struct hook_attempt *a);

#endif
