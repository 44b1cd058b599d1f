"""The security floor (docs/security.md), from the attacker's side: another
local user reading hutch's state, a copy of hutch.db opening sandboxes,
volumes mounted over the kernel's files. Each test makes the attack and
sees it fail."""
import http.client
import json
import os
import pathlib
import shutil
import signal
import socket
import sqlite3
import subprocess
import tempfile

import pytest

from conftest import BUILD, require
from serveapi import Server, error_of, free_port, output, wait_for

NOBODY = 65534
SECRET = "floor-secret-value-4c1d"


def as_nobody(*argv):
    """argv run as uid and gid 65534, as any other local user would."""
    def drop():
        os.setgroups([])
        os.setgid(NOBODY)
        os.setuid(NOBODY)
    return subprocess.run(argv, capture_output=True, preexec_fn=drop, timeout=30)


def state_bytes(state):
    """Everything SQLite keeps on disk: the database, its log and index."""
    return b"".join(p.read_bytes() for p in state.glob("hutch.db*"))


def e2b_create(s, key):
    r = s.api(None).post("/sandboxes", {"templateID": "base"}, headers={"X-API-Key": key})
    assert r.status == 201, r
    return r.json


def envd_ok(s, sid, token):
    """Whether envd takes token as the sandbox's (a Stat of /)."""
    r = s.api(None).post("/filesystem.Filesystem/Stat", json.dumps({"path": "/"}),
                         headers={"E2b-Sandbox-Id": sid, "E2b-Sandbox-Port": "49983",
                                  "X-Access-Token": token, "Content-Type": "application/json"})
    assert r.status in (200, 401), r
    return r.status == 200


# ---- 3. state and secrets at rest ----

@pytest.fixture
def open_dir():
    """A directory every user may pass through (pytest's own are 0700)."""
    d = pathlib.Path(tempfile.mkdtemp(prefix="hutch-floor-", dir=tempfile.gettempdir()))
    d.chmod(0o755)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def test_loose_state_dir_is_locked_down(open_dir):
    """A state dir made 0755 with a 0644 database (an operator's mkdir, an
    older hutch, a restored backup): once the server has started, no other
    user can read the database, its log or the keys."""
    state = open_dir / "state"
    state.mkdir()
    state.chmod(0o755)
    (state / "hutch.db").touch(mode=0o644)
    (state / "admin.key").write_text("hk_" + "0" * 40 + "\n")
    (state / "admin.key").chmod(0o644)
    assert as_nobody("cat", str(state / "admin.key")).returncode == 0  # readable, before
    s = Server(BUILD / "hutch-serve", state).start()
    try:
        s.api().create()  # the log and index exist, written
        assert state.stat().st_mode & 0o777 == 0o700
        for name in ("hutch.db", "hutch.db-wal", "hutch.db-shm", "admin.key", "state.key",
                     "audit.jsonl"):
            assert (state / name).stat().st_mode & 0o777 == 0o600, name
        for name in ("hutch.db", "hutch.db-wal", "admin.key", "state.key"):
            r = as_nobody("cat", str(state / name))
            assert r.returncode != 0 and b"Permission denied" in r.stderr, name
        assert as_nobody("ls", str(state)).returncode != 0
    finally:
        assert s.stop() == 0


@pytest.mark.parametrize("how", ["other-owner", "group-writable", "world-writable"])
def test_untrusted_state_dir_is_refused(tmp_path, how):
    """A state dir another user owns, or may write, could hold a key or a
    database of theirs: the server refuses to start, in one line, with
    exit 78, and changes nothing there."""
    state = tmp_path / "state"
    state.mkdir()
    state.chmod({"other-owner": 0o700, "group-writable": 0o770, "world-writable": 0o1777}[how])
    if how == "other-owner":
        os.chown(state, NOBODY, NOBODY)
    p = subprocess.run([str(BUILD / "hutch-serve"), "--listen", f"127.0.0.1:{free_port()}",
                        "--state-dir", str(state), "--pool", "host=0"],
                       capture_output=True, timeout=30)
    err = p.stderr.decode()
    assert p.returncode == 78, err
    assert err.count("\n") == 1 and "refusing to keep keys there" in err, err
    assert ("belongs to uid 65534" if how == "other-owner" else "writable by") in err
    assert list(state.iterdir()) == []


def test_database_holds_no_token_or_secret(tmp_path):
    """A copy of hutch.db (a backup, a file left readable) opens no sandbox
    and tells no secret: its tokens and secrets are sealed under state.key.
    The server, with its key, still has them after a restart."""
    state = tmp_path / "state"
    s = Server(BUILD / "hutch-serve", state).start()
    try:
        key = s.admin_key
        e = e2b_create(s, key)
        sid, token, traffic = e["sandboxID"], e["envdAccessToken"], e["trafficAccessToken"]
        n = s.api().create(network={"allow": ["example.com"]},
                           secrets=[{"host": "example.com", "header": "X-Key", "value": SECRET}])
        assert envd_ok(s, sid, token)
        disk = state_bytes(state)
        for needle in (token, traffic, n["traffic_token"], SECRET):
            assert needle.encode() not in disk, needle
        s.stop(signal.SIGTERM)
        disk = state_bytes(state)
        for needle in (token, traffic, n["traffic_token"], SECRET):
            assert needle.encode() not in disk, needle
        s.start()
        got = s.api(None).get(f"/sandboxes/{sid}", headers={"X-API-Key": key}).json
        assert got["envdAccessToken"] == token
        assert s.api().get(f"/v1/sandboxes/{n['id']}").json["traffic_token"] == n["traffic_token"]
        assert envd_ok(s, sid, token) and not envd_ok(s, sid, "0" * 40)
    finally:
        assert s.stop() == 0


def test_older_database_is_sealed_on_start(tmp_path):
    """Rows an older hutch wrote kept the tokens in the clear: the next
    start seals them and rewrites the file, and the tokens the clients
    hold go on working."""
    state = tmp_path / "state"
    s = Server(BUILD / "hutch-serve", state).start()
    try:
        sid = e2b_create(s, s.admin_key)["sandboxID"]
        s.stop(signal.SIGTERM)
        token, traffic = os.urandom(20).hex(), os.urandom(20).hex()
        db = sqlite3.connect(state / "hutch.db")
        spec = json.loads(db.execute("SELECT spec FROM sandboxes WHERE id = ?", (sid,))
                          .fetchone()[0])
        assert "token" not in spec and "sealed" in spec
        del spec["sealed"]
        spec.update(token=token, traffic_token=traffic,
                    secrets=[{"host": "example.com", "header": "X-Key", "value": SECRET}])
        db.execute("UPDATE sandboxes SET spec = ? WHERE id = ?", (json.dumps(spec), sid))
        db.execute("PRAGMA user_version = 0")
        db.commit()
        db.close()
        s.start()
        assert envd_ok(s, sid, token)
        got = s.api(None).get(f"/sandboxes/{sid}", headers={"X-API-Key": s.admin_key}).json
        assert got["envdAccessToken"] == token
        disk = state_bytes(state)
        for needle in (token, traffic, SECRET):
            assert needle.encode() not in disk, needle
    finally:
        assert s.stop() == 0


@pytest.fixture(scope="module")
def vserver(tmp_path_factory):
    """A server with a volume "v" of the admin's."""
    s = Server(BUILD / "hutch-serve", tmp_path_factory.mktemp("floor") / "state").start()
    ok = s.api().post("/v1/volumes", {"name": "v", "size_mb": 16}).status == 201
    yield s if ok else None
    assert s.stop() == 0


@pytest.mark.parametrize("path,why", [
    ("/", "over the root"), ("/.", "over the root"), ("//./", "over the root"),
    ("/data/../etc", "'..'"), ("..", "relative"), ("data", "relative"), ("", "a path of"),
    ("/proc", "kernel's"), ("/proc/sys", "kernel's"), ("//sys/./fs", "kernel's"),
    ("/dev", "kernel's"), ("/dev/shm", "kernel's"), ("/x/" + "n" * 300, "longer than"),
])
def test_volume_mount_paths_are_judged_up_front(vserver, path, why):
    """A volume over the root, over /proc, /sys or /dev (hiding their
    masks, or a sandbox-owned filesystem where devices are expected), or
    at a path with '..' or none at all: a 400 that says why, no sandbox."""
    require(vserver, "volumes cannot be made here")
    api = vserver.api()
    r = api.post("/v1/sandboxes", {"volumes": [{"name": "v", "path": path}]})
    assert r.status == 400 and error_of(r) == "invalid_argument", r
    assert why in r.json["error"]["message"], r
    assert api.get("/v1/sandboxes").json["sandboxes"] == []


def test_volume_mount_path_is_normalised(vserver):
    require(vserver, "volumes cannot be made here")
    api = vserver.api()
    sb = api.create(volumes=[{"name": "v", "path": "//data/./x//"}])
    try:
        assert [v["path"] for v in sb["volumes"]] == ["/data/x"]
        lines = api.exec(sb["id"], {"shell": "mountpoint -q /data/x && echo mounted"})
        assert output(lines) == b"mounted\n", lines
    finally:
        api.delete(f"/v1/sandboxes/{sb['id']}")


# ---- 4. what leaks through the doors ----

# A service that keeps every byte it is sent in /tmp/seen (one connection at
# a time): "plain" answers 200 to anything, "101" switches any Upgrade and
# then echoes. Each connection is kept for at most 3 s.
RECORDER = r'''
import socket, sys, time
port, mode = int(sys.argv[1]), sys.argv[2]
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", port))
s.listen(16)
open("/tmp/ready", "w").close()
while True:
    c, _ = s.accept()
    c.settimeout(0.5)
    data, answered, end = b"", False, time.monotonic() + 3
    while time.monotonic() < end:
        try:
            chunk = c.recv(65536)
        except socket.timeout:
            chunk = None
        if chunk == b"":
            break
        if chunk:
            data += chunk
            if answered and mode == "101":
                c.sendall(chunk)
        if not answered and b"\r\n\r\n" in data:
            answered = True
            if mode == "101" and b"upgrade:" in data.lower():
                c.sendall(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\nConnection: Upgrade\r\n\r\n")
            else:
                c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
    with open("/tmp/seen", "ab") as f:
        f.write(data + b"\n=====\n")
    c.close()
'''


@pytest.fixture(scope="module")
def pserver(tmp_path_factory):
    s = Server(BUILD / "hutch-serve", tmp_path_factory.mktemp("floor") / "state").start()
    yield s
    assert s.stop() == 0


def recorder(s, mode, port=8000):
    """An E2B sandbox of the admin's, its ports private, running RECORDER
    on port."""
    r = s.api(None).post("/sandboxes", {"templateID": "base",
                                        "network": {"allowPublicTraffic": False}},
                         headers={"X-API-Key": s.admin_key})
    assert r.status == 201, r
    e = r.json
    sid, api = e["sandboxID"], s.api()
    assert api.request("PUT", f"/v1/sandboxes/{sid}/files?path=/tmp/rec.py", RECORDER).status == 200
    api.post(f"/v1/sandboxes/{sid}/exec", {"cmd": ["python3", "/tmp/rec.py", str(port), mode],
                                           "background": True})
    wait_for(lambda: api.get(f"/v1/sandboxes/{sid}/files?path=/tmp/ready").status == 200, 20)
    return e


def seen(s, sid):
    r = s.api().get(f"/v1/sandboxes/{sid}/files?path=/tmp/seen")
    return r.raw if r.status == 200 else b""


def raw_exchange(s, data, until=b"\r\n\r\n", timeout=10):
    """Send data on a new connection to the server; what comes back up to
    and with until (or the end), and the socket."""
    c = socket.create_connection(("127.0.0.1", s.port), timeout=timeout)
    c.sendall(data)
    got = b""
    while until not in got:
        chunk = c.recv(65536)
        if not chunk:
            break
        got += chunk
    return got, c


def test_ports_take_hutchs_credentials_off(pserver):
    """A request through a private port carries the API key, envd's access
    token and the traffic tokens in every header hutch reads: the service
    sees none of them, and the rest of the request as sent."""
    s = pserver
    e = recorder(s, "plain")
    sid, key = e["sandboxID"], s.admin_key
    creds = {"Authorization": f"Bearer {key}", "X-API-Key": key,
             "X-Access-Token": e["envdAccessToken"],
             "X-Hutch-Traffic-Token": e["trafficAccessToken"], "X-Other": "kept-value"}
    try:
        r = s.api(None).get(f"/v1/sandboxes/{sid}/ports/8000/by-path", headers=creds)
        assert r.status == 200 and r.raw == b"ok", r
        by_host = dict(creds, Host=f"8000-{sid}.localhost")
        del by_host["X-Hutch-Traffic-Token"]
        by_host["E2B-Traffic-Access-Token"] = e["trafficAccessToken"]
        r = s.api(None).get("/by-host", headers=by_host)
        assert r.status == 200 and r.raw == b"ok", r
        wait_for(lambda: seen(s, sid).count(b"=====") == 2, 15)
        got = seen(s, sid)
        assert b"GET /by-path " in got and b"GET /by-host " in got and b"kept-value" in got
        for secret in (key, e["envdAccessToken"], e["trafficAccessToken"]):
            assert secret.encode() not in got, got
        for name in (b"x-api-key", b"x-access-token", b"traffic-token", b"authorization"):
            assert name not in got.lower(), got
    finally:
        s.api().delete(f"/sandboxes/{sid}")


@pytest.mark.parametrize("mode", ["plain", "101"])
def test_upgrade_carries_no_pipelined_request(pserver, mode):
    """An Upgrade to a private port with a second request pipelined behind
    it: the service never sees the second request (nor its key), whether
    it refuses the upgrade or agrees to it; once it has answered 101, what
    the client sends goes through both ways."""
    s = pserver
    e = recorder(s, mode)
    sid, key = e["sandboxID"], s.admin_key
    first = (f"GET /ws HTTP/1.1\r\nHost: 8000-{sid}.localhost\r\nUpgrade: x\r\n"
             f"Connection: Upgrade\r\nAuthorization: Bearer {key}\r\n\r\n")
    second = "GET /second HTTP/1.1\r\nHost: x\r\nX-Smuggled: yes\r\n\r\n"
    try:
        got, c = raw_exchange(s, (first + second).encode())
        if mode == "101":
            assert got.startswith(b"HTTP/1.1 101 "), got
            c.sendall(b"after-the-switch")
            echoed = b""
            while b"after-the-switch" not in echoed:
                chunk = c.recv(65536)
                assert chunk, echoed
                echoed += chunk
        else:
            assert got.startswith(b"HTTP/1.1 200 "), got
        c.close()
        wait_for(lambda: b"=====" in seen(s, sid), 15)
        got = seen(s, sid)
        assert b"GET /ws " in got and b"/second" not in got and b"X-Smuggled" not in got, got
        assert key.encode() not in got
        assert (b"after-the-switch" in got) == (mode == "101")
    finally:
        s.api().delete(f"/sandboxes/{sid}")


def test_upgrade_refused_keeps_the_one_request(pserver):
    """A service that answers an Upgrade with something other than 101:
    what the client sends next is a second request, and it never arrives."""
    s = pserver
    e = recorder(s, "plain")
    sid, key = e["sandboxID"], s.admin_key
    try:
        got, c = raw_exchange(s, (f"GET /ws HTTP/1.1\r\nHost: 8000-{sid}.localhost\r\n"
                                  f"Upgrade: x\r\nConnection: Upgrade\r\n"
                                  f"Authorization: Bearer {key}\r\n\r\n").encode(), until=b"ok")
        assert got.startswith(b"HTTP/1.1 200 "), got
        try:
            c.sendall(b"GET /late HTTP/1.1\r\nHost: x\r\n\r\n")
            c.recv(100)
        except OSError:
            pass
        c.close()
        wait_for(lambda: b"=====" in seen(s, sid), 15)
        assert b"/late" not in seen(s, sid)
    finally:
        s.api().delete(f"/sandboxes/{sid}")


def test_metrics_are_the_operators(tmp_path):
    """/metrics tells how busy every tenant is: no key, a tenant's key and
    a wrong token are refused; the admin key and the metrics token read it,
    and it names no tenant and no sandbox."""
    token = "scrape-" + os.urandom(12).hex()
    (tmp_path / "token").write_text(token + "\n")
    s = Server(BUILD / "hutch-serve", tmp_path / "state", "--metrics-token-file",
               str(tmp_path / "token")).start()
    try:
        t = s.api(s.api().post("/v1/keys", {"tenant": "metrics-tenant"}).json["key"])
        sb = t.create()
        r = s.api(None).get("/metrics")
        assert r.status == 401 and error_of(r) == "unauthorized", r
        r = t.get("/metrics")
        assert r.status == 403 and error_of(r) == "forbidden", r
        assert s.api("x" * len(token)).get("/metrics").status == 401
        assert s.api(token + "x").get("/metrics").status == 401
        for api in (s.api(), s.api(token)):
            r = api.get("/metrics")
            assert r.status == 200 and b"hutch_sandboxes{" in r.raw, r
            assert sb["id"].encode() not in r.raw and b"metrics-tenant" not in r.raw
        assert t.get(f"/v1/sandboxes/{sb['id']}/metrics").status == 200  # its own
    finally:
        assert s.stop() == 0


def test_metrics_public_and_bad_token_file(tmp_path):
    s = Server(BUILD / "hutch-serve", tmp_path / "a", "--metrics-public").start()
    try:
        assert s.api(None).get("/metrics").status == 200
    finally:
        assert s.stop() == 0
    (tmp_path / "short").write_text("short\n")
    p = subprocess.run([str(BUILD / "hutch-serve"), "--listen", f"127.0.0.1:{free_port()}",
                        "--state-dir", str(tmp_path / "b"), "--pool", "host=0",
                        "--metrics-token-file", str(tmp_path / "short")],
                       capture_output=True, timeout=30)
    assert p.returncode == 125 and b"--metrics-token-file" in p.stderr, p.stderr


@pytest.mark.userspace
def test_a_tenant_cannot_fill_the_disk_with_audit_lines(tmp_path):
    """Every request that is an action writes an audit line, and a tenant
    decides how many it makes: the log rotates at --audit-max-mb into
    audit.jsonl.1 (the older one goes), so it holds at most twice that, and
    both files stay the operator's (0600). Nothing is lost at rotation."""
    state = tmp_path / "state"
    s = Server(BUILD / "hutch-serve", state, "--audit-max-mb", "1").start()
    try:
        key = s.api().post("/v1/keys", {"tenant": "noisy"}).json["key"]
        conn = http.client.HTTPConnection("127.0.0.1", s.port, timeout=30)
        n = 0
        # about 2.6 MiB of lines (160 bytes each): two rotations
        while n < 16000:
            conn.request("DELETE", f"/v1/sandboxes/{n:016x}",
                         headers={"Authorization": f"Bearer {key}"})
            r = conn.getresponse()
            r.read()
            assert r.status == 404
            n += 1
        conn.close()
        assert s.api().get("/healthz").status == 200
    finally:
        assert s.stop() == 0
    cur, old = state / "audit.jsonl", state / "audit.jsonl.1"
    assert old.stat().st_size <= (1 << 20) and cur.stat().st_size <= (1 << 20)
    assert old.stat().st_mode & 0o777 == 0o600 and cur.stat().st_mode & 0o777 == 0o600
    lines = [json.loads(l) for l in (old.read_text() + cur.read_text()).splitlines()]
    deletes = [l for l in lines if l["action"] == "sandbox.delete" and l["tenant"] == "noisy"]
    # the newest lines, in order, none torn: the last one is the last request
    assert deletes[-1]["sandbox"] == f"{n - 1:016x}"
    ids = [int(l["sandbox"], 16) for l in deletes]
    assert ids == list(range(ids[0], n)), "lines lost or out of order"
    assert ids[0] > 0  # the oldest went with the first rotated file
    for bad in ("0", "-1", "abc", "99999999"):
        p = subprocess.run([str(BUILD / "hutch-serve"), "--state-dir", str(tmp_path / "bad"),
                            "--audit-max-mb", bad], capture_output=True, timeout=30)
        assert p.returncode == 125 and p.stderr.count(b"\n") == 1, p.stderr
        assert b"--audit-max-mb" in p.stderr


def test_server_sandbox_sees_no_host_path(tmp_path):
    """A server's sandbox holds the code kernels (a directory of hutch's
    install) and runs them, without its mountinfo saying where they are."""
    s = Server(BUILD / "hutch-serve", tmp_path / "state").start()
    try:
        api = s.api()
        sid = api.create()["id"]
        lines = api.exec(sid, {"cmd": ["cat", "/proc/self/mountinfo"]})
        mountinfo = output(lines).decode()
        kernels = str((BUILD.parent / "share" / "kernels").resolve())
        for leak in (kernels, str(BUILD.parent.resolve()), str(tmp_path)):
            assert leak not in mountinfo, (leak, mountinfo)
        assert " /opt/hutch/kernels " in mountinfo
        code = api.code(sid, {"code": "print(6 * 7)"})
        assert any(l.get("type") == "stdout" and "42" in l.get("text", "") for l in code), code
    finally:
        assert s.stop() == 0


def test_sandbox_sees_no_host_path_or_kernel_build(run):
    """What a sandbox reads of its own mounts names no host path (the state
    dir, hutch's staging dir, the template's place), and the host kernel's
    build config and vmcoreinfo (symbol addresses) read empty."""
    r = run(["--", "sh", "-c", "cat /proc/self/mountinfo; echo =====; "
                               "cat /proc/config.gz /sys/kernel/vmcoreinfo 2>/dev/null | wc -c"])
    assert r.code == 0, r
    mountinfo, size = r.out.split("=====\n")
    assert int(size) == 0
    for leak in ("/run/hutch", "/var/lib/hutch", os.environ["HUTCH_STATE_DIR"], "lowerdir=/",
                 "devtmpfs"):
        assert leak not in mountinfo, (leak, mountinfo)
    for line in mountinfo.splitlines():
        fields = line.split()
        source = fields[fields.index("-") + 2]
        assert source in ("hutch", "proc", "sysfs", "tmpfs", "devpts", "shm", "hutch-masked"), line
    if pathlib.Path("/proc/config.gz").exists():
        assert " /proc/config.gz " in mountinfo
    if pathlib.Path("/sys/kernel/vmcoreinfo").exists():
        assert " /sys/kernel/vmcoreinfo " in mountinfo
