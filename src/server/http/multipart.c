/* multipart/form-data parsed as it comes (multipart.h): the boundary and a
 * part's file name read from headers, and the parser fed piece by piece. */

#include "http/multipart.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "util.h"

char *http_multipart_boundary(const char *ctype) {
  const char *b = ctype ? strcasestr(ctype, "boundary=") : NULL;
  if (!b)
    return NULL;
  b += 9;
  size_t n = *b == '"' ? strcspn(++b, "\"") : strcspn(b, "; \t");
  return n >= 1 && n <= 70 ? strndup(b, n) : NULL;
}

char *http_multipart_filename(const char *headers) {
  for (const char *h = headers; h && *h; h = strstr(h, "\r\n") ? strstr(h, "\r\n") + 2 : NULL) {
    if (strncasecmp(h, "Content-Disposition:", 20) != 0)
      continue;
    const char *end = strstr(h, "\r\n");
    size_t n = end ? (size_t)(end - h) : strlen(h);
    char *line = strndup(h, n);
    const char *name = strstr(line, " name=\"file\"");
    if (!name)
      name = strstr(line, ";name=\"file\"");
    const char *fn = strstr(line, "filename=\"");
    char *out = NULL;
    if (name && fn) {
      fn += 10;
      const char *q = strchr(fn, '"');
      out = q ? strndup(fn, (size_t)(q - fn)) : NULL;
    } else if (name) {
      out = xstrdup(""); /* a field's value, not a file's: its path is the query's */
    }
    free(line);
    return out;
  }
  return NULL;
}

void http_multipart_init(struct multipart *mp, const char *boundary,
                         const struct multipart_ops *ops, void *ctx) {
  *mp = (struct multipart){.ops = ops, .ctx = ctx, .state = MP_PREAMBLE};
  mp->delim = xasprintf("\r\n--%s", boundary);
  mp->dlen = strlen(mp->delim);
}

static void data(struct multipart *mp, const char *p, size_t n) {
  if (n)
    mp->ops->data(mp->ctx, p, n);
}

/* Parse what is buffered; keep what cannot be decided yet. */
static void parse(struct multipart *mp) {
  size_t off = 0;
  for (;;) {
    char *at = mp->buf + off;
    size_t left = mp->nbuf - off;

    if (mp->state == MP_PREAMBLE) {
      /* The first delimiter has no CRLF before it. */
      char *d = memmem(at, left, mp->delim + 2, mp->dlen - 2);
      if (!d) {
        if (left > mp->dlen)
          off += left - mp->dlen;
        break;
      }

      off = (size_t)(d - mp->buf) + mp->dlen - 2;
      mp->state = MP_AFTER;
    } else if (mp->state == MP_AFTER) {
      if (left < 2)
        break;
      if (memcmp(at, "--", 2) == 0) {
        mp->state = MP_DONE;
        off = mp->nbuf;
        break;
      }
      if (memcmp(at, "\r\n", 2) != 0) {
        mp->bad = true;
        mp->state = MP_DONE;
        break;
      }
      off += 2;
      mp->state = MP_HEADERS;
    } else if (mp->state == MP_HEADERS) {
      char *e = memmem(at, left, "\r\n\r\n", 4);
      if (!e) {
        if (left > MULTIPART_HEADERS_MAX) {
          mp->bad = true;
          mp->state = MP_DONE;
        }
        break;
      }

      char *headers = strndup(at, (size_t)(e - at) + 2);
      mp->ops->begin(mp->ctx, headers);
      free(headers);
      off = (size_t)(e - mp->buf) + 4;
      mp->state = MP_BODY;
    } else if (mp->state == MP_BODY) {
      char *d = memmem(at, left, mp->delim, mp->dlen);
      if (!d) { /* all but what could start a delimiter */
        size_t safe = left > mp->dlen ? left - mp->dlen : 0;
        data(mp, at, safe);
        off += safe;
        break;
      }

      data(mp, at, (size_t)(d - at));
      mp->ops->end(mp->ctx);
      off = (size_t)(d - mp->buf) + mp->dlen;
      mp->state = MP_AFTER;
    } else {
      off = mp->nbuf; /* the epilogue is dropped */
      break;
    }
  }

  memmove(mp->buf, mp->buf + off, mp->nbuf - off);
  mp->nbuf -= off;
}

void http_multipart_feed(struct multipart *mp, const char *p, size_t n) {
  if (mp->state == MP_DONE)
    return;
  mp->buf = xrealloc(mp->buf, mp->nbuf + n);
  memcpy(mp->buf + mp->nbuf, p, n);
  mp->nbuf += n;
  parse(mp);
}

bool http_multipart_done(const struct multipart *mp) {
  return mp->state == MP_DONE;
}

void http_multipart_free(struct multipart *mp) {
  free(mp->delim);
  free(mp->buf);
  mp->delim = mp->buf = NULL;
  mp->nbuf = 0;
}
