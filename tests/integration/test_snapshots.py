"""Snapshots and forks over HTTP: a sandbox's files captured as a layer,
sandboxes made from it (files, owners, links, holes and deletions as they
were), forks that diverge, snapshots that outlive the server and are kept
while anything stacks them, and what a hostile sandbox can put in its
files. Against both builds of the server."""
import pathlib
import signal
import time

import pytest

from conftest import BUILD, leftovers, serve_each_build
from serveapi import Server, error_of, output, wait_for

# Everything a sandbox can make in its files, listed in a form that is the
# same wherever the files are: path, type, mode, owner, size, content hash
# (of the sparse file, its tail: hashing its 4 GiB of holes took 8 s).
TREE = ("cd / && find /home/user /tmp /etc/extra -xdev | sort | while read -r f; do "
        "stat -c '%n %F %a %U:%G' \"$f\"; "
        "[ -f \"$f\" ] && [ ! -L \"$f\" ] && stat -c %s \"$f\" && "
        "{ [ \"$f\" = /tmp/sparse ] && tail -c 4 \"$f\" && echo || md5sum < \"$f\"; }; "
        "[ -L \"$f\" ] && readlink \"$f\"; done; du -k /tmp/sparse | cut -f1")

SETUP = ("mkdir -p /home/user/proj/deep/er /home/user/empty && cd /home/user/proj && "
         "echo hello > a.txt && printf 'x%.0s' $(seq 1 5000) > deep/er/b.txt && "
         "ln -s a.txt link && ln -s /etc/shadow outside && mkfifo pipe && chmod 640 a.txt && "
         "head -c 300000 /dev/urandom > /tmp/rand && truncate -s 4G /tmp/sparse && "
         "printf 'tail' >> /tmp/sparse")


@pytest.fixture(scope="module", params=["build", "asan"])
def server(request, tmp_path_factory):
    yield from serve_each_build(request, tmp_path_factory)


def nothing_left_since(before):
    wait_for(lambda: not set(leftovers()) - before, 30)


def sh(api, sid, script, user=None):
    body = {"shell": script}
    if user:
        body["user"] = user
    lines = api.exec(sid, body)
    assert lines[-1]["status"] == "ok", lines
    return output(lines).decode()


def made(api, sid):
    """A sandbox with one of everything, and root's file in /etc."""
    sh(api, sid, SETUP)
    sh(api, sid, "mkdir /etc/extra && echo r > /etc/extra/root.txt && chmod 600 /etc/extra/root.txt",
       user="root")


def snapshot(api, sid, **body):
    r = api.post(f"/v1/sandboxes/{sid}/snapshots", body)
    assert r.status == 201, r
    return r.json


def test_a_snapshot_holds_the_files_as_they_were(server, tenant):
    src = tenant.create(env={"E": "1"})["id"]
    made(tenant, src)
    tree = sh(tenant, src, TREE)
    assert "/home/user/proj/a.txt regular file 640 user:user\n6\n" in tree and tree.endswith("4\n")
    sn = snapshot(tenant, src, name="first")
    assert sn["id"].startswith("snap_") and sn["name"] == "first" and sn["sandbox"] == src
    assert sn["layers"] == [sn["id"]] and sn["size_bytes"] >= 300000 and sn["files"] >= 10
    # holes stay holes: far less than the 4 GiB the sparse file claims
    assert sn["size_bytes"] < 10 << 20
    copy = tenant.create(template=sn["id"])
    assert copy["template"] == sn["id"]
    assert sh(tenant, copy["id"], TREE) == tree
    # the copy is its own: writes go to its own layer, not the snapshot
    sh(tenant, copy["id"], "echo changed > /home/user/proj/a.txt")
    assert sh(tenant, src, "cat /home/user/proj/a.txt") == "hello\n"
    assert sh(tenant, tenant.create(template=sn["id"])["id"], "cat /home/user/proj/a.txt") == "hello\n"
    # the link to a host path is a link, and leads nowhere inside
    assert sh(tenant, copy["id"], "readlink /home/user/proj/outside; cat /home/user/proj/outside "
              "2>/dev/null || echo none") == "/etc/shadow\nnone\n"
    listed = tenant.get("/v1/snapshots").json["snapshots"]
    assert [s["id"] for s in listed] == [sn["id"]] and "tenant" not in listed[0]
    got = tenant.get(f"/v1/snapshots/{sn['id']}").json
    assert got["id"] == sn["id"] and got["ephemeral"] is False


def test_the_sandbox_runs_on_while_and_after_its_snapshot(tenant):
    sid = tenant.create()["id"]
    r = tenant.post(f"/v1/sandboxes/{sid}/exec", {
        "shell": "i=0; while :; do i=$((i+1)); echo $i > /tmp/n.new; mv /tmp/n.new /tmp/n; "
                 "sleep 0.05; done", "background": True})
    assert r.status == 201
    wait_for(lambda: tenant.get(f"/v1/sandboxes/{sid}/files?path=/tmp/n").status == 200)
    snapshot(tenant, sid)
    n = int(sh(tenant, sid, "cat /tmp/n"))
    wait_for(lambda: int(sh(tenant, sid, "cat /tmp/n")) > n)  # it counts on
    assert [p["running"] for p in tenant.get(f"/v1/sandboxes/{sid}/processes").json["processes"]] == [True]
    # a paused sandbox stays paused through its snapshot
    assert tenant.post(f"/v1/sandboxes/{sid}/pause").status == 200
    snapshot(tenant, sid)
    assert tenant.get(f"/v1/sandboxes/{sid}").json["state"] == "paused"


def test_layers_stack_deletions_and_replaced_directories(tenant):
    first = tenant.create()["id"]
    made(tenant, first)
    s1 = snapshot(tenant, first)
    second = tenant.create(template=s1["id"])["id"]
    sh(tenant, second, "rm /tmp/rand && rm -rf /home/user/proj && mkdir /home/user/proj && "
                       "echo new > /home/user/proj/only.txt")
    s2 = snapshot(tenant, second)
    assert s2["layers"] == [s2["id"], s1["id"]]
    third = tenant.create(template=s2["id"])["id"]
    assert sh(tenant, third, "ls -A /home/user/proj; ls /tmp") == "only.txt\nsparse\n"
    # s1 is stacked by s2 and by sandboxes: it stays
    r = tenant.delete(f"/v1/snapshots/{s1['id']}")
    assert r.status == 409 and error_of(r) == "snapshot_in_use"
    r = tenant.delete(f"/v1/snapshots/{s2['id']}")
    assert r.status == 409 and "1 running" in r.json["error"]["message"]
    assert tenant.delete(f"/v1/sandboxes/{third}").status == 204
    assert tenant.delete(f"/v1/snapshots/{s2['id']}").status == 204
    assert tenant.get(f"/v1/snapshots/{s2['id']}").status == 404
    assert tenant.delete(f"/v1/sandboxes/{second}").status == 204
    assert tenant.delete(f"/v1/snapshots/{s1['id']}").status == 204


def test_fork_copies_diverge(server, tenant):
    parent = tenant.create(memory_mb=256, pids=128, env={"WHO": "parent"},
                           metadata={"k": "v"})
    pid_ = parent["id"]
    sh(tenant, pid_, "echo base > /home/user/f")
    r = tenant.post(f"/v1/sandboxes/{pid_}/fork", {"count": 5})
    assert r.status == 201, r
    forks = r.json["sandboxes"]
    assert len({f["id"] for f in forks}) == 5 and r.json["snapshot_id"].startswith("snap_")
    for f in forks:
        assert (f["memory_mb"], f["pids"], f["metadata"], f["template"]) == (
            256, 128, {"k": "v"}, r.json["snapshot_id"])
    for i, f in enumerate(forks):
        assert sh(tenant, f["id"], f"cat /home/user/f; echo $WHO; echo {i} > /home/user/f") == \
            "base\nparent\n"
    sh(tenant, pid_, "echo parent-later > /home/user/f")
    for i, f in enumerate(forks):
        assert sh(tenant, f["id"], "cat /home/user/f") == f"{i}\n"
    assert sh(tenant, pid_, "cat /home/user/f") == "parent-later\n"
    # a fork's snapshot is not the tenant's to manage, and goes with its forks
    snap = tenant.get(f"/v1/snapshots/{r.json['snapshot_id']}").json
    assert snap["ephemeral"] is True
    for f in forks:
        assert tenant.delete(f"/v1/sandboxes/{f['id']}").status == 204
    assert tenant.get(f"/v1/snapshots/{r.json['snapshot_id']}").status == 404


@pytest.mark.parametrize("body", [{"count": 0}, {"count": 10000}, {}, {"count": "2"},
                                  {"count": 1, "timeout_s": 0}, {"count": 1, "bogus": True}])
def test_fork_refuses_bad_counts(tenant, body):
    sid = tenant.create()["id"]
    r = tenant.post(f"/v1/sandboxes/{sid}/fork", body)
    assert r.status == 400 and error_of(r) == "invalid_argument", r
    assert tenant.get("/v1/snapshots").json["snapshots"] == []


def test_fork_within_the_tenant_quota(server):
    api = server.api()
    # a tenant of 3 sandboxes: one and a fork of 2 fit, a fork of 3 does not
    t = server.api(api.post("/v1/keys", {"tenant": f"q{time.monotonic_ns()}",
                                         "max_sandboxes": 3}).json["key"])
    sid = t.create()["id"]
    r = t.post(f"/v1/sandboxes/{sid}/fork", {"count": 3})
    assert r.status == 429 and error_of(r) == "quota_exceeded"
    assert t.get("/v1/snapshots").json["snapshots"] == []
    assert t.post(f"/v1/sandboxes/{sid}/fork", {"count": 2}).status == 201
    for sb in t.get("/v1/sandboxes").json["sandboxes"]:
        t.delete(f"/v1/sandboxes/{sb['id']}")


def test_bad_input(server, tenant):
    sid = tenant.create()["id"]
    sn = snapshot(tenant, sid)
    for path, method in (("/v1/sandboxes/0123456789abcdef/snapshots", "POST"),
                         ("/v1/sandboxes/0123456789abcdef/fork", "POST"),
                         ("/v1/snapshots/snap_0123456789abcdef", "GET"),
                         ("/v1/snapshots/snap_0123456789abcdef", "DELETE")):
        r = tenant.request(method, path, {"count": 1} if method == "POST" else None)
        assert r.status == 404 and error_of(r) == "not_found", (path, r)
    for body in ({"name": 5}, {"name": "x" * 200}, {"other": 1}):
        assert tenant.post(f"/v1/sandboxes/{sid}/snapshots", body).status == 400, body
    r = tenant.post("/v1/sandboxes", {"template": "snap_0123456789abcdef"})
    assert r.status == 404 and error_of(r) == "template_not_found"
    # another tenant's snapshot is not there, as a template either
    other = server.api()
    assert other.get(f"/v1/snapshots/{sn['id']}").status == 404
    assert other.delete(f"/v1/snapshots/{sn['id']}").status == 404
    r = other.post("/v1/sandboxes", {"template": sn["id"]})
    assert r.status == 404 and error_of(r) == "template_not_found"


def test_hostile_files_are_refused_or_copied_as_data(server, tenant):
    sid = tenant.create()["id"]
    # deeper than a layer may be: refused, and nothing is left behind
    sh(tenant, sid, "d=/tmp/d; for i in $(seq 1 300); do d=$d/x; done; mkdir -p $d")
    before = sorted(p.name for p in (server.state_dir / "snapshots").glob("*")) \
        if (server.state_dir / "snapshots").exists() else []
    r = tenant.post(f"/v1/sandboxes/{sid}/snapshots")
    assert r.status == 400 and error_of(r) == "invalid" and "deeper" in r.json["error"]["message"]
    assert sorted(p.name for p in (server.state_dir / "snapshots").glob("*")) == before
    assert tenant.get("/v1/snapshots").json["snapshots"] == []
    assert sh(tenant, sid, "echo still") == "still\n"  # thawed after the refusal
    # odd names, setuid bits, a socket: copied as data, never as privilege;
    # a file linked 2000 times is one file on the host, not 2000
    sh(tenant, sid, "rm -rf /tmp/d; cd /home/user && printf x > \"$(printf 'new\\nline')\" && "
                    "cp /bin/true suid && chmod 4755 suid && "
                    "python3 -c \"import socket; socket.socket(socket.AF_UNIX).bind('sock')\" && "
                    "mkdir /tmp/l && head -c 4000000 /dev/urandom > /tmp/l/0 && "
                    "python3 -c \"import os; [os.link('/tmp/l/0', f'/tmp/l/{i}') "
                    "for i in range(1, 2001)]\"")
    sn = snapshot(tenant, sid)
    assert 4000000 <= sn["size_bytes"] < 5000000, sn
    copy = tenant.create(template=sn["id"])["id"]
    assert sh(tenant, copy, "cd /home/user; ls -b; stat -c %a suid") == "new\\nline\nsuid\n755\n"
    assert sh(tenant, copy, "stat -c %h /tmp/l/0; cmp /tmp/l/0 /tmp/l/2000 && echo same") == \
        "2001\nsame\n"
    layer = server.state_dir / "snapshots" / sn["id"]
    assert not any(p.stat().st_mode & 0o6000 for p in layer.rglob("*") if p.is_file() and
                   not p.is_symlink())


def test_snapshots_survive_a_restart(tmp_path):
    before = set(leftovers())
    s = Server(BUILD / "hutch-serve", tmp_path / "state").start()
    api = s.api()
    sid = api.create()["id"]
    sh(api, sid, "echo kept > /home/user/k")
    sn = snapshot(api, sid, name="durable")
    fork = api.post(f"/v1/sandboxes/{sid}/fork", {"count": 1}).json
    assert s.stop(signal.SIGKILL) == -signal.SIGKILL
    s.start()
    try:
        assert api.get(f"/v1/snapshots/{sn['id']}").json["name"] == "durable"
        assert sh(api, api.create(template=sn["id"])["id"], "cat /home/user/k") == "kept\n"
        # the fork was taken over with its layers: deleting its snapshot is refused
        fid = fork["sandboxes"][0]["id"]
        assert sh(api, fid, "cat /home/user/k") == "kept\n"
        assert api.delete(f"/v1/snapshots/{fork['snapshot_id']}").status == 409
        assert api.delete(f"/v1/sandboxes/{fid}").status == 204
        assert api.get(f"/v1/snapshots/{fork['snapshot_id']}").status == 404
    finally:
        assert s.stop() == 0
    nothing_left_since(before)
    # the server's sandboxes went with SIGINT; the named snapshot stays on disk
    assert (tmp_path / "state" / "snapshots" / sn["id"]).is_dir()


def test_snapshots_pause_and_delete_at_once(tenant):
    """A snapshot is copied off the server's loop: other requests for the
    same sandbox come meanwhile. However they interleave, the sandbox ends
    in the state the last request asked for, and nothing is lost."""
    import concurrent.futures
    sid = tenant.create(disk_mb=512)["id"]
    sh(tenant, sid, "head -c 150000000 /dev/urandom > /tmp/big")
    r = tenant.post(f"/v1/sandboxes/{sid}/exec", {
        "shell": "i=0; while :; do i=$((i+1)); echo $i > /tmp/n.new; mv /tmp/n.new /tmp/n; "
                 "sleep 0.02; done", "background": True})
    assert r.status == 201
    sh(tenant, sid, "while [ ! -e /tmp/n ]; do sleep 0.01; done")  # the loop has begun
    pool = concurrent.futures.ThreadPoolExecutor(4)
    # two snapshots at once: both made, and the sandbox runs on after both
    a, b = (pool.submit(tenant.post, f"/v1/sandboxes/{sid}/snapshots") for _ in range(2))
    assert a.result().status == 201 and b.result().status == 201
    assert a.result().json["size_bytes"] >= 150000000 and a.result().json["id"] != b.result().json["id"]
    n = int(sh(tenant, sid, "cat /tmp/n"))
    wait_for(lambda: int(sh(tenant, sid, "cat /tmp/n")) > n)  # it counts on
    # a pause while a snapshot is copied: paused it stays
    snap = pool.submit(tenant.post, f"/v1/sandboxes/{sid}/snapshots")
    assert tenant.post(f"/v1/sandboxes/{sid}/pause").status == 200
    assert snap.result().status == 201
    assert tenant.get(f"/v1/sandboxes/{sid}").json["state"] == "paused"
    # a resume while a snapshot of the paused sandbox is copied: it runs after
    snap = pool.submit(tenant.post, f"/v1/sandboxes/{sid}/snapshots")
    assert tenant.post(f"/v1/sandboxes/{sid}/resume").status == 200
    assert snap.result().status == 201
    n = int(sh(tenant, sid, "cat /tmp/n"))
    wait_for(lambda: int(sh(tenant, sid, "cat /tmp/n")) > n)  # it counts on
    # a delete while a snapshot is copied: the snapshot is whole, or never began
    snap = pool.submit(tenant.post, f"/v1/sandboxes/{sid}/snapshots")
    assert tenant.delete(f"/v1/sandboxes/{sid}").status == 204
    r = snap.result()
    assert r.status in (201, 404), r
    ids = [s["id"] for s in tenant.get("/v1/snapshots").json["snapshots"]]
    assert len(ids) == (5 if r.status == 201 else 4)
    if r.status == 201:
        copy = tenant.create(template=r.json["id"], disk_mb=512)["id"]
        assert sh(tenant, copy, "stat -c %s /tmp/big") == "150000000\n"
    pool.shutdown()


def test_a_sandbox_a_dead_server_left_frozen_runs_again(tmp_path):
    """A server killed while it copied a snapshot leaves the sandbox frozen
    (and the copy half made): the next start thaws it, takes it over, and
    removes the half copy."""
    import sqlite3
    before = set(leftovers())
    s = Server(BUILD / "hutch-serve", tmp_path / "state").start()
    api = s.api()
    sid = api.create()["id"]
    sh(api, sid, "echo alive > /tmp/a")
    slot = json_slot(tmp_path / "state" / "hutch.db", sid, sqlite3)
    v2 = pathlib.Path("/sys/fs/cgroup/cgroup.controllers").exists()
    freeze = (pathlib.Path(f"/sys/fs/cgroup/hutch/{slot}/cgroup.freeze") if v2 else
              pathlib.Path(f"/sys/fs/cgroup/freezer/hutch/{slot}/freezer.state"))
    assert s.stop(signal.SIGKILL) == -signal.SIGKILL
    freeze.write_text("1" if v2 else "FROZEN")
    half = tmp_path / "state" / "snapshots" / "snap_0123456789abcdef"
    half.mkdir(parents=True)
    (half / "partial").write_text("x")
    s.start()
    try:
        assert sh(api, sid, "cat /tmp/a") == "alive\n"
        assert not half.exists()
    finally:
        assert s.stop() == 0
    nothing_left_since(before)


def json_slot(db, sid, sqlite3):
    import json
    with sqlite3.connect(db) as con:
        (spec,) = con.execute("SELECT spec FROM sandboxes WHERE id = ?", (sid,)).fetchone()
    return json.loads(spec)["slot"]
