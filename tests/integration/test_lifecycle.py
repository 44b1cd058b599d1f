"""Create and destroy, many times and under hostile templates, leaving
nothing behind (the autouse fixture checks cgroups, mounts, processes and
staged files after every test)."""
import os
import pathlib
import shutil
import subprocess
import time

import pytest

from conftest import BUILD, procs_under, sandbox_cgroups


def test_200_create_destroy_cycles(tier):
    # gVisor's are 25 times as slow to make: fewer of them
    for i in range(200 if tier == "ns" else 40):
        p = subprocess.run([BUILD / "hutch", "run", "--isolation", tier, "--", "true"],
                           capture_output=True, timeout=30)
        assert p.returncode == 0, (i, p.stderr)
    # what is left is checked after the test (no_leftovers), against what
    # was there before it: other runs on the host may hold sandboxes now


def test_crashed_hutch_is_cleaned_up_by_the_next(tmp_path, tier):
    """SIGKILL hutch mid-run: its sandbox dies with it (PDEATHSIG; in the
    gvisor tier runsc, its sentry, gofer and stubs too), and the cgroup it
    could not remove is collected by a later hutch."""
    p = subprocess.Popen([BUILD / "hutch", "run", "--isolation", tier, "-i", "--", "sh", "-c",
                          "echo up; cat"],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert p.stdout.readline() == b"up\n"
    cgroups = sandbox_cgroups(p.pid)
    p.kill()
    p.wait()
    # Only this run's sandbox: others may run on the host meanwhile. Its
    # processes leave cgroup.procs as they exit, the cgroup is empty (v2:
    # not "populated", what collection checks) once all are released.
    def populated(cg):
        events = cg / "cgroup.events"
        return "populated 1" in events.read_text() if events.exists() else procs_under(cg)
    deadline = time.monotonic() + 10
    while any(populated(cg) for cg in cgroups) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not any(populated(cg) for cg in cgroups)
    assert all(cg.is_dir() for cg in cgroups)
    # Collection spares sandbox cgroups younger than a few seconds (one may be
    # being set up): age this one instead of sleeping.
    for cg in cgroups:
        os.utime(cg, (1, 1))
    q = subprocess.run([BUILD / "hutch", "run", "--", "true"], capture_output=True, timeout=30)
    assert q.returncode == 0, q.stderr
    assert not any(cg.exists() for cg in cgroups)


def make_rootfs(base, probe):
    for d in ("bin", "etc", "tmp"):
        (base / d).mkdir(parents=True, exist_ok=True)
    shutil.copy(probe, base / "bin" / "probe")
    return base


@pytest.mark.parametrize("entry", ["proc", "dev", "sys"])
def test_hostile_template_symlink_is_refused(run, tmp_path, probe, entry):
    root = make_rootfs(tmp_path / "root", probe[0])
    os.symlink("/etc", root / entry)
    r = run(["--rootfs", str(root), "--", "/bin/probe", "getpid"], verdict=False)
    assert r.code == 125, r
    assert f"/{entry} is or passes through a symlink" in r.err and r.err.count("\n") == 1, r
    assert os.path.islink(root / entry)  # the template itself is never changed


def test_hostile_bind_destination_symlink_is_refused(run, tmp_path, probe):
    root = make_rootfs(tmp_path / "root", probe[0])
    os.symlink("/", root / "escape")
    src = tmp_path / "src"
    src.mkdir()
    r = run(["--rootfs", str(root), "--bind-ro", f"{src}:/escape/etc", "--", "/bin/probe", "getpid"],
            verdict=False)
    assert r.code == 125 and "symlink" in r.err, r


def test_custom_rootfs_runs_static_binary(run, tmp_path, probe):
    root = make_rootfs(tmp_path / "root", probe[0])
    r = run(["--rootfs", str(root), "--", "/bin/probe", "getpid"])
    assert r.code == 0 and r.out.strip() == "getpid OK", r
    assert not (root / "proc").exists()  # mount points are made in the upper layer


def test_custom_rootfs_keeps_its_own_files(run, tmp_path, probe):
    # Only the host template gets the host's /etc/ld.so.cache.
    root = make_rootfs(tmp_path / "root", probe[0])
    (root / "etc" / "ld.so.cache").write_text("MINE\n")
    shutil.copy("/bin/busybox", root / "bin" / "busybox")
    r = run(["--rootfs", str(root), "--", "/bin/busybox", "cat", "/etc/ld.so.cache"])
    assert r.code == 0 and r.out == "MINE\n", r


def test_writes_stay_in_the_sandbox(run):
    r = run(["--", "sh", "-c", "echo x > /tmp/f && echo y > /home/user/g"])
    assert r.code == 0, r
    r = run(["--user", "root", "--", "sh", "-c", "touch /etc/h-hutch-test /root/x"])
    assert r.code == 0, r
    assert not os.path.exists("/etc/h-hutch-test")
    r2 = run(["--", "sh", "-c", "ls /tmp /home/user /etc"])
    assert not {"f", "g", "h-hutch-test"} & set(r2.out.split())
    # The user may write its home and /tmp, not the system's directories.
    r3 = run(["--", "sh", "-c", "touch /etc/x || touch /usr/x || echo refused"])
    assert "refused" in r3.out
