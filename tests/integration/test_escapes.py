"""Escape-attempt monitoring (docs/security.md, "Escape attempts"), from the
attacker's side: a workload that probes the walls gets the same EPERM as
before, and the operator sees who probed what — in the exec's verdict, the
sandbox's info, /metrics and the audit log, rate-limited so that a flood
writes one line a minute. The listener that could let a refused call
through is out of every workload's reach."""
import json
import signal
import time

import pytest

from conftest import BUILD, build_binary, no_i386_abi, require, serve_tier_args
from serveapi import Server, wait_for

# A refused call from Python: mount(2) on x86_64, n times, each EPERM.
MOUNTS = ("import ctypes, ctypes.util, sys\n"
          "libc = ctypes.CDLL(None, use_errno=True)\n"
          "bad = 0\n"
          "for _ in range({n}):\n"
          "    if libc.syscall(165, b'none', b'/mnt', b'tmpfs', 0, 0) != -1 or "
          "ctypes.get_errno() != 1:\n"
          "        bad += 1\n"
          "sys.exit(bad and 3)\n")
# unshare(CLONE_NEWUSER) and keyctl: two more syscalls, one each.
OTHERS = ("import ctypes\nlibc = ctypes.CDLL(None)\n"
          "libc.syscall(272, 0x10000000)\nlibc.syscall(250, 0, 0, 0, 0, 0)\n")


def mounts(n):
    return ["python3", "-c", MOUNTS.format(n=n)]


def counted(tier, n):
    """What the verdict says of n refused calls: their count, or in the
    gvisor tier null (gVisor has no seccomp listener to count with)."""
    return n if tier == "ns" else None


@pytest.mark.parametrize("abi", ["x86_64", "i386-int80"])
def test_every_refusal_is_counted_once(trun, tier, probe, abi):
    """The probe makes every refused call of the profile; each is counted,
    except unshare of a cgroup namespace alone, which the workload filter
    answers before the sandbox's (docs/seccomp.md)."""
    binary = probe[0] if abi == "x86_64" else probe[2]
    require(binary.exists(), f"the {abi} probe was not built")
    r = trun(["--bind-ro", f"{binary}:/probe", "--", "/probe", "all"])
    if r.code == 77 and tier == "gvisor":
        # gVisor runs 64-bit programs only (test_seccomp_sandbox checks it)
        return
    if r.code == 77:
        if no_i386_abi(probe):
            pytest.skip("this kernel has no i386 ABI at all: no i386 call to count")
        require(False, "int $0x80 reaches no i386 ABI on this kernel")
    assert r.code == 0, r
    got = dict(line.split(" ", 1) for line in r.out.splitlines())
    refused = [k for k, v in got.items() if v == "EPERM"]
    assert "mount" in refused and "clone-newuser" in refused and "unshare-newcgroup" in refused
    assert r.verdict["escape_attempts"] == counted(tier, len(refused) - 1), (r.verdict, refused)


def test_ordinary_work_counts_nothing(trun, tier):
    """Shells, Python with threads and subprocesses, compilers: no refused
    call, so a well-behaved workload shows 0 (not a count of noise). (ls
    lists names only: gVisor 2022's statx refuses what ls -l and ls DIR
    ask.)"""
    r = trun(["--", "sh", "-c",
              "cd / && ls -a >/dev/null && id >/dev/null && python3 -c 'import threading, "
              "subprocess, ssl, socket; t = threading.Thread(target=print); t.start(); "
              "t.join(); subprocess.run([\"true\"])' && cc --version >/dev/null"])
    assert r.code == 0, r
    assert r.verdict["escape_attempts"] == counted(tier, 0), r.verdict


def test_a_flood_is_answered_and_counted(trun, tier):
    """Twenty thousand refused calls: each answered EPERM at once (the
    workload is not stalled), all counted, and nothing else breaks."""
    r = trun(["--", *mounts(20000)], timeout=120)
    assert r.code == 0, r
    assert r.verdict["escape_attempts"] == counted(tier, 20000)


def test_children_count_for_their_exec(trun, tier):
    """A refused call made by a grandchild counts for the exec it came from."""
    r = trun(["--", "sh", "-c", f"(python3 -c \"{OTHERS}\") & wait"])
    assert r.code == 0, r
    assert r.verdict["escape_attempts"] == counted(tier, 2), r.verdict


@pytest.mark.parametrize("user", ["user", "root"])
def test_no_workload_holds_the_listener(trun, tier, user):
    """A workload holding the listener could answer its own refused calls
    with CONTINUE and run them. No process of the sandbox but the agent has
    it: not the workload (as the user or the sandbox's root), and the
    agent's fds are not readable. (gVisor gives no listener at all, and
    lists the agent's fds: none of them is one.)"""
    script = ("import os\n"
              "mine = []\n"
              "for f in os.listdir('/proc/self/fd'):\n"
              "    try:\n        mine.append(os.readlink(f'/proc/self/fd/{f}'))\n"
              "    except OSError:\n        pass  # the listing's own fd, closed\n"
              "print('notify' if any('seccomp' in m for m in mine) else 'none')\n"
              "try:\n    fds = [os.readlink(f'/proc/1/fd/{f}') for f in os.listdir('/proc/1/fd')]\n"
              "    print('agent-open', 'notify' if any('seccomp' in t for t in fds) else 'none')\n"
              "except OSError:\n    print('agent-closed')\n")
    args = ["--user", "root"] if user == "root" else []
    r = trun([*args, "--", "python3", "-c", script])
    assert r.code == 0, r
    want = ["none", "agent-closed"] if tier == "ns" else ["none", "agent-open", "none"]
    assert r.out.split() == want, r.out


# ---- the server: info, metrics, audit, restarts ----

@pytest.fixture(params=["build", "asan"])
def server(request, tmp_path):
    s = Server(build_binary(request.param, "hutch-serve"), tmp_path / "state").start()
    yield s
    assert s.stop() == 0, s.log_text()
    assert "Sanitizer" not in s.log_text() and "runtime error" not in s.log_text()


def audit(server, sid):
    return [json.loads(l) for l in (server.state_dir / "audit.jsonl").read_text().splitlines()
            if json.loads(l).get("action") == "sandbox.escape_attempt"
            and json.loads(l).get("sandbox") == sid]


def run_in(api, sid, argv):
    lines = api.exec(sid, {"cmd": argv})
    return lines[-1]


def escapes_of(api, sid):
    j = api.get(f"/v1/sandboxes/{sid}").json
    return j["escape_attempts"], j["escape_syscalls"]


def test_server_shows_counts_and_audits_once_a_minute(server):
    api = server.api()
    tenant = server.api(api.post("/v1/keys", {"tenant": "prober"}).json["key"])
    sid = tenant.create()["id"]
    other = tenant.create()["id"]
    assert escapes_of(tenant, sid) == (0, {})
    end = run_in(tenant, sid, mounts(5))
    assert end["status"] == "ok" and end["escape_attempts"] == 5, end
    # the first attempt of a syscall is audited at once, the rest of the
    # minute's later
    wait_for(lambda: escapes_of(tenant, sid) == (5, {"mount": 5}))
    wait_for(lambda: len(audit(server, sid)) == 1)
    line = audit(server, sid)[0]
    assert line["tenant"] == "prober" and line["syscall"] == "mount"
    assert line["count"] == 1 and line["total"] == 1
    # more within the minute: counted, but no second line for mount yet
    end = run_in(tenant, sid, ["sh", "-c", f"python3 -c \"{OTHERS}\"; "
                               f"python3 -c \"$0\"", MOUNTS.format(n=7)])
    assert end["escape_attempts"] == 9, end
    wait_for(lambda: escapes_of(tenant, sid)[0] == 14)
    assert escapes_of(tenant, sid)[1] == {"mount": 12, "unshare": 1, "keyctl": 1}
    wait_for(lambda: len(audit(server, sid)) == 3)  # unshare and keyctl: new syscalls
    assert sorted(l["syscall"] for l in audit(server, sid)) == ["keyctl", "mount", "unshare"]
    # the other sandbox saw nothing
    assert escapes_of(tenant, other) == (0, {})
    # /metrics: per sandbox and syscall, for the operator only
    text = api.get("/metrics").raw.decode()
    assert f'hutch_escape_attempts_total{{sandbox="{sid}",syscall="mount"}} 12' in text
    # (the other sandbox has series of its own, its memory and CPU, but no
    # escape attempts)
    assert f'hutch_escape_attempts_total{{sandbox="{other}"' not in text
    assert "hutch_escape_attempts_seen_total 14" in text
    assert tenant.get("/metrics").status == 403
    # the sandbox ends: what no line told yet is written then
    assert tenant.delete(f"/v1/sandboxes/{sid}").status == 204
    def mount_lines():
        return [(l["count"], l["total"]) for l in audit(server, sid) if l["syscall"] == "mount"]
    wait_for(lambda: len(mount_lines()) == 2)
    assert mount_lines() == [(1, 1), (11, 12)]
    assert f'sandbox="{sid}"' not in api.get("/metrics").raw.decode()


def test_server_gvisor_refusals_are_refused_uncounted(tmp_path):
    """A server's gvisor sandbox: the workload's refused calls get the same
    EPERM, and since gVisor gives the agent no listener, nobody claims a
    count: the verdict and the sandbox's info say null (unknown, not 0),
    no audit line and no per-sandbox series pretend otherwise."""
    binary = build_binary("build", "hutch-serve")
    s = Server(binary, tmp_path / "state", *serve_tier_args(binary, "gvisor")).start()
    try:
        api = s.api()
        sid = api.create()["id"]
        end = run_in(api, sid, mounts(5))
        assert end["status"] == "ok" and end["escape_attempts"] is None, end
        info = api.get(f"/v1/sandboxes/{sid}").json
        assert info["isolation"] == "gvisor"
        assert info["escape_attempts"] is None and not info["escape_syscalls"], info
        assert f'hutch_escape_attempts_total{{sandbox="{sid}"' not in api.get("/metrics").raw.decode()
        assert api.delete(f"/v1/sandboxes/{sid}").status == 204
    finally:
        assert s.stop() == 0, s.log_text()
    assert audit(s, sid) == []


def test_public_metrics_show_no_sandbox(tmp_path):
    s = Server(BUILD / "hutch-serve", tmp_path / "state", "--metrics-public").start()
    try:
        sid = s.api().create()["id"]
        run_in(s.api(), sid, mounts(1))
        wait_for(lambda: escapes_of(s.api(), sid)[0] == 1)
        anonymous = s.api(None).get("/metrics")
        assert anonymous.status == 200
        assert "hutch_escape_attempts_total{" not in anonymous.raw.decode()
        # nor any other series of a sandbox or a tenant (metrics_sandboxes.c)
        assert f'sandbox="{sid}"' not in anonymous.raw.decode()
        assert 'tenant="' not in anonymous.raw.decode()
        assert f'sandbox="{sid}"' in s.api().get("/metrics").raw.decode()
    finally:
        assert s.stop() == 0


def test_counts_survive_a_restart(tmp_path):
    """The agent keeps the counts: a server that takes the sandbox over
    hears them in the agent's HELLO. The audit log tells each attempt once:
    the stopping server writes what it had not told, the next one does not
    tell it again."""
    s = Server(BUILD / "hutch-serve", tmp_path / "state").start()
    api = s.api()
    sid = api.create(timeout_s=120)["id"]
    run_in(api, sid, mounts(3))
    wait_for(lambda: escapes_of(api, sid)[0] == 3)
    assert s.stop(signal.SIGTERM) == 0
    s.start()
    try:
        assert escapes_of(s.api(), sid) == (3, {"mount": 3})
        run_in(s.api(), sid, mounts(2))
        wait_for(lambda: escapes_of(s.api(), sid)[0] == 5)
    finally:
        assert s.stop() == 0
    lines = [(l["count"], l["total"]) for l in audit(s, sid)]
    # the agent may send 4 and 5, or 5 alone (its reports are a second apart)
    assert lines[:2] == [(1, 1), (2, 3)], lines
    assert lines[2:] in ([(1, 4), (1, 5)], [(2, 5)]), lines
