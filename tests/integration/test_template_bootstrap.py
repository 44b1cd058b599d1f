"""hutch template bootstrap: a Debian base made by mmdebstrap from the
Debian mirror (a package registry: the one outside address the tests
reach), once per session (about 30 s, 190 MB), then used: run, and built
on. Bad arguments are refused before mmdebstrap runs."""
import json
import os
import shutil
import subprocess
import time

import pytest

from conftest import BUILD, build_binary, require

NAME = "bootstrap-py"


def template(*args, timeout=120):
    return subprocess.run([str(BUILD / "hutch-template"), *args], capture_output=True, text=True,
                          timeout=timeout)


@pytest.fixture(scope="module")
def base(state_dir):
    """The base, in the session's state directory (hutch run's too)."""
    require(shutil.which("mmdebstrap"), "mmdebstrap is not installed (scripts/deps.sh --test)")
    # The cgroup v2 guest has no network device by design, and does not run
    # this file (scripts/test-v2.sh): a bootstrap depends on no cgroup.
    require(set(os.listdir("/sys/class/net")) - {"lo"},
            "no network device: the Debian mirror is out of reach")
    p = subprocess.run([str(BUILD / "hutch-template"), "--progress", "ndjson", "bootstrap", NAME,
                        "--suite", "bookworm", "--include", "python3-minimal"],
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-2000:]
    events = [json.loads(line) for line in p.stdout.splitlines()]
    assert any(e["event"] == "log" and "success" in e["line"] for e in events)
    assert events[-1]["event"] == "done" and events[-1]["name"] == NAME
    yield json.loads(template("inspect", NAME).stdout)
    template("rm", NAME)


def test_record(base, state_dir):
    assert base["source"] == "bootstrap" and len(base["layers"]) == 1
    path = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
    assert base["config"]["env"] == [path]
    assert base["config"]["workdir"] == "/" and base["config"]["cmd"] == ["bash"]
    layer = state_dir / "images" / "layers" / base["layers"][0]
    assert (layer / "usr" / "bin" / "python3").exists()
    assert not os.path.lexists(layer / "dev" / "null")  # the sandbox makes its own /dev
    assert not any((state_dir / "images" / "tmp").iterdir())


def test_name_taken(base):
    """A name taken fails before mmdebstrap runs, unless --replace."""
    t0 = time.monotonic()
    p = template("bootstrap", NAME)
    assert p.returncode == 2 and "exists (--replace replaces it)" in p.stderr, p.stderr
    assert time.monotonic() - t0 < 5


def test_run_and_build_on_it(base, run, tmp_path):
    r = run(["--template", NAME, "--", "python3", "-c", "import sys; print(sys.version_info[0])"])
    assert r.code == 0 and r.out == "3\n", r
    ctx = tmp_path / "ctx"
    ctx.mkdir()
    (ctx / "Dockerfile").write_text(f"FROM {NAME}\nRUN python3 -c 'print(6*7)' > /answer\n")
    p = template("build", "-t", "on-bootstrap", str(ctx))
    assert p.returncode == 0, p.stderr
    r = run(["--template", "on-bootstrap", "--", "cat", "/answer"])
    assert r.code == 0 and r.out == "42\n", r
    template("rm", "on-bootstrap")


@pytest.mark.parametrize("args,message", [
    (["--include", "-evil"], "not a Debian package name"),
    (["--include", "ok,bad name"], "not a Debian package name"),
    (["--mirror", "ftp://deb.debian.org/debian"], "--mirror"),
    (["--mirror", "http://x/ y"], "--mirror"),
    (["--suite", "--help"], "--suite"),
    (["--variant", "everything"], "--variant"),
])
@pytest.mark.parametrize("which", ["build", "asan"])
def test_bad_arguments(tmp_path, args, message, which):
    p = subprocess.run([str(build_binary(which, "hutch-template")), "--state-dir", str(tmp_path),
                        "bootstrap", "nope", *args], capture_output=True, text=True, timeout=20)
    assert "Sanitizer" not in p.stderr
    assert p.returncode == 2, p.stderr
    assert message in p.stderr.strip().splitlines()[-1]
    assert not any((tmp_path / "images" / "tmp").iterdir())
