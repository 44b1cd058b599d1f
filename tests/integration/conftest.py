"""Fixtures for hutch's integration tests: real sandboxes, driven through
the hutch command (and the agent bridge), checked from inside and outside.

Tests that need something this machine lacks skip with a reason; with
HUTCH_MUST_WORK=1 (CI) such a skip is a failure instead.
"""
import errno
import json
import os
import pathlib
import shutil
import subprocess
import time

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
BUILD = pathlib.Path(os.environ.get("HUTCH_BUILD", ROOT / "build")).resolve()
ASAN_BUILD = os.environ.get("HUTCH_ASAN_BUILD")
UID_BASE = 0x70000000


def require(condition, reason):
    """Skip when condition is false, or fail under HUTCH_MUST_WORK."""
    if condition:
        return
    if os.environ.get("HUTCH_MUST_WORK") == "1":
        pytest.fail(f"required but unavailable (HUTCH_MUST_WORK=1): {reason}")
    pytest.skip(reason)


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "userspace: the server's own work, minutes on the cgroup v2 guest's "
        "emulated CPU and nothing a kernel or cgroup version changes: the guest "
        "(scripts/test-v2.sh) leaves it out")
    config.addinivalue_line(
        "markers", "serial: needs the host to itself (host-wide limits, bursts, a "
        "server out of descriptors, CPU time earned in a given time): scripts/test.sh "
        "runs these one at a time, before the rest of the suite runs on several workers")


@pytest.hookimpl(tryfirst=True)  # before xdist reads the xdist_group marks
def pytest_collection_modifyitems(config, items):
    only_build(config, items)
    group_shared_fixtures(items)


def only_build(config, items):
    """HUTCH_ONLY_BUILD=asan (or build): the tests that run once against
    each build (a "build" and an "asan" param) run against that one only;
    the rest run as ever. The cgroup v2 guest's choice (scripts/test-v2.sh):
    the builds differ in their checks, not their behaviour, and the host's
    suite runs both."""
    only = os.environ.get("HUTCH_ONLY_BUILD")
    if not only:
        return
    if only not in ("build", "asan"):
        raise pytest.UsageError(f"HUTCH_ONLY_BUILD={only}: build or asan")
    other = "asan" if only == "build" else "build"
    keep, drop = [], []
    for item in items:
        spec = getattr(item, "callspec", None)
        # A fixture's params, and (on a pytest that keeps them apart) a
        # test's own parametrize values: ["build", "asan"] either way.
        values = {**spec.params, **getattr(spec, "funcargs", {})}.values() if spec else ()
        (drop if other in values else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


def group_shared_fixtures(items):
    """Under xdist (--dist loadgroup, scripts/test.sh), the tests that share
    a fixture wider than a test (a module's server, registry, template) go
    to one worker together, so that each such fixture is made once: one
    group per module and per value of those fixtures' params (a module's
    "build" server and its "asan" server are two groups, run side by side).
    A test that shares nothing is a unit of its own."""
    for item in items:
        info = getattr(item, "_fixtureinfo", None)
        if info is None:
            continue
        shared = [name for name in item.fixturenames
                  if (defs := info.name2fixturedefs.get(name))
                  and defs[-1].scope in ("class", "module", "package")]
        if not shared:
            continue
        spec = getattr(item, "callspec", None)
        params = sorted(f"{n}={spec.params[n]}" for n in shared if spec and n in spec.params)
        item.add_marker(pytest.mark.xdist_group(":".join([item.module.__name__, *params])))


@pytest.fixture(scope="session", autouse=True)
def state_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("state")
    os.environ["HUTCH_STATE_DIR"] = str(d)
    return d


class Run:
    def __init__(self, proc, verdict):
        self.code = proc.returncode
        self.stdout = proc.stdout
        self.stderr = proc.stderr
        self.verdict = verdict

    @property
    def out(self):
        return self.stdout.decode(errors="replace")

    @property
    def err(self):
        return self.stderr.decode(errors="replace")

    def __repr__(self):
        return f"Run(code={self.code}, verdict={self.verdict}, stderr={self.err[-500:]!r})"


def hutch_run(binary, args, tmp_path, input=None, timeout=120, verdict=True):
    cmd = [str(binary), "run"]
    vpath = tmp_path / f"verdict-{time.monotonic_ns()}.json"
    if verdict:
        cmd += ["--verdict-json", str(vpath)]
    cmd += args
    proc = subprocess.run(cmd, input=input, capture_output=True, timeout=timeout)
    v = None
    if verdict and vpath.exists() and vpath.stat().st_size:
        v = json.loads(vpath.read_text())
    return Run(proc, v)


@pytest.fixture
def run(tmp_path):
    """run([...hutch run args...], input=b"") -> Run, against the normal build."""
    return lambda args, **kw: hutch_run(BUILD / "hutch", args, tmp_path, **kw)


def runsc_found():
    """Where hutch finds gVisor's runsc (gvisor.c's find_runsc), or None."""
    env = os.environ.get("HUTCH_RUNSC")
    if env:
        return env if os.access(env, os.X_OK) else None
    for p in ("/usr/bin/runsc", "/usr/sbin/runsc", "/usr/local/bin/runsc"):
        if os.access(p, os.X_OK):
            return p
    return shutil.which("runsc")


def require_gvisor():
    """The gvisor tier needs runsc: a skip where it is missing, a failure
    under HUTCH_MUST_WORK."""
    require(runsc_found(), "runsc (gVisor) is not installed: scripts/deps.sh --test installs it")


def serve_tier_args(binary, tier):
    """hutch serve's arguments for sandboxes of tier by default."""
    if tier == "ns":
        return []
    require_gvisor()
    helped = subprocess.run([str(binary), "--help"], capture_output=True, text=True).stdout
    require("--isolation" in helped, f"{binary} has no --isolation: a server of the gvisor tier "
            "comes with issue 20's server work")
    return ["--isolation", tier]


@pytest.fixture(params=["ns", "gvisor"])
def tier(request):
    """Each isolation tier in turn."""
    if request.param == "gvisor":
        require_gvisor()
    return request.param


@pytest.fixture
def trun(run, tier):
    """run, in the tier of the test's `tier` param (hutch run --isolation)."""
    return lambda args, **kw: run(["--isolation", tier, *args], **kw)


def build_binary(param, name):
    """The program name of the build a ("build" or "asan") fixture param names."""
    if param == "asan":
        require(ASAN_BUILD, "HUTCH_ASAN_BUILD is not set (make test sets it)")
        return pathlib.Path(ASAN_BUILD).resolve() / name
    return BUILD / name


@pytest.fixture(params=["build", "asan"])
def any_run(request, tmp_path):
    """The same, once against each build (sanitizers catch what tests miss)."""
    binary = build_binary(request.param, "hutch")
    return lambda args, **kw: hutch_run(binary, args, tmp_path, **kw)


def serve_each_build(request, tmp_path_factory, *args):
    """For a module fixture with params ["build", "asan"]: yields a started
    hutch serve of that build (with args), and checks at the end that it
    stopped cleanly and that the sanitizers found nothing."""
    from serveapi import Server
    binary = build_binary(request.param, "hutch-serve")
    s = Server(binary, tmp_path_factory.mktemp("serve") / "state", *args).start()
    s.sanitized = request.param == "asan"
    yield s
    code = s.stop()
    assert code == 0, s.log_text()
    assert "Sanitizer" not in s.log_text() and "runtime error" not in s.log_text()


@pytest.fixture
def tenant(server):
    """For a module with a `server` fixture: the Api of a tenant of the
    test's own, so that listings, quotas and usage see only its sandboxes;
    they and its snapshots go after the test."""
    t = server.api(server.api().post("/v1/keys", {"tenant": f"t{time.monotonic_ns()}"})
                   .json["key"])
    yield t
    for sb in t.get("/v1/sandboxes").json["sandboxes"]:
        t.delete(f"/v1/sandboxes/{sb['id']}")
    for sn in t.get("/v1/snapshots").json["snapshots"]:
        t.delete(f"/v1/snapshots/{sn['id']}")


@pytest.fixture
def bridge():
    """The command that starts a sandbox and relays its agent connection."""
    return [str(BUILD / "tests" / "bridge"), "--agent", str(BUILD / "hutch-agent")]


@pytest.fixture
def probe():
    """Paths of the static syscall probes (64-bit, 32-bit, 64-bit making
    i386 calls through int $0x80)."""
    return (BUILD / "tests" / "try-syscall", BUILD / "tests" / "try-syscall-32",
            BUILD / "tests" / "try-syscall-int80")


def no_i386_abi(probe):
    """True when this kernel has no i386 ABI at all, as seen outside any
    sandbox: int $0x80 does not reach it (the probe exits 77) and a 32-bit
    program will not exec (ENOEXEC), as under some PVM hypervisors. No
    workload can then make an i386 call, and the filter's i386 half has
    nothing to meet: a test of it skips, even under HUTCH_MUST_WORK. Where
    either way in works, that test runs (or fails) as ever."""
    if subprocess.run([str(probe[2]), "getpid"], capture_output=True).returncode != 77:
        return False
    try:
        subprocess.run([str(probe[1]), "getpid"], capture_output=True)
    except OSError as e:
        return e.errno == errno.ENOEXEC
    return False


def cgroup_roots():
    roots = []
    for line in open("/proc/self/mountinfo"):
        fields = line.split()
        fstype = fields[fields.index("-") + 1]
        if fstype in ("cgroup", "cgroup2"):
            roots.append(pathlib.Path(fields[4]))
    return roots


def sandbox_cgroups(run_pid):
    """The cgroup directories (one per hierarchy) of the sandbox a `hutch
    run` (run_pid) made, found through the run's child (the agent, or in
    the gvisor tier the process runsc runs under)."""
    kids = set()
    for stat in pathlib.Path("/proc").glob("[0-9]*/stat"):
        try:
            if int(stat.read_text().rsplit(")", 1)[1].split()[1]) == run_pid:
                kids.add(int(stat.parent.name))
        except (OSError, IndexError, ValueError):
            pass
    found = []
    for root in cgroup_roots():
        for sandbox in (root / "hutch").glob("*/"):
            if kids & procs_under(sandbox):
                found.append(sandbox)
    assert found, f"no sandbox cgroup holds a child of {run_pid}"
    return found


def procs_under(cgroup):
    pids = set()
    try:
        files = list(cgroup.glob("**/cgroup.procs"))
    except OSError:
        return pids  # removed meanwhile
    for procs in files:
        try:
            pids |= set(map(int, procs.read_text().split()))
        except OSError:
            pass  # a leaf removed since the listing
    return pids


def sandbox_of(run_pid):
    """Host pids of every process of a `hutch run`'s sandbox."""
    return set().union(*(procs_under(cg) for cg in sandbox_cgroups(run_pid)))


# Who runs this test: the pytest session (one per run, its xdist workers
# share it) and the xdist worker ("gw0"...; "" in a serial run). Two runs on
# one host, or two workers of one run, each answer for their own sandboxes.
SESSION = os.environ.setdefault("HUTCH_TEST_SESSION", f"{os.getpid()}-{time.time_ns()}")
WORKER = os.environ.get("PYTEST_XDIST_WORKER")
ME = f"{SESSION}/{WORKER or ''}"
GONE = object()  # runner_of's answer for a process that has ended


def runner_of(pid):
    """The session and worker ("SESSION/WORKER") a process was started
    under: the first of it and its ancestors whose environment names a
    session (hutch serve and hutch run inherit the test's; an agent or a
    workload is reached through its parents). GONE when the process itself
    has ended (it is no leftover), None for an orphan. A process that is
    ending has no environment to read (a zombie, or an agent taking its pid
    namespace down, which can take seconds for a fork bomb's thousands of
    processes; a zombie is out of its cgroups too): its parent answers for
    it. An ancestor that ends during the walk has handed its children to
    another parent: the walk starts again."""
    for _ in range(5):
        p = pid
        while p > 1:
            try:
                stat = pathlib.Path(f"/proc/{p}/stat").read_text()
            except OSError:
                if p == pid:
                    return GONE
                break
            try:
                env = pathlib.Path(f"/proc/{p}/environ").read_bytes().split(b"\0")
            except OSError:
                env = []  # ending: no memory, no environment
            found = dict(v.split(b"=", 1) for v in env if b"=" in v)
            if b"HUTCH_TEST_SESSION" in found:
                return (found[b"HUTCH_TEST_SESSION"] + b"/" +
                        found.get(b"PYTEST_XDIST_WORKER", b"")).decode()
            p = int(stat.rsplit(")", 1)[1].split()[1])
        else:
            return None
    return None


def slot_lockers():
    """{(st_dev, st_ino): {pid}} of the flocks held on directories: a
    sandbox's memory cgroup is locked by the hutch process that claimed its
    slot (src/lib/slot.c) for the sandbox's life."""
    held = {}
    for line in open("/proc/locks"):
        f = line.split()
        if len(f) < 6 or f[1] != "FLOCK" or f[4] == "-1":
            continue
        major, minor, ino = f[5].split(":")
        dev = os.makedev(int(major, 16), int(minor, 16))
        held.setdefault((dev, int(ino)), set()).add(int(f[4]))
    return held


def foreign(pids):
    """Whether anything of pids belongs to another worker's or another
    run's test (which is theirs to check). A thing no live process accounts
    for is this one's to answer for: a leak found by the wrong worker still
    fails the run."""
    return any(r not in (None, GONE, ME) for r in map(runner_of, pids))


def subdirs(d):
    """The directories in d, none if d itself has gone meanwhile."""
    try:
        return [p for p in d.iterdir() if p.is_dir()]
    except OSError:
        return []


def sandbox_cgroup_owners():
    """{cgroup directory name ("hutch/<slot>"): pids that account for it:
    the processes in it and the holder of its slot's lock}."""
    owners, held = {}, slot_lockers()
    for root in cgroup_roots():
        for p in subdirs(root / "hutch"):
            pids = procs_under(p)
            try:
                st = p.stat()
                pids |= held.get((st.st_dev, st.st_ino), set())
            except OSError:
                pass
            owners.setdefault(p.name, set()).update(pids)
    return owners


def leftovers():
    """What hutch could leave on the host: sandbox cgroups, mounts of its
    storage, processes in its id range, staged files. What a live process of
    another worker or another run accounts for is left out: that test is
    still running, and checks it after."""
    found = []
    owners = sandbox_cgroup_owners()
    for root in cgroup_roots():
        found += [f"cgroup {p}" for p in subdirs(root / "hutch")
                  if not foreign(owners.get(p.name, ()))]
    for line in open("/proc/self/mountinfo"):
        if "/run/hutch" in line.split()[4]:
            found.append(f"mount {line.split()[4]}")
    for status in pathlib.Path("/proc").glob("[0-9]*/status"):
        try:
            uid = int(next(l for l in status.read_text().splitlines() if l.startswith("Uid:")).split()[1])
        except (OSError, StopIteration, ValueError):
            continue
        pid = int(status.parent.name)
        if uid < UID_BASE or runner_of(pid) is GONE:
            continue
        # Still there after the walk: one reaped meanwhile left no trace.
        if not foreign({pid} | owners.get(slot_of(pid), set())) and runner_of(pid) is not GONE:
            found.append(f"process {pid} uid {uid}")
    staging = pathlib.Path("/run/hutch/mnt")
    if staging.is_dir() and any(staging.iterdir()):
        found.append("files in /run/hutch/mnt")
    return found


def slot_of(pid):
    """The sandbox slot ("hutch/<slot>" in any hierarchy) a process is in."""
    try:
        for line in pathlib.Path(f"/proc/{pid}/cgroup").read_text().splitlines():
            path = line.split(":", 2)[2].split("/")
            if len(path) > 2 and path[1] == "hutch":
                return path[2]
    except OSError:
        pass
    return None


@pytest.fixture(autouse=True)
def no_leftovers():
    before = set(leftovers())
    yield
    deadline = time.monotonic() + 10
    while True:
        new = set(leftovers()) - before
        if not new or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert not new, f"left behind on the host: {sorted(new)}"
