/* URL query strings (query.h): percent-decoding, and the walk over their
 * key=value pairs. */

#include "http/query.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

static int hexval(char ch) {
  if (ch >= '0' && ch <= '9')
    return ch - '0';
  if (ch >= 'a' && ch <= 'f')
    return ch - 'a' + 10;
  if (ch >= 'A' && ch <= 'F')
    return ch - 'A' + 10;
  return -1;
}

/* Percent-decoding, '+' as a space; NULL when an escape is broken or it
 * decodes to a NUL (which would cut the C string a handler sees short). */
static char *decode(const char *s, size_t n) {
  char *out = xmalloc(n + 1), *o = out;
  for (size_t i = 0; i < n; i++) {
    if (s[i] == '%') {
      int hi = i + 1 < n ? hexval(s[i + 1]) : -1;
      int lo = i + 2 < n ? hexval(s[i + 2]) : -1;
      if (hi < 0 || lo < 0 || (hi | lo) == 0) {
        free(out);
        return NULL;
      }
      *o++ = (char)(hi << 4 | lo);
      i += 2;
      continue;
    }
    *o++ = s[i] == '+' ? ' ' : s[i];
  }
  *o = '\0';
  /* What the handlers get is UTF-8, as every string of a request is
   * (request.c checks the target and the headers): it may go into JSON. */
  if (!utf8_valid(out, (size_t)(o - out))) {
    free(out);
    return NULL;
  }
  return out;
}

char *http_unescape(const char *s) {
  return decode(s, strlen(s));
}

const char *http_query_next(const char *q, char **key, char **value) {
  const char *end = strchr(q, '&');
  size_t len = end ? (size_t)(end - q) : strlen(q);
  const char *eq = memchr(q, '=', len);
  size_t klen = eq ? (size_t)(eq - q) : len;
  *key = decode(q, klen);
  *value = eq ? decode(eq + 1, len - klen - 1) : xstrdup("");
  return end ? end + 1 : NULL;
}

char *http_query_get(const char *q, const char *name) {
  while (q && *q) {
    char *key, *value;
    q = http_query_next(q, &key, &value);
    bool match = key && strcmp(key, name) == 0;
    free(key);
    if (match)
      return value;
    free(value);
  }
  return NULL;
}
