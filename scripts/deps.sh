#!/bin/sh
# Install the Debian packages hutch needs to build (no option), test
# (--test) or benchmark (--bench), when they are missing. Safe to run again;
# does nothing when all are present.
set -eu

# build: compiler, meson, static libraries for the agent, the i386 toolchain
# for the 32-bit syscall probe (meson looks for it when it configures), the
# python3 that `make run` shows at work in a sandbox, and ccache (meson
# uses it when it is there: a source compiled before with the same
# compiler and flags, in any build directory, is not compiled again)
build="gcc meson ninja-build pkg-config libjansson-dev libseccomp-dev gcc-multilib python3 ccache"
# the server: event loop, HTTP parser, WebSocket frames, database, hashing,
# gzip uploads (envd's Content-Encoding)
build="$build libuv1-dev libhttp-parser-dev libwslay-dev libsqlite3-dev libssl-dev zlib1g-dev"
# hutch-template: archives (gzip, zstd), the registry client
build="$build libarchive-dev libcurl4-openssl-dev"
# tests: a sandbox's userland is the host's /usr, so what a test runs in one
# must be installed here. Beyond a minbase root (sh, bash, coreutils, grep,
# sed, mawk, diffutils, util-linux's setsid, gzip, dpkg-deb) the tests run:
#   pytest, yaml     the integration suite; test_openapi
#   pytest-xdist     the suite on several workers at once (scripts/test.sh)
#   curl             in sandboxes: test_network's egress tests, test_sdk's
#                    test_network, tests/e2b's network test
#   procps           pgrep in sandboxes: test_code's forked contexts
#   iproute2         ip: test_network's private test host, in a network
#                    namespace the test makes
#   busybox-static   test_lifecycle's own rootfs; the guest's init
#   qemu-system-x86  the cgroup v2 guest (tests/vm/run-v2)
#   e2fsprogs        mkfs.ext4: volumes, the guest's disk (Priority required,
#                    not Essential: a root may go without)
test="python3 python3-pytest python3-pytest-xdist python3-yaml curl procps iproute2 util-linux qemu-system-x86 busybox-static"
test="$test e2fsprogs"
# templates (tests/integration/test_template*): archives made by skopeo and
# umoci, a registry on loopback, zstd layers, Debian bases by mmdebstrap
test="$test skopeo umoci docker-registry zstd mmdebstrap"
# the request fuzzer (tests/fuzz): clang with libFuzzer
test="$test clang libclang-rt-dev"
# the code interpreter's kernels at work in sandboxes: charts, tables
# (test_code, test_sdk, tests/e2b), JavaScript; npm for E2B's SDKs
# (tests/e2b), unless a node install brought its own
test="$test python3-matplotlib python3-pandas nodejs"
test="$test chromium" # the console's browser test (tests/console), driven headless
# the gvisor tier (docs/isolation.md): gVisor's runsc, which the posture
# suite runs in as well as the ns tier
test="$test runsc"
# the alert rules (deploy/prometheus, test_alerts): promtool, which checks
# and tests them, comes in Debian's prometheus (it brings a few JavaScript
# and font packages for its web page; on a host whose init runs services
# it starts a Prometheus on :9090 too: `systemctl disable --now prometheus`)
test="$test prometheus"
# bench: the peers hutch is measured against (runc: bench/scale), a load generator, the
# shell of the image bench/templates makes (busybox-static), and perf (bench/events)
bench="bubblewrap runc runsc wrk socat tinyproxy buildah skopeo umoci busybox-static linux-perf"

want="$build"
case "${1:-}" in
  --test) want="$want $test" ;;
  --bench) want="$want $bench" ;;
esac

missing=""
for p in $want; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q '^install ok installed$' || missing="$missing $p"
done
if [ "${1:-}" = --test ] && ! command -v npm >/dev/null 2>&1; then
  missing="$missing npm"
fi
[ -z "$missing" ] && exit 0

echo "deps: installing$missing" >&2
if [ "$(id -u)" -ne 0 ]; then
  echo "deps: need root to install:$missing" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends $missing >/dev/null
