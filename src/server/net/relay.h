/* A relay: two TCP sockets joined, bytes moved both ways as they come by
 * splice(2) through a pipe per direction (they never enter the server's
 * memory), with flow control (a pipe that is full stops its source from
 * being read) and half-close (one side's EOF is passed on as a shutdown of
 * the other once the pipe has drained). The egress proxy (egress.c) and
 * the port forwarder (ports.c) run their connections through one once
 * they are set up.
 *
 * The owner embeds struct relay, initialises both sides' libuv handles
 * with relay_init and sets them up itself (accept; or relay_adopt a
 * socket, relay_connect),
 * may queue bytes with relay_send, then relay_start, which moves the
 * sockets to the relay. relay_close (or both sides' ends, or an error)
 * closes everything; done is called once all is closed, and is where the
 * owner frees what holds the relay. */
#ifndef HUTCH_RELAY_H
#define HUTCH_RELAY_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#define RELAY_FIRST_MAX 256 /* relay_first's bytes at most */

struct relay;
struct relay_attempt;
typedef void (*relay_done_fn)(struct relay *r);

/* The relays one owner holds (a sandbox's connections through its egress
 * proxy, or through its ports), linked through the relays themselves. */
struct relay_set {
  struct relay *first;
  unsigned n;
  /* Counts that count this set's relays too (its owner's tenant's, the
   * server's); NULL: none. */
  unsigned *tally[2];
};

struct relay {
  uv_tcp_t side[2];  /* while it is set up */
  uv_poll_t poll[2]; /* once it relays: the sockets, fd[i] */
  int fd[2];
  int pipe[2][2];  /* direction d (from side d): its pipe's read and write ends */
  size_t piped[2]; /* bytes in the pipe of direction d */
  char *pre[2];    /* relay_send's bytes for side i, sent before the rest */
  size_t npre[2];
  uint64_t bytes[2]; /* bytes read from side i */
  uint64_t limit[2]; /* bytes side i may still send (relay_limit); UINT64_MAX: no end */
  bool eof[2];       /* side i has sent all it will */
  bool full[2];      /* the pipe of direction d has no room, whatever piped[d] says */
  bool polled[2];    /* poll[i] is a handle to close */
  bool shut[2];      /* side i has been told: nothing more comes */
  bool started, closing;
  uint64_t active;               /* loop time (ms) bytes last moved */
  struct relay_attempt *attempt; /* a connect of side 1 under way */
  /* relay_first: side first_side's first line, read into first_buf
   * before any byte is spliced; first_fn sends it on (NULL once it has). */
  bool (*first_fn)(struct relay *r, const char *data, size_t n);
  int first_side;
  size_t first_got;
  char first_buf[RELAY_FIRST_MAX];
  int open; /* handles not yet closed */
  relay_done_fn done;
  struct relay_set *set; /* the set it is in, if any */
  struct relay *prev, *next;
};

/* r joins s; relay_set_leave takes it out of its set (if in one). */
void relay_set_join(struct relay_set *s, struct relay *r);
void relay_set_leave(struct relay *r);

typedef void (*relay_connect_fn)(struct relay *r, int status);

void relay_init(struct relay *r, uv_loop_t *loop, relay_done_fn done);
/* Connect side 1 to sa on a socket of its own (a socket whose connect
 * failed cannot try another address): fd, made by the caller (in a
 * sandbox's namespace, say), or -1 for a new one. cb hears 0 once side 1
 * is connected, or the error; not at all if the relay closes first. */
void relay_connect(struct relay *r, int fd, const struct sockaddr *sa, relay_connect_fn cb);
/* Side i is the connected socket fd (taken), not its handle's. */
void relay_adopt(struct relay *r, int i, int fd);
/* Side i may send n bytes more, no more: one more from it ends the relay
 * (a request on a connection that was to carry one, ports.c). */
void relay_limit(struct relay *r, int i, uint64_t n);
/* The first bytes side i sends, up to its first newline (or
 * RELAY_FIRST_MAX bytes, or its end, whichever comes first; a few past the
 * newline may come with them), are held and given to fn, which sends them
 * on with relay_send as it likes, or returns false to end the relay:
 * ports.c reads a service's status line. */
void relay_first(struct relay *r, int i, bool (*fn)(struct relay *r, const char *data, size_t n));
/* Queue a copy of data for side i, sent when it starts. */
void relay_send(struct relay *r, int i, const void *data, size_t n);
/* Relay both ways from now on. */
void relay_start(struct relay *r);
/* Instead of starting: write data to side i (its handle set up), then
 * close all. */
void relay_reply(struct relay *r, int i, const void *data, size_t n);
void relay_close(struct relay *r);
/* Whether it relays and no byte has moved for ms milliseconds. */
bool relay_idle(const struct relay *r, uint64_t ms);

#endif
