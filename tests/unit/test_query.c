/* Query strings (src/server/http/query.c): percent-decoding and the walk
 * over key=value pairs. */
#include <stdlib.h>
#include <string.h>

#include "http/query.h"
#include "tap.h"

/* unescape(s) compared with want (NULL: refused), freed. */
static void unescape_is(const char *s, const char *want) {
  char *got = http_unescape(s);
  is_str(got, want, "unescape '%s'", s);
  free(got);
}

static void get_is(const char *q, const char *name, const char *want) {
  char *got = http_query_get(q, name);
  is_str(got, want, "get '%s' from '%s'", name, q ? q : "(null)");
  free(got);
}

static void test_unescape(void) {
  unescape_is("", "");
  unescape_is("plain", "plain");
  unescape_is("%2F%2f", "//");
  unescape_is("%41%62%7A%7a", "Abzz");
  unescape_is("a+b", "a b");
  unescape_is("%2B", "+");
  unescape_is("%20+%20", "   ");
  unescape_is("%e2%82%AC", "\xe2\x82\xac");
  unescape_is("%", NULL);
  unescape_is("a%", NULL);
  unescape_is("%4", NULL);
  unescape_is("x%4", NULL);
  unescape_is("%zz", NULL);
  unescape_is("%4z", NULL);
  unescape_is("%z4", NULL);
  unescape_is("%00", NULL);
  unescape_is("a%00b", NULL);
  unescape_is("%01", "\x01");
  unescape_is("%%41", NULL);
}

/* The next pair of *q is key=value; *q moves on. */
static void next_is(const char **q, const char *key, const char *value, const char *what) {
  char *k, *v;
  *q = http_query_next(*q, &k, &v);
  is_str(k, key, "%s: the key", what);
  is_str(v, value, "%s: the value", what);
  free(k), free(v);
}

static void test_next(void) {
  const char *q = "a=1&b&c=&=d&e=%zz&%zz=f";
  next_is(&q, "a", "1", "a pair");
  next_is(&q, "b", "", "a key without '='");
  next_is(&q, "c", "", "a key with '=' and nothing after");
  next_is(&q, "", "d", "an empty key");
  next_is(&q, "e", NULL, "an undecodable value");
  next_is(&q, NULL, "f", "an undecodable key");
  ok(q == NULL, "the walk ends after the last pair");

  q = "x=1&";
  next_is(&q, "x", "1", "a pair before a trailing '&'");
  ok(q && *q == '\0', "a trailing '&' leaves an empty rest");
  q = "a=b=c";
  next_is(&q, "a", "b=c", "the first '=' splits");
}

static void test_get(void) {
  get_is(NULL, "a", NULL);
  get_is("", "a", NULL);
  get_is("a=1", "a", "1");
  get_is("a=1", "b", NULL);
  get_is("a=1&a=2", "a", "1"); /* repeated: the first wins */
  get_is("b=0&a=x&a=y", "a", "x");
  get_is("path=%2Fhome%2Fuser%2Ff+1", "path", "/home/user/f 1");
  get_is("p%61th=x", "path", "x"); /* keys are decoded too */
  get_is("flag", "flag", "");      /* a key without '=' */
  get_is("flag&x=1", "flag", "");
  get_is("a=", "a", "");
  get_is("&&a=1&&", "a", "1");
  get_is("a=%zz&a=2", "a", NULL); /* the first match decides */
  get_is("%zz=1&a=2", "a", "2");  /* an undecodable key is skipped */
  get_is("a=%00", "a", NULL);
  get_is("ab=1", "a", NULL);
  get_is("a=1", "ab", NULL);
  get_is("A=1", "a", NULL); /* keys are case-sensitive */
}

/* A query of 1 MiB: many pairs, and one long value at the end. */
static void test_long(void) {
  size_t n = 1u << 20, pairs = 50000;
  char *q = malloc(n + 1), *p = q;
  for (size_t i = 0; i < pairs; i++)
    p += sprintf(p, "k%zu=%zu&", i, i);
  memcpy(p, "last=", 5);
  p += 5;
  size_t vlen = (size_t)(q + n - p) / 3;
  for (size_t i = 0; i < vlen; i++, p += 3)
    memcpy(p, "%41", 3);
  *p = '\0';
  char *v = http_query_get(q, "k49999");
  is_str(v, "49999", "a key near the end of 50000 pairs");
  free(v);
  v = http_query_get(q, "last");
  ok(v && strlen(v) == vlen && strspn(v, "A") == vlen, "a %zu-byte escaped value decodes", vlen);
  free(v);
  v = http_query_get(q, "missing");
  ok(v == NULL, "a missing key in a long query");
  free(q);
}

static void test_not_utf8(void) {
  ok(http_unescape("%FF") == NULL, "an escape that is not UTF-8 is refused");
  ok(http_unescape("caf%C3") == NULL, "a UTF-8 form cut short is refused");
  ok(http_unescape("%C0%AF") == NULL, "an overlong form is refused");
  char *v = http_unescape("caf%C3%A9");
  is_str(v, "caf\xc3\xa9", "UTF-8 escapes decode");
  free(v);
  ok(http_query_get("path=%FF%FE", "path") == NULL, "a value that is not UTF-8 is no value");
}

int main(void) {
  test_not_utf8();
  test_unescape();
  test_next();
  test_get();
  test_long();
  return done_testing();
}
