/* The cgroup fds as text across exec (hutch_cgroup_spec and
 * hutch_cgroup_from_spec in src/lib/cgroup.c). No cgroup is touched: the
 * structs are built by hand and the fd numbers are never used. */
#include <string.h>

#include "cgroup.h"
#include "tap.h"

/* Same version and, per controller, the same fd (v1) or the same fd (v2). */
static bool same_cgroup(const struct hutch_cgroup *a, const struct hutch_cgroup *b) {
  if (a->ops != b->ops || a->nfd != b->nfd)
    return false;
  if (a->ops == &hutch_cgroup_v2_ops)
    return a->fd[0] == b->fd[0];
  for (int c = 0; c < CG_NCTL; c++)
    if (a->fd[a->ctl[c]] != b->fd[b->ctl[c]])
      return false;
  return true;
}

static void test_v1(void) {
  struct hutch_cgroup cg = {.ops = &hutch_cgroup_v1_ops, .nfd = 4, .fd = {10, 11, 12, 13}};
  cg.ctl[CG_MEMORY] = 0;
  cg.ctl[CG_PIDS] = 1;
  cg.ctl[CG_CPU] = 2;
  cg.ctl[CG_CPUACCT] = 2;
  cg.ctl[CG_FREEZER] = 3;
  char spec[64], again[64];
  struct hutch_cgroup back;
  struct hutch_err err;

  hutch_cgroup_spec(&cg, spec, sizeof spec);
  is_str(spec, "1:10,11,12,12,13", "v1 spec: fds in controller order, cpu and cpuacct shared");
  is_int(hutch_cgroup_from_spec(spec, &back, &err), 0, "v1 spec parses");
  ok(back.ops == &hutch_cgroup_v1_ops, "... as v1");
  is_int(back.nfd, 4, "... with 4 distinct fds");
  ok(back.ctl[CG_CPU] == back.ctl[CG_CPUACCT], "... cpu and cpuacct share one fd");
  ok(same_cgroup(&cg, &back), "... each controller on the same fd as before");
  hutch_cgroup_spec(&back, again, sizeof again);
  is_str(again, spec, "... and gives the same spec again");

  is_int(hutch_cgroup_from_spec("1:3,4,5,6,7", &back, &err), 0, "v1 with 5 distinct fds");
  ok(back.nfd == 5 && back.fd[back.ctl[CG_MEMORY]] == 3 && back.fd[back.ctl[CG_PIDS]] == 4 &&
         back.fd[back.ctl[CG_CPU]] == 5 && back.fd[back.ctl[CG_CPUACCT]] == 6 &&
         back.fd[back.ctl[CG_FREEZER]] == 7,
     "... 5 fds, one per controller");
  is_int(hutch_cgroup_from_spec("1:9,9,9,9,9", &back, &err), 0, "v1 all on one hierarchy");
  ok(back.nfd == 1 && back.fd[0] == 9, "... one fd");
  is_int(hutch_cgroup_from_spec("1:0,1024,0,0,1024", &back, &err), 0, "v1 fds 0 and 1024");
  ok(back.nfd == 2 && back.fd[back.ctl[CG_PIDS]] == 1024 && back.fd[back.ctl[CG_MEMORY]] == 0,
     "... two fds");

  char small[8];
  memset(small, 'X', sizeof small);
  hutch_cgroup_spec(&cg, small, 6);
  ok(memchr(small, '\0', 6) != NULL && small[6] == 'X',
     "spec into a short buffer: cut, terminated");
}

static void test_v2(void) {
  struct hutch_cgroup cg = {.ops = &hutch_cgroup_v2_ops, .nfd = 1, .fd = {42}};
  char spec[64];
  struct hutch_cgroup back;
  struct hutch_err err;
  hutch_cgroup_spec(&cg, spec, sizeof spec);
  is_str(spec, "2:42", "v2 spec");
  is_int(hutch_cgroup_from_spec(spec, &back, &err), 0, "v2 spec parses");
  ok(back.ops == &hutch_cgroup_v2_ops && back.nfd == 1 && back.fd[0] == 42, "... as v2, fd 42");
  ok(same_cgroup(&cg, &back), "... the same cgroup");
  is_int(hutch_cgroup_from_spec("2:1024", &back, &err), 0, "v2 fd 1024 parses");
}

static void check_bad(const char *spec) {
  struct hutch_cgroup cg;
  struct hutch_err err;
  memset(&err, 0, sizeof err);
  int r = hutch_cgroup_from_spec(spec, &cg, &err);
  ok(r == -1 && err.kind == HUTCH_ERR_INVALID && strstr(err.msg, spec) != NULL,
     "malformed spec '%s': INVALID, named in the message", spec);
}

static void test_malformed(void) {
  static const char *const bad[] = {
      "",
      "3:4",
      "1",
      "2",
      "1:",
      "2:",
      "1:4,5",
      "1:4,5,6,6",
      "1:4,5,6,6,",
      "1:a,b,c,d,e",
      "1:4,5,6,6,x",
      "1:4,,6,6,7",
      "1:4,5,6,6,7x",
      "1:4,5,6,6,99999",
      "1:4,5,6,6,1025",
      "1: 4,5,6,6,7",
      "1:-4,5,6,6,7",
      "2:99999",
      "2:1025",
      "2:-1",
      "2:+4",
      "2:4x",
      "2: 4",
      "2:18446744073709551616",
      /* Trailing bytes after a complete spec. */
      "1:4,5,6,6,7,8",
      "1:4,5,6,6,7,",
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
    check_bad(bad[i]);

  /* A long number is read whole, never as its first digits. */
  struct hutch_cgroup cg;
  struct hutch_err err;
  int r = hutch_cgroup_from_spec("1:0000000000000000005,6,7,7,8", &cg, &err);
  ok(r == -1 || (cg.fd[cg.ctl[CG_MEMORY]] == 5 && cg.fd[cg.ctl[CG_PIDS]] == 6),
     "'1:0000000000000000005,...': memory on fd 5 or rejected (got %s, fd %d)",
     r == 0 ? "accepted" : "rejected", r == 0 ? cg.fd[cg.ctl[CG_MEMORY]] : -1);
}

int main(void) {
  test_v1();
  test_v2();
  test_malformed();
  return done_testing();
}
