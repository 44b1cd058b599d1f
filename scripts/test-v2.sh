#!/bin/bash
# The integration suite on a cgroup v2 kernel: a QEMU guest booting
# Debian's kernel (tests/vm/run-v2), since the development and CI machines
# are cgroup v1 (hybrid) hosts and a fresh Debian 12 is v2 on Linux 6.1.
#
#   scripts/test-v2.sh BUILD ASAN pinned   # make test's part
#   scripts/test-v2.sh BUILD ASAN all      # make test-v2
#
# Prints the guest's console; exits with the suite's status, or run-v2's
# own (125: no guest could be made; 124: it hung or ran out of time).
#
# What runs there, and why not everything: QEMU emulates the CPU (KVM cannot
# boot a guest on these machines), a program's start there costs tens of
# times what it does on the host, and all the suite it can run took 1655 to
# 1762 s there on a good day, the pinned part of old (379 tests) 982 to
# 1998 s: more than make test's budget.
#
# "all": every file but those whose subject no kernel or cgroup version
# changes, which the host runs and the emulated CPU would take minutes over
# (E2B's wire formats and control plane, the routes against
# docs/openapi.yaml, the egress proxy's TLS) and the Debian bootstrap (the
# guest has no network); the tests marked "userspace" (conftest.py: the
# server's own work, a minute or more each there) are left out too. The
# tests made once against each build run against the sanitizer build only
# (HUTCH_ONLY_BUILD, conftest.py): the builds behave alike and the host
# runs both.
#
# "pinned" (make test): the tests listed in tests/vm/pinned, each there
# for a cgroup operation or a kernel behaviour of its own (limits, leaves,
# kills, freezing, adoption, id-mapped layers on ext4, namespaces, /proc,
# seccomp, the host's probes), and nothing that only makes a sandbox on
# its way to something else (docs/ci.md says how they were chosen).
set -u
build=${1:?build dir}
asan=${2:?sanitizer build dir}
what=${3:?pinned or all}
t=tests/integration

if [ "$(id -u)" -ne 0 ]; then
  echo "test-v2: the suite creates real sandboxes and needs root" >&2
  exit 1
fi

case "$what" in
  pinned) mapfile -t tests < <(sed -e 's/#.*//' -e 's/[[:space:]]*$//' -e '/^$/d' -e "s|^|$t/|" tests/vm/pinned) ;;
  all)
    tests=($t --ignore $t/test_template_bootstrap.py --ignore $t/test_e2b.py
      --ignore $t/test_e2b_control.py --ignore $t/test_openapi.py --ignore $t/test_egress_tls.py)
    ;;
  *) echo "test-v2: the third argument is pinned or all, not $what" >&2; exit 2 ;;
esac

exec tests/vm/run-v2 --workdir "$PWD" -- env HUTCH_BUILD="$build" HUTCH_ASAN_BUILD="$asan" \
  HUTCH_ONLY_BUILD=asan HUTCH_MUST_WORK="${HUTCH_MUST_WORK:-}" PYTHONDONTWRITEBYTECODE=1 \
  /usr/bin/python3 -m pytest -q -rs -p no:cacheprovider --durations=20 -m "not userspace" \
  "${tests[@]}"
