/* multipart/form-data as it comes (src/server/http/multipart.c): each body
 * is fed whole and in pieces of every size from 1 byte, and must be read
 * alike. */
#include <stdlib.h>
#include <string.h>

#include "http/multipart.h"
#include "tap.h"
#include "util.h"

/* What the parser reported: "[headers]" as a part begins, its bytes, and
 * "|" as it ends. */
struct log {
  char *s;
  size_t n;
  bool in_part;
  bool nested; /* begin inside a part, or end or data outside one */
};

static void add(struct log *l, const char *p, size_t n) {
  l->s = xrealloc(l->s, l->n + n + 1);
  memcpy(l->s + l->n, p, n);
  l->n += n;
  l->s[l->n] = '\0';
}

static void on_begin(void *ctx, const char *headers) {
  struct log *l = ctx;
  l->nested |= l->in_part;
  l->in_part = true;
  add(l, "[", 1);
  add(l, headers, strlen(headers));
  add(l, "]", 1);
}

static void on_data(void *ctx, const char *p, size_t n) {
  struct log *l = ctx;
  l->nested |= !l->in_part || n == 0;
  add(l, p, n);
}

static void on_end(void *ctx) {
  struct log *l = ctx;
  l->nested |= !l->in_part;
  l->in_part = false;
  add(l, "|", 1);
}

static const struct multipart_ops ops = {.begin = on_begin, .data = on_data, .end = on_end};

struct outcome {
  char *log;
  bool done, bad, nested;
};

static struct outcome run(const char *boundary, const char *body, size_t n, size_t chunk) {
  struct log l = {0};
  add(&l, "", 0);
  struct multipart mp;
  http_multipart_init(&mp, boundary, &ops, &l);
  for (size_t off = 0; off < n; off += chunk)
    http_multipart_feed(&mp, body + off, n - off < chunk ? n - off : chunk);
  struct outcome o = {l.s, http_multipart_done(&mp), mp.bad, l.nested};
  http_multipart_free(&mp);
  return o;
}

/* body read whole must give want (the log), done and bad; and so must it
 * read in pieces of every size. */
static void reads(const char *what, const char *boundary, const char *body, const char *want,
                  bool done, bool bad) {
  size_t n = strlen(body);
  struct outcome o = run(boundary, body, n, n ? n : 1);
  is_str(o.log, want, "%s: the parts", what);
  ok(o.done == done && o.bad == bad && !o.nested, "%s: done %d, bad %d", what, o.done, o.bad);
  size_t differ = 0;
  for (size_t chunk = 1; chunk < n; chunk++) {
    struct outcome p = run(boundary, body, n, chunk);
    if (strcmp(p.log, o.log) != 0 || p.done != o.done || p.bad != o.bad || p.nested)
      differ = differ ? differ : chunk;
    free(p.log);
  }
  ok(differ == 0, "%s: read alike in pieces (first differing: %zu)", what, differ);
  free(o.log);
}

#define CD "Content-Disposition: form-data; name=\"file\"; filename=\"a.txt\"\r\n"

static void test_parse(void) {
  reads("one part", "XyZ", "--XyZ\r\n" CD "\r\nhello\r\n--XyZ--\r\n", "[" CD "]hello|", true,
        false);
  reads("two parts and a preamble and epilogue", "b",
        "preamble\r\n--b\r\n" CD "\r\none\r\n--b\r\nX: y\r\n\r\ntwo\r\n--b--\r\nepilogue --b\r\n",
        "[" CD "]one|[X: y\r\n]two|", true, false);
  reads("an empty part", "b", "--b\r\nX: y\r\n\r\n\r\n--b--", "[X: y\r\n]|", true, false);
  reads("CRLF inside a part is data", "b",
        "--b\r\nX: y\r\n\r\nl1\r\nl2\r\n\r\n-\r\n--\r\n--c\r\n--b--",
        "[X: y\r\n]l1\r\nl2\r\n\r\n-\r\n--\r\n--c|", true, false);
  reads("a boundary-like line without CRLF before it is data", "b",
        "--b\r\nX: y\r\n\r\nx--b\r\n--b--", "[X: y\r\n]x--b|", true, false);
  reads("bytes after the delimiter that are not CRLF", "b",
        "--b\r\nX: y\r\n\r\nx\r\n--bz\r\nX: y\r\n\r\n", "[X: y\r\n]x|", true, true);
  reads("a bare LF is not a line end", "b", "--b\nX: y\n\nx\n--b--\n", "", true, true);
  /* What could start a delimiter (as long as one) is held back. */
  reads("missing final boundary", "b", "--b\r\nX: y\r\n\r\nsome bytes", "[X: y\r\n]some ", false,
        false);
  reads("final delimiter without '--'", "b", "--b\r\nX: y\r\n\r\nab\r\n--b\r\n", "[X: y\r\n]ab|",
        false, false);
  reads("no delimiter at all", "b", "just text", "", false, false);
  reads("empty body", "b", "", "", false, false);
  reads("a long boundary", "0123456789012345678901234567890123456789012345678901234567890123456789",
        "--0123456789012345678901234567890123456789012345678901234567890123456789\r\nX: "
        "y\r\n\r\nv\r\n"
        "--0123456789012345678901234567890123456789012345678901234567890123456789--",
        "[X: y\r\n]v|", true, false);

  /* A part held back until what might start a delimiter is decided: the
   * bytes before it are not (the log shows all of them once done). */
  struct log l = {0};
  add(&l, "", 0);
  struct multipart mp;
  http_multipart_init(&mp, "b", &ops, &l);
  const char *head = "--b\r\nX: y\r\n\r\n";
  http_multipart_feed(&mp, head, strlen(head));
  http_multipart_feed(&mp, "0123456789\r\n-", 13);
  is_str(l.s, "[X: y\r\n]01234567", "a part's bytes are passed on before it ends");
  http_multipart_feed(&mp, "-b--", 4);
  is_str(l.s, "[X: y\r\n]0123456789|", "and the delimiter split across pieces ends it");
  ok(http_multipart_done(&mp), "done");
  http_multipart_feed(&mp, "\r\n--b\r\n\r\n\r\nmore", 15);
  is_str(l.s, "[X: y\r\n]0123456789|", "nothing is read after the final delimiter");
  http_multipart_free(&mp);
  free(l.s);
}

static void test_huge_header(void) {
  size_t n = MULTIPART_HEADERS_MAX + 64;
  char *body = xmalloc(n + 32);
  strcpy(body, "--b\r\nX: ");
  memset(body + 8, 'a', n);
  body[8 + n] = '\0';
  struct outcome o = run("b", body, strlen(body), 4096);
  ok(o.bad && o.done && strcmp(o.log, "") == 0, "headers past %u bytes: bad, and no part",
     MULTIPART_HEADERS_MAX);
  free(o.log);
  /* Just under the limit, then the end of the headers: a part. */
  memset(body + 8, 'a', MULTIPART_HEADERS_MAX - 16);
  strcpy(body + 8 + MULTIPART_HEADERS_MAX - 16, "\r\n\r\nv\r\n--b--");
  o = run("b", body, strlen(body), 4096);
  ok(!o.bad && o.done && o.log[0] == '[' && strcmp(o.log + strlen(o.log) - 3, "]v|") == 0,
     "headers just under the limit: a part");
  free(o.log);
  free(body);
}

static void boundary_is(const char *ctype, const char *want) {
  char *b = http_multipart_boundary(ctype);
  is_str(b, want, "boundary of '%s'", ctype ? ctype : "(null)");
  free(b);
}

static void test_boundary(void) {
  boundary_is("multipart/form-data; boundary=abc", "abc");
  boundary_is("multipart/form-data; boundary=\"a b;c\"", "a b;c");
  boundary_is("multipart/form-data; boundary=\"abc\"; charset=x", "abc");
  boundary_is("multipart/form-data; BOUNDARY=abc; charset=x", "abc");
  boundary_is("multipart/form-data; boundary=abc def", "abc");
  boundary_is("multipart/form-data; boundary=", NULL);
  boundary_is("multipart/form-data; boundary=\"\"", NULL);
  boundary_is("multipart/form-data", NULL);
  boundary_is(NULL, NULL);
  char ct[200];
  snprintf(ct, sizeof ct, "multipart/form-data; boundary=%070d", 7);
  char *b = http_multipart_boundary(ct);
  ok(b && strlen(b) == 70, "a 70-character boundary");
  free(b);
  snprintf(ct, sizeof ct, "multipart/form-data; boundary=%071d", 7);
  boundary_is(ct, NULL);
}

static void filename_is(const char *headers, const char *want) {
  char *f = http_multipart_filename(headers);
  is_str(f, want, "filename of '%.*s'", (int)strcspn(headers, "\r"), headers);
  free(f);
}

static void test_filename(void) {
  filename_is(CD, "a.txt");
  filename_is("Content-Type: text/plain\r\n" CD, "a.txt");
  filename_is("content-disposition: form-data;name=\"file\";filename=\"b\"\r\n", "b");
  filename_is("Content-Disposition: form-data; name=\"file\"; filename=\"/abs/dir/c.txt\"\r\n",
              "/abs/dir/c.txt");
  filename_is("Content-Disposition: form-data; name=\"file\"; filename=\"../../etc/x\"\r\n",
              "../../etc/x"); /* as sent: the caller resolves it in the sandbox */
  filename_is("Content-Disposition: form-data; name=\"file\"; filename=\"\"\r\n", "");
  filename_is("Content-Disposition: form-data; name=\"other\"; filename=\"d\"\r\n", NULL);
  filename_is("Content-Disposition: form-data; name=\"file\"\r\n", ""); /* a field */
  filename_is("Content-Disposition: form-data; name=\"file\"; filename=\"open\r\n", NULL);
  filename_is("Content-Type: text/plain\r\n", NULL);
  filename_is("", NULL);
}

int main(void) {
  test_parse();
  test_huge_header();
  test_boundary();
  test_filename();
  return done_testing();
}
