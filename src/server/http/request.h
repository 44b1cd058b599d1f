/* A request (request.c): http-parser's callbacks that read it from its
 * connection's bytes, what frees it, and what a handler reads of it: its
 * headers and query, and whether they are text a handler may put in JSON. */
#ifndef HUTCH_HTTP_REQUEST_H
#define HUTCH_HTTP_REQUEST_H

#include <http_parser.h>
#include <stdbool.h>
#include <stddef.h>

struct http_header;
struct http_req;

/* One piece of a header's name (value false) or value, as http_parser hands
 * them over, added to the growing list h[*n]: a name piece after a value
 * starts the next header (*in_value remembers the last). -1: a name would
 * make more than HTTP_MAX_HEADERS headers, or a value comes before any. */
int http_header_piece(struct http_header **h, size_t *n, bool *in_value, bool value, const char *at,
                      size_t len);

/* http-parser's callbacks, which fill a connection's request (c->req) as
 * http.c feeds the parser its bytes; and what frees a request and empties
 * it. */
extern const http_parser_settings http_request_settings;
void http_request_free(struct http_req *r);
/* Whether every header of req is UTF-8 and its query decodes (each key
 * and value: query.c), so that a handler may put any of them in JSON:
 * NULL, or why not and the error code that says so (bad_request for the
 * headers, invalid_argument for the query). */
const char *http_request_text(const struct http_req *req, const char **code);

const char *http_header(const struct http_req *req, const char *name);
/* The value of a query parameter, percent-decoded (malloc'd), or NULL
 * (query.h: http_query_get on req->query). */
char *http_query(const struct http_req *req, const char *name);

#endif
