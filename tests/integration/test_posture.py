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

from conftest import BUILD, UID_BASE, require_gvisor, sandbox_of

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
            threads.append({k: s.get(k) for k in ("Name", "Uid", "Seccomp", "NoNewPrivs", "CapEff", "CapPrm", "CapBnd", "CapAmb")})
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
    "writes": {p: writes(p) for p in ("/proc/sys/kernel/core_pattern", "/proc/sysrq-trigger", "/sys/kernel/uevent_helper", "/sys/class/net/lo/mtu", "/usr/bin/env", "/etc/passwd", "/dev/planted")},
    "fds": sorted(os.listdir("/proc/self/fd")),
    "cgroup": open("/proc/self/cgroup").read(),
}))
'''


# 65534: nobody, an id images run as; under gVisor /dev must not be its
# (the agent's own uid owns it, which no workload can have).
@pytest.mark.parametrize("user", ["user", "root", "65534"])
def test_posture_inside(trun, tier, tmp_path, user):
    marker = tmp_path / "host-marker"
    marker.write_text("host only")
    # /tmp: nobody's home in /etc/passwd is /nonexistent
    r = trun(["--user", user, "--cwd", "/tmp", "--env", f"MARKER={marker}", "--", "python3", "-c",
              INSIDE])
    assert r.code == 0, r
    got = json.loads(r.out)
    agent = [t for t in got["threads"] if t["Name"] in ("hutch-agent", ".hutch-agent")]
    workload = [t for t in got["threads"] if t not in agent]
    assert len(workload) >= 2  # python and its thread
    for t in workload:
        assert t["Seccomp"] == "2", t
        assert t["CapEff"] == t["CapPrm"] == t["CapBnd"] == "0000000000000000", t
        assert t["Uid"].split()[0] == {"root": "0", "user": "1000"}.get(user, user)
        if tier == "ns":
            assert t["NoNewPrivs"] == "1" and t["CapAmb"] == "0000000000000000", t
        else:  # gVisor's status has neither line; no_new_privs is what seccomp
            # needs without CAP_SYS_ADMIN, which the workload lacks
            assert t["NoNewPrivs"] is None and t["CapAmb"] is None, t
    if tier == "ns":
        # Its own pid namespace: a handful of small pids, and PID 1 (the
        # agent) hidden, since the workload may not trace it
        # (hidepid=invisible).
        assert not got["pid1_visible"] and not agent
    else:
        # gVisor's /proc has no hidepid: the agent shows, as a uid no
        # workload has (gvisor.c), so that root cannot signal it or open
        # its descriptors (test_agent_cannot_be_touched).
        assert got["pid1_visible"] and len(agent) == 1, got["threads"]
        assert agent[0]["Uid"].split() == ["65536"] * 4, agent
        assert agent[0]["Seccomp"] == "2", agent  # the profile, beneath the workload's
    assert got["pids"] and max(got["pids"]) < 50 and len(got["pids"]) <= 4, got["pids"]
    assert got["interfaces"] == ["lo"]
    assert got["hostname"] != socket.gethostname()
    assert not got["shadow"] and not got["marker"]
    assert "root:x:0:0" in got["passwd"] and os.uname().nodename not in got["passwd"]
    assert not {"work", "farm", "old_root", "boot", "runsc", "config.json", "agent"} & set(got["root"])
    for path, content in got["masked"].items():
        assert content == "" or content.startswith("error:"), (path, content)
    for path, result in got["writes"].items():
        assert result != "written", path
    assert got["fds"] == ["0", "1", "2", "3"]  # 3: the listing itself
    # ns: its own cgroup namespace, rooted at its exec's leaf; gVisor's
    # kernel has no cgroup mounted and shows none.
    assert all(line.endswith(":/") for line in got["cgroup"].split()), got["cgroup"]
    assert tier == "ns" or got["cgroup"] == "", got["cgroup"]


def sandbox_processes(run_pid):
    """Host pids of the processes of a `hutch run`'s sandbox: (agents,
    workloads)."""
    comms = {}
    for pid in sandbox_of(run_pid):
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
        agent, workload = sandbox_processes(p.pid)
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


def test_sandboxes_get_distinct_ids(tier):
    procs = [subprocess.Popen([BUILD / "hutch", "run", "--isolation", tier, "-i", "--", "sh", "-c",
                               "id -u; cat"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
             for _ in range(3)]
    try:
        for p in procs:
            assert p.stdout.readline() == b"1000\n"
        # Every process of each sandbox (gVisor's too: runsc, its sentry,
        # gofer and stubs) runs as one of that sandbox's own host ids.
        uids = [{int(status_of(pid)["Uid"].split()[0]) for pid in sandbox_of(p.pid)} for p in procs]
        bases = {min(u) for u in uids}
        assert len(bases) == 3 and all(b >= UID_BASE and b % 65536 == 0 for b in bases), bases
        assert all(max(u) < min(u) + 65536 for u in uids), uids
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
def open_agent_fds():
    # its pipes and sockets (an exec's output) and its connection (fd 3;
    # under gVisor a host file): a workload opening one would read or
    # write another exec's streams, or speak for the agent
    for fd in os.listdir("/proc/1/fd"):
        if fd == "3" or os.readlink(f"/proc/1/fd/{fd}").startswith(("pipe:", "socket:")):
            try:
                os.close(os.open(f"/proc/1/fd/{fd}", os.O_RDONLY | os.O_NONBLOCK))
                return f"opened {fd}"
            except OSError:
                pass
    raise PermissionError(13, "none opened")
attempt("fd-open", open_agent_fds)
attempt("alive", lambda: open("/proc/1/status").read() and None)
'''


@pytest.mark.parametrize("user", ["user", "root"])
def test_agent_cannot_be_touched(trun, tier, user):
    r = trun(["--user", user, "--", "python3", "-c", ATTACK_AGENT])
    assert r.code == 0, r
    got = dict(line.split(" ", 1) for line in r.out.splitlines())
    # ns: signals to PID 1 from inside its namespace are dropped by the
    # kernel when it has no handler (root, same uid, may send them; they do
    # nothing). gVisor delivers them by uid alone: the agent has a uid no
    # workload has, so even root's are refused.
    for sig in ("kill-9", "kill-term", "kill-stop"):
        want = "refused 1" if user == "user" or tier == "gvisor" else "done"
        assert got[sig] == want, (sig, got[sig])
    for what in ("ptrace", "mem", "exe-write", "exe-path-write", "prlimit"):
        assert got[what] != "done", (what, got[what])
    assert got["fd-open"].startswith("refused"), got["fd-open"]
    if tier == "ns":
        for what in ("environ", "fds"):
            assert got[what] != "done", (what, got[what])
        assert got["alive"].startswith("refused"), got["alive"]  # not even visible
    else:
        # gVisor's /proc has no hidepid and checks no ptrace access on
        # environ or the fd listing: both show (PATH and HOME, descriptor
        # numbers), nothing more opens.
        assert got["alive"] == "done" and got["environ"] == "done" and got["fds"] == "done", got
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


def test_host_file_activity_is_invisible(tier):
    """The host's directories are shown through overlays of the sandbox's
    own (in gVisor, through its gofer, whose inotify is the sentry's): an
    inotify watch inside sees what the sandbox does there, not which
    programs the host or a neighbour sandbox runs and which files they open."""
    p = subprocess.Popen([BUILD / "hutch", "run", "--isolation", tier, "-i", "--", "python3", "-c", WATCHER],
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


NO_ROUTE = r'''
import errno, json, socket, sys
got = {}
for addr in sys.argv[2:]:
    s = socket.socket()
    s.settimeout(3)
    try:
        s.connect((addr, int(sys.argv[1])))
        got[addr] = "connected"
    except OSError as e:
        got[addr] = errno.errorcode.get(e.errno, str(e))
    s.close()
print(json.dumps(got))
'''


def host_addresses():
    """The host's own IPv4 addresses, loopback aside (no packet leaves the
    machine for them)."""
    try:
        out = subprocess.run(["ip", "-4", "-o", "addr", "show"], capture_output=True,
                             text=True, timeout=10).stdout
    except FileNotFoundError:
        return []
    return [l.split()[3].split("/")[0] for l in out.splitlines()
            if len(l.split()) > 3 and not l.split()[3].startswith("127.")]


def test_no_route_out(trun, tier):
    """The sandbox's network is its own loopback: a listener on the host's
    loopback or on the host's addresses is not reached (gVisor's sockets
    are the host kernel's, --network=host, in the same namespace)."""
    srv = socket.socket()
    srv.bind(("0.0.0.0", 0))
    srv.listen(8)
    srv.setblocking(False)
    port = srv.getsockname()[1]
    try:
        addrs = ["127.0.0.1", *host_addresses()]
        r = trun(["--", "python3", "-c", NO_ROUTE, str(port), *addrs])
        assert r.code == 0, r
        got = json.loads(r.out)
        assert got["127.0.0.1"] == "ECONNREFUSED", got  # its own loopback: nobody there
        for addr in addrs[1:]:
            assert got[addr] in ("ENETUNREACH", "EHOSTUNREACH"), (addr, got)
        with pytest.raises(BlockingIOError):
            srv.accept()
    finally:
        srv.close()


GVISOR_INSIDE = r'''
import json, os
def read(p):
    try:
        return open(p, "rb").read().decode(errors="replace")
    except OSError as e:
        return "error: " + e.strerror
pids = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
print(json.dumps({
    "uname": list(os.uname()),
    "version": read("/proc/version"),
    "osrelease": read("/proc/sys/kernel/osrelease"),
    "boot_id": read("/proc/sys/kernel/random/boot_id"),
    "mountinfo": read("/proc/self/mountinfo"),
    "cmdlines": {p: read(f"/proc/{p}/cmdline") for p in pids},
}))
'''


def test_gvisor_kernel_and_proc_are_the_sentrys(run, tmp_path):
    """Under gVisor the workload sees gVisor's kernel, not the host's: not
    its version (what a kernel exploit aims by), not its boot, not its
    mounts, not its processes."""
    require_gvisor()
    r = run(["--isolation", "gvisor", "--", "python3", "-c", GVISOR_INSIDE])
    assert r.code == 0, r
    got = json.loads(r.out)
    host = os.uname()
    assert got["uname"][2] != host.release and got["uname"][3] != host.version, got["uname"]
    assert host.release not in got["version"] + got["osrelease"], (got["version"], got["osrelease"])
    assert got["version"] != pathlib.Path("/proc/version").read_text()
    assert got["boot_id"] != pathlib.Path("/proc/sys/kernel/random/boot_id").read_text()
    # The sentry's mounts: its own filesystems, no host path or device.
    mounts = [l.split() for l in got["mountinfo"].splitlines()]
    assert mounts, got["mountinfo"]
    for m in mounts:
        fstype, source = m[m.index("-") + 1], m[m.index("-") + 2]
        assert fstype in ("9p", "tmpfs", "proc", "sysfs", "devpts"), m
        assert source in ("none", "proc", "sysfs", "tmpfs", "devpts", "shm"), m
    for host_path in ("/run/hutch", str(BUILD), str(tmp_path), os.environ["HUTCH_STATE_DIR"]):
        assert host_path not in got["mountinfo"], host_path
    # PID 1 is the agent; every other process is the workload's own.
    cmdlines = dict(got["cmdlines"])
    assert cmdlines.pop("1") == "/dev/.hutch-agent\0--cgroup\0none\0", got["cmdlines"]
    assert cmdlines and all(c.startswith("python3\0") for c in cmdlines.values()), cmdlines


def test_gvisor_posture_outside():
    """The gvisor tier from the host: every process of the sandbox (the
    first process, runsc, its sentry, gofer and the ptrace stubs that run
    the workload's code) runs as the sandbox's host id in its namespaces,
    and all that serve the workload are under gVisor's seccomp filters;
    only the first process holds the storage."""
    require_gvisor()
    p = subprocess.Popen([BUILD / "hutch", "run", "--isolation", "gvisor", "-i", "--", "cat"],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        p.stdin.write(b"ready\n")
        p.stdin.flush()
        assert p.stdout.readline() == b"ready\n"
        pids = sandbox_of(p.pid)
        first = [pid for pid in pids if int(status_of(pid)["PPid"]) == p.pid]
        assert len(first) == 1, pids
        (first,) = first
        base = int(status_of(first)["Uid"].split()[0])
        assert base >= UID_BASE and base % 65536 == 0
        storage = os.stat(f"/proc/{first}/fd/16")
        kinds = {}
        for pid in pids:
            try:
                s = status_of(pid)
                argv0 = pathlib.Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0]
            except (FileNotFoundError, ProcessLookupError):
                continue  # a stub that ended since the listing
            kinds.setdefault(argv0.decode(), []).append(pid)
            assert s["Uid"].split() == [str(base)] * 4 and s["Gid"].split() == [str(base)] * 4, s
            assert userns_owner(pid) == base
            for ns in ("mnt", "pid", "net", "ipc", "uts", "user"):
                assert os.readlink(f"/proc/{pid}/ns/{ns}") != os.readlink(f"/proc/self/ns/{ns}"), ns
            if pid != first and argv0 != b"runsc":
                # the sentry, the gofer, and the stubs the sentry forks
                assert s["Seccomp"] == "2" and s["NoNewPrivs"] == "1", (argv0, s)
            for fd in os.listdir(f"/proc/{pid}/fd"):
                if pid == first:
                    continue
                try:
                    st = os.stat(f"/proc/{pid}/fd/{fd}")
                except OSError:
                    continue
                assert (st.st_dev, st.st_ino) != (storage.st_dev, storage.st_ino), (argv0, fd)
        assert {"runsc", "runsc-sandbox", "runsc-gofer"} <= set(kinds), kinds
    finally:
        p.stdin.close()
        p.wait(timeout=30)
    assert p.returncode == 0


FORKS = r'''
import os, threading, time
n = t = 0
try:
    for _ in range(200):
        if os.fork() == 0:
            time.sleep(3)
            os._exit(0)
        n += 1
except OSError as e:
    print("fork", e.strerror)
try:
    for _ in range(200):
        threading.Thread(target=time.sleep, args=(3,), daemon=True).start()
        t += 1
except RuntimeError:
    print("thread refused")
print(n, t)
'''


@pytest.mark.parametrize("user", ["user", "root"])
def test_process_limit_is_a_refusal(trun, tier, user):
    """Forking and threading up to --pids is refused (EAGAIN), in both
    tiers, and the sandbox lives on. Under gVisor the limit is kept inside
    its kernel (RLIMIT_NPROC): its processes each cost the host several, so
    the host's limit alone ended the sandbox instead (gvisor.c)."""
    # 64 forks under gVisor take minutes on the cgroup v2 guest's emulated CPU.
    r = trun(["--user", user, "--pids", "64", "--", "python3", "-c", FORKS], timeout=600)
    assert r.code == 0, r
    lines = r.out.splitlines()
    assert lines[:2] == ["fork Resource temporarily unavailable", "thread refused"], r.out
    forks, threads = map(int, lines[2].split())
    assert 60 <= forks <= 64 and threads == 0, r.out  # the forks hold the whole limit
    assert r.verdict["status"] == "ok"


DEV_INSIDE = r'''
import json, os, subprocess
opts = {}
for line in open("/proc/self/mountinfo"):
    f = line.split()
    opts[f[4]] = set(f[5].split(","))
def fill(path):
    try:
        with open(path, "wb") as f:
            for _ in range(16):
                f.write(b"x" * (1 << 20))
                f.flush()
        return "written"
    except OSError as e:
        return e.strerror
shm = fill("/dev/shm/big")
os.unlink("/dev/shm/big")
tmp = fill("/tmp/big")
os.unlink("/tmp/big")
open("/dev/shm/t", "wb").write(open("/bin/true", "rb").read())
os.chmod("/dev/shm/t", 0o755)
try:
    subprocess.run(["/dev/shm/t"])
    ran = "ran"
except OSError as e:
    ran = e.strerror
print(json.dumps({"dev": sorted(opts["/dev"]), "shm": sorted(opts["/dev/shm"]), "fill": [shm, tmp],
                  "exec": ran, "null": open("/dev/null", "w").write("x")}))
'''


def test_dev_and_shm_are_bounded_binds(run):
    """/dev and /dev/shm are directories of the sandbox's storage bound in
    (rootfs.c mount_dev): /dev's devices open but nothing runs from it,
    /dev/shm is nosuid, nodev and noexec, and what it holds counts against
    the disk quota (8 MiB here: 16 MiB does not fit, in /dev/shm as in
    /tmp)."""
    r = run(["--disk", "8", "--", "python3", "-c", DEV_INSIDE])
    assert r.code == 0, r
    got = json.loads(r.out)
    assert {"nosuid", "noexec"} <= set(got["dev"]) and "nodev" not in got["dev"], got
    assert {"nosuid", "nodev", "noexec"} <= set(got["shm"]), got
    assert got["fill"] == ["No space left on device"] * 2, got
    assert got["exec"] == "Permission denied" and got["null"] == 1, got
