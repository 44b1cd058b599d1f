#!/bin/bash
# Run the libFuzzer targets (tests/fuzz/README.md), each from its seed
# corpus (copied: what a run finds stays out of the checkout) for SECONDS
# on one core, FUZZ_JOBS of them at a time (default 1). Prints one line per
# target, in the order given, and exits non-zero if any failed.
#
# A target fails when it crashed, leaked, hit undefined behaviour, ran
# one input longer than its -timeout (a hang), or ran fewer inputs than
# its floor: so many per second, about a tenth of what it does on a
# 2-core CI machine, so that a harness that stopped exercising anything
# (its setup broken, every input refused early, a server that no longer
# answers) cannot pass.
#
#   scripts/fuzz.sh BUILD SECONDS [TARGET...]   (default: every target)
set -u
build=${1:?usage: scripts/fuzz.sh BUILD SECONDS [TARGET...]}
seconds=${2:?usage: scripts/fuzz.sh BUILD SECONDS [TARGET...]}
shift 2
# Inputs per second each target must at least reach, and its -timeout (s).
declare -A floor=([request]=300 [connect]=2000 [body]=2000 [multipart]=500 [ws]=500 [dockerfile]=2000 [scrub]=800 [mcp]=2000)
declare -A timeout=([request]=10 [connect]=5 [body]=5 [multipart]=5 [ws]=5 [dockerfile]=5 [scrub]=5 [mcp]=10)
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(request connect body multipart ws dockerfile scrub mcp)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
jobs=${FUZZ_JOBS:-1}

# One target, its lines on stdout (the caller keeps them for the report).
one() {
  local t=$1 exe="$build/tests/fuzz_$1" log="$work/$1.log" rc runs took cov min keep
  if [ ! -x "$exe" ] || [ -z "${floor[$t]:-}" ]; then
    echo "fuzz_$t: FAIL: no such target built in $build"
    return 1
  fi
  mkdir -p "$work/$t"
  cp tests/fuzz/corpus/"$t"/* "$work/$t/"
  "$exe" -max_total_time="$seconds" -timeout="${timeout[$t]}" -max_len=8192 \
    -print_final_stats=1 -artifact_prefix="$work/$t-" "$work/$t" >"$log" 2>&1
  rc=$?
  runs=$(sed -n 's/^Done \([0-9]*\) runs in \([0-9]*\) second.*/\1/p' "$log" | tail -n 1)
  took=$(sed -n 's/^Done \([0-9]*\) runs in \([0-9]*\) second.*/\2/p' "$log" | tail -n 1)
  cov=$(grep -oE 'cov: [0-9]+ ft: [0-9]+' "$log" | tail -n 1)
  min=$(( floor[$t] * seconds ))
  if [ "$rc" != 0 ]; then
    echo "fuzz_$t: FAIL (exit $rc):"
    grep -E 'ERROR|SUMMARY|^fuzz:|runtime error|^    #[0-9]+ ' "$log" | head -n 40
    # The input that failed, kept (its reproduction: EXE FILE).
    keep=$(mktemp -d "${TMPDIR:-/tmp}/hutch-fuzz-$t-XXXXXX")
    cp "$work/$t"-* "$log" "$keep/" 2>/dev/null
    echo "fuzz_$t: the failing input and the log are in $keep"
    return 1
  elif [ -z "$runs" ] || [ "$runs" -lt "$min" ]; then
    echo "fuzz_$t: FAIL: ${runs:-no} runs in ${took:-?} s, fewer than its floor of $min"
    tail -n 20 "$log"
    return 1
  fi
  echo "fuzz_$t: $runs runs in $took s ($(( runs / (took > 0 ? took : 1) ))/s), $cov, no failure (floor $min)"
}

running=0
for t in "${targets[@]}"; do
  if [ "$running" -ge "$jobs" ]; then
    wait -n
    running=$((running - 1))
  fi
  one "$t" >"$work/$t.result" 2>&1 &
  running=$((running + 1))
done
wait
fail=0
for t in "${targets[@]}"; do
  cat "$work/$t.result"
  grep -q '^fuzz_[a-z]*: FAIL' "$work/$t.result" && fail=1
done
exit $fail
