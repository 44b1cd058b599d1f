#!/bin/bash
# make test: unit tests (TAP, under meson) in the normal and the sanitizer
# build, then the integration suite (pytest) against real sandboxes. Ends
# with one "N passed, N failed" line.
set -u
build=${1:-build}
asan=${2:-build-asan}
py=/usr/bin/python3
log=$(mktemp -d)
trap 'rm -rf "$log"' EXIT
fail=0

if [ "$(id -u)" -ne 0 ]; then
  echo "make test: the suite creates real sandboxes and needs root" >&2
  exit 1
fi

meson test -C "$build" --print-errorlogs >"$log/unit" 2>&1 || fail=1
tail -n 12 "$log/unit"
meson test -C "$asan" --print-errorlogs >"$log/asan" 2>&1 || fail=1
tail -n 12 "$log/asan"

HUTCH_BUILD="$build" HUTCH_ASAN_BUILD="$asan" \
  $py -m pytest -q -rs -p no:cacheprovider tests/integration 2>&1 | tee "$log/pytest"
[ "${PIPESTATUS[0]}" = 0 ] || fail=1

count() { sed -n "s/^$1: *\([0-9]*\).*/\1/p" "$2" | tail -n 1; }
upass=$(( $(count Ok "$log/unit") + $(count Ok "$log/asan") ))
ufail=$(( $(count Fail "$log/unit") + $(count Fail "$log/asan") ))
ppass=$(grep -oE '[0-9]+ passed' "$log/pytest" | tail -n 1 | cut -d' ' -f1)
pfail=$(grep -oE '[0-9]+ failed' "$log/pytest" | tail -n 1 | cut -d' ' -f1)
echo "$(( upass + ${ppass:-0} )) passed, $(( ufail + ${pfail:-0} )) failed"
exit $fail
