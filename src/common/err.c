/* Filling in a struct hutch_err (err.h): its kind, errno and message, the
 * kind a system error counts as, and the context a caller puts before the
 * message on the way up. */
#include "err.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static int err_vset(struct hutch_err *err, enum hutch_errkind kind, int errnum, const char *fmt,
                    va_list ap) {
  err->kind = kind;
  err->errnum = errnum;
  err->code = NULL;
  err->retry_s = 0;
  int n = vsnprintf(err->msg, sizeof err->msg, fmt, ap);
  if (errnum != 0 && n >= 0 && (size_t)n < sizeof err->msg)
    snprintf(err->msg + n, sizeof err->msg - (size_t)n, ": %s", strerror(errnum));
  return -1;
}

int hutch_err_set(struct hutch_err *err, int errnum, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  err_vset(err, HUTCH_ERR_SYSTEM, errnum, fmt, ap);
  va_end(ap);
  return -1;
}

int hutch_err_invalid(struct hutch_err *err, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  err_vset(err, HUTCH_ERR_INVALID, 0, fmt, ap);
  va_end(ap);
  return -1;
}

int hutch_err_not_found(struct hutch_err *err, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  err_vset(err, HUTCH_ERR_NOT_FOUND, 0, fmt, ap);
  va_end(ap);
  return -1;
}

int hutch_err_fail(struct hutch_err *err, enum hutch_errkind kind, const char *code,
                   const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  err_vset(err, kind, 0, fmt, ap);
  va_end(ap);
  err->code = code;
  return -1;
}

enum hutch_errkind hutch_err_class(const struct hutch_err *err) {
  if (err->kind != HUTCH_ERR_SYSTEM)
    return err->kind;
  switch (err->errnum) {
  case EBUSY:
    return HUTCH_ERR_BUSY;
  case ENOSPC:
  case EDQUOT:
    return HUTCH_ERR_NO_SPACE;
  case EMFILE:
  case ENFILE:
  case EAGAIN:
    return HUTCH_ERR_UNAVAILABLE;
  default:
    return HUTCH_ERR_SYSTEM;
  }
}

int hutch_err_wrap(struct hutch_err *err, const char *fmt, ...) {
  char prefix[512];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(prefix, sizeof prefix - 2, fmt, ap);
  va_end(ap);
  if (n < 0)
    return -1;

  size_t plen = strlen(prefix), cap = sizeof err->msg - 1;
  memcpy(prefix + plen, ": ", 3);
  plen += 2;
  if (plen > cap)
    plen = cap;
  size_t keep = strnlen(err->msg, cap);
  if (keep > cap - plen)
    keep = cap - plen;

  memmove(err->msg + plen, err->msg, keep);
  memcpy(err->msg, prefix, plen);
  err->msg[plen + keep] = '\0';
  return -1;
}
