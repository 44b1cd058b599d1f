"""The security floor (docs/security.md), from the attacker's side: another
local user reading hutch's state, a copy of hutch.db opening sandboxes,
volumes mounted over the kernel's files. Each test makes the attack and
sees it fail."""
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
    d = pathlib.Path(tempfile.mkdtemp(prefix="hutch-floor-", dir="/var/tmp"))
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

