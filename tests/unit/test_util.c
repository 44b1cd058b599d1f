/* Number parsing, string copy and whole-buffer I/O (src/common/util.c). */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tap.h"
#include "util.h"

#define SENTINEL 0x5a5a5a5a5a5a5a5aull

static void u64_ok(const char *s, uint64_t want) {
  uint64_t v = SENTINEL;
  bool r = parse_u64(s, &v);
  ok(r && v == want, "parse_u64(\"%s\") = %" PRIu64 " (got %s, %" PRIu64 ")", s, want,
     r ? "true" : "false", v);
}

/* s as a C literal, for a one-line test description. */
static const char *quoted(const char *s) {
  static char buf[128];
  size_t n = 0;
  if (!s)
    return "NULL";
  buf[n++] = '"';
  for (; *s && n < sizeof buf - 4; s++) {
    if (*s == '\n') {
      buf[n++] = '\\';
      buf[n++] = 'n';
    } else {
      buf[n++] = *s;
    }
  }
  buf[n++] = '"';
  buf[n] = '\0';
  return buf;
}

static void u64_bad(const char *s) {
  uint64_t v = SENTINEL;
  bool r = parse_u64(s, &v);
  ok(!r && v == SENTINEL, "parse_u64(%s) rejected, output untouched", quoted(s));
}

static void milli_ok(const char *s, uint64_t want) {
  uint64_t v = SENTINEL;
  bool r = parse_milli(s, &v);
  ok(r && v == want, "parse_milli(\"%s\") = %" PRIu64 " (got %s, %" PRIu64 ")", s, want,
     r ? "true" : "false", v);
}

static void milli_bad(const char *s) {
  uint64_t v = SENTINEL;
  bool r = parse_milli(s, &v);
  ok(!r && v == SENTINEL, "parse_milli(\"%s\") rejected, output untouched (got %s, %" PRIu64 ")", s,
     r ? "true" : "false", v);
}

static void test_parse_u64(void) {
  u64_bad("");
  u64_bad(NULL);
  u64_ok("0", 0);
  u64_ok("7", 7);
  u64_ok("007", 7);
  u64_ok("4096", 4096);
  u64_ok("18446744073709551615", UINT64_MAX);
  u64_bad("18446744073709551616");
  u64_bad("18446744073709551620");
  u64_bad("99999999999999999999");
  u64_bad("184467440737095516150");
  u64_bad("+1");
  u64_bad("-1");
  u64_bad("-0");
  u64_bad(" 1");
  u64_bad("1 ");
  u64_bad("1\n");
  u64_bad("12a");
  u64_bad("0x10");
  u64_bad("1e3");
  u64_bad("1.0");
}

static void test_parse_milli(void) {
  milli_ok("1", 1000);
  milli_ok("0", 0);
  milli_ok("1.5", 1500);
  milli_ok("0.001", 1);
  milli_ok("0.05", 50);
  milli_ok("2.25", 2250);
  milli_ok("604800", 604800000);
  milli_ok("18446744073709551", 18446744073709551000ull);
  milli_ok("18446744073709551.615", UINT64_MAX);
  milli_bad("1.2345");
  milli_ok(".5", 500);
  milli_ok(".05", 50);
  milli_bad("1.");
  milli_bad(".");
  milli_bad("");
  milli_bad("abc");
  milli_bad("1.a");
  milli_bad("1.5.5");
  milli_bad("1..5");
  milli_bad("+1");
  milli_bad("-1");
  milli_bad("1.-5");
  milli_bad(" 1");
  milli_bad("1e3");
  milli_bad("18446744073709552");
  milli_bad("18446744073709551615");
  milli_bad("99999999999999999999999999999999999.5");
  /* The whole part fits, the whole in thousandths does not. */
  milli_bad("18446744073709551.616");
  milli_bad("18446744073709551.999");
}

static void test_str_copy(void) {
  char buf[8];
  memset(buf, 'X', sizeof buf);
  str_copy(buf, 4, "hello");
  ok(strcmp(buf, "hel") == 0 && buf[4] == 'X', "str_copy truncates to size-1 and terminates");
  memset(buf, 'X', sizeof buf);
  str_copy(buf, 4, "abc");
  ok(strcmp(buf, "abc") == 0 && buf[4] == 'X', "str_copy: exact fit");
  memset(buf, 'X', sizeof buf);
  str_copy(buf, 4, "ab");
  is_str(buf, "ab", "str_copy: shorter");
  memset(buf, 'X', sizeof buf);
  str_copy(buf, 1, "abc");
  ok(buf[0] == '\0' && buf[1] == 'X', "str_copy: size 1 gives the empty string");
  str_copy(buf, sizeof buf, "");
  is_str(buf, "", "str_copy: empty source");
}

static volatile sig_atomic_t alarms;
static void on_alarm(int sig) {
  (void)sig;
  alarms++;
}

static void start_alarms(void) {
  struct itimerval t = {{0, 100}, {0, 100}};
  setitimer(ITIMER_REAL, &t, NULL);
}

static void stop_alarms(void) {
  struct itimerval t = {{0, 0}, {0, 0}};
  setitimer(ITIMER_REAL, &t, NULL);
}

static void test_pipe_io(void) {
  int p[2];
  char buf[4096];
  if (pipe2(p, O_CLOEXEC) < 0)
    exit(1);
  is_int(write_all(p[1], "hello world", 11), 0, "write_all to a pipe");
  is_int(read_all(p[0], buf, 5), 5, "read_all of exactly what is wanted");
  ok(memcmp(buf, "hello", 5) == 0, "... the first bytes");
  close(p[1]);
  is_int(read_all(p[0], buf, sizeof buf), 6, "read_all returns short at end of file");
  ok(memcmp(buf, " world", 6) == 0, "... the rest");
  is_int(read_all(p[0], buf, sizeof buf), 0, "read_all at end of file: 0");
  close(p[0]);

  /* A signal without SA_RESTART every 100us on the side under test, and a
   * slow peer: the calls come back short or fail with EINTR, and write_all
   * and read_all must carry on. */
  enum { BIG = 4 << 20, CHUNK = 65536 };
  char *out = malloc(BIG), *in = malloc(BIG + 1);
  for (size_t i = 0; i < BIG; i++)
    out[i] = (char)(i * 7 + i / 1000);
  struct sigaction sa = {.sa_handler = on_alarm}, old_sa;
  sigaction(SIGALRM, &sa, &old_sa);

  if (pipe2(p, O_CLOEXEC) < 0)
    exit(1);
  pid_t pid = fork();
  if (pid == 0) {
    close(p[0]);
    start_alarms();
    int r = write_all(p[1], out, BIG);
    stop_alarms();
    _exit(r < 0 ? 1 : alarms == 0 ? 2 : 0);
  }
  close(p[1]);
  size_t got = 0;
  for (ssize_t r = 1; r > 0 && got < BIG + 1; got += (size_t)r) {
    usleep(1000);
    r = read(p[0], in + got, got + CHUNK <= BIG + 1 ? CHUNK : BIG + 1 - got);
    if (r < 0)
      r = 0;
  }
  close(p[0]);
  int status = -1;
  waitpid(pid, &status, 0);
  ok(WIFEXITED(status) && WEXITSTATUS(status) == 0,
     "write_all of 4 MiB to a slow reader, under signals, returned 0 (status %d)", status);
  ok(got == BIG && memcmp(in, out, BIG) == 0, "... all of it arrived, the same bytes (%zu)", got);

  enum { SMALL = 256 << 10 };
  if (pipe2(p, O_CLOEXEC) < 0)
    exit(1);
  pid = fork();
  if (pid == 0) {
    close(p[0]);
    for (size_t off = 0; off < SMALL; off += 1024) {
      usleep(200);
      if (write(p[1], out + off, 1024) != 1024)
        _exit(1);
    }
    _exit(0);
  }
  close(p[1]);
  alarms = 0;
  start_alarms();
  ssize_t n = read_all(p[0], in, SMALL + 1);
  stop_alarms();
  close(p[0]);
  waitpid(pid, &status, 0);
  is_int(n, SMALL, "read_all from a slow writer, under signals, reads to end of file");
  ok(n == SMALL && memcmp(in, out, SMALL) == 0, "... the same bytes");
  ok(alarms > 0, "... and the reader was interrupted (%d signals)", (int)alarms);
  sigaction(SIGALRM, &old_sa, NULL);
  free(out);
  free(in);

  if (pipe2(p, O_CLOEXEC) < 0)
    exit(1);
  close(p[0]);
  signal(SIGPIPE, SIG_IGN);
  errno = 0;
  ok(write_all(p[1], "x", 1) == -1 && errno == EPIPE, "write_all to a closed pipe: -1, EPIPE");
  signal(SIGPIPE, SIG_DFL);
  close(p[1]);
  errno = 0;
  ok(read_all(p[1], buf, 1) == -1 && errno == EBADF, "read_all of a closed fd: -1, EBADF");
}

static void test_files(void) {
  char dir[] = "/tmp/hutch-test-util.XXXXXX";
  if (!mkdtemp(dir))
    exit(1);
  int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  struct hutch_err err;
  char buf[64], want[256];

  memset(&err, 0, sizeof err);
  is_int(read_file_at(dfd, "missing", buf, sizeof buf, &err), -1, "read_file_at missing: -1");
  is_int(err.errnum, ENOENT, "... errnum ENOENT");
  snprintf(want, sizeof want, "open missing: %s", strerror(ENOENT));
  is_str(err.msg, want, "... message names the file and the error");

  memset(&err, 0, sizeof err);
  is_int(write_file_at(dfd, "missing", "1", &err), -1, "write_file_at missing: -1");
  is_int(err.errnum, ENOENT, "... errnum ENOENT");
  is_str(err.msg, want, "... message names the file and the error");
  ok(faccessat(dfd, "missing", F_OK, 0) < 0, "... and did not create it");

  close(openat(dfd, "f", O_CREAT | O_WRONLY | O_CLOEXEC, 0644));
  is_int(write_file_at(dfd, "f", "hello\n", &err), 0, "write_file_at an existing file");
  memset(buf, 'X', sizeof buf);
  is_int(read_file_at(dfd, "f", buf, sizeof buf, &err), 6, "read_file_at returns its length");
  is_str(buf, "hello\n", "... and the content, terminated");
  memset(buf, 'X', sizeof buf);
  is_int(read_file_at(dfd, "f", buf, 4, &err), 3, "read_file_at into 4 bytes: 3");
  ok(strcmp(buf, "hel") == 0 && buf[4] == 'X', "... cut short, terminated, nothing beyond");

  close(openat(dfd, "empty", O_CREAT | O_WRONLY | O_CLOEXEC, 0644));
  memset(buf, 'X', sizeof buf);
  ok(read_file_at(dfd, "empty", buf, sizeof buf, &err) == 0 && buf[0] == '\0',
     "read_file_at of an empty file: 0 and \"\"");

  /* Control files are never reached through a symlink. */
  if (symlinkat("f", dfd, "link") == 0) {
    memset(&err, 0, sizeof err);
    ok(read_file_at(dfd, "link", buf, sizeof buf, &err) == -1 && err.errnum == ELOOP,
       "read_file_at does not follow a symlink (ELOOP)");
    memset(&err, 0, sizeof err);
    ok(write_file_at(dfd, "link", "x", &err) == -1 && err.errnum == ELOOP,
       "write_file_at does not follow a symlink (ELOOP)");
    unlinkat(dfd, "link", 0);
  }

  mkdirat(dfd, "sub", 0755);
  memset(&err, 0, sizeof err);
  ok(read_file_at(dfd, "sub", buf, sizeof buf, &err) == -1 && err.errnum == EISDIR &&
         strncmp(err.msg, "read sub: ", 10) == 0,
     "read_file_at of a directory: -1, EISDIR, %s", err.msg);

  unlinkat(dfd, "f", 0);
  unlinkat(dfd, "empty", 0);
  unlinkat(dfd, "missing", 0); /* only if write_file_at wrongly created it */
  unlinkat(dfd, "sub", AT_REMOVEDIR);
  close(dfd);
  rmdir(dir);
}

static void test_utf8(void) {
  static const struct {
    const char *s;
    bool ok;
    const char *what;
  } cases[] = {
      {"", true, "empty"},
      {"plain ascii", true, "ASCII"},
      {"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", true, "2, 3 and 4 byte forms"},
      {"\xff", false, "a byte no UTF-8 has"},
      {"\x80", false, "a continuation byte first"},
      {"\xc3", false, "cut short"},
      {"\xe2\x82", false, "a 3-byte form cut short"},
      {"\xc0\xaf", false, "an overlong '/'"},
      {"\xe0\x80\xaf", false, "an overlong 3-byte form"},
      {"\xed\xa0\x80", false, "a surrogate"},
      {"\xf4\x90\x80\x80", false, "past U+10FFFF"},
      {"\xf4\x8f\xbf\xbf", true, "U+10FFFF itself"},
      {"a\xc3(b", false, "a lead without its continuation"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
    ok(utf8_valid(cases[i].s, strlen(cases[i].s)) == cases[i].ok, "utf8: %s", cases[i].what);
}

int main(void) {
  test_utf8();
  test_parse_u64();
  test_parse_milli();
  test_str_copy();
  test_pipe_io();
  test_files();
  return done_testing();
}
