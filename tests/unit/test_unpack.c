/* The unpacker's path rules (src/image/unpack.c): archive names cleaned
 * to paths under the root, ".." refused, and parents walked without
 * following a symlink. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tap.h"
#include "unpack.h"

static void clean(const char *name, const char *want) {
  char out[PATH_MAX];
  struct hutch_err err = {0};
  int r = unpack_clean_path(name, out, sizeof out, &err);
  if (want)
    ok(r == 0 && strcmp(out, want) == 0, "'%s' is '%s' (%s)", name, want, r ? err.msg : out);
  else
    ok(r < 0 && err.kind == HUTCH_ERR_INVALID, "'%s' refused: %s", name, err.msg);
}

static void names(void) {
  clean("etc/passwd", "etc/passwd");
  clean("/etc/passwd", "etc/passwd");
  clean("./etc//./passwd/", "etc/passwd");
  clean("///", "");
  clean(".", "");
  clean("..", NULL);
  clean("../etc", NULL);
  clean("a/../../etc", NULL);
  clean("a/..", NULL);
  clean("...", "...");
  clean("a/..b", "a/..b");
  char deep[4 * 300 + 1] = "";
  for (int i = 0; i < 300; i++)
    strcat(deep, "a/");
  clean(deep, NULL);
}

static void digests(void) {
  char hex[65];
  const char *good = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
  ok(unpack_digest_hex(good, hex) && strcmp(hex, good + 7) == 0, "a sha256 digest");
  ok(!unpack_digest_hex("sha256:0123", hex), "too short");
  ok(!unpack_digest_hex("sha512:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
                        hex),
     "another algorithm");
  ok(!unpack_digest_hex("sha256:0123456789ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef",
                        hex),
     "upper case");
  ok(!unpack_digest_hex(NULL, hex), "none");
}

static void walk(void) {
  char dir[] = "/tmp/test_unpack.XXXXXX";
  ok(mkdtemp(dir) != NULL, "temporary directory");
  int root = open(dir, O_RDONLY | O_DIRECTORY);
  ok(mkdirat(root, "real", 0755) == 0 && symlinkat("/", root, "link") == 0 &&
         symlinkat("real", root, "rel") == 0,
     "a directory and symlinks");
  struct hutch_err err = {0};
  const char *leaf;
  int fd = unpack_open_parent(root, "real/x", false, &leaf, &err);
  ok(fd >= 0 && strcmp(leaf, "x") == 0, "through a directory");
  close(fd);
  fd = unpack_open_parent(root, "new/deeper/x", true, &leaf, &err);
  struct stat st;
  ok(fd >= 0 && fstatat(root, "new/deeper", &st, 0) == 0 && S_ISDIR(st.st_mode),
     "missing parents made");
  close(fd);
  const char *through[] = {"link/etc/passwd", "rel/x", "link/x"};
  for (size_t i = 0; i < sizeof through / sizeof *through; i++) {
    err = (struct hutch_err){0};
    fd = unpack_open_parent(root, through[i], true, &leaf, &err);
    ok(fd < 0 && err.kind == HUTCH_ERR_INVALID && strstr(err.msg, "symlink"), "'%s' refused: %s",
       through[i], err.msg);
  }
  err = (struct hutch_err){0};
  fd = unpack_open_parent(root, "gone/x", false, &leaf, &err);
  ok(fd < 0 && err.kind == HUTCH_ERR_INVALID, "a missing parent, not made: %s", err.msg);
  ok(fstatat(root, "gone", &st, 0) < 0 && errno == ENOENT, "nothing made");
  unlinkat(root, "link", 0);
  unlinkat(root, "rel", 0);
  unlinkat(root, "real", AT_REMOVEDIR);
  unlinkat(root, "new/deeper", AT_REMOVEDIR);
  unlinkat(root, "new", AT_REMOVEDIR);
  close(root);
  ok(rmdir(dir) == 0, "all removed");
}

int main(void) {
  names();
  digests();
  walk();
  return done_testing();
}
