/* The error convention (src/common/err.c, docs/error_handling.md). */
#include <errno.h>
#include <string.h>

#include "err.h"
#include "tap.h"

static void test_set(void) {
  struct hutch_err err;
  char want[256];

  memset(&err, 0x5a, sizeof err);
  is_int(hutch_err_set(&err, 0, "open %s", "/x"), -1, "hutch_err_set returns -1");
  is_str(err.msg, "open /x", "without errno: the message alone");
  is_int(err.kind, HUTCH_ERR_SYSTEM, "... kind SYSTEM");
  is_int(err.errnum, 0, "... errnum 0");

  memset(&err, 0x5a, sizeof err);
  hutch_err_set(&err, ENOENT, "open %s", "/x");
  snprintf(want, sizeof want, "open /x: %s", strerror(ENOENT));
  is_str(err.msg, want, "with errno: \": strerror\" appended");
  is_int(err.errnum, ENOENT, "... errnum kept");
  is_int(err.kind, HUTCH_ERR_SYSTEM, "... kind SYSTEM");

  memset(&err, 0x5a, sizeof err);
  is_int(hutch_err_invalid(&err, "bad %d", 3), -1, "hutch_err_invalid returns -1");
  ok(err.kind == HUTCH_ERR_INVALID && err.errnum == 0 && strcmp(err.msg, "bad 3") == 0,
     "hutch_err_invalid: kind INVALID, errnum 0, message");

  memset(&err, 0x5a, sizeof err);
  is_int(hutch_err_not_found(&err, "no sandbox %s", "s1"), -1, "hutch_err_not_found returns -1");
  ok(err.kind == HUTCH_ERR_NOT_FOUND && err.errnum == 0 && strcmp(err.msg, "no sandbox s1") == 0,
     "hutch_err_not_found: kind NOT_FOUND, errnum 0, message");

  char longmsg[2000];
  memset(longmsg, 'm', sizeof longmsg - 1);
  longmsg[sizeof longmsg - 1] = '\0';
  memset(&err, 0x5a, sizeof err);
  hutch_err_set(&err, EIO, "%s", longmsg);
  ok(strnlen(err.msg, sizeof err.msg) == sizeof err.msg - 1 && err.errnum == EIO,
     "a message longer than the buffer is cut and terminated");
  longmsg[1020] = '\0';
  memset(&err, 0x5a, sizeof err);
  hutch_err_set(&err, EIO, "%s", longmsg);
  ok(strnlen(err.msg, sizeof err.msg) == sizeof err.msg - 1 && strncmp(err.msg, longmsg, 1020) == 0,
     "a message that leaves no room for all of strerror is cut and terminated");
}

static void test_wrap(void) {
  struct hutch_err err;
  char want[256];
  hutch_err_set(&err, EACCES, "open %s", "memory.max");
  is_int(hutch_err_wrap(&err, "sandbox %s", "s1"), -1, "hutch_err_wrap returns -1");
  hutch_err_wrap(&err, "create");
  snprintf(want, sizeof want, "create: sandbox s1: open memory.max: %s", strerror(EACCES));
  is_str(err.msg, want, "wrap prefixes \"context: \", outermost first");
  ok(err.kind == HUTCH_ERR_SYSTEM && err.errnum == EACCES, "wrap keeps kind and errnum");

  hutch_err_invalid(&err, "bad spec");
  hutch_err_wrap(&err, "agent");
  ok(err.kind == HUTCH_ERR_INVALID && strcmp(err.msg, "agent: bad spec") == 0,
     "wrap keeps kind INVALID");

  hutch_err_invalid(&err, "%s", "");
  hutch_err_wrap(&err, "ctx");
  is_str(err.msg, "ctx: ", "wrap of an empty message");

  char big[1001];
  memset(big, 'a', 1000);
  big[1000] = '\0';
  hutch_err_set(&err, 0, "%s", big);
  bool terminated = true, prefixed = true;
  for (int i = 0; i < 10; i++) {
    char prefix[32];
    hutch_err_wrap(&err, "layer %d", i);
    snprintf(prefix, sizeof prefix, "layer %d: ", i);
    terminated &= strnlen(err.msg, sizeof err.msg) < sizeof err.msg;
    prefixed &= strncmp(err.msg, prefix, strlen(prefix)) == 0;
  }
  ok(terminated, "a 1000-char message wrapped 10 times stays NUL-terminated");
  ok(prefixed, "... and starts with the last prefix each time");
  is_int(strlen(err.msg), sizeof err.msg - 1, "... filling the buffer exactly");
  ok(strncmp(err.msg, "layer 9: layer 8: layer 7: ", 27) == 0 && err.msg[sizeof err.msg - 2] == 'a',
     "... prefixes in order, the tail of the old message cut");

  /* A prefix longer than the message buffer's half. */
  char longprefix[2000];
  memset(longprefix, 'p', sizeof longprefix - 1);
  longprefix[sizeof longprefix - 1] = '\0';
  hutch_err_set(&err, 0, "%s", big);
  hutch_err_wrap(&err, "%s", longprefix);
  size_t len = strnlen(err.msg, sizeof err.msg);
  ok(len < sizeof err.msg && strspn(err.msg, "p") > 0 && strstr(err.msg, ": aaa") != NULL,
     "a 1999-char prefix is cut: terminated, prefix then \": \" then the message (%zu chars)", len);
  for (int i = 0; i < 10; i++)
    hutch_err_wrap(&err, "%s", longprefix);
  ok(strnlen(err.msg, sizeof err.msg) < sizeof err.msg, "... and so after wrapping it 10 times");
}

int main(void) {
  test_set();
  test_wrap();
  return done_testing();
}
