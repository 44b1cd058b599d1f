"""Isolation posture, read from inside the sandbox and from the host (as
gVisor's posture tests do): every workload thread filtered, unprivileged,
alone in its namespaces, seeing nothing of the host it should not."""
import fcntl
import json
import os
import pathlib
import socket
import struct
import subprocess
import time

import pytest

from conftest import BUILD, UID_BASE, cgroup_roots

INSIDE = r'''
import json, os, socket, threading
threading.Thread(target=lambda: __import__("time").sleep(0.5), daemon=True).start()
def status(path):
    d = {}
    for line in open(path):
        k, _, v = line.partition(":")
        d[k] = v.strip()
    return d
threads = []
for pid in os.listdir("/proc"):
    if not pid.isdigit():
        continue
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            s = status(f"/proc/{pid}/task/{tid}/status")
            threads.append({k: s[k] for k in ("Name", "Uid", "Seccomp", "NoNewPrivs", "CapEff", "CapPrm", "CapBnd", "CapAmb")})
    except OSError:
        pass
def reads(p):
    try:
        return open(p, "rb").read()
    except OSError as e:
        return "error: " + e.strerror
def writes(p):
    try:
        with open(p, "w") as f:
            f.write("x")
        return "written"
    except OSError as e:
        return e.strerror
print(json.dumps({
    "threads": threads,
    "pids": sorted(int(p) for p in os.listdir("/proc") if p.isdigit()),
    "pid1_visible": os.path.exists("/proc/1"),
    "interfaces": sorted(n for _, n in socket.if_nameindex()),
    "hostname": socket.gethostname(),
    "root": sorted(os.listdir("/")),
    "shadow": os.path.exists("/etc/shadow"),
    "passwd": open("/etc/passwd").read(),
    "marker": os.path.exists(os.environ["MARKER"]),
    "masked": {p: reads(p).decode() if isinstance(reads(p), bytes) else reads(p) for p in ("/proc/keys", "/proc/timer_list", "/proc/interrupts", "/proc/kcore", "/proc/sched_debug")},
    "writes": {p: writes(p) for p in ("/proc/sys/kernel/core_pattern", "/proc/sysrq-trigger", "/sys/kernel/uevent_helper", "/sys/class/net/lo/mtu", "/usr/bin/env", "/etc/passwd")},
    "fds": sorted(os.listdir("/proc/self/fd")),
    "cgroup": open("/proc/self/cgroup").read(),
}))
'''


@pytest.mark.parametrize("user", ["user", "root"])
def test_posture_inside(run, tmp_path, user):
    marker = tmp_path / "host-marker"
    marker.write_text("host only")
    r = run(["--user", user, "--env", f"MARKER={marker}", "--", "python3", "-c", INSIDE])
    assert r.code == 0, r
    got = json.loads(r.out)
    workload = [t for t in got["threads"] if t["Name"] != "hutch-agent"]
    assert len(workload) >= 2  # python and its thread
    for t in workload:
        assert t["Seccomp"] == "2" and t["NoNewPrivs"] == "1", t
        assert t["CapEff"] == t["CapPrm"] == t["CapBnd"] == t["CapAmb"] == "0000000000000000", t
        assert t["Uid"].split()[0] == ("0" if user == "root" else "1000")
    # Its own pid namespace: a handful of small pids, and PID 1 (the agent)
    # hidden, since the workload may not trace it (hidepid=invisible).
    assert not got["pid1_visible"]
    assert got["pids"] and max(got["pids"]) < 50 and len(got["pids"]) <= 4, got["pids"]
    assert got["interfaces"] == ["lo"]
    assert got["hostname"] != socket.gethostname()
    assert not got["shadow"] and not got["marker"]
    assert "root:x:0:0" in got["passwd"] and os.uname().nodename not in got["passwd"]
    assert not {"work", "farm", "old_root", "boot"} & set(got["root"])
    for path, content in got["masked"].items():
        assert content == "" or content.startswith("error:"), (path, content)
    for path, result in got["writes"].items():
        assert result != "written", path
    assert got["fds"] == ["0", "1", "2", "3"]  # 3: the listing itself
    assert all(line.endswith(":/") for line in got["cgroup"].split()), got["cgroup"]


def sandbox_processes():
    """Host pids of every process in a sandbox cgroup: (agents, workloads)."""
    comms = {}
    for root in cgroup_roots():
        for procs in (root / "hutch").glob("*/**/cgroup.procs"):
            for pid in map(int, procs.read_text().split()):
                try:
                    comms[pid] = pathlib.Path(f"/proc/{pid}/comm").read_text().strip()
                except (FileNotFoundError, ProcessLookupError):
                    pass  # exited since the listing (a shell's short-lived child), or mid-read
    agents = {p for p, comm in comms.items() if comm == "hutch-agent"}
    return agents, set(comms) - agents


def status_of(pid):
    s = {}
    for line in pathlib.Path(f"/proc/{pid}/status").read_text().splitlines():
        k, _, v = line.partition(":")
        s[k] = v.strip()
    return s


def userns_owner(pid):
    NS_GET_OWNER_UID = 0xB704
    fd = os.open(f"/proc/{pid}/ns/user", os.O_RDONLY | os.O_CLOEXEC)
    try:
        buf = bytearray(4)
        fcntl.ioctl(fd, NS_GET_OWNER_UID, buf)
        return struct.unpack("I", buf)[0]
    finally:
        os.close(fd)


def test_posture_outside():
    # cat echoing a line back is past its dynamic loader (which holds libc
    # open for a moment) and settled in its read loop: its fds are final.
    p = subprocess.Popen([BUILD / "hutch", "run", "-i", "--", "cat"],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        p.stdin.write(b"ready\n")
        p.stdin.flush()
        assert p.stdout.readline() == b"ready\n"
        agent, workload = sandbox_processes()
        assert len(agent) == 1 and workload, (agent, workload)
        (agent_pid,) = agent
        a = status_of(agent_pid)
        assert a["NSpid"].split()[-1] == "1", a["NSpid"]  # PID 1 of the sandbox
        base = int(a["Uid"].split()[0])
        assert base >= UID_BASE and base % 65536 == 0
        assert a["NoNewPrivs"] == "1" and a["Seccomp"] == "2", a
        # The agent runs under the sandbox's filter alone; every workload
        # stacks its own on it (docs/seccomp.md).
        assert a["Seccomp_filters"] == "1", a
        # Its user namespace belongs to the sandbox's own host id, not to
        # host root: per-user kernel quotas are charged up to that owner.
        assert userns_owner(agent_pid) == base
        for pid in workload:
            for task in pathlib.Path(f"/proc/{pid}/task").iterdir():
                s = status_of(f"{pid}/task/{task.name}")
                assert s["Seccomp"] == "2" and s["NoNewPrivs"] == "1", s
                assert s["Seccomp_filters"] == "2", s
                assert s["CapEff"] == "0000000000000000" and s["CapBnd"] == "0000000000000000", s
                assert int(s["Uid"].split()[0]) == base + 1000
            # Its own namespaces, every one of them.
            for ns in ("mnt", "pid", "net", "ipc", "uts", "user", "cgroup"):
                assert os.readlink(f"/proc/{pid}/ns/{ns}") != os.readlink(f"/proc/self/ns/{ns}"), ns
            # Nothing open but its stdio: no host file, no agent socket.
            fds = {fd: os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")}
            assert set(fds) == {"0", "1", "2"}, fds
            assert all(t.startswith("pipe:") or t == "/dev/null" for t in fds.values()), fds
        # The agent holds its connection and cgroup directories, and at fd
        # 16 its sandbox's own storage (the tmpfs of the disk quota, held
        # for the host's metrics and snapshots): nothing of the host's files.
        for fd in os.listdir(f"/proc/{agent_pid}/fd"):
            target = os.readlink(f"/proc/{agent_pid}/fd/{fd}")
            if fd == "16":
                st = os.statvfs(f"/proc/{agent_pid}/fd/16")
                assert target == "/" and st.f_blocks * st.f_frsize == 1024 << 20, (target, st)
                continue
            assert target.startswith(("socket:", "pipe:", "anon_inode:", "/dev/null", "/sys/fs/cgroup/")), target
        # The agent cannot rewrite its own binary: it runs from a read-only mount.
        with pytest.raises(OSError):
            open(f"/proc/{agent_pid}/exe", "r+b")
    finally:
        p.stdin.close()
        p.wait(timeout=30)
    assert p.returncode == 0


def test_sandboxes_get_distinct_ids(tmp_path):
    procs = [subprocess.Popen([BUILD / "hutch", "run", "-i", "--", "sh", "-c", "id -u; cat"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE) for _ in range(3)]
    try:
        for p in procs:
            assert p.stdout.readline() == b"1000\n"
        agents, _ = sandbox_processes()
        uids = {int(status_of(pid)["Uid"].split()[0]) for pid in agents}
        assert len(uids) == 3 and all(u >= UID_BASE for u in uids), uids
    finally:
        for p in procs:
            p.stdin.close()
            p.wait(timeout=30)


ATTACK_AGENT = r'''
import ctypes, os, signal
libc = ctypes.CDLL(None, use_errno=True)
def attempt(name, f):
    try:
        r = f()
        print(name, "done" if r in (None, 0) else f"failed {r}")
    except OSError as e:
        print(name, "refused", e.errno)
attempt("kill-9", lambda: os.kill(1, signal.SIGKILL))
attempt("kill-term", lambda: os.kill(1, signal.SIGTERM))
attempt("kill-stop", lambda: os.kill(1, signal.SIGSTOP))
attempt("ptrace", lambda: libc.ptrace(16, 1, 0, 0) and -ctypes.get_errno())  # PTRACE_ATTACH
attempt("environ", lambda: open("/proc/1/environ", "rb").read() and None)
attempt("mem", lambda: open("/proc/1/mem", "rb").read(1) and None)
attempt("fds", lambda: os.listdir("/proc/1/fd") and None)
attempt("exe-write", lambda: open("/proc/1/exe", "r+b") and None)
attempt("exe-path-write", lambda: open(os.readlink("/proc/1/exe"), "r+b") and None)
attempt("prlimit", lambda: __import__("resource").prlimit(1, __import__("resource").RLIMIT_NOFILE, (0, 0)) and None)
attempt("alive", lambda: open("/proc/1/status").read() and None)
'''


@pytest.mark.parametrize("user", ["user", "root"])
def test_agent_cannot_be_touched(run, user):
    r = run(["--user", user, "--", "python3", "-c", ATTACK_AGENT])
    assert r.code == 0, r
    got = dict(line.split(" ", 1) for line in r.out.splitlines())
    # Signals to PID 1 from inside its namespace are dropped by the kernel
    # when it has no handler (root, same uid, may send them; they do nothing).
    for sig in ("kill-9", "kill-term", "kill-stop"):
        assert got[sig] == ("refused 1" if user == "user" else "done"), (sig, got[sig])
    for what in ("ptrace", "environ", "mem", "fds", "exe-write", "exe-path-write", "prlimit"):
        assert got[what] != "done", (what, got[what])
    assert got["alive"].startswith("refused"), got["alive"]  # not even visible
    assert r.verdict["status"] == "ok"  # the agent reported the end: it survived


WATCHER = r'''
import ctypes, os, select, sys
libc = ctypes.CDLL(None, use_errno=True)
fd = libc.inotify_init1(os.O_NONBLOCK)
IN_ACCESS, IN_OPEN = 0x1, 0x20
for path in (b"/usr/bin", b"/etc/ld.so.cache"):
    assert libc.inotify_add_watch(fd, path, IN_ACCESS | IN_OPEN) >= 0, path
print("watching", flush=True)
sys.stdin.readline()
seen = select.select([fd], [], [], 0.2)[0]
print("events" if seen else "quiet", flush=True)
open("/usr/bin/env", "rb").close()
seen = select.select([fd], [], [], 1)[0]
print("own events" if seen else "no own events", flush=True)
'''


def test_host_file_activity_is_invisible():
    """The host's directories are shown through overlays of the sandbox's
    own: an inotify watch inside sees what the sandbox does there, not which
    programs the host or a neighbour sandbox runs and which files they open."""
    p = subprocess.Popen([BUILD / "hutch", "run", "-i", "--", "python3", "-c", WATCHER],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert p.stdout.readline() == b"watching\n"
        subprocess.run(["/usr/bin/true"], check=True)
        subprocess.run([BUILD / "hutch", "run", "--", "/usr/bin/true"], check=True)
        p.stdin.write(b"go\n")
        p.stdin.flush()
        assert p.stdout.readline() == b"quiet\n"
        assert p.stdout.readline() == b"own events\n"  # the watch itself works
    finally:
        p.stdin.close()
        p.wait(timeout=30)
    assert p.returncode == 0
