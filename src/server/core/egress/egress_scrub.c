/* The heads a host answers a request that carried secrets, scrubbed of
 * them (egress_scrub.h). */
#include "core/egress/egress_scrub.h"

#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <http_parser.h>

#include "util.h"

#define SCRUB_MIN 8   /* a needle shorter than this matches a whole header value only */
#define SCRUB_WORDS 8 /* words of a value looked for on their own */

struct needle {
  char *text; /* lower-cased */
  size_t len;
};

struct field {
  char *name, *value;
  size_t nname, nvalue;
};

/* Where in the answer it is: its heads; a chunked body, passed on as it
 * is up to its last chunk; that body's trailers (headers too); past it. */
enum scrub_phase { SCRUB_HEADS, SCRUB_BODY, SCRUB_TRAILERS, SCRUB_DONE };

struct scrub {
  struct needle *needles;
  size_t nneedles;
  http_parser parser;
  enum scrub_phase phase;
  size_t head_bytes;
  char *reason;
  size_t nreason;
  struct field *fields;
  size_t nfields;
  bool in_value;
};

/* ---- what to look for ---- */

static void add_needle(struct scrub *s, const char *text, size_t len) {
  if (!len)
    return;
  s->needles = xrealloc(s->needles, (s->nneedles + 1) * sizeof *s->needles);
  struct needle *n = &s->needles[s->nneedles++];
  n->text = xmalloc(len + 1);
  for (size_t i = 0; i < len; i++)
    n->text[i] = (char)tolower((unsigned char)text[i]);
  n->text[len] = '\0';
  n->len = len;
}

/* text in base64 and in base64url, without padding: how a host that
 * encodes what it reflects (a JSON Web Token, a Basic credential) would
 * write it. */
static void add_base64(struct scrub *s, const char *text, size_t len) {
  static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  char *out = xmalloc(len / 3 * 4 + 5);
  size_t o = 0;
  for (size_t i = 0; i < len; i += 3) {
    uint32_t v = (uint32_t)(unsigned char)text[i] << 16;
    size_t left = len - i;
    if (left > 1)
      v |= (uint32_t)(unsigned char)text[i + 1] << 8;
    if (left > 2)
      v |= (unsigned char)text[i + 2];
    out[o++] = b64[v >> 18 & 63];
    out[o++] = b64[v >> 12 & 63];
    if (left > 1)
      out[o++] = b64[v >> 6 & 63];
    if (left > 2)
      out[o++] = b64[v & 63];
  }
  add_needle(s, out, o);

  /* The same in base64url. */
  for (size_t i = 0; i < o; i++) {
    if (out[i] == '+')
      out[i] = '-';
    else if (out[i] == '/')
      out[i] = '_';
  }
  add_needle(s, out, o);

  explicit_bzero(out, o);
  free(out);
}

static void add_value(struct scrub *s, const char *v) {
  size_t len = strlen(v);
  add_needle(s, v, len);
  add_base64(s, v, len);
  /* A scheme and a token ("Bearer sk-…"): the token alone is the secret
   * a host would hand back. */
  size_t words = 0;
  for (const char *p = v; *p && words < SCRUB_WORDS;) {
    size_t n = strcspn(p, " \t");
    if (n >= SCRUB_MIN && n < len) {
      add_needle(s, p, n);
      add_base64(s, p, n);
      words++;
    }
    p += n;
    p += strspn(p, " \t");
  }
}

struct scrub *egress_scrub_new(const char *const *values, size_t n) {
  struct scrub *s = xcalloc(1, sizeof *s);
  for (size_t i = 0; i < n; i++)
    add_value(s, values[i]);
  http_parser_init(&s->parser, HTTP_RESPONSE);
  s->parser.data = s;
  return s;
}

static void fields_free(struct scrub *s) {
  for (size_t i = 0; i < s->nfields; i++) {
    free(s->fields[i].name);
    free(s->fields[i].value);
  }
  free(s->fields);
  free(s->reason);
  s->fields = NULL;
  s->reason = NULL;
  s->nfields = s->nreason = 0;
  s->in_value = false;
  s->head_bytes = 0;
}

void egress_scrub_free(struct scrub *s) {
  if (!s)
    return;
  for (size_t i = 0; i < s->nneedles; i++) {
    explicit_bzero(s->needles[i].text, s->needles[i].len);
    free(s->needles[i].text);
  }
  free(s->needles);
  fields_free(s);
  free(s);
}

/* ---- looking ---- */

bool egress_scrub_carries(const struct scrub *s, const char *text, size_t len) {
  while (len && (*text == ' ' || *text == '\t'))
    text++, len--;
  while (len && (text[len - 1] == ' ' || text[len - 1] == '\t'))
    len--;
  char *low = xmalloc(len + 1);
  for (size_t i = 0; i < len; i++)
    low[i] = (char)tolower((unsigned char)text[i]);
  bool found = false;
  for (size_t i = 0; i < s->nneedles && !found; i++) {
    const struct needle *n = &s->needles[i];
    if (n->len < SCRUB_MIN)
      found = n->len == len && memcmp(n->text, low, len) == 0;
    else
      found = memmem(low, len, n->text, n->len) != NULL;
  }
  free(low);
  return found;
}

/* ---- the heads ---- */

static void append(char **buf, size_t *len, const char *at, size_t n) {
  *buf = xrealloc(*buf, *len + n + 1);
  memcpy(*buf + *len, at, n);
  *len += n;
  (*buf)[*len] = '\0';
}

static int count(struct scrub *s, size_t n) {
  s->head_bytes += n;
  return s->head_bytes > SCRUB_HEAD_MAX ? -1 : 0;
}

static int on_status(http_parser *p, const char *at, size_t n) {
  struct scrub *s = p->data;
  if (count(s, n) < 0)
    return -1;
  append(&s->reason, &s->nreason, at, n);
  return 0;
}

static int on_field(http_parser *p, const char *at, size_t n) {
  struct scrub *s = p->data;
  if (count(s, n) < 0)
    return -1;
  if (s->in_value || !s->nfields) {
    s->fields = xrealloc(s->fields, (s->nfields + 1) * sizeof *s->fields);
    s->fields[s->nfields++] = (struct field){0};
    s->in_value = false;
  }
  struct field *f = &s->fields[s->nfields - 1];
  append(&f->name, &f->nname, at, n);
  return 0;
}

static int on_value(http_parser *p, const char *at, size_t n) {
  struct scrub *s = p->data;
  if (count(s, n) < 0 || !s->nfields)
    return -1;
  s->in_value = true;
  struct field *f = &s->fields[s->nfields - 1];
  append(&f->value, &f->nvalue, at, n);
  return 0;
}

static int pause_here(http_parser *p) {
  http_parser_pause(p, 1);
  return 0;
}

/* The last chunk's size line has been read: its trailers follow. */
static int on_chunk_header(http_parser *p) {
  if (p->content_length == 0)
    http_parser_pause(p, 1);
  return 0;
}

static const http_parser_settings head_settings = {
    .on_status = on_status,
    .on_header_field = on_field,
    .on_header_value = on_value,
    .on_headers_complete = pause_here,
};

static const http_parser_settings body_settings = {.on_chunk_header = on_chunk_header};

static const http_parser_settings trailer_settings = {
    .on_header_field = on_field,
    .on_header_value = on_value,
    .on_message_complete = pause_here,
};

/* The fields as parsed, written anew into out without those that carry
 * a secret, and the blank line. */
static void write_fields(struct scrub *s, char **out, size_t *nout) {
  for (size_t i = 0; i < s->nfields; i++) {
    const struct field *f = &s->fields[i];
    const char *value = f->value ? f->value : "";
    if (egress_scrub_carries(s, f->name, f->nname) || egress_scrub_carries(s, value, f->nvalue))
      continue;
    append(out, nout, f->name, f->nname);
    append(out, nout, ": ", 2);
    append(out, nout, value, f->nvalue);
    append(out, nout, "\r\n", 2);
  }
  append(out, nout, "\r\n", 2);
}

/* The head as parsed, written anew into out without what carries a
 * secret; the phase that follows it. */
static enum scrub_phase write_head(struct scrub *s, char **out, size_t *nout) {
  const http_parser *p = &s->parser;
  bool reason_ok = s->reason && !egress_scrub_carries(s, s->reason, s->nreason);
  char *line = xasprintf("HTTP/%u.%u %u %s\r\n", p->http_major, p->http_minor, p->status_code,
                         reason_ok ? s->reason : "");
  append(out, nout, line, strlen(line));
  free(line);
  write_fields(s, out, nout);

  /* An interim answer (100 Continue, 103 Early Hints) comes before the
   * answer itself, whose head is checked in turn; 101 ends the HTTP. A
   * chunked body may end with trailers, which clients take for headers
   * (curl shows them with the head, Node as res.trailers). */
  unsigned status = p->status_code;
  bool chunked = (p->flags & F_CHUNKED) && status != 204 && status != 304;
  fields_free(s);
  if (status < 200 && status != 101) {
    http_parser_init(&s->parser, HTTP_RESPONSE);
    return SCRUB_HEADS;
  }
  return status != 101 && chunked ? SCRUB_BODY : SCRUB_DONE;
}

/* One step of the phase over data: how much of it was taken, and the
 * parser's verdict. */
static size_t step(struct scrub *s, const char *data, size_t n, enum http_errno *err) {
  const http_parser_settings *set = &trailer_settings;
  if (s->phase == SCRUB_HEADS)
    set = &head_settings;
  else if (s->phase == SCRUB_BODY)
    set = &body_settings;

  size_t used = http_parser_execute(&s->parser, set, data, n);
  *err = HTTP_PARSER_ERRNO(&s->parser);
  return used;
}

/* Paused at the end of a head, the parser has not taken its last LF
 * (already written with the head): a parser that goes on into the body
 * takes it now, one that is done with it leaves it. */
static size_t head_lf(struct scrub *s, const char *data, size_t n) {
  if (!n || data[0] != '\n')
    return 0;
  if (s->phase == SCRUB_BODY)
    http_parser_execute(&s->parser, &body_settings, data, 1);
  return 1;
}

int egress_scrub_feed(struct scrub *s, const char *data, size_t n, char **out, size_t *nout) {
  bool head_gone = s->phase != SCRUB_HEADS;
  while (s->phase != SCRUB_DONE && n) {
    enum http_errno err;
    size_t used = step(s, data, n, &err);
    if (err != HPE_OK && err != HPE_PAUSED)
      return head_gone ? -2 : -1;

    if (s->phase == SCRUB_BODY)
      append(out, nout, data, used);
    data += used;
    n -= used;
    if (err == HPE_OK)
      return 0; /* All was taken, and the step is not over. */

    http_parser_pause(&s->parser, 0);
    if (s->phase == SCRUB_HEADS) {
      s->phase = write_head(s, out, nout);
      head_gone = s->phase != SCRUB_HEADS;
      size_t lf = head_lf(s, data, n);
      data += lf;
      n -= lf;
    } else if (s->phase == SCRUB_BODY) {
      s->phase = SCRUB_TRAILERS;
    } else {
      write_fields(s, out, nout);
      fields_free(s);
      s->phase = SCRUB_DONE;
    }
  }

  if (s->phase != SCRUB_DONE)
    return 0;
  if (n)
    append(out, nout, data, n);
  return 1;
}
