/* The one error convention of hutch (docs/error_handling.md).
 *
 * A function that can fail takes `struct hutch_err *err` last and returns a
 * negative value on failure with *err filled in; callers add context with
 * hutch_err_wrap() on the way up. The message is a fixed buffer, so reporting
 * an error never allocates and never fails. */
#ifndef HUTCH_ERR_H
#define HUTCH_ERR_H

/* What went wrong, from a closed set: the kind alone decides how each
 * front end answers (hutch serve's one table, src/server/http/errors.c;
 * hutch run's exit status), so every front end gives a kind the same
 * meaning. */
enum hutch_errkind {
  HUTCH_ERR_SYSTEM = 0,       /* hutch's own failure: internal, exit 125 */
  HUTCH_ERR_INVALID,          /* the caller's input is wrong */
  HUTCH_ERR_NOT_FOUND,        /* the caller named something that does not exist (or not its own) */
  HUTCH_ERR_UNAUTHENTICATED,  /* no valid key or token */
  HUTCH_ERR_FORBIDDEN,        /* a valid key that may not do this */
  HUTCH_ERR_CONFLICT,         /* the thing's state forbids it (already paused, in use) */
  HUTCH_ERR_BUSY,             /* work under way forbids it now: the same request succeeds soon */
  HUTCH_ERR_QUOTA,            /* a tenant's or a sandbox's limit is reached */
  HUTCH_ERR_TOO_LARGE,        /* more than one request may carry */
  HUTCH_ERR_NO_SPACE,         /* the state filesystem keeps its reserve */
  HUTCH_ERR_UNSUPPORTED,      /* asks for what hutch does not do */
  HUTCH_ERR_UNAVAILABLE,      /* the server's load or capacity, or it is stopping: retry */
  HUTCH_ERR_UPSTREAM,         /* a sandbox's own service failed or is gone */
  HUTCH_ERR_UPSTREAM_TIMEOUT, /* what a sandbox reached did not answer in time */
  HUTCH_ERR_TIMEOUT,          /* the client did not send its request in time */
  /* The transport's own: the request is not HTTP this server takes. */
  HUTCH_ERR_METHOD,          /* no such method on the path */
  HUTCH_ERR_LENGTH_REQUIRED, /* a body without a length where one is needed */
  HUTCH_ERR_MEDIA,           /* a content encoding the route does not take */
  HUTCH_ERR_HEADERS_TOO_LARGE,
  HUTCH_ERR_KINDS
};

struct hutch_err {
  enum hutch_errkind kind;
  int errnum;       /* errno behind the failure, 0 when none */
  const char *code; /* a string literal naming the case ("already_paused"); NULL: the kind's */
  unsigned retry_s; /* a refusal worth retrying: in about this many seconds; 0: unknown (1) */
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
/* Any kind, with the code that names the case (a string literal, or NULL). */
int hutch_err_fail(struct hutch_err *err, enum hutch_errkind kind, const char *code,
                   const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/* The kind an error answers as: its own, or for hutch's own failures the
 * one its errno means (EBUSY busy, ENOSPC no space, out of descriptors or
 * processes unavailable). */
enum hutch_errkind hutch_err_class(const struct hutch_err *err);
/* Prefix context: "context: previous message". Kind and errnum are kept. */
int hutch_err_wrap(struct hutch_err *err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#endif
