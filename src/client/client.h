/* A client of hutch's native API (docs/openapi.yaml) over HTTP, with
 * libcurl: the way to hutch of the MCP front end (src/mcp/) and of the
 * operator's CLI (src/ctl/).
 *
 * Every call is a native request made with the caller's own key, so a
 * client can do exactly what that key can and no more: the tenant checks,
 * quotas, rate limits, the egress floor and the audit lines of the native
 * routes are its too, and nothing here decides who may do what. Calls
 * block; MCP runs each request on its own thread (src/mcp/serve_stdio.c,
 * and src/server/mcp/ for /mcp). */
#ifndef HUTCH_CLIENT_H
#define HUTCH_CLIENT_H

#include <jansson.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define HC_BODY_MAX (64u << 20) /* an answer's body held in memory */

/* Curl handles kept between calls (client.c): a handle keeps its
 * connection to the server open, which a new one would make again
 * (about 0.4 ms of each call on loopback). */
struct hc_handles;

/* Where the native API is and whose key calls it. */
struct hc_client {
  char url[256]; /* "http://127.0.0.1:7420", no trailing slash */
  char key[256];
  bool loopback; /* url's host is this machine's loopback (hc_client_setup) */
  /* Where an MCP session's client reaches the same server (expose_port's
   * URLs): url on stdio; the Host the client sent to /mcp. */
  char public_url[256];
  struct hc_handles *handles; /* NULL: a handle per call */
};

enum { HC_LINE_STOP, HC_LINE_MORE, HC_LINE_NEW };

/* One request. */
struct hc_req {
  const char *method; /* "GET", "POST", ... */
  const char *path;   /* "/v1/sandboxes/ID/exec?x=y", its parts escaped */
  const char *body;   /* NULL: none */
  size_t body_len;
  const char *ctype; /* the body's; default application/json */
  /* The body streamed from upload_fd instead, upload_len bytes of it
   * (image archives, build contexts: too large to hold). */
  bool upload;
  int upload_fd;
  uint64_t upload_len;
  /* As the upload goes: bytes sent of upload_len. NULL: not told. */
  void (*sent)(void *arg, uint64_t done, uint64_t total);
  const char *accept; /* the Accept header; NULL: none */
  /* NDJSON answers: each line as it comes (not kept in the answer's
   * body); returns HC_LINE_STOP to stop reading (the request is then cut,
   * which for an exec kills the command), HC_LINE_NEW for a line that
   * counts for idle_ms, else HC_LINE_MORE. NULL: lines are kept in body. */
  int (*line)(void *arg, json_t *obj);
  void *arg;
  /* Set (by another thread) to give up: the transfer is cut. */
  const atomic_bool *cancel;
  long timeout_ms; /* 0: none */
  /* NDJSON answers: once a HC_LINE_NEW line came, stop when no other
   * came for this long (a read of what is there, not a wait for the
   * end); 0: never. */
  long idle_ms;
};

/* What came back. */
struct hc_answer {
  long status; /* 0: no answer (err says why) */
  char *body;  /* malloc'd, NUL-terminated; NULL when lines took it */
  size_t len;
  bool cut;          /* more than HC_BODY_MAX: the rest dropped */
  bool timed_out;    /* the call's timeout_ms passed (what came is kept) */
  json_t *json;      /* body parsed, when it was JSON */
  char code[64];     /* the native error's code ("not_found"), when status >= 400 */
  char message[512]; /* ... and its message; or the transport's failure */
  /* No server answered at the URL: why ("connection refused", "no such
   * host"); NULL otherwise. */
  const char *unreachable;
};

enum { HC_SETUP_OK, HC_SETUP_BAD_URL, HC_SETUP_NO_KEY };

/* Fill c's url and key: url, else $HUTCH_URL, else http://127.0.0.1:7420
 * (its trailing slashes dropped); key, else $HUTCH_API_KEY, else the admin
 * key of a local server ($HUTCH_STATE_DIR/admin.key, else
 * /var/lib/hutch/admin.key) when this user may read it and url is a
 * loopback one. HC_SETUP_OK, or which is wrong with why[n] saying so. */
int hc_client_setup(struct hc_client *c, const char *url, const char *key, char *why, size_t n);

/* The options of every curl handle (a CURL *) made to reach c's server:
 * http and https only, no signals, no proxy to a loopback server. */
void hc_curl_opts(const struct hc_client *c, void *curl);

/* Make the request; false only when no answer came (transport failure,
 * cancelled: a->message says which). A 4xx or 5xx is an answer. */
bool hc_call(const struct hc_client *n, const struct hc_req *call, struct hc_answer *a);
void hc_answer_free(struct hc_answer *a);

/* s escaped for a URL's path segment or query value (malloc'd). */
char *hc_escape(const char *s);

/* A cache of at most max handles; freed with hc_handles_free. */
struct hc_handles *hc_handles_new(unsigned max);
void hc_handles_free(struct hc_handles *hs);

/* Once per process, before any thread calls. */
void hc_init(void);

#endif
