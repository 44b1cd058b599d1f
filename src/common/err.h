/* The one error convention of hutch (docs/error_handling.md).
 *
 * A function that can fail takes `struct hutch_err *err` last and returns a
 * negative value on failure with *err filled in; callers add context with
 * hutch_err_wrap() on the way up. The message is a fixed buffer, so reporting
 * an error never allocates and never fails. */
#ifndef HUTCH_ERR_H
#define HUTCH_ERR_H

enum hutch_errkind {
  HUTCH_ERR_SYSTEM = 0, /* hutch's own failure: sandbox_error, exit 125 */
  HUTCH_ERR_INVALID,    /* the caller's input is wrong */
  HUTCH_ERR_NOT_FOUND,  /* the caller named something that does not exist */
};

struct hutch_err {
  enum hutch_errkind kind;
  int errnum; /* errno behind the failure, 0 when none */
  char msg[1024];
};

/* Each returns -1 so that `return hutch_err_set(err, ...)` reads naturally.
 * hutch_err_set appends ": strerror(errnum)" when errnum is not 0. */
int hutch_err_set(struct hutch_err *err, int errnum, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
int hutch_err_invalid(struct hutch_err *err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
int hutch_err_not_found(struct hutch_err *err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Prefix context: "context: previous message". Kind and errnum are kept. */
int hutch_err_wrap(struct hutch_err *err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#endif
