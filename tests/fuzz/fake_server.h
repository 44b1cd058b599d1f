/* A fake world around the server's request handlers, for the fuzz
 * targets that call them directly: one HTTP connection whose responses
 * are recorded and checked (fake_http.c), and one sandbox whose agent and
 * background process answer as the target says (fake_agent.c). Nothing
 * here opens a socket or makes a sandbox.
 *
 * The fakes keep the contracts of http.h, agentc.h and procs.h that the
 * handlers rely on, and fail (abort, which libFuzzer reports as a crash)
 * when a handler breaks one: a second answer to one request, a request
 * left with no answer and no owner, input sent after its end, an agent
 * request that is not {"op": …}, a Connect stream message that is not one
 * well-formed envelope. */
#ifndef HUTCH_FUZZ_FAKE_SERVER_H
#define HUTCH_FUZZ_FAKE_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/sandbox/agentc.h"
#include "core/tenancy/keys.h"
#include "core/serve/metrics.h"
#include "core/run/procs.h"
#include "core/sandbox/sbx.h"
#include "core/base/server.h"
#include "http/http.h"

#define FAKE_SANDBOX_ID "0123456789abcdef"
#define FAKE_PID 42

struct fake_req {
  const char *body; /* a held body (http_body_start hands a streamed one over) */
  size_t body_len;
  const char *query; /* "k=v&k=v", not percent-decoded; NULL: none */
  const struct http_header *headers;
  size_t nheaders;
  enum http_dialect dialect;
};

/* How the agent and the process answer, from the target's input. */
struct fake_script {
  const uint8_t *out; /* each stream's STDOUT before its end (may be empty) */
  size_t nout;
  const uint8_t *end; /* the END frame's JSON payload */
  size_t nend;
  bool error;        /* the END frame is ERROR, not EVENT */
  bool agent_dead;   /* agentc_open fails */
  bool proc_missing; /* procs_lookup and procs_by_pid find nothing */
  bool proc_ended;   /* the process has ended before the request */
  int stdin_result;  /* procs_input: 0 takes it, -1 stdin_closed, -2 stdin_full */
  size_t queued;     /* what http_queued says */
  size_t held;       /* what agentc_stdin_pending says */
};

/* A new request (the last one's state is gone): the connection the
 * handler gets, the principal, and the sandbox the route names. */
struct http_conn *fake_request(const struct fake_req *r, const struct fake_script *s);
/* The next request to the same sandbox, after fake_finish: what the
 * last one left there (a polled watcher) is still there. */
struct http_conn *fake_request_again(const struct fake_req *r);
const struct principal *fake_principal(void);
struct sbx *fake_sandbox(void);

/* A target's input: a flags byte (the script's booleans), the request,
 * then optionally "@@A@" and the agent's STDOUT, "@@A@" and its END
 * payload. The request's bytes are returned (*nbody of them). */
const uint8_t *fake_split(const uint8_t *data, size_t size, size_t *nbody, struct fake_script *s);

/* A streamed body (a handler called http_body_start): handed over in
 * pieces of chunk bytes while the handler wants it, then its end. */
void fake_feed_body(const uint8_t *body, size_t n, size_t chunk);

/* Everything the request started ends: each open agent stream gets its
 * STDOUT and END (streams opened meanwhile too), the process ends, and a
 * handler still holding the connection hears the client go. Then checks
 * that the request was answered once (or given up). What the sandbox
 * keeps between requests goes with the next fake_request. */
void fake_finish(void);

/* The answer so far: its status (0: none) and what a raw (WebSocket)
 * connection was sent. */
int fake_status(void);
const uint8_t *fake_raw(size_t *n);
/* The handler's stream ops while it holds the connection, else NULL. */
const struct http_stream_ops *fake_ops(void **ctx);

/* What the agent's streams were sent, in the order they were opened:
 * the i-th stream's STDIN bytes (NULL past the last). */
const uint8_t *fake_stdin(size_t i, size_t *n, bool *eof);

void fake_fail(const char *what) __attribute__((noreturn));

#endif
