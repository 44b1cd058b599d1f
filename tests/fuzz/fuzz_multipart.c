/* libFuzzer target: envd's POST /files, the multipart/form-data parser
 * of e2b/files.c, each "file" part written through a fake agent
 * (fake_server.h).
 *
 * The parser takes the body as it comes: each input is uploaded twice,
 * whole and in pieces of a size the input chooses, and both must end
 * alike, with the same status and the same bytes written to the same
 * files. A part's bytes must also be found in the body as sent.
 *
 * Input: a byte (the size of the pieces; its top bit: ?path= is given),
 * then fake_split's layout, whose request is the Content-Type line and
 * the body. */
#include <stdlib.h>
#include <string.h>

#include "e2b/files.h"
#include "fake_server.h"
#include "util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define PARTS_MAX 64

struct outcome {
  int status;
  size_t nparts;
  uint8_t *part[PARTS_MAX];
  size_t len[PARTS_MAX];
  bool eof[PARTS_MAX];
};

static void upload(const char *ctype, const uint8_t *body, size_t n, size_t chunk, bool path,
                   const struct fake_script *s, struct outcome *o) {
  struct http_header h[] = {{"Content-Type", (char *)ctype}};
  struct fake_req r = {NULL, 0, path ? "path=/home/user/f" : NULL, h, 1, DIALECT_E2B};
  struct http_conn *c = fake_request(&r, s);
  e2b_files_write(c, fake_principal());
  fake_feed_body(body, n, chunk);
  /* What each part's write was sent, before its end is answered. */
  const uint8_t *p;
  size_t len;
  bool eof;
  memset(o, 0, sizeof *o);
  for (; (p = fake_stdin(o->nparts, &len, &eof)); o->nparts++) {
    if (o->nparts == PARTS_MAX)
      fake_fail("more parts than the target keeps");
    if (len && !memmem(body, n, p, len))
      fake_fail("a part's bytes are not in the body");
    o->part[o->nparts] = xmalloc(len + 1);
    memcpy(o->part[o->nparts], p, len);
    o->len[o->nparts] = len;
    o->eof[o->nparts] = eof;
  }
  fake_finish();
  o->status = fake_status();
}

static void outcome_free(struct outcome *o) {
  for (size_t i = 0; i < o->nparts; i++)
    free(o->part[i]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1)
    return 0;
  size_t chunk = 1 + (data[0] & 0x7f), n;
  bool path = data[0] & 0x80;
  struct fake_script s;
  const uint8_t *req = fake_split(data + 1, size - 1, &n, &s);
  const uint8_t *nl = memchr(req, '\n', n);
  if (!nl)
    return 0;
  char *ctype = strndup((const char *)req, (size_t)(nl - req));
  const uint8_t *body = nl + 1;
  size_t nbody = n - (size_t)(body - req);
  struct outcome whole, pieces;
  upload(ctype, body, nbody, nbody ? nbody : 1, path, &s, &whole);
  upload(ctype, body, nbody, chunk, path, &s, &pieces);
  if (whole.status != pieces.status || whole.nparts != pieces.nparts)
    fake_fail("the upload ends otherwise when the body comes in pieces");
  for (size_t i = 0; i < whole.nparts; i++)
    if (whole.len[i] != pieces.len[i] || whole.eof[i] != pieces.eof[i] ||
        memcmp(whole.part[i], pieces.part[i], whole.len[i]) != 0)
      fake_fail("a part's bytes differ when the body comes in pieces");
  outcome_free(&whole);
  outcome_free(&pieces);
  free(ctype);
  return 0;
}
