#!/bin/sh
# make run: the main job on its embedded defaults. For now that is hutch run:
# a Python snippet in a fresh sandbox, its output streamed, its verdict shown.
set -eu
build=${1:-build}
hutch="$build/hutch"
if [ "$(id -u)" -ne 0 ]; then
  echo "make run: hutch needs root (namespaces, cgroups, id-mapped users); try: sudo make run" >&2
  exit 1
fi
verdict=$(mktemp)
trap 'rm -f "$verdict"' EXIT

echo "\$ $hutch run --memory 256 --timeout 10 --verdict-json V -- python3 -c '...'"
set +e
"$hutch" run --memory 256 --timeout 10 --verdict-json "$verdict" -- python3 -c '
import os, platform, socket
print("hello from a hutch sandbox")
print("  python", platform.python_version(), "as uid", os.getuid(), "in", os.getcwd())
print("  hostname", socket.gethostname(), "- pid", os.getpid(), "- parent pid", os.getppid())
print("  network interfaces:", sorted(n for _, n in socket.if_nameindex()))
print("  can read /etc/shadow:", os.path.exists("/etc/shadow"))
print("  squares:", [i * i for i in range(10)])
'
code=$?
set -e
echo "exit status: $code"
echo "verdict: $(cat "$verdict")"

echo
echo "\$ $hutch run --timeout 1 --verdict-json V -- python3 -c 'while True: pass'"
set +e
"$hutch" run --timeout 1 --verdict-json "$verdict" -- python3 -c 'while True: pass'
code=$?
set -e
echo "exit status: $code"
echo "verdict: $(cat "$verdict")"
