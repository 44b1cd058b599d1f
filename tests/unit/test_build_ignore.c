/* .dockerignore and COPY patterns (src/image/build_ignore.c): Docker's
 * matching, `**` across names, exceptions, and parents excluding what
 * they hold. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "build.h"
#include "tap.h"

static void match_is(const char *pat, const char *path, bool want) {
  is_int(build_match(pat, path), want, "'%s' %s '%s'", pat, want ? "matches" : "does not match",
         path);
}

static void test_match(void) {
  match_is("*.log", "a.log", true);
  match_is("*.log", "sub/a.log", false);
  match_is("**/*.log", "a.log", true);
  match_is("**/*.log", "sub/deep/a.log", true);
  match_is("sub/**", "sub/x/y", true);
  match_is("sub/**", "other/x", false);
  match_is("/sub/?.txt", "sub/a.txt", true);
  match_is("sub/?.txt", "sub/ab.txt", false);
  match_is("[ab].c", "b.c", true);
  match_is("a/**/b", "a/b", true);
  match_is("a/**/b", "a/x/y/b", true);
  match_is("a/**/b", "a/x/y/c", false);
  match_is("a", "a/b", false);
}

static void test_file(void) {
  char dir[] = "/tmp/test_build_ignore.XXXXXX";
  if (!ok(mkdtemp(dir) != NULL, "temp dir"))
    return;
  char path[128];
  snprintf(path, sizeof path, "%s/.dockerignore", dir);
  FILE *f = fopen(path, "w");
  fputs("# comment\n\n  ./build/  \n*.tmp\n!keep.tmp\nlogs\n", f);
  fclose(f);
  int fd = open(dir, O_RDONLY | O_DIRECTORY);
  struct build_ignore *ig = NULL;
  struct hutch_err err = {0};
  ok(build_ignore_load(fd, &ig, &err) == 0 && ig, "loads (%s)", err.msg);
  ok(build_ignored(ig, "build"), "a directory");
  ok(build_ignored(ig, "build/out/x.o"), "what it holds");
  ok(build_ignored(ig, "x.tmp"), "a pattern");
  ok(!build_ignored(ig, "keep.tmp"), "an exception");
  ok(build_ignored(ig, "logs/today"), "under an excluded name");
  ok(!build_ignored(ig, "src/x.tmp"), "a pattern is anchored at the root");
  ok(!build_ignored(ig, "Dockerfile"), "the rest is in");
  ok(!build_ignored(NULL, "anything"), "no .dockerignore");
  build_ignore_free(ig);
  close(fd);
  unlink(path);
  rmdir(dir);
}

int main(void) {
  test_match();
  test_file();
  return done_testing();
}
