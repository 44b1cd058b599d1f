#!/bin/sh
# make template: the code-interpreter template (docs/templates.md) in the
# store of $HUTCH_STATE_DIR (else /var/lib/hutch): a Debian base with the
# code interpreter's packages (mmdebstrap, from the Debian mirror), then
# share/templates/code-interpreter/Dockerfile on it. Both are kept: run
# again, it reuses the base and the build's cache.
set -eu
build=${1:-build}
state=${HUTCH_STATE_DIR:-/var/lib/hutch}
packages=python3,python3-numpy,python3-pandas,python3-matplotlib,nodejs
if [ "$(id -u)" -ne 0 ]; then
  echo "make template: hutch needs root; try: sudo make template" >&2
  exit 1
fi
t="$build/hutch template --state-dir $state"
if ! $t inspect code-interpreter-base >/dev/null 2>&1; then
  $t bootstrap code-interpreter-base --suite bookworm --include "$packages"
fi
$t build -t code-interpreter share/templates/code-interpreter
