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
# boot a guest on these machines), so the guest is about three times slower
# than the host, and the whole suite took 1655-1762 s there, more than
# make test's budget left once the host's own suite has run.
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
# "pinned" (make test): of those, the files whose subject is what the
# kernel and the cgroup hierarchy do (limits, freezing, killing, leaves,
# namespaces, seccomp, id-mapped layers on ext4, the gVisor tier's own
# cgroups, the network namespaces, the host's checks), hutch run's own tests
# (test_cli: its own path to a sandbox, cheap), and the server's tests that
# reach a cgroup file. What it leaves out is the server's and the templates' own
# work over HTTP (the API's shapes, template builds and imports, the code
# interpreter, the SDK, bursts, the relay): the host's suite runs those,
# and make test-v2 runs them on v2.
set -u
build=${1:?build dir}
asan=${2:?sanitizer build dir}
what=${3:?pinned or all}
t=tests/integration

pinned=(
  $t/test_abuse.py $t/test_agent.py $t/test_cli.py $t/test_doctor.py $t/test_escapes.py
  $t/test_fds.py $t/test_floor.py $t/test_gvisor.py $t/test_gvisor_run.py
  $t/test_host_limits.py $t/test_idle.py $t/test_lifecycle.py $t/test_network.py
  $t/test_pause.py $t/test_posture.py $t/test_seccomp_sandbox.py $t/test_snapshots.py
  $t/test_template_security.py $t/test_volumes.py
)
# The server's tests that reach a cgroup file: limits, verdicts, kills,
# quotas, a frozen exec's end, a file's pages charged to the sandbox.
serve=(
  create_get_list_delete limits_reach_the_sandbox tight_pids_limit_with_execs_files_and_root
  exec_verdicts client_gone_kills_the_exec background_stdin_signal_kill files_quota_is_enforced
  files_one_gib_round_trip_in_bounded_memory destroy_with_a_frozen_exec
  timeout_reaper_and_extension restart_takes_sandboxes_over sigint_ends_the_sandboxes
)

if [ "$(id -u)" -ne 0 ]; then
  echo "test-v2: the suite creates real sandboxes and needs root" >&2
  exit 1
fi

case "$what" in
  pinned) tests=("${pinned[@]}" "${serve[@]/#/$t/test_serve.py::test_}") ;;
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
