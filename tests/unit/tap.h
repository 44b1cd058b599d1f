/* A minimal TAP producer for the C unit tests (meson: protocol 'tap').
 *
 *   ok(cond, "what", ...)          is_int(got, want, "what", ...)
 *   is_u64(got, want, "what", ...) is_str(got, want, "what", ...)
 *   return done_testing();
 *
 * Each check prints "ok N - what" or "not ok N - what" with the file, line
 * and, for the is_* forms, the values seen; done_testing() prints the plan
 * "1..N" last (allowed by TAP, so a test that crashes half way shows up as a
 * missing plan) and returns the exit status: nonzero if any check failed. */
#ifndef HUTCH_TAP_H
#define HUTCH_TAP_H

#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

static int tap_count, tap_failed;

static inline void tap_vreport(bool pass, const char *file, int line, const char *fmt, va_list ap) {
  tap_count++;
  printf("%sok %d - ", pass ? "" : "not ", tap_count);
  vprintf(fmt, ap);
  printf("\n");
  if (!pass) {
    tap_failed++;
    printf("#   failed at %s:%d\n", file, line);
  }
  fflush(stdout);
}

static inline __attribute__((format(printf, 4, 5))) bool tap_ok(bool pass, const char *file,
                                                                int line, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  tap_vreport(pass, file, line, fmt, ap);
  va_end(ap);
  return pass;
}

static inline __attribute__((format(printf, 5, 6))) bool tap_is_int(long long got, long long want,
                                                                    const char *file, int line,
                                                                    const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  tap_vreport(got == want, file, line, fmt, ap);
  va_end(ap);
  if (got != want)
    printf("#        got: %lld\n#   expected: %lld\n", got, want);
  return got == want;
}

static inline __attribute__((format(printf, 5, 6))) bool tap_is_u64(uint64_t got, uint64_t want,
                                                                    const char *file, int line,
                                                                    const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  tap_vreport(got == want, file, line, fmt, ap);
  va_end(ap);
  if (got != want)
    printf("#        got: %" PRIu64 "\n#   expected: %" PRIu64 "\n", got, want);
  return got == want;
}

static inline __attribute__((format(printf, 5, 6))) bool tap_is_str(const char *got,
                                                                    const char *want,
                                                                    const char *file, int line,
                                                                    const char *fmt, ...) {
  bool pass = got && want ? strcmp(got, want) == 0 : got == want;
  va_list ap;
  va_start(ap, fmt);
  tap_vreport(pass, file, line, fmt, ap);
  va_end(ap);
  if (!pass)
    printf("#        got: %s%s%s\n#   expected: %s%s%s\n", got ? "'" : "", got ? got : "NULL",
           got ? "'" : "", want ? "'" : "", want ? want : "NULL", want ? "'" : "");
  return pass;
}

static inline __attribute__((format(printf, 1, 2))) void diag(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  printf("# ");
  vprintf(fmt, ap);
  printf("\n");
  va_end(ap);
}

static inline int done_testing(void) {
  printf("1..%d\n", tap_count);
  if (tap_failed)
    printf("# %d of %d checks failed\n", tap_failed, tap_count);
  fflush(stdout);
  return tap_failed ? 1 : 0;
}

#define ok(cond, ...) tap_ok(!!(cond), __FILE__, __LINE__, __VA_ARGS__)
#define is_int(got, want, ...) \
  tap_is_int((long long)(got), (long long)(want), __FILE__, __LINE__, __VA_ARGS__)
#define is_u64(got, want, ...) \
  tap_is_u64((uint64_t)(got), (uint64_t)(want), __FILE__, __LINE__, __VA_ARGS__)
#define is_str(got, want, ...) tap_is_str((got), (want), __FILE__, __LINE__, __VA_ARGS__)

#endif
