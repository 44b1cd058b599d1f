/* How the server writes JSON: the flags of every body and line, and a JSON
 * string of text that may not be UTF-8 (body.c). */
#ifndef HUTCH_HTTP_JSON_H
#define HUTCH_HTTP_JSON_H

#include <jansson.h>

struct server;

/* How every JSON body and line is written: compact, and numbers with at
 * most 10 significant digits (timings in ms). */
#define SERVE_JSON_FLAGS (JSON_COMPACT | JSON_REAL_PRECISION(10))

/* A JSON string of text that may not be valid UTF-8. */
json_t *http_json_text(const char *s);

#endif
