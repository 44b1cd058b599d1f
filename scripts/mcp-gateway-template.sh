#!/bin/sh
# make mcp-gateway-template: the mcp-gateway template (docs/mcp-gateway.md)
# in the store of $HUTCH_STATE_DIR (else /var/lib/hutch): a Debian base
# with python3 and git (mmdebstrap, from the Debian mirror), then
# share/templates/mcp-gateway/Dockerfile on it with share/mcp-gateway as
# the context. Both are kept: run again, it reuses the base and the
# build's cache.
set -eu
build=${1:-build}
state=${HUTCH_STATE_DIR:-/var/lib/hutch}
packages=python3,git,ca-certificates
if [ "$(id -u)" -ne 0 ]; then
  echo "make mcp-gateway-template: hutch needs root; try: sudo make mcp-gateway-template" >&2
  exit 1
fi
t="$build/hutch template --state-dir $state"
if ! $t inspect mcp-gateway-base >/dev/null 2>&1; then
  $t bootstrap mcp-gateway-base --suite bookworm --include "$packages"
fi
$t build -t mcp-gateway -f share/templates/mcp-gateway/Dockerfile share/mcp-gateway
