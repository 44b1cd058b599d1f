#!/bin/sh
# make run: the main job on its embedded defaults: hutch serve on
# 127.0.0.1:7420 with its state in $HUTCH_STATE_DIR (else /var/lib/hutch).
# Once it answers, the example agent (examples/agent.py, through the Python
# SDK) shows a sandbox at work; then the server goes on until Ctrl-C, which
# stops it and its sandboxes (SIGTERM would leave them for the next start).
set -eu
build=${1:-build}
state=${HUTCH_STATE_DIR:-/var/lib/hutch}
url=http://127.0.0.1:7420
if [ "$(id -u)" -ne 0 ]; then
  echo "make run: hutch needs root (namespaces, cgroups, id-mapped users); try: sudo make run" >&2
  exit 1
fi

"$build/hutch" serve --state-dir "$state" &
server=$!
trap 'kill -INT $server 2>/dev/null; wait $server' INT TERM

python3 - "$url" <<'PY' || { kill -INT $server 2>/dev/null; wait $server; exit 1; }
import sys, time, urllib.request
for _ in range(200):
    try:
        urllib.request.urlopen(sys.argv[1] + "/healthz", timeout=1)
        sys.exit(0)
    except OSError:
        time.sleep(0.05)
print("make run: the server did not answer", file=sys.stderr)
sys.exit(1)
PY

echo
echo "== the example agent, through the Python SDK (examples/agent.py) =="
HUTCH_API_URL=$url HUTCH_API_KEY=$(cat "$state/admin.key") PYTHONPATH=sdk/python \
  python3 examples/agent.py || true

# The key is root's to read: a user who came in through sudo reads it
# the same way from another terminal; root (a minimal Debian has no sudo)
# reads it directly.
read_key="cat $state/admin.key"
[ -n "${SUDO_USER:-}" ] && [ "$SUDO_USER" != root ] && read_key="sudo $read_key"

cat <<MSG

hutch serve is listening on $url/  (Ctrl-C stops it and its sandboxes)
  admin key:  $state/admin.key
  API:        docs/openapi.yaml
  console:    $url/ui/  (log in with the admin key; docs/console.md)

try, from another terminal:
  KEY=\$($read_key)
  curl -s -H "Authorization: Bearer \$KEY" -d '{"timeout_s": 600}' $url/v1/sandboxes
  curl -sN -H "Authorization: Bearer \$KEY" -d '{"shell": "python3 -c \"print(6 * 7)\""}' \\
      $url/v1/sandboxes/ID/exec
  curl -s -X DELETE -H "Authorization: Bearer \$KEY" $url/v1/sandboxes/ID

or in Python (PYTHONPATH=sdk/python HUTCH_API_KEY=\$KEY python3):
  from hutch import Sandbox
  with Sandbox.create() as sbx:
      print(sbx.commands.run("python3 -c 'print(6 * 7)'").stdout)
MSG
wait $server
