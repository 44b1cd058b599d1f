/* What a handler reads of a request (http.h): its headers and query, and
 * whether they are text a handler may put in JSON. */
#include "http/http.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "util.h"

const char *http_request_text(const struct http_req *req, const char **code) {
  *code = "bad_request";
  for (size_t i = 0; i < req->nheaders; i++)
    if (!utf8_valid(req->headers[i].name, strlen(req->headers[i].name)) ||
        !utf8_valid(req->headers[i].value, strlen(req->headers[i].value)))
      return "the request's headers must be UTF-8";
  *code = "invalid_argument";
  for (const char *q = req->query; q && *q;) {
    char *key, *value;
    q = http_query_next(q, &key, &value);
    bool bad = !key || !value;
    free(key);
    free(value);
    if (bad)
      return "the query must be key=value pairs, URL-encoded UTF-8";
  }
  return NULL;
}

const char *http_header(const struct http_req *req, const char *name) {
  for (size_t i = 0; i < req->nheaders; i++)
    if (strcasecmp(req->headers[i].name, name) == 0)
      return req->headers[i].value;
  return NULL;
}

char *http_query(const struct http_req *req, const char *name) {
  return http_query_get(req->query, name);
}
