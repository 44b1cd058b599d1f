/* libFuzzer target: the egress proxy's scrubber (core/egress_scrub.c),
 * which reads what a host that got a secret answers: its heads, 1xx
 * ones included, and a chunked body's trailers. That host is anyone's:
 * no answer may crash, leak, hang or read out of bounds, and no header
 * the scrubber lets go on may carry a secret.
 *
 * Input: a byte saying the size of the pieces the answer comes in
 * (1 to 256 bytes: heads split anywhere), then the answer. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/egress/egress_scrub.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const secrets[] = {"Bearer sk-fuzz-s3cr3t-0123456789", "tok"};

/* The first bytes that go on are the first head, written anew: it must
 * not name a secret (what follows it, the body, goes on as the host sent
 * it, and is not looked at). */
static void check_head(const char *out, size_t n) {
  const char *end = memmem(out, n, "\r\n\r\n", 4);
  size_t heads = end ? (size_t)(end - out) : n;
  if (memmem(out, heads, "sk-fuzz-s3cr3t-0123456789", 25))
    abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1)
    return 0;
  size_t piece = 1 + data[0];
  struct scrub *s = egress_scrub_new(secrets, 2);
  int r = 0;
  bool first = true;
  for (size_t at = 1; at < size && r == 0; at += piece) {
    size_t n = size - at < piece ? size - at : piece;
    char *out = NULL;
    size_t nout = 0;
    r = egress_scrub_feed(s, (const char *)data + at, n, &out, &nout);
    if (r >= 0 && nout && first) {
      check_head(out, nout);
      first = false;
    }
    free(out);
  }
  egress_scrub_free(s);
  return 0;
}
