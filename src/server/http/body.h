/* Request bodies: JSON objects and their typed fields; and how the server
 * writes JSON: the flags of every body and line, and a JSON string of text
 * that may not be UTF-8 (body.c). */
#ifndef HUTCH_HTTP_BODY_H
#define HUTCH_HTTP_BODY_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

struct http_conn;

/* How every JSON body and line is written: compact, and numbers with at
 * most 10 significant digits (timings in ms). */
#define SERVE_JSON_FLAGS (JSON_COMPACT | JSON_REAL_PRECISION(10))

/* A JSON string of text that may not be valid UTF-8. */
json_t *http_json_text(const char *s);

/* The request body as a JSON object; on failure a 400 has been sent and
 * NULL is returned. */
json_t *http_body_object(struct http_conn *c);
/* Optional typed fields of a request object. Each returns 0 when absent
 * (leaving *out as it was), 1 when present and right, -1 after sending 400. */
int http_body_uint(struct http_conn *c, json_t *o, const char *key, uint64_t min, uint64_t max,
                   uint64_t *out);
int http_body_number(struct http_conn *c, json_t *o, const char *key, double min, double max,
                     double *out);
int http_body_string(struct http_conn *c, json_t *o, const char *key, size_t max, const char **out);
int http_body_string_map(struct http_conn *c, json_t *o, const char *key, size_t max_entries,
                         json_t **out);
/* Fields other than those named: 400. NULL-terminated list. */
int http_body_only(struct http_conn *c, json_t *o, const char *const *known);
/* The first field of o not named, or NULL. */
const char *http_body_unknown(json_t *o, const char *const *known);

#endif
