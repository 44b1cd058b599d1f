#!/bin/sh
# The web console's terminal library, installed at build time (meson.build's
# ui-vendor target): npm ci of share/ui-vendor's pinned packages into
# OUTDIR/npm, then the three files hutch serve shows under /ui/vendor/
# copied to OUTDIR. Without npm or the registry the build goes on: each
# file is then a stub that says why, and the console shows that in place of
# its terminal (docs/console.md).
#   scripts/ui-vendor.sh OUTDIR package.json package-lock.json
set -eu
out=$1
mkdir -p "$out/npm"
cp "$2" "$3" "$out/npm/"

stub() {
  echo "ui-vendor: $1: the console will have no terminal" >&2
  msg="xterm was not installed at build time ($1): run make again with npm and the registry reachable"
  printf 'throw new Error(%s);\n' "\"$msg\"" >"$out/xterm.mjs"
  printf 'throw new Error(%s);\n' "\"$msg\"" >"$out/addon-fit.mjs"
  printf '/* %s */\n' "$msg" >"$out/xterm.css"
  exit 0
}

command -v npm >/dev/null 2>&1 || stub "npm is not installed"
(cd "$out/npm" && npm ci --no-audit --no-fund --ignore-scripts --loglevel=error >&2) ||
  stub "npm ci failed"
m="$out/npm/node_modules/@xterm"
cp "$m/xterm/lib/xterm.mjs" "$m/xterm/css/xterm.css" "$m/addon-fit/lib/addon-fit.mjs" "$out/"
