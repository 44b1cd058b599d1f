/* Small helpers shared by the host side and the agent (util.h): allocation
 * that aborts on failure, whole-buffer and whole-file I/O, strict number
 * parsing, bounded strings, UTF-8 checking, the monotonic clock, and
 * closing every fd but some. */
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "cleanup.h"

static void *oom(void) {
  static const char msg[] = "hutch: out of memory\n";
  (void)!write(2, msg, sizeof msg - 1);
  abort();
}

void *xmalloc(size_t n) {
  void *p = malloc(n ? n : 1);
  return p ? p : oom();
}

void *xcalloc(size_t n, size_t size) {
  void *p = calloc(n ? n : 1, size ? size : 1);
  return p ? p : oom();
}

void *xrealloc(void *p, size_t n) {
  void *q = realloc(p, n ? n : 1);
  return q ? q : oom();
}

void *xgrow(void *p, size_t *cap, size_t need) {
  if (need <= *cap)
    return p;
  size_t n = *cap ? *cap : 4096;
  while (n < need)
    n *= 2;
  *cap = n;
  return xrealloc(p, n);
}

char *xstrdup(const char *s) {
  char *p = strdup(s);
  return p ? p : oom();
}

char *xasprintf(const char *fmt, ...) {
  char *p;
  va_list ap;
  va_start(ap, fmt);
  int n = vasprintf(&p, fmt, ap);
  va_end(ap);
  return n < 0 ? oom() : p;
}

int write_all(int fd, const void *buf, size_t n) {
  const char *p = buf;
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR)
        continue;
      return -1;
    }
    p += w;
    n -= (size_t)w;
  }
  return 0;
}

ssize_t read_all(int fd, void *buf, size_t n) {
  char *p = buf;
  size_t got = 0;
  while (got < n) {
    ssize_t r = read(fd, p + got, n - got);
    if (r < 0) {
      if (errno == EINTR)
        continue;
      return -1;
    }
    if (r == 0)
      break;
    got += (size_t)r;
  }
  return (ssize_t)got;
}

int write_file_at(int dirfd, const char *name, const char *s, struct hutch_err *err) {
  _cleanup_close_ int fd = openat(dirfd, name, O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0)
    return hutch_err_set(err, errno, "open %s", name);
  if (write_all(fd, s, strlen(s)) < 0)
    return hutch_err_set(err, errno, "write '%s' to %s", s, name);
  return 0;
}

int create_file_at(int dirfd, const char *name, const char *s, mode_t mode, struct hutch_err *err) {
  _cleanup_close_ int fd =
      openat(dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode);
  if (fd < 0)
    return hutch_err_set(err, errno, "create %s", name);
  if (write_all(fd, s, strlen(s)) < 0)
    return hutch_err_set(err, errno, "write %s", name);
  return 0;
}

ssize_t read_file_at(int dirfd, const char *name, char *buf, size_t size, struct hutch_err *err) {
  if (size == 0)
    return hutch_err_invalid(err, "read %s: no room", name);
  _cleanup_close_ int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0)
    return hutch_err_set(err, errno, "open %s", name);
  ssize_t n = read_all(fd, buf, size - 1);
  if (n < 0)
    return hutch_err_set(err, errno, "read %s", name);
  buf[n] = '\0';
  return n;
}

bool parse_u64(const char *s, uint64_t *out) {
  uint64_t v = 0;
  if (!s || !*s)
    return false;
  for (; *s; s++) {
    if (*s < '0' || *s > '9')
      return false;
    unsigned d = (unsigned)(*s - '0');
    if (v > (UINT64_MAX - d) / 10)
      return false;
    v = v * 10 + d;
  }
  *out = v;
  return true;
}

bool parse_milli(const char *s, uint64_t *out) {
  char whole[32];
  const char *dot = strchr(s, '.');
  size_t wl = dot ? (size_t)(dot - s) : strlen(s);
  uint64_t w, frac = 0;
  if ((wl == 0 && !dot) || wl >= sizeof whole)
    return false;

  memcpy(whole, s, wl);
  whole[wl] = '\0';
  if (wl == 0) /* ".5" */
    strcpy(whole, "0");
  if (!parse_u64(whole, &w) || w > UINT64_MAX / 1000)
    return false;

  if (dot) {
    const char *f = dot + 1;
    size_t fl = strlen(f);
    if (fl == 0 || fl > 3)
      return false;
    for (size_t i = 0; i < 3; i++) {
      if (i < fl && (f[i] < '0' || f[i] > '9'))
        return false;
      frac = frac * 10 + (i < fl ? (uint64_t)(f[i] - '0') : 0);
    }
  }

  if (w > (UINT64_MAX - frac) / 1000)
    return false;
  *out = w * 1000 + frac;
  return true;
}

void str_copy(char *dst, size_t size, const char *src) {
  if (size == 0)
    return;
  size_t n = strnlen(src, size - 1);
  memcpy(dst, src, n);
  dst[n] = '\0';
}

void str_append(char **s, const char *at, size_t n) {
  size_t old = *s ? strlen(*s) : 0;
  *s = xrealloc(*s, old + n + 1);
  memcpy(*s + old, at, n);
  (*s)[old + n] = '\0';
}

uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int64_t wall_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void iso8601(int64_t ms, char out[32]) {
  time_t t = (time_t)(ms / 1000);
  struct tm tm;
  gmtime_r(&t, &tm);
  size_t n = strftime(out, 32, "%Y-%m-%dT%H:%M:%S", &tm);
  snprintf(out + n, 32 - n, ".%03dZ", (int)(ms % 1000));
}

void random_hex(char *out, size_t nhex) {
  unsigned char raw[64];
  size_t n = (nhex + 1) / 2;
  size_t got = 0;
  while (got < n) {
    ssize_t r = getrandom(raw + got, n - got, 0);
    if (r < 0 && errno != EINTR)
      abort(); /* no randomness, no keys: nothing sensible to go on with */
    if (r > 0)
      got += (size_t)r;
  }
  for (size_t i = 0; i < nhex; i++)
    out[i] = "0123456789abcdef"[(raw[i / 2] >> (i % 2 ? 0 : 4)) & 15];
  out[nhex] = '\0';
}

size_t utf8_seq(const char *s, size_t n, unsigned *cp) {
  const unsigned char *p = (const unsigned char *)s;
  unsigned c = p[0], len;
  if (c < 0x80) {
    *cp = c;
    return 1;
  }
  if (c >= 0xc2 && c <= 0xdf)
    len = 2, *cp = c & 0x1f;
  else if (c >= 0xe0 && c <= 0xef)
    len = 3, *cp = c & 0x0f;
  else if (c >= 0xf0 && c <= 0xf4)
    len = 4, *cp = c & 0x07;
  else
    return 0; /* a continuation byte first, an overlong lead, or past 0xf4 */

  if (n < len)
    return 0;
  for (unsigned k = 1; k < len; k++) {
    if ((p[k] & 0xc0) != 0x80)
      return 0;
    *cp = *cp << 6 | (p[k] & 0x3f);
  }
  if ((len == 3 && *cp < 0x800) || (len == 4 && (*cp < 0x10000 || *cp > 0x10ffff)) ||
      (*cp >= 0xd800 && *cp <= 0xdfff))
    return 0;
  return len;
}

bool utf8_valid(const char *s, size_t n) {
  unsigned cp;
  for (size_t i = 0, len; i < n; i += len)
    if ((len = utf8_seq(s + i, n - i, &cp)) == 0)
      return false;
  return true;
}

void hutch_close_others(int *keep, size_t n) {
  for (size_t i = 1; i < n; i++)
    for (size_t j = i; j > 0 && keep[j - 1] > keep[j]; j--) {
      int t = keep[j];
      keep[j] = keep[j - 1];
      keep[j - 1] = t;
    }
  unsigned from = 0;
  for (size_t i = 0; i < n; i++) {
    if (keep[i] < 0 || (unsigned)keep[i] < from)
      continue;
    if ((unsigned)keep[i] > from)
      syscall(SYS_close_range, from, (unsigned)keep[i] - 1, 0);
    from = (unsigned)keep[i] + 1;
  }
  syscall(SYS_close_range, from, ~0U, 0);
}
