/* A WebSocket client (RFC 6455) for the CLI's interactive sessions: the
 * native route GET /v1/sandboxes/{id}/exec/{pid}/ws. curl makes the
 * connection (CONNECT_ONLY: http or https, as every other call of the
 * CLI), the upgrade is written here, wslay does the framing. One
 * connection, one thread; nothing blocks but term_ws_open. */
#ifndef HUTCH_TERM_WS_H
#define HUTCH_TERM_WS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "client.h"

#define TERM_WS_MSG_MAX (16u << 20) /* the largest message taken from the server */
#define TERM_WS_HEAD_MAX 16384      /* the upgrade's answer: its head */
#define TERM_WS_BODY_MAX 65536      /* ... and the body of a refusal */

struct term_ws;

/* Why term_ws_open failed: status 0 when no answer came (message says
 * why), else the server's status with its error's code and message. */
struct term_ws_err {
  long status;
  char code[64];
  char message[512];
};

/* Connect to c's server and upgrade path (escaped) with c's key as the
 * bearer; NULL and err on failure. */
struct term_ws *term_ws_open(const struct hc_client *c, const char *path,
                             struct term_ws_err *err);

/* The socket, to poll; POLLOUT too while term_ws_want_write. */
int term_ws_fd(const struct term_ws *w);
bool term_ws_want_write(const struct term_ws *w);

/* Queue a message (copied): text for JSON commands, binary for bytes. */
void term_ws_queue(struct term_ws *w, bool text, const void *data, size_t n);

/* Messages queued, not yet sent. */
size_t term_ws_queued(const struct term_ws *w);

/* Send what the socket takes now; -1 when the connection is lost. */
int term_ws_flush(struct term_ws *w);

/* Read what came, each whole message handed to fn; 1 once the server
 * closed (its close frame or the end of the stream), -1 on a broken
 * connection or protocol, else 0. */
typedef void term_ws_msg_fn(void *arg, bool text, const uint8_t *data, size_t n);
int term_ws_read(struct term_ws *w, term_ws_msg_fn *fn, void *arg);

/* A close frame sent when the socket takes it at once, and all freed. */
void term_ws_close(struct term_ws *w);

/* The upgrade's answer head (up to and without the blank line) checked
 * against the accept value the key asks for: 0 when it is a 101 that
 * upgrades to a WebSocket, else -1 with *status the answer's status (0 when
 * none could be read). */
int term_ws_check_head(const char *head, size_t n, const char *accept, long *status);

#endif
