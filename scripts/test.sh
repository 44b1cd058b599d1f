#!/bin/bash
# make test: unit tests (TAP, under meson) in the normal and the sanitizer
# build, the fuzz targets for a minute, the integration suite (pytest)
# against real sandboxes, E2B's SDKs against the server (tests/e2b), and
# the suite's kernel-facing part again on a cgroup v2 guest
# (scripts/test-v2.sh). Ends with one "N passed, N failed" line.
#
# The order is the machine's (docs/ci.md): the guest starts first, in the
# background (QEMU emulates its CPU: it is the longest stage, and keeps
# about a core busy), and the host's stages run beside it: the unit tests,
# the tests that need the host to themselves one at a time, the fuzz
# targets, the rest of the integration suite on several workers at once
# (pytest-xdist), E2B's SDKs, MCP's conformance scenarios. Each stage prints its time against its
# budget; the budgets fit make test's twenty minutes.
set -u
build=${1:-build}
asan=${2:-build-asan}
fuzz=${3:-build-fuzz}
py=/usr/bin/python3
# The integration suite's workers: more than the cores, since most of a
# test's time is spent waiting on sandboxes, servers and timeouts.
workers=${HUTCH_TEST_WORKERS:-4}
log=$(mktemp -d)
guest=
trap '[ -n "$guest" ] && kill "$guest" 2>/dev/null; rm -rf "$log"' EXIT
fail=0
over=""

# Each stage's time as it ends, against its budget in seconds (on the
# 2-core CI machine; docs/ci.md: a new issue's tests fit in these, or go
# to a make target of their own with a pinned, fast part here).
mark=$SECONDS
took() {
  local s=$((SECONDS - mark))
  echo "make test: $1 took $s s (budget $2 s)"
  [ "$s" -le "$2" ] || over="$over $1 ($s s of $2);"
  mark=$SECONDS
}

if [ "$(id -u)" -ne 0 ]; then
  echo "make test: the suite creates real sandboxes and needs root" >&2
  exit 1
fi

# The suite's kernel-facing part where the kernel runs cgroup v2, as on a
# fresh Debian 12 (Linux 6.1); the development and CI machines are v1
# (hybrid). Its pinned part (tests/vm/pinned; make test-v2 runs the rest),
# in the background while the host's stages run: its console is printed
# when it ends.
# The guest's TMPDIR and state dir are on ext4, which its kernel can
# id-map (tmpfs it cannot before Linux 6.3).
guest_start=$SECONDS
scripts/test-v2.sh "$build" "$asan" pinned >"$log/v2" 2>&1 &
guest=$!

meson test -C "$build" --print-errorlogs >"$log/unit" 2>&1 || fail=1
tail -n 12 "$log/unit"
meson test -C "$asan" --print-errorlogs >"$log/asan" 2>&1 || fail=1
tail -n 12 "$log/asan"
took "the unit tests (both builds)" 45

# The tests that need the host to themselves (marked serial, conftest.py):
# host-wide limits, bursts, a server out of descriptors, CPU time earned in
# a given time. One at a time, with no other test of the host's beside
# them (the guest is a kernel of its own: it takes CPU time, not the
# host's pids, memory, descriptors, terminals or cgroups).
echo "== the integration suite's serial part (tests marked serial) =="
HUTCH_BUILD="$build" HUTCH_ASAN_BUILD="$asan" \
  $py -m pytest -q -rs -p no:cacheprovider --durations=10 -m serial tests/integration 2>&1 |
  tee "$log/serial"
[ "${PIPESTATUS[0]}" = 0 ] || fail=1
took "the serial part" 120

# The fuzz targets (tests/fuzz/README.md), 10 s each from their seed
# corpora, two at a time (scripts/fuzz.sh): one test per target, which
# passes when nothing crashed, leaked or hung and it ran at least its floor
# of inputs.
fpass=0 ffail=0
if [ -x "$fuzz/tests/fuzz_request" ]; then
  FUZZ_JOBS=2 scripts/fuzz.sh "$fuzz" 10 >"$log/fuzz" 2>&1
  frc=$?
  cat "$log/fuzz"
  fpass=$(grep -c '^fuzz_[a-z]*: [0-9]* runs' "$log/fuzz")
  ffail=$(grep -c '^fuzz_[a-z]*: FAIL' "$log/fuzz")
  if [ "$frc" != 0 ]; then
    [ "$ffail" -gt 0 ] || ffail=1
    fail=1
  fi
elif [ "${HUTCH_MUST_WORK:-}" = 1 ]; then
  echo "fuzz targets: required but not built (HUTCH_MUST_WORK=1)"
  ffail=1
  fail=1
else
  echo "fuzz targets: not built (make test builds them with clang), not run"
fi
took "the fuzz targets" 60

# The rest of the suite, on $workers workers: the tests that share a
# module's server or template go to one worker together (conftest.py).
echo "== the integration suite, $workers workers (pytest-xdist) =="
HUTCH_BUILD="$build" HUTCH_ASAN_BUILD="$asan" \
  $py -m pytest -q -rs -p no:cacheprovider --durations=30 -m "not serial" \
  -n "$workers" --dist loadgroup tests/integration 2>&1 | tee "$log/pytest"
[ "${PIPESTATUS[0]}" = 0 ] || fail=1
took "the integration suite" 420

# E2B's official SDKs against hutch serve (tests/e2b/run: node's runner, TAP),
# once with each isolation tier as the server's default (docs/isolation.md).
# The Debian base the first run bootstraps, the second imports
# (HUTCH_E2B_CACHE, tests/e2b/debian.mjs).
epass=0 efail=0
mkdir -p "$log/e2b"
for tier in ns gvisor; do
  echo "== E2B's SDKs against hutch serve, $tier tier (tests/e2b) =="
  HUTCH_BUILD="$build" HUTCH_SERVE_ARGS="--isolation $tier" HUTCH_E2B_CACHE="$log/e2b" \
    tests/e2b/run >"$log/e2b-$tier" 2>&1 || fail=1
  grep -E "^not ok|^# (tests|pass|fail)" "$log/e2b-$tier"
  p=$(sed -n 's/^# pass \([0-9]*\)/\1/p' "$log/e2b-$tier" | tail -n 1)
  f=$(sed -n 's/^# fail \([0-9]*\)/\1/p' "$log/e2b-$tier" | tail -n 1)
  if [ -z "$p" ]; then # it never ran its tests (no npm registry, no node): say why
    tail -n 20 "$log/e2b-$tier"
    p=0 f=1 fail=1
  elif [ "${f:-0}" != 0 ]; then
    grep -A 30 "not ok" "$log/e2b-$tier" | head -n 120
  fi
  epass=$(( epass + p )) efail=$(( efail + ${f:-0} ))
  [ "$tier" = ns ] && budget=180 || budget=120 # the first bootstraps the base both use
  took "E2B's SDKs ($tier)" "$budget"
done

# MCP's conformance suite (@modelcontextprotocol/conformance, pinned), its
# scenarios of the transport and the lifecycle that hutch's own tools
# answer (make mcp-conformance runs all of them, with the misses listed).
echo "== MCP conformance, pinned scenarios (tests/mcp-conformance) =="
HUTCH_BUILD="$build" tests/mcp-conformance/run server-initialize ping tools-list \
  server-sse-polling server-sse-multiple-streams dns-rebinding-protection resources-list \
  >"$log/mcpc" 2>&1 || fail=1
grep -E "^(pass|FAIL)|passed" "$log/mcpc"
cpass=$(sed -n 's/^\([0-9]*\) passed, \([0-9]*\) failed.*/\1/p' "$log/mcpc" | tail -n 1)
# The scenarios expected to miss (expected-misses) are not failures.
cfail=$(sed -n 's/^[0-9]* passed, \([0-9]*\) failed (\([0-9]*\) of them.*/\1-\2/p' "$log/mcpc" | tail -n 1)
cfail=$(( ${cfail:-1} ))
if [ -z "$cpass" ]; then # it never ran (no npm registry, no node 22): say why
  tail -n 20 "$log/mcpc"
  cpass=0 cfail=1 fail=1
fi
took "MCP conformance (and its first npm install)" 60

echo "== the integration suite's kernel-facing part, on a cgroup v2 guest (scripts/test-v2.sh) =="
wait "$guest"
vm=$?
guest=
cat "$log/v2"
mark=$guest_start
took "the cgroup v2 guest (from its start, beside the stages above)" 900

# pytest's closing line: "N passed", "N failed", "N error(s)", each optional.
summary() { grep -oE "[0-9]+ $2" "$1" | tail -n 1 | cut -d' ' -f1; }
passed() { local p; p=$(summary "$1" passed); echo "${p:-0}"; }
failed() { local f e; f=$(summary "$1" failed); e=$(summary "$1" 'errors?'); echo $(( ${f:-0} + ${e:-0} )); }

if [ "$vm" = 125 ]; then
  # run-v2 could not make the guest (QEMU, busybox or the kernel package
  # missing) and said why above: nothing ran.
  if [ "${HUTCH_MUST_WORK:-}" = 1 ]; then
    echo "cgroup v2 guest: required but unavailable (HUTCH_MUST_WORK=1)"
    echo "guest: 0 passed, 1 failed" >"$log/v2"
    fail=1
  else
    echo "cgroup v2 guest: unavailable, not run (see the line above)"
  fi
elif [ "$vm" != 0 ]; then
  # A failing suite, or one cut short (a crash, a hang past the timeout)
  # that never printed its count: a failure either way.
  fail=1
  [ "$(failed "$log/v2")" -gt 0 ] || echo "guest: 0 passed, 1 failed" >>"$log/v2"
fi

echo "make test: its stages took $SECONDS s (budget 1020 s: make test's 1200 less 180 for the builds before them)"
[ -z "$over" ] || echo "make test: over budget:$over"

count() { sed -n "s/^$1: *\([0-9]*\).*/\1/p" "$2" | tail -n 1; }
upass=$(( $(count Ok "$log/unit") + $(count Ok "$log/asan") ))
ufail=$(( $(count Fail "$log/unit") + $(count Fail "$log/asan") ))
ppass=$(( $(passed "$log/serial") + $(passed "$log/pytest") + $(passed "$log/v2") ))
pfail=$(( $(failed "$log/serial") + $(failed "$log/pytest") + $(failed "$log/v2") ))
echo "$(( upass + ppass + fpass + epass + cpass )) passed, $(( ufail + pfail + ffail + efail + cfail )) failed"
exit $fail
