"""Hostile workloads: each gets its verdict, and the host and a neighbour
sandbox are unharmed. (The autouse fixture checks nothing is left behind.)"""
import ctypes
import os
import subprocess
import threading
import time

import pytest

from conftest import BUILD, cgroup_roots

# Serial (conftest.py): fork, memory and pty bombs press on what the host
# shares (pids, memory, the kernel's pty pool), and the output flood measures
# the server's memory: each needs the machine to itself.
pytestmark = pytest.mark.serial


class Neighbour:
    """A sandbox doing steady, checkable work while another one misbehaves:
    files written, read back and checked, with pauses, so that it measures
    harm without taking a CPU from the tests that count CPU time."""

    CODE = ("import hashlib, os, time\n"
            "for i in range(40):\n"
            "    data = os.urandom(256 << 10)\n"
            "    with open(f'/tmp/n{i}', 'wb') as f: f.write(data)\n"
            "    assert hashlib.sha256(open(f'/tmp/n{i}', 'rb').read()).digest() == hashlib.sha256(data).digest()\n"
            "    time.sleep(0.02)\n"
            "print('ok')")

    def __init__(self):
        self.proc = subprocess.Popen([BUILD / "hutch", "run", "--timeout", "60", "--", "python3", "-c", self.CODE],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)

    def check(self):
        out, err = self.proc.communicate(timeout=60)
        assert self.proc.returncode == 0 and out == b"ok\n", (out, err)


@pytest.fixture(autouse=True)
def neighbour(tmp_path):
    """Every abuse test runs beside a neighbour sandbox and checks, after,
    that the neighbour finished its work and the host still works."""
    n = Neighbour()
    yield n
    n.check()
    host_still_works(tmp_path)


def host_still_works(tmp_path):
    subprocess.run(["true"], check=True, timeout=10)
    f = tmp_path / "host-write"
    f.write_bytes(b"x" * 4096)
    assert f.read_bytes() == b"x" * 4096
    block = bytearray(64 << 20)
    assert len(block) == 64 << 20


def pids_current_max():
    worst = 0
    for root in cgroup_roots():
        for d in (root / "hutch").glob("*"):
            try:
                worst = max(worst, int((d / "pids.current").read_text()))
            except OSError:  # none there, or the cgroup went since the listing (ENODEV)
                pass
    return worst


def test_fork_bomb_is_contained(run, tmp_path):
    samples = []
    stop = threading.Event()

    def sample():
        while not stop.is_set():
            samples.append(pids_current_max())
            time.sleep(0.05)
    t = threading.Thread(target=sample)
    t.start()
    try:
        bomb = "import os\nwhile True:\n try: os.fork()\n except OSError: pass"
        # 8 s: on the cgroup v2 guest's emulated CPU a python3 takes 1 to 2 s to
        # start, and with 3 s a busy run's bomb had forked twice by the timeout.
        r = run(["--pids", "64", "--timeout", "8", "--", "python3", "-c", bomb])
    finally:
        stop.set()
        t.join()
    assert r.verdict["status"] == "timeout", r
    assert r.code == 137
    assert 10 < max(samples) <= 64 + 1, max(samples)  # the command's 64 and the agent


def test_memory_bomb_is_oom(run, tmp_path):
    r = run(["--memory", "64", "--", "python3", "-c", "b = []\nwhile True: b.append(bytearray(8 << 20))"])
    assert r.verdict["status"] == "oom", r
    assert r.code == 137 and r.verdict["signal"] == 9
    # cgroup v2 records the exec cgroup's high-water mark before its parent,
    # which holds the limit, refuses a charge: the peak may pass the limit by
    # the charge that was refused.
    assert 40 * 1024 < r.verdict["peak_memory_kb"] <= 64 * 1024 + 4096, r.verdict
    assert "out of memory" in r.err


def test_disk_fill_stops_at_quota(run, tmp_path):
    r = run(["--disk", "16", "--", "sh", "-c",
             "dd if=/dev/zero of=/tmp/fill bs=1M count=64 2>&1 | head -n1; du -m /tmp/fill | cut -f1"])
    assert r.code == 0, r
    lines = r.out.splitlines()
    assert "No space left on device" in lines[0], r.out
    assert 12 <= int(lines[1]) <= 16, r.out


def test_output_flood_hits_limit(run):
    r = run(["--output-limit", "1000000", "--", "yes"])
    assert r.verdict["status"] == "output_limit", r
    assert len(r.stdout) == 1000000 and set(r.stdout) == {ord("y"), ord("\n")}
    assert r.code == 137


@pytest.mark.userspace
def test_output_flood_keeps_memory_flat():
    # A fresh parent, so that the peak covers only this hutch, its agent and
    # the workload (every process it waited for, directly or not).
    wrapper = ("import resource, subprocess, sys\n"
               "p = subprocess.run([sys.argv[1], 'run', '--', 'sh', '-c', 'head -c 2000000000 /dev/zero'],"
               " stdout=subprocess.DEVNULL)\n"
               "print(p.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")
    out = subprocess.run(["/usr/bin/python3", "-c", wrapper, BUILD / "hutch"], capture_output=True,
                         text=True, timeout=600).stdout.split()  # 2 GB, emulated in the guest
    assert out[0] == "0", out
    assert int(out[1]) < 40 * 1024, f"peak RSS {out[1]} KiB while 2 GB streamed"


def test_cpu_spin_honours_cpu_limit_and_times_out(run):
    spin = "import multiprocessing as m\ndef s():\n while True: pass\n[m.Process(target=s).start() for _ in range(4)]\ns()"
    r = run(["--cpus", "0.5", "--timeout", "2", "--", "python3", "-c", spin])
    assert r.verdict["status"] == "timeout" and "wall clock" in r.verdict["message"], r
    assert 1900 <= r.verdict["wall_ms"] <= 4000
    assert r.verdict["cpu_ms"] <= 0.5 * r.verdict["wall_ms"] * 1.25, r.verdict


def test_cpu_time_limit_counts_all_processes(run):
    # Only the children spin; the command itself sleeps. Were their CPU time
    # not counted, the wall clock limit would end it instead.
    spin = ("import multiprocessing as m, time\ndef s():\n while True: pass\n"
            "[m.Process(target=s).start() for _ in range(2)]\ntime.sleep(100)")
    r = run(["--cpu-time", "1", "--timeout", "30", "--", "python3", "-c", spin])
    assert r.verdict["status"] == "timeout" and "CPU time" in r.verdict["message"], r
    assert 1000 <= r.verdict["cpu_ms"] <= 1600, r.verdict


def test_sleep_forever_times_out_on_wall_clock(run):
    r = run(["--timeout", "0.5", "--", "sleep", "1000"])
    assert r.verdict["status"] == "timeout", r
    # sleeping, not spinning: its CPU time is a small part of its wall time
    # (not an absolute bound: the cgroup v2 guest emulates its CPU, slowly)
    assert 450 <= r.verdict["wall_ms"] <= 2000
    assert r.verdict["cpu_ms"] < r.verdict["wall_ms"] / 2, r.verdict


@pytest.mark.parametrize("user", ["user", "root"])
def test_kill_everything_from_inside(run, user):
    r = run(["--user", user, "--", "sh", "-c", "sleep 100 & sleep 0.1; kill -9 -1; wait; echo survived"])
    assert r.code == 0 and r.out == "survived\n", r


def test_daemon_left_running_is_killed_at_teardown(run):
    t = time.monotonic()
    r = run(["--", "sh", "-c", "(setsid sh -c 'sleep 1000' >/dev/null 2>&1 &); "
                               "(setsid sleep 1000 &); echo started"])
    assert r.code == 0 and r.out == "started\n", r
    assert time.monotonic() - t < 10
    # no_leftovers (autouse) asserts no process of the sandbox survives.


INOTIFY_HOG = ("import ctypes, sys\n"
               "libc = ctypes.CDLL(None)\n"
               "print(sum(libc.inotify_init1(0) >= 0 for _ in range(1000)), flush=True)\n"
               "sys.stdin.read()")


def inotify_works():
    libc = ctypes.CDLL(None, use_errno=True)
    fd = libc.inotify_init1(os.O_CLOEXEC)
    if fd >= 0:
        os.close(fd)
    return fd >= 0


def test_per_user_kernel_quotas_are_the_sandboxs_own(run):
    """inotify instances are counted per user, up the chain of user namespace
    owners: a sandbox that takes all it may must not take host root's, nor
    leave a neighbour sandbox without any."""
    hog = subprocess.Popen([BUILD / "hutch", "run", "-i", "--", "python3", "-c", INOTIFY_HOG],
                           stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        taken = int(hog.stdout.readline())
        assert 0 < taken < 1000  # the per-user limit stopped it
        assert inotify_works(), "host root lost its inotify instances to a sandbox"
        r = run(["--", "python3", "-c", "import ctypes; print(ctypes.CDLL(None).inotify_init1(0) >= 0)"])
        assert r.out == "True\n", r
    finally:
        hog.stdin.close()
        hog.wait(timeout=30)
    assert hog.returncode == 0


TCP_HOG = """
import socket
srv = socket.socket(); srv.bind(("127.0.0.1", 0)); srv.listen(64)
queued, conns, chunk = 0, [], b"x" * 65536
while queued < (512 << 20) and len(conns) < 400:
    c = socket.create_connection(srv.getsockname()); a, _ = srv.accept()
    conns += [c, a]
    c.setblocking(False)
    try:
        while queued < (512 << 20):
            queued += c.send(chunk)
    except OSError:
        pass
print(queued >> 20, flush=True)
"""


def test_unread_socket_buffers_count_against_memory(run):
    """Data queued on loopback connections nobody reads is kernel memory the
    sandbox holds: it must not grow past the memory limit's order (cgroup v1
    keeps TCP buffers on a counter of their own, capped at the same figure)."""
    r = run(["--memory", "64", "--", "python3", "-c", TCP_HOG])
    assert r.verdict["status"] in ("ok", "oom"), r
    if r.verdict["status"] == "ok":
        assert int(r.out) <= 2 * 64 + 16, f"{r.out.strip()} MiB queued with a 64 MiB limit"


PTY_HOG = ("import os, sys, time\n"
           "fds = []\n"
           "try:\n"
           "    while len(fds) < 5000: fds.append(os.openpty())\n"
           "except OSError as e: print(len(fds), e.errno, flush=True)\n"
           "sys.stdin.read()")


def test_pty_hog_leaves_other_sandboxes_their_terminals():
    """A sandbox opening terminals until refused gets its own share (64 by
    default; the kernel's pool is shared by every sandbox) and no more: a
    second sandbox still gets a terminal while the first holds them all."""
    hog = subprocess.Popen([BUILD / "hutch", "run", "-i", "--timeout", "40", "--", "python3", "-c", PTY_HOG],
                           stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        count, errno_ = hog.stdout.readline().split()
        assert (int(count), int(errno_)) == (64, 28)  # ENOSPC at devpts' max=
        small = subprocess.run([BUILD / "hutch", "run", "--ptys", "3", "--", "python3", "-c", PTY_HOG],
                               input=b"", capture_output=True, timeout=30)
        assert small.stdout.split() == [b"3", b"28"], small
        t = subprocess.run([BUILD / "hutch", "run", "-t", "--", "tty"], stdin=subprocess.DEVNULL,
                           capture_output=True, timeout=30)
        assert t.returncode == 0 and t.stdout.strip().startswith(b"/dev/pts/"), t
    finally:
        hog.stdin.close()
        assert hog.wait(timeout=30) == 0


def test_ptys_beyond_the_hosts_pool_are_refused(run):
    with open("/proc/sys/kernel/pty/max") as f_max, open("/proc/sys/kernel/pty/reserve") as f_res:
        shared = int(f_max.read()) - int(f_res.read())
    if shared >= 4096:
        pytest.skip(f"the host's pty pool ({shared}) is larger than hutch's own bound")
    r = run(["--ptys", str(shared + 1), "--", "true"])
    assert r.code == 125 and b"kernel.pty.max" in r.stderr, r.err
