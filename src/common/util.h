/* Small helpers shared by the host side and the agent: allocation that
 * aborts on failure, whole-buffer I/O, strict number parsing. */
#ifndef HUTCH_UTIL_H
#define HUTCH_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "err.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

void *xmalloc(size_t n);
void *xcalloc(size_t n, size_t size);
void *xrealloc(void *p, size_t n);
/* p with room for at least need bytes (*cap its size): grown by doubling,
 * never shrunk, so that a buffer filled and drained over and over is not
 * given back to the kernel and faulted in again each time. */
void *xgrow(void *p, size_t *cap, size_t need);
char *xstrdup(const char *s);
char *xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Write or read all of buf, retrying on EINTR and short transfers.
 * read_all returns the bytes read (less than n only at end of file). */
int write_all(int fd, const void *buf, size_t n);
ssize_t read_all(int fd, void *buf, size_t n);

/* Write a short string to dirfd/name (a cgroup or proc control file). */
/* Create name (which must not exist) holding s. */
int create_file_at(int dirfd, const char *name, const char *s, mode_t mode, struct hutch_err *err);
int write_file_at(int dirfd, const char *name, const char *s, struct hutch_err *err);
/* Read at most size-1 bytes of dirfd/name into buf, NUL-terminated. */
ssize_t read_file_at(int dirfd, const char *name, char *buf, size_t size, struct hutch_err *err);

/* Strict decimal parsing: the whole string, no sign, no overflow. */
bool parse_u64(const char *s, uint64_t *out);
/* A non-negative decimal with an optional fraction ("1.5", ".5"), as thousandths. */
bool parse_milli(const char *s, uint64_t *out);

/* Copy src into dst[size], cut short if need be, always terminated. */
void str_copy(char *dst, size_t size, const char *src);
/* Whether s[0..n) is UTF-8 as JSON (jansson) takes it: no overlong forms,
 * no surrogates, nothing past U+10FFFF. */
bool utf8_valid(const char *s, size_t n);
/* The length of the UTF-8 sequence s[0..n) starts with (n > 0), as
 * utf8_valid takes one, and its code point in *cp; 0 when it is none. */
size_t utf8_seq(const char *s, size_t n, unsigned *cp);

/* Append n bytes of at to the malloc'd string *s (NULL: empty so far). */
void str_append(char **s, const char *at, size_t n);

/* Close every fd but the n in keep (sorted in place; -1 entries are
 * ignored), with close_range: system calls only, so a process cloned
 * from a threaded one may call it before anything else. */
void hutch_close_others(int *keep, size_t n);

/* Monotonic clock in nanoseconds. */
uint64_t now_ns(void);
/* The wall clock in ms since the epoch. */
int64_t wall_ms(void);
/* ms since the epoch as "2026-01-02T03:04:05.678Z". */
void iso8601(int64_t ms, char out[32]);
/* nhex (at most 128) random hex digits and a NUL; aborts without randomness. */
void random_hex(char *out, size_t nhex);

#endif
