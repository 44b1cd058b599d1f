/* How every error is answered (errors.c): the one table from an error's
 * kind to its HTTP status and Connect code, and the answer each front
 * end's dialect writes. */
#ifndef HUTCH_HTTP_ERRORS_H
#define HUTCH_HTTP_ERRORS_H

#include "err.h"

struct http_conn;
struct hutch_err;

/* An error answered as the request's dialect writes it, its status from
 * the one table of kinds; code names the case (a string literal; NULL:
 * the kind's). */
void http_error(struct http_conn *c, enum hutch_errkind kind, const char *code, const char *fmt,
                ...) __attribute__((format(printf, 4, 5)));
void http_fail(struct http_conn *c, const struct hutch_err *err);
/* The table's HTTP status and Connect code of a kind. */
int http_error_status(enum hutch_errkind kind);
const char *http_connect_code(enum hutch_errkind kind, const char *code);

const char *http_status_text(int status);

#endif
