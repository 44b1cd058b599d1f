/* The answer's heads, scrubbed of the secrets a request carried
 * (src/server/core/egress_scrub.c): what a host that reflects them can
 * and cannot hand back to the sandbox. */
#include <stdlib.h>
#include <string.h>

#include "core/egress/egress_scrub.h"
#include "tap.h"

#define SECRET "Bearer sk-live-0123456789abcdef"

/* What goes on to the sandbox of an answer fed in pieces of step bytes
 * (0: whole); rc gets egress_scrub_feed's last answer. */
static char *scrubbed(const char *answer, size_t step, int *rc) {
  const char *values[] = {SECRET, "short"};
  struct scrub *s = egress_scrub_new(values, 2);
  char *out = NULL;
  size_t nout = 0, len = strlen(answer), off = 0;
  *rc = 0;
  while (off < len && *rc == 0) {
    size_t n = step && len - off > step ? step : len - off;
    *rc = egress_scrub_feed(s, answer + off, n, &out, &nout);
    off += n;
  }
  /* Once the head has gone by, the rest goes as it is (the caller's). */
  if (*rc == 1 && off < len) {
    out = realloc(out, nout + len - off + 1);
    memcpy(out + nout, answer + off, len - off + 1);
  }
  egress_scrub_free(s);
  return out ? out : strdup("");
}

static void leaves(const char *answer, const char *want, const char *what) {
  size_t steps[] = {0, 1, 7};
  for (size_t i = 0; i < 3; i++) {
    int rc;
    char *out = scrubbed(answer, steps[i], &rc);
    ok(rc == 1 && strcmp(out, want) == 0, "%s (in pieces of %zu): %s", what, steps[i], out);
    free(out);
  }
}

int main(void) {
  leaves("HTTP/1.1 200 OK\r\nContent-Length: 2\r\nX-A: b\r\n\r\nhi",
         "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nX-A: b\r\n\r\nhi", "an answer without secrets");
  leaves("HTTP/1.1 200 OK\r\nX-Echo-Authorization: " SECRET "\r\nContent-Length: 0\r\n\r\n",
         "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", "a reflected value");
  leaves("HTTP/1.1 200 OK\r\nX-Token: SK-LIVE-0123456789ABCDEF\r\n\r\n", "HTTP/1.1 200 OK\r\n\r\n",
         "its token alone, in another case");
  leaves("HTTP/1.1 200 OK\r\nX-B64: c2stbGl2ZS0wMTIzNDU2Nzg5YWJjZGVm\r\n\r\n",
         "HTTP/1.1 200 OK\r\n\r\n", "its token in base64");
  leaves("HTTP/1.1 200 OK\r\nX-B64: QmVhcmVyIHNrLWxpdmUtMDEyMzQ1Njc4OWFiY2RlZg\r\n\r\n",
         "HTTP/1.1 200 OK\r\n\r\n", "the whole value in base64");
  leaves("HTTP/1.1 200 OK\r\nSet-Cookie: s=1; sk-live-0123456789abcdef\r\n\r\n",
         "HTTP/1.1 200 OK\r\n\r\n", "inside another header");
  leaves("HTTP/1.1 200 OK\r\nsk-live-0123456789abcdef: 1\r\n\r\n", "HTTP/1.1 200 OK\r\n\r\n",
         "as a header's name");
  leaves("HTTP/1.1 200 sk-live-0123456789abcdef\r\nX-A: b\r\n\r\n",
         "HTTP/1.1 200 \r\nX-A: b\r\n\r\n", "in the status text");
  leaves("HTTP/1.1 200 OK\r\nX-Short: short\r\nX-Other: shorter\r\n\r\n",
         "HTTP/1.1 200 OK\r\nX-Other: shorter\r\n\r\n", "a short value: as a whole value only");
  leaves("HTTP/1.1 100 Continue\r\nX-E: " SECRET "\r\n\r\nHTTP/1.1 200 OK\r\nX-E: " SECRET
         "\r\nX-F: f\r\n\r\nbody " SECRET,
         "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nX-F: f\r\n\r\nbody " SECRET,
         "an interim answer, then the answer; the body goes as it is");
  leaves("HTTP/1.1 200 OK\r\nX-Fold: a\r\n " SECRET "\r\n\r\n", "HTTP/1.1 200 OK\r\n\r\n",
         "a folded line");

  leaves("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;x=y\r\nhello\r\n0\r\n"
         "X-T: " SECRET "\r\nX-U: u\r\n\r\nafter",
         "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;x=y\r\nhello\r\n0\r\n"
         "X-U: u\r\n\r\nafter",
         "a chunked body's trailers are headers too");
  leaves("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
         "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
         "a chunked body without trailers");
  leaves("HTTP/1.1 304 Not Modified\r\nTransfer-Encoding: chunked\r\n\r\nnext",
         "HTTP/1.1 304 Not Modified\r\nTransfer-Encoding: chunked\r\n\r\nnext",
         "no body after a 304, whatever it says");

  int rc;
  char *out = scrubbed("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 0, &rc);
  ok(rc == -2, "a chunked body it cannot follow: cut after the head");
  free(out);
  out = scrubbed("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhel", 0, &rc);
  ok(rc == 0 && strstr(out, "\r\n\r\n5\r\nhel"), "the body goes on as it comes: %s", out);
  free(out);
  out = scrubbed("NOT HTTP\r\n\r\n", 0, &rc);
  ok(rc < 0 && !*out, "no HTTP: refused, nothing goes on");
  free(out);
  out = scrubbed("HTTP/1.1 200 OK\r\nX-A: b\r\n", 0, &rc);
  ok(rc == 0 && !*out, "half a head: nothing yet");
  free(out);
  char *big = malloc(SCRUB_HEAD_MAX + 64);
  strcpy(big, "HTTP/1.1 200 OK\r\nX-Big: ");
  memset(big + strlen(big), 'a', SCRUB_HEAD_MAX);
  strcpy(big + strlen("HTTP/1.1 200 OK\r\nX-Big: ") + SCRUB_HEAD_MAX, "\r\n\r\n");
  out = scrubbed(big, 4096, &rc);
  ok(rc < 0, "a head past the cap is refused");
  free(out);
  free(big);
  return done_testing();
}
