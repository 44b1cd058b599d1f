"""The event loop never blocks (issue 16): slow work (a volume's mkfs, a
sandbox made or torn down) runs off the loop, so the server answers other
requests meanwhile; a client that leaves mid-create leaves nothing behind;
creates in flight count against the tenant's quota; a server stopped with
work in flight finishes it and leaves nothing. Ordering and outcomes only:
timings belong to bench/loop. Against both builds of the server."""
import json
import os
import socket
import time

import pytest

from conftest import build_binary, leftovers, serve_each_build
from serveapi import Server, audit_log, error_of, wait_for

SHIM = """#!/bin/sh
# mkfs.ext4 that waits while {gate}/hold exists (saying so in {gate}/started)
if [ -e {gate}/hold ]; then
  touch {gate}/started
  i=0
  while [ -e {gate}/hold ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done
fi
exec /usr/sbin/mkfs.ext4 "$@"
"""


@pytest.fixture(scope="module")
def gate(tmp_path_factory):
    d = tmp_path_factory.mktemp("gate")
    shim = d / "bin" / "mkfs.ext4"
    shim.parent.mkdir()
    shim.write_text(SHIM.format(gate=d))
    shim.chmod(0o755)
    return d


@pytest.fixture(scope="module", params=["build", "asan"])
def server(request, tmp_path_factory, gate):
    path = os.environ["PATH"]
    os.environ["PATH"] = f"{gate / 'bin'}:{path}"  # the server's mkfs.ext4 is the shim
    try:
        gen = serve_each_build(request, tmp_path_factory)
        s = next(gen)
    finally:
        os.environ["PATH"] = path
    yield s
    next(gen, None)


def raw_request(port, method, path, key, body=None):
    """A connected socket that has sent one request (and not read)."""
    s = socket.create_connection(("127.0.0.1", port))
    data = json.dumps(body).encode() if body is not None else b""
    s.sendall(f"{method} {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {key}\r\n"
              f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n"
              .encode() + data)
    return s


def read_status(s, timeout=60):
    s.settimeout(timeout)
    buf = b""
    while b"\r\n" not in buf:
        chunk = s.recv(4096)
        if not chunk:
            break
        buf += chunk
    return int(buf.split(b" ", 2)[1]) if buf else None


def test_the_loop_answers_while_a_volume_is_made(server, tenant, gate):
    (gate / "hold").touch()
    try:
        s = raw_request(server.port, "POST", "/v1/volumes", tenant.key,
                        {"name": "slow", "size_mb": 64})
        wait_for(lambda: (gate / "started").exists(), 30)
        # mkfs.ext4 waits: the server answers everything else meanwhile
        assert server.api(None).get("/healthz").status == 200
        sb = tenant.create()
        lines = tenant.exec(sb["id"], {"cmd": ["echo", "hi"]})
        assert lines[-1]["status"] == "ok"
        assert tenant.delete(f"/v1/sandboxes/{sb['id']}").status == 204
        # the volume is not there yet, and its name is taken
        assert tenant.get("/v1/volumes").json["volumes"] == []
        r = tenant.post("/v1/volumes", {"name": "slow", "size_mb": 16})
        assert r.status == 409 and error_of(r) == "exists"
        s.settimeout(0.2)
        with pytest.raises(socket.timeout):
            s.recv(1)  # no answer while mkfs.ext4 waits
    finally:
        (gate / "hold").unlink(missing_ok=True)
    assert read_status(s) == 201
    s.close()
    (gate / "started").unlink()
    v = tenant.get("/v1/volumes/slow").json
    assert v["size_mb"] == 64
    assert tenant.delete(f"/v1/volumes/{v['id']}").status == 204


def test_a_volume_whose_client_left_is_not_kept(server, tenant, gate):
    images = server.state_dir / "volumes"
    before = set(images.glob("*.img")) if images.exists() else set()
    (gate / "hold").touch()
    try:
        s = raw_request(server.port, "POST", "/v1/volumes", tenant.key,
                        {"name": "gone", "size_mb": 32})
        wait_for(lambda: (gate / "started").exists(), 30)
        left = lambda lines: sum(l["action"] == "volume.create" and l["status"] == 499
                                 for l in lines)
        gone = left(audit_log(server.state_dir))
        s.close()
        # The server has seen its client go (and audited it so) before the
        # volume it was making is done.
        audit_log(server.state_dir, lambda lines: left(lines) > gone)
    finally:
        (gate / "hold").unlink(missing_ok=True)
    (gate / "started").unlink(missing_ok=True)
    wait_for(lambda: set(images.glob("*.img")) == before, 30)
    assert tenant.get("/v1/volumes").json["volumes"] == []
    # its name is free again
    v = tenant.post("/v1/volumes", {"name": "gone", "size_mb": 16})
    assert v.status == 201
    assert tenant.delete(f"/v1/volumes/{v.json['id']}").status == 204


def hutch_cgroups():
    return {l for l in leftovers() if l.startswith("cgroup ")}


def metric(server, name):
    text = server.api().get("/metrics").raw.decode()
    return int(float(next(l.split()[1] for l in text.splitlines() if l.startswith(name + " "))))


def test_a_client_that_leaves_mid_create_leaves_nothing(server, tenant):
    before = hutch_cgroups()
    left = lambda lines: sum(l["action"] == "sandbox.create" and l["status"] == 499
                             for l in lines)
    gone = left(audit_log(server.state_dir))
    socks = [raw_request(server.port, "POST", "/v1/sandboxes", tenant.key, {})
             for _ in range(3)]
    for s in socks:
        s.close()  # before the answer: the sandboxes being made have no one to go to
    # each create ran to its end (made, then destroyed) and nothing stayed
    audit_log(server.state_dir, lambda lines: left(lines) == gone + 3)  # seen to go, under way
    wait_for(lambda: metric(server, "hutch_sandboxes_creating") == 0, 30)
    wait_for(lambda: hutch_cgroups() <= before, 30)  # none new (old ones may go)
    assert tenant.get("/v1/sandboxes").json["sandboxes"] == []
    # the server goes on as before
    sb = tenant.create()
    assert tenant.delete(f"/v1/sandboxes/{sb['id']}").status == 204


def test_creates_in_flight_count_against_the_quota(server):
    admin = server.api()
    t = server.api(admin.post("/v1/keys", {"tenant": f"q{time.monotonic_ns()}",
                                           "max_sandboxes": 2}).json["key"])
    socks = [raw_request(server.port, "POST", "/v1/sandboxes", t.key, {}) for _ in range(6)]
    statuses = sorted(read_status(s) for s in socks)
    for s in socks:
        s.close()
    assert statuses == [201, 201, 429, 429, 429, 429], statuses
    made = t.get("/v1/sandboxes").json["sandboxes"]
    assert len(made) == 2
    for sb in made:
        assert t.delete(f"/v1/sandboxes/{sb['id']}").status == 204


@pytest.mark.serial  # no new cgroup at all on the host at the moment of the answer
def test_a_deleted_sandbox_is_gone_when_the_answer_comes(server, tenant):
    before = hutch_cgroups()
    sb = tenant.create()
    assert hutch_cgroups() - before
    assert tenant.delete(f"/v1/sandboxes/{sb['id']}").status == 204
    assert not hutch_cgroups() - before  # torn down off the loop, answered after
    assert tenant.get(f"/v1/sandboxes/{sb['id']}").status == 404


@pytest.mark.parametrize("build", ["build", "asan"])
def test_a_server_stopped_mid_create_finishes_and_leaves_nothing(build, tmp_path):
    s = Server(build_binary(build, "hutch-serve"), tmp_path / "state").start()
    key = s.admin_key
    before = hutch_cgroups()
    socks = [raw_request(s.port, "POST", "/v1/sandboxes", key, {}) for _ in range(4)]
    wait_for(lambda: hutch_cgroups() - before, 30)  # under way
    assert s.stop() == 0, s.log_text()
    for sock in socks:
        sock.close()
    assert "Sanitizer" not in s.log_text() and "runtime error" not in s.log_text()
    audit = (s.state_dir / "audit.jsonl").read_text().splitlines()
    assert all(json.loads(l)["action"] for l in audit)  # whole lines only
