"""hutch run --isolation gvisor: the workload on gVisor's kernel, and a
runsc that is missing or is not runsc said in one line (docs/isolation.md)."""
import platform
import shutil

import pytest

from conftest import require

UNAME = ["--", "python3", "-c", "import os; print(os.uname().release)"]


def test_gvisor_tier_runs_on_gvisors_kernel(any_run):
    require(shutil.which("runsc"), "runsc is not installed (scripts/deps.sh --test installs it)")
    r = any_run(["--isolation", "gvisor", *UNAME])
    assert r.code == 0, r
    assert r.verdict["status"] == "ok", r
    assert r.stdout.decode().strip() == "4.4.0", r  # gVisor's, not the host's
    assert platform.release() != "4.4.0"


def test_ns_tier_runs_on_the_hosts_kernel(run):
    r = run(["--isolation", "ns", *UNAME])
    assert r.code == 0, r
    assert r.stdout.decode().strip() == platform.release()


@pytest.mark.parametrize("runsc, says", [
    ("/nonexistent/runsc", "apt-get install runsc"),
    ("/usr/bin/true", "runsc"),  # not runsc: the exec of it in the sandbox fails
])
def test_runsc_missing_or_not_runsc_is_one_line_and_125(run, monkeypatch, runsc, says):
    monkeypatch.setenv("HUTCH_RUNSC", runsc)
    r = run(["--isolation", "gvisor", "--", "true"])
    assert r.code == 125, r
    lines = r.err.strip().splitlines()
    assert len(lines) == 1 and says in lines[0], r
