"""An idle sandbox holds as little as it can: the agent's spare process
(started ahead of the next exec) ends after the sandbox has been idle a few
seconds, with its exec leaf cgroup, and the next exec still runs and brings
a spare back (src/agent/spare.c)."""
import json
import os
import pathlib
import time

import pytest

from conftest import serve_each_build
from serveapi import output, wait_for

SPARE_IDLE_S = 30


@pytest.fixture(scope="module", params=["build", "asan"])
def server(request, tmp_path_factory):
    yield from serve_each_build(request, tmp_path_factory)


def agent_of(server, sid):
    """The host pid of the sandbox's agent: the server's child (cloned by
    one of its threads) whose root holds the sandbox's hostname."""
    tasks = pathlib.Path(f"/proc/{server.proc.pid}/task").iterdir()
    for child in (c for t in tasks for c in (t / "children").read_text().split()):
        try:
            if pathlib.Path(f"/proc/{child}/root/etc/hostname").read_text().strip() == sid:
                return int(child)
        except OSError:
            continue
    raise AssertionError(f"no agent for {sid}")


def children(pid):
    return pathlib.Path(f"/proc/{pid}/task/{pid}/children").read_text().split()


def leaves(pid):
    """The exec leaves (e<N>) in the sandbox's memory cgroup."""
    for line in pathlib.Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        _, ctls, path = line.split(":", 2)
        if "memory" in ctls.split(",") or (ctls == "" and path.startswith("/hutch/")):
            root = "/sys/fs/cgroup/memory" if ctls else "/sys/fs/cgroup"
            if not ctls:  # v2: the agent is in its own leaf beside the execs'
                path = path.rsplit("/", 1)[0]
            return sorted(d.name for d in pathlib.Path(root + path).iterdir()
                          if d.is_dir() and d.name.startswith("e"))
    raise AssertionError("no memory cgroup")


def test_spare_ends_when_idle_and_the_next_exec_runs(server, tenant):
    sid = tenant.create()["id"]
    agent = agent_of(server, sid)
    assert output(tenant.exec(sid, {"cmd": ["echo", "one"]})) == b"one\n"
    wait_for(lambda: len(children(agent)) == 1)  # the spare, for the next exec
    assert len(leaves(agent)) == 1
    # It goes once the sandbox has been idle its while (AGENT_IDLE_MS), not
    # before: seen from a moment after it came.
    seen = time.monotonic()
    wait_for(lambda: children(agent) == [] and leaves(agent) == [], SPARE_IDLE_S + 30)
    assert time.monotonic() - seen > SPARE_IDLE_S - 5
    assert output(tenant.exec(sid, {"cmd": ["echo", "two"]})) == b"two\n"
    wait_for(lambda: len(children(agent)) == 1)  # a spare again after a job
    assert output(tenant.exec(sid, {"cmd": ["id", "-u"]})) == b"1000\n"


def test_first_spare_comes_without_an_exec(server, tenant):
    """A server's sandbox gets its first spare a moment after its start
    (SPARE_FIRST_MS), whether or not an exec has come: its agent wakes up
    for it, and an exec then takes it."""
    sid = tenant.create()["id"]
    agent = agent_of(server, sid)
    wait_for(lambda: len(children(agent)) == 1)
    spare = children(agent)
    lines = tenant.exec(sid, {"cmd": ["sh", "-c", "echo $PPID"]})
    assert next(l for l in lines if l["type"] == "start")["pid"] == 2
    assert output(lines) == b"1\n"
    wait_for(lambda: len(children(agent)) == 1 and children(agent) != spare)


def status(pid):
    return dict(line.split(":", 1) for line in
                pathlib.Path(f"/proc/{pid}/status").read_text().splitlines())


def test_spare_holds_nothing_of_the_agents(server, tenant):
    """A server's sandbox spawns its spare on cgroup v1 (the agent's binary
    again, src/agent/spare.c; on v2 it is forked into its leaf), and the
    spare, before any exec takes it, is set up as an exec is: the sandbox
    user's ids, no capability (bounding set included), no_new_privs, the
    workload's filter on the sandbox's, its own exec leaf and cgroup
    namespace, not dumpable (its /proc files are the sandbox root's, not
    its uid's), and no fd but stdio and its socket. The next exec is that
    process."""
    sid = tenant.create()["id"]
    agent = agent_of(server, sid)
    tenant.exec(sid, {"cmd": ["true"]})
    wait_for(lambda: len(children(agent)) == 1)
    spare = int(children(agent)[0])
    # Its setup is done: the workload's filter is its last step.
    wait_for(lambda: status(spare)["Seccomp_filters"].strip() == "2")
    st = status(spare)
    argv = pathlib.Path(f"/proc/{spare}/cmdline").read_bytes().split(b"\0")
    assert (argv[1] == b"--spare") == cgroup_v1(agent), argv
    assert pathlib.Path(f"/proc/{spare}/comm").read_text() == "hutch-agent\n"
    uid = st["Uid"].split()
    assert len(set(uid)) == 1 and set(st["Gid"].split()) == {uid[0]}, st
    assert int(uid[0]) == int(status(agent)["Uid"].split()[0]) + 1000, (uid, status(agent))
    assert st["Groups"].strip() == ""
    for cap in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
        assert int(st[cap], 16) == 0, (cap, st[cap])
    assert st["Seccomp"].strip() == "2" and st["NoNewPrivs"].strip() == "1", st
    # A process's /proc files (not its world-readable directory) are its
    # own uid's only while it is dumpable.
    assert os.stat(f"/proc/{spare}/status").st_uid == int(status(agent)["Uid"].split()[0])
    assert sorted(int(fd) for fd in os.listdir(f"/proc/{spare}/fd")) == [0, 1, 2, 3]
    assert os.readlink(f"/proc/{spare}/ns/cgroup") != os.readlink(f"/proc/{agent}/ns/cgroup")
    for line in pathlib.Path(f"/proc/{spare}/cgroup").read_text().splitlines():
        _, ctls, path = line.split(":", 2)
        if "memory" in ctls.split(",") or (ctls == "" and path.startswith("/hutch/")):
            assert path.rsplit("/", 1)[-1] in leaves(agent), line
    lines = tenant.exec(sid, {"cmd": ["id", "-u"]})
    started = next(l for l in lines if l["type"] == "start")["pid"]
    assert started == int(st["NSpid"].split()[-1]), (started, st["NSpid"])
    assert output(lines) == b"1000\n"


def cgroup_v1(pid):
    return any(line.split(":", 2)[1] for line in
               pathlib.Path(f"/proc/{pid}/cgroup").read_text().splitlines())


def verdict(lines):
    return next(l for l in lines if l["type"] == "exit")


def leaf_cpu_ms(agent, leaf):
    """The CPU time one of the sandbox's exec leaves has counted, read
    from the host (cpuacct on v1, cpu.stat on v2)."""
    for line in pathlib.Path(f"/proc/{agent}/cgroup").read_text().splitlines():
        _, ctls, path = line.split(":", 2)
        if "cpuacct" in ctls.split(","):
            d = pathlib.Path(f"/sys/fs/cgroup/{ctls}{path}") / leaf
            return int((d / "cpuacct.usage").read_text()) / 1e6
        if ctls == "" and path.startswith("/hutch/"):
            # v2: the agent is in its own leaf beside the execs'
            d = pathlib.Path("/sys/fs/cgroup" + path).parent / leaf
            usec = next(l for l in (d / "cpu.stat").read_text().splitlines()
                        if l.startswith("usage_usec "))
            return int(usec.split()[1]) / 1e3
    raise AssertionError("no cpu cgroup")


def test_exec_leaf_is_kept_and_its_counts_start_again(server, tenant):
    """An ended exec's leaf is the next exec's (src/agent/leaf.c) where the
    kernel can reset a peak (v1), and nothing of one exec's counts shows in
    the next's verdict: CPU time, memory peak, OOM kills. A leaf still
    holding an exec's file (charged to it) is not kept."""
    sid = tenant.create(memory_mb=96)["id"]
    agent = agent_of(server, sid)
    v1 = cgroup_v1(agent)
    # The first python3 in a fresh sandbox looks up its modules in the
    # sandbox's own overlay, and the new dentries and inodes are charged to
    # that exec's leaf: 0.8 to 1.5 MiB with the per-CPU stocks, on either
    # side of what a kept leaf may hold (KEEP_CHARGED). Paid here, before the
    # leaf whose reuse is checked.
    assert verdict(tenant.exec(sid, {"cmd": ["python3", "-c", "pass"]}))["status"] == "ok"
    assert verdict(tenant.exec(sid, {"cmd": ["true"]}))["status"] == "ok"
    wait_for(lambda: len(children(agent)) == 1)
    first = leaves(agent)
    burn = verdict(tenant.exec(sid, {"cmd": ["python3", "-c",
                                             "import time\nt=time.process_time()\n"
                                             "while time.process_time()-t<0.3: pass"]}))
    assert burn["cpu_ms"] >= 250, burn
    big = verdict(tenant.exec(sid, {"cmd": ["python3", "-c", "x=bytearray(40<<20)"]}))
    assert big["peak_memory_kb"] >= 40 << 10, big
    oom = verdict(tenant.exec(sid, {"cmd": ["python3", "-c", "x=bytearray(400<<20)"]}))
    assert oom["status"] == "oom", oom
    after = verdict(tenant.exec(sid, {"cmd": ["true"]}))
    assert after["status"] == "ok", after
    # Carried over, the burn's CPU time would all be in true's: half of it is
    # the line between the two (true costs a few ms on the host, up to a few
    # hundred on the cgroup v2 guest's emulated CPU, where the burn's python3
    # costs a second or more).
    assert after["cpu_ms"] < burn["cpu_ms"] / 2 and after["peak_memory_kb"] < 4096, (burn, after)
    wait_for(lambda: len(children(agent)) == 1)
    assert len(leaves(agent)) == 1
    if v1:
        assert leaves(agent) == first
    # 8 MiB of /tmp charged to the leaf that wrote it: that leaf goes.
    tenant.exec(sid, {"cmd": ["sh", "-c", "head -c 8000000 /dev/zero > /tmp/f"]})
    wait_for(lambda: len(children(agent)) == 1)
    assert len(leaves(agent)) == 1 and leaves(agent) != first
    assert verdict(tenant.exec(sid, {"cmd": ["true"]}))["peak_memory_kb"] < 4096


def test_a_leftover_process_keeps_no_leaf_for_the_next_exec(server, tenant):
    """A process an exec left running (a daemon) keeps every leaf from
    being reused while it lives (src/agent/leaf.c): the next exec's verdict
    counts none of the daemon's CPU time, and an exec after the daemon ends
    gets a kept leaf again."""
    sid = tenant.create()["id"]
    agent = agent_of(server, sid)
    tenant.exec(sid, {"cmd": ["true"]})
    wait_for(lambda: len(children(agent)) == 1)
    tenant.exec(sid, {"cmd": ["sh", "-c",
                              "setsid sh -c 'while :; do :; done' >/dev/null 2>&1 &"]})
    # Until the daemon's leaf has counted two seconds: were its CPU time in
    # an exec's verdict (a leaf's count is all its processes'), the verdict
    # would say at least that, so 1.5 s is the line (true's own costs a few
    # ms on the host, up to a few hundred on the cgroup v2 guest, and once
    # 730 under the sanitizers on a host busy with the whole suite).
    wait_for(lambda: max(leaf_cpu_ms(agent, l) for l in leaves(agent)) >= 2000, 30)
    for _ in range(3):
        v = verdict(tenant.exec(sid, {"cmd": ["true"]}))
        assert v["status"] == "ok" and v["cpu_ms"] < 1500, v
    wait_for(lambda: len(leaves(agent)) == 1)  # the daemon's: none kept beside it
    tenant.exec(sid, {"cmd": ["pkill", "-f", "while"]})
    wait_for(lambda: len(children(agent)) == 1)
    v = verdict(tenant.exec(sid, {"cmd": ["true"]}))
    assert v["status"] == "ok" and v["cpu_ms"] < 1500, v


def test_kept_leaf_after_kills_and_execs_at_once(server, tenant):
    """A leaf whose exec was killed (out of memory, twice in a row; a
    timeout, which freezes and thaws the leaf on v1) serves the next exec
    with nothing carried over; after two execs at once, one leaf is left
    beside none kept twice."""
    sid = tenant.create(memory_mb=96)["id"]
    agent = agent_of(server, sid)
    for _ in range(2):
        v = verdict(tenant.exec(sid, {"cmd": ["python3", "-c", "x=bytearray(400<<20)"]}))
        assert v["status"] == "oom", v
    v = verdict(tenant.exec(sid, {"cmd": ["sleep", "30"], "timeout_s": 0.3}))
    assert v["status"] == "timeout", v
    v = verdict(tenant.exec(sid, {"cmd": ["true"]}))
    assert v["status"] == "ok" and v["cpu_ms"] < 100 and v["peak_memory_kb"] < 4096, v
    streams = [tenant.exec_stream(sid, {"shell": f"sleep 0.3; echo {i}"}) for i in range(2)]
    for i, (conn, r) in enumerate(streams):
        lines = [json.loads(l) for l in r.read().splitlines()]
        conn.close()
        assert output(lines) == f"{i}\n".encode() and lines[-1]["status"] == "ok"
    wait_for(lambda: len(children(agent)) == 1)
    assert len(leaves(agent)) == 1
    assert verdict(tenant.exec(sid, {"cmd": ["true"]}))["status"] == "ok"


def test_an_exec_the_spare_cannot_run_takes_its_leaf(server, tenant):
    """An exec as root or on a pty is not the spare's to run (it is the
    sandbox user's, on pipes): the spare goes first and the exec runs the
    slow way, in the leaf the spare held on v1; a new spare and one leaf
    are back after it."""
    sid = tenant.create()["id"]
    agent = agent_of(server, sid)
    wait_for(lambda: len(children(agent)) == 1)  # the first spare
    spare, first = children(agent), leaves(agent)
    cases = [({"cmd": ["id", "-u"], "user": "root"}, b"0"),
             ({"cmd": ["sh", "-c", "test -t 1 && echo tty"], "pty": {"rows": 24, "cols": 80}},
              b"tty")]
    for body, out in cases:
        lines = tenant.exec(sid, body)
        assert verdict(lines)["status"] == "ok", lines
        assert output(lines).strip() == out, lines
        wait_for(lambda: len(children(agent)) == 1 and children(agent) != spare)
        spare = children(agent)
        assert len(leaves(agent)) == 1
        if cgroup_v1(agent):
            assert leaves(agent) == first


def test_a_sandbox_deleted_at_once(server, tenant):
    """A sandbox deleted as soon as it is made, most often while its agent
    still waits to make its first spare (SPARE_FIRST_MS), goes with its
    processes and cgroups (the autouse check looks for any left on the
    host), and the server serves the next."""
    for _ in range(5):
        sid = tenant.create()["id"]
        assert tenant.delete(f"/v1/sandboxes/{sid}").status == 204
    sid = tenant.create()["id"]
    assert output(tenant.exec(sid, {"cmd": ["echo", "next"]})) == b"next\n"
