/* How every error is answered: the one table from an error's kind
 * (src/common/err.h) to each front end's wire form. No other place in
 * the server chooses an error's status, so a kind means the same in the
 * native API, E2B's REST API, envd's Connect RPCs and the code
 * interpreter (docs/error_handling.md has the table in prose).
 *
 * The native API writes {"error":{"code","message"}} with the error's own
 * code (it names the case: "already_paused"); E2B's REST API and envd's
 * HTTP routes {"code":STATUS,"message"}, as its SDKs read them; Connect
 * {"code":CONNECT_CODE,"message"} (a server stream ends with it instead,
 * status 200); the code interpreter the message as text. */
#include "http/errors.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http/body.h"
#include "http/connect.h"
#include "http/http.h"

static const struct {
  int status;          /* HTTP, for every dialect that has one */
  const char *connect; /* connectrpc.com/docs/protocol, "Error codes" */
  const char *code;    /* the native code when the error names none */
  bool retry;          /* worth trying again: Retry-After */
} kinds[HUTCH_ERR_KINDS] = {
    [HUTCH_ERR_SYSTEM] = {500, "internal", "internal"},
    [HUTCH_ERR_INVALID] = {400, "invalid_argument", "invalid_argument"},
    [HUTCH_ERR_NOT_FOUND] = {404, "not_found", "not_found"},
    [HUTCH_ERR_UNAUTHENTICATED] = {401, "unauthenticated", "unauthorized"},
    [HUTCH_ERR_FORBIDDEN] = {403, "permission_denied", "forbidden"},
    [HUTCH_ERR_CONFLICT] = {409, "failed_precondition", "conflict"},
    [HUTCH_ERR_BUSY] = {409, "unavailable", "busy"},
    [HUTCH_ERR_QUOTA] = {429, "resource_exhausted", "quota_exceeded", true},
    [HUTCH_ERR_TOO_LARGE] = {413, "invalid_argument", "body_too_large"},
    [HUTCH_ERR_NO_SPACE] = {507, "resource_exhausted", "no_space"},
    [HUTCH_ERR_UNSUPPORTED] = {400, "unimplemented", "not_supported"},
    [HUTCH_ERR_UNAVAILABLE] = {503, "unavailable", "overloaded", true},
    [HUTCH_ERR_UPSTREAM] = {502, "unavailable", "upstream_error"},
    [HUTCH_ERR_UPSTREAM_TIMEOUT] = {504, "deadline_exceeded", "upstream_timeout"},
    [HUTCH_ERR_TIMEOUT] = {408, "deadline_exceeded", "timeout"},
    [HUTCH_ERR_METHOD] = {405, "unimplemented", "method_not_allowed"},
    [HUTCH_ERR_LENGTH_REQUIRED] = {411, "invalid_argument", "length_required"},
    [HUTCH_ERR_MEDIA] = {415, "invalid_argument", "unsupported_encoding"},
    [HUTCH_ERR_HEADERS_TOO_LARGE] = {431, "invalid_argument", "headers_too_large"},
};

static enum hutch_errkind checked(enum hutch_errkind kind) {
  return (unsigned)kind < HUTCH_ERR_KINDS ? kind : HUTCH_ERR_SYSTEM;
}

int http_error_status(enum hutch_errkind kind) {
  return kinds[checked(kind)].status;
}

const char *http_connect_code(enum hutch_errkind kind, const char *code) {
  /* Connect has a code of its own for one case hutch names. */
  if (code && strcmp(code, "exists") == 0)
    return "already_exists";
  return kinds[checked(kind)].connect;
}

/* Whether ch ends a path quoted in a message ("open /x/y: ...", "'/x'"). */
static bool path_end(char ch) {
  return !ch || strchr(" \t\n'\"`,;:=()<>[]{}", ch);
}

/* msg, with every path under the state directory said as "(the state
 * directory)", into out. An error's message goes to whoever asked, a
 * tenant; the state directory's layout is the host's, and under its
 * images/tmp/ a path holds the server's pid. An internal error still says
 * what failed ("write (the state directory): No space left on device");
 * the operator finds the whole message on the server's stderr. Messages
 * quote paths of hutch's own making here (the state directory is never a
 * sandbox's path), so a quoted prefix of it is the host's. */
static const char *hide_private(const struct http_conn *c, const char *msg, char *out, size_t cap) {
  const char *dir = c->hs ? c->hs->private_dir : NULL;
  size_t n = dir ? strlen(dir) : 0;
  while (n > 1 && dir[n - 1] == '/')
    n--;
  if (n < 2)
    return msg;

  size_t len = 0;
  bool hidden = false;
  for (const char *p = msg; *p && len + 1 < cap;) {
    if (strncmp(p, dir, n) == 0 && (p[n] == '/' || path_end(p[n]))) {
      len += (size_t)snprintf(out + len, cap - len, "(the state directory)");
      len = len < cap ? len : cap - 1;
      for (p += n; !path_end(*p); p++)
        ;
      hidden = true;
      continue;
    }
    out[len++] = *p++;
  }
  out[len] = '\0';

  if (!hidden)
    return msg;
  fprintf(stderr, "hutch serve: %s\n", msg);
  return out;
}

static void answer(struct http_conn *c, enum hutch_errkind kind, const char *code, const char *msg,
                   unsigned retry_s) {
  char hidden[sizeof((struct hutch_err *)0)->msg];
  msg = hide_private(c, msg, hidden, sizeof hidden);
  kind = checked(kind);
  int status = kinds[kind].status;
  code = code ? code : kinds[kind].code;
  c->last_error = code;

  char retry[48];
  snprintf(retry, sizeof retry, "Retry-After: %u\r\n", retry_s ? retry_s : 1);
  const char *extra = kinds[kind].retry ? retry : NULL;

  json_t *j;
  switch (c->dialect) {
  case DIALECT_TEXT:
    http_respond(c, status, "text/plain; charset=utf-8", msg, strlen(msg), extra);
    return;
  case DIALECT_E2B:
    j = json_pack("{s:i,s:o}", "code", status, "message", http_json_text(msg));
    break;
  case DIALECT_CONNECT:
    j = json_pack("{s:s,s:o}", "code", http_connect_code(kind, code), "message",
                  http_json_text(msg));
    break;
  case DIALECT_CONNECT_STREAM: {
    /* A stream's error is its end-of-stream message; the status is 200. */
    size_t n;
    char *env = http_connect_envelope(CONNECT_END_STREAM,
                                      json_pack("{s:{s:s,s:o}}", "error", "code",
                                                http_connect_code(kind, code), "message",
                                                http_json_text(msg)),
                                      &n);
    http_respond(c, 200, "application/connect+json", env, n, NULL);
    free(env);
    return;
  }
  default:
    j = json_pack("{s:{s:s,s:o}}", "error", "code", code, "message", http_json_text(msg));
    break;
  }

  size_t n;
  char *s = http_json_line(j, &n);
  http_respond(c, status, "application/json", s, n, extra);
  free(s);
}

void http_error(struct http_conn *c, enum hutch_errkind kind, const char *code, const char *fmt,
                ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  answer(c, kind, code, msg, 0);
}

void http_fail(struct http_conn *c, const struct hutch_err *err) {
  answer(c, hutch_err_class(err), err->code, err->msg, err->retry_s);
}

/* The reason phrase of each status the server answers with. */
const char *http_status_text(int status) {
  switch (status) {
  case 200:
    return "OK";
  case 201:
    return "Created";
  case 202:
    return "Accepted";
  case 204:
    return "No Content";
  case 304:
    return "Not Modified";
  case 308:
    return "Permanent Redirect";
  case 400:
    return "Bad Request";
  case 401:
    return "Unauthorized";
  case 403:
    return "Forbidden";
  case 404:
    return "Not Found";
  case 405:
    return "Method Not Allowed";
  case 408:
    return "Request Timeout";
  case 409:
    return "Conflict";
  case 411:
    return "Length Required";
  case 413:
    return "Content Too Large";
  case 406:
    return "Not Acceptable";
  case 415:
    return "Unsupported Media Type";
  case 422:
    return "Unprocessable Content";
  case 429:
    return "Too Many Requests";
  case 431:
    return "Request Header Fields Too Large";
  case 500:
    return "Internal Server Error";
  case 502:
    return "Bad Gateway";
  case 503:
    return "Service Unavailable";
  case 504:
    return "Gateway Timeout";
  default:
    return "Unknown";
  }
}
