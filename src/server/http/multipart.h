/* multipart/form-data (RFC 7578) read as the body comes: a parser fed the
 * body piece by piece, which tells its caller where each part's headers
 * end, its bytes, and where it ends. Nothing here knows what the parts are
 * for or where the body comes from. */
#ifndef HUTCH_MULTIPART_H
#define HUTCH_MULTIPART_H

#include <stdbool.h>
#include <stddef.h>

#define MULTIPART_HEADERS_MAX (16u << 10) /* one part's header lines */

struct multipart_ops {
  /* A part starts: headers are its header lines, each ending in CRLF. */
  void (*begin)(void *ctx, const char *headers);
  /* The next bytes of the part's body (n > 0). */
  void (*data)(void *ctx, const char *p, size_t n);
  /* The part's body ended (its delimiter was read). */
  void (*end)(void *ctx);
};

struct multipart {
  const struct multipart_ops *ops;
  void *ctx;
  char *delim; /* "\r\n--" BOUNDARY */
  size_t dlen;
  enum { MP_PREAMBLE, MP_HEADERS, MP_BODY, MP_AFTER, MP_DONE } state;
  char *buf; /* bytes not parsed yet */
  size_t nbuf;
  bool bad; /* the body is not multipart: a part's headers too long, or
                * what follows a delimiter is neither CRLF nor "--" */
};

/* The boundary of a multipart/form-data Content-Type (quoted or not, 1 to
 * 70 characters; malloc'd), or NULL. */
char *http_multipart_boundary(const char *ctype);
/* The filename of a part's Content-Disposition if the part is named
 * "file" (as it is sent, path and all; "" when it has none: a form's
 * field; malloc'd), or NULL. */
char *http_multipart_filename(const char *headers);

void http_multipart_init(struct multipart *mp, const char *boundary,
                         const struct multipart_ops *ops, void *ctx);
/* The next n bytes of the body, parsed as far as they can be (the ops are
 * called from here); ignored once the body is done. */
void http_multipart_feed(struct multipart *mp, const char *data, size_t n);
/* Whether the final delimiter was read (or the body found bad): after it,
 * nothing more is parsed. A body that ends before is cut short. */
bool http_multipart_done(const struct multipart *mp);
void http_multipart_free(struct multipart *mp);

#endif
