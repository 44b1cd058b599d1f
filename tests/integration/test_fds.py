"""One tenant cannot run the server out of file descriptors: a server
started with few (prlimit) answers tunnels, streams and connections past
each budget with 429 or 503 and Retry-After, never 500, and serves again
once they close."""
import contextlib
import os
import signal
import socket
import stat
import time

import pytest

from conftest import BUILD
from serveapi import Server, WebSocket, output, wait_for

# Serial (conftest.py): a server run out of descriptors on purpose, and
# shares counted against the whole server.
pytestmark = pytest.mark.serial

NOFILE = 256  # fds.c: pool 192, a tenant's share 48, a sandbox's 12 (two tunnels)

HOLD = b"""import socket, threading
def hold(c):
    while c.recv(4096):  # until the client goes
        pass
    c.close()
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", 8600))
s.listen(64)
while True:
    c, _ = s.accept()
    if c.recv(4096).startswith(b"GET /up"):
        c.sendall(b"HTTP/1.1 200 OK\\r\\nContent-Length: 2\\r\\nConnection: close\\r\\n\\r\\nok")
        c.close()
    else:
        threading.Thread(target=hold, args=(c,), daemon=True).start()
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    d = tmp_path_factory.mktemp("fds")
    wrapper = d / "serve-lowfd"
    wrapper.write_text(f"#!/bin/sh\nexec prlimit --nofile={NOFILE} {BUILD / 'hutch-serve'} \"$@\"\n")
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    s = Server(wrapper, d / "state").start()
    yield s
    assert s.stop() == 0, s.log_text()


def new_tenant(server):
    return server.api(server.api().post("/v1/keys", {"tenant": f"t{time.monotonic_ns()}"})
                      .json["key"])


@contextlib.contextmanager
def held_until_closed(server, tenant, held):
    """The body fills tenant's share with held (each has close()): then its
    requests are 429 and another tenant's are served; closed, they count
    down and the tenant is served again."""
    try:
        yield
        assert tenant.get("/v1/sandboxes").status == 429
        assert new_tenant(server).get("/v1/sandboxes").status == 200
    finally:
        for h in held:
            h.close()
    wait_for(lambda: tenant.get("/v1/sandboxes").status == 200, 20)


def status_of(sock, timeout):
    """The status of the answer on sock and the whole answer (head and a
    Content-Length body); None if none comes in time."""
    sock.settimeout(timeout)
    got = b""
    try:
        while True:
            head, sep, body = got.partition(b"\r\n\r\n")
            length = next((int(l.split(b":")[1]) for l in head.split(b"\r\n")
                           if l.lower().startswith(b"content-length:")), 0)
            if sep and len(body) >= length:
                break
            chunk = sock.recv(4096)
            if not chunk:
                break
            got += chunk
    except (socket.timeout, TimeoutError):
        if not got:
            return None, b""
    except ConnectionResetError:
        return "reset", got
    return (int(got.split()[1]) if got.startswith(b"HTTP/1.1 ") else "closed"), got


def raw(server, request):
    s = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    s.sendall(request.encode())
    return s


def test_tunnels_past_a_sandboxs_share_are_429(server, tenant):
    sid = tenant.create()["id"]
    tenant.request("PUT", f"/v1/sandboxes/{sid}/files?path=/tmp/hold.py", HOLD)
    tenant.post(f"/v1/sandboxes/{sid}/exec", {"cmd": ["python3", "/tmp/hold.py"], "background": True})
    path = f"/v1/sandboxes/{sid}/ports/8600"
    wait_for(lambda: tenant.get(f"{path}/up").status == 200, 20)
    hold = (f"GET {path}/hold HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {tenant.key}\r\n"
            "Content-Length: 0\r\n\r\n")
    # The tunnels of the /up probes above are let go a moment after their
    # answers: until then they still count, so the share fills one by one.
    held, socks, refused = [], [], []
    try:
        deadline = time.monotonic() + 20
        while len(held) < 2 and time.monotonic() < deadline:
            s = raw(server, hold)
            socks.append(s)
            status, head = status_of(s, 1.5)
            if status is None:
                held.append(s)
            else:
                refused.append(head)
                time.sleep(0.2)
        assert len(held) == 2, refused  # held open: the sandbox's share
        extra = [raw(server, hold) for _ in range(4)]
        socks += extra
        refused += [head for _, head in (status_of(s, 1.5) for s in extra)]
        assert len(refused) >= 4 and all(
            h.startswith(b"HTTP/1.1 429") and b"Retry-After: 1" in h for h in refused), refused
        assert tenant.get(f"/v1/sandboxes/{sid}").status == 200
    finally:
        for s in socks:
            s.close()
    wait_for(lambda: tenant.get(f"{path}/up").status == 200, 20)


def test_a_tenants_streams_past_its_share_are_429_and_others_are_served(server, tenant):
    # Spread over sandboxes: each agent has the server's few descriptors
    # where hutch may not raise them (no CAP_SYS_RESOURCE).
    sids = [tenant.create()["id"] for _ in range(4)]
    streams, statuses = [], []
    with held_until_closed(server, tenant, streams):
        for i in range(60):
            conn, r = tenant.exec_stream(sids[i % 4], {"cmd": ["sleep", "30"]}, timeout=20)
            streams.append(conn)
            statuses.append(r.status)
            if r.status != 200:
                assert r.getheader("Retry-After") == "1", r.read()
                r.read()
        assert statuses.count(200) >= 30 and statuses.count(429) >= 5, statuses
        assert set(statuses) == {200, 429}, statuses
    lines = tenant.exec(sids[0], {"cmd": ["echo", "again"]})
    assert any(l.get("data") == "again\n" for l in lines), lines


def test_a_tenants_websockets_count_in_its_share_and_others_are_served(server, tenant):
    """WebSockets are connections a handler holds, like streams: past the
    tenant's share (48 descriptors here) one more is 429 quota_exceeded
    naming the share, and so is any request of that tenant; another
    tenant is served; closed, they count down. (They were not counted:
    the audit line written at the upgrade forgot whose they were.)"""
    sid = tenant.create()["id"]
    r = tenant.post(f"/v1/sandboxes/{sid}/exec", {"cmd": ["sleep", "300"], "background": True})
    assert r.status == 201, r
    path = f"/v1/sandboxes/{sid}/exec/{r.json['pid']}/ws"
    sockets, statuses = [], []
    with held_until_closed(server, tenant, sockets):
        for _ in range(60):
            ws = WebSocket(server.port, path, tenant.key)
            sockets.append(ws)
            statuses.append(ws.status)
        assert statuses.count(101) == 48 and statuses[48:] == [429] * 12, statuses
        refused = sockets[-1]
        length = next(int(l.split(b":")[1]) for l in refused.head.split(b"\r\n")
                      if l.lower().startswith(b"content-length:"))
        refused._need(length)
        assert b"quota_exceeded" in refused.buf and b" 48 descriptors" in refused.buf, refused.buf


def test_uploads_to_a_tenants_urls_count_in_its_share(server, tenant):
    """An upload URL needs no key, but the upload is its tenant's: with 44
    of its 48 connections (its share) held by WebSockets, slow PUTs to 8 of
    its URLs hold the 4 left, and the other 4 are 429 naming the share;
    another tenant is served. (They counted for no one: 256 URLs were 256
    connections held on no tenant's share.) 8 is also the most uploads a
    tenant has under way, so the share is reached before that bound."""
    sid = tenant.create()["id"]
    r = tenant.post(f"/v1/sandboxes/{sid}/exec", {"cmd": ["sleep", "300"], "background": True})
    assert r.status == 201, r
    ws_path = f"/v1/sandboxes/{sid}/exec/{r.json['pid']}/ws"
    paths = []
    for i in range(8):
        r = tenant.get(f"/templates/t/files/{'%064x' % i}")
        assert r.status == 201, r
        paths.append(r.json["url"].split(str(server.port), 1)[1])
    held = []
    with held_until_closed(server, tenant, held):
        for _ in range(44):
            held.append(WebSocket(server.port, ws_path, tenant.key))
        assert [ws.status for ws in held] == [101] * 44
        socks = [raw(server, f"PUT {path} HTTP/1.1\r\nHost: x\r\n"
                             "Content-Length: 1000000\r\n\r\npart") for path in paths]
        held += socks
        got = [status_of(s, 0.5) for s in socks[4:]]
        # E2B's shape of quota_exceeded
        assert all(st == 429 and b"share of the server's connections: 48" in head
                   for st, head in got), got
        assert all(status_of(s, 0.01)[0] is None for s in socks[:4])


def test_a_tenants_tunnels_over_its_sandboxes_stop_at_its_share_and_count_down(server, tenant):
    """A tenant's share (8 tunnels) is counted over all its sandboxes as
    tunnels open and close: the ninth, on a sandbox holding none, is 429;
    once they close, tunnels are let through again."""
    sids = [tenant.create()["id"] for _ in range(5)]
    for sid in sids:
        tenant.request("PUT", f"/v1/sandboxes/{sid}/files?path=/tmp/hold.py", HOLD)
        tenant.post(f"/v1/sandboxes/{sid}/exec",
                    {"cmd": ["python3", "/tmp/hold.py"], "background": True})
    for sid in sids:
        wait_for(lambda: tenant.get(f"/v1/sandboxes/{sid}/ports/8600/up").status == 200, 20)
    hold = lambda sid: (f"GET /v1/sandboxes/{sid}/ports/8600/hold HTTP/1.1\r\nHost: x\r\n"
                        f"Authorization: Bearer {tenant.key}\r\nContent-Length: 0\r\n\r\n")
    held, socks, refused = [], [], []
    try:
        # two on each of the first four; the probes' tunnels still count
        # for a moment after their answers: those refused meanwhile again
        pending, deadline = [sids[i // 2] for i in range(8)], time.monotonic() + 20
        while pending and time.monotonic() < deadline:
            batch = [(sid, raw(server, hold(sid))) for sid in pending]
            socks += [s for _, s in batch]
            time.sleep(1)
            pending = []
            for sid, s in batch:
                status, head = status_of(s, 0.01)
                if status is None:
                    held.append(s)
                else:
                    refused.append(head)
                    pending.append(sid)
        assert len(held) == 8, refused
        s = raw(server, hold(sids[4]))
        socks.append(s)
        status, head = status_of(s, 3)
        assert status == 429 and b"your sandboxes hold your share" in head, head
    finally:
        for s in socks:
            s.close()
    wait_for(lambda: tenant.get(f"/v1/sandboxes/{sids[4]}/ports/8600/up").status == 200, 20)


def test_connections_past_the_descriptors_get_503_and_the_server_recovers(server, tenant):
    socks = [raw(server, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n") for _ in range(NOFILE + 50)]
    try:
        got = [status_of(s, 10) for s in socks]
    finally:
        for s in socks:
            s.close()
    statuses = [g[0] for g in got]
    assert set(statuses) <= {200, 503}, [g for g in got if g[0] not in (200, 503)][:3]
    assert statuses.count(503) >= 50 and statuses.count(200) >= 50, statuses
    assert all(b"Retry-After: 1" in head for status, head in got if status == 503)
    assert all(b'"overloaded"' in head for status, head in got if status == 503)
    # More connections than descriptors: some were answered with the spare.
    assert any(b"out of file descriptors" in head for status, head in got), statuses
    wait_for(lambda: tenant.get("/healthz").status == 200, 20)
    sid = tenant.create()["id"]
    lines = tenant.exec(sid, {"cmd": ["echo", "served"]})
    assert any(l.get("data") == "served\n" for l in lines), lines



def test_a_sandbox_holds_few_of_the_servers_descriptors(server):
    """A server of thousands of sandboxes lives under RLIMIT_NOFILE: each
    holds its agent's connection, its egress listener and its slot's lock
    (fds.c's FDS_SANDBOX), and opens the rest when used."""
    tenant = new_tenant(server)
    fds = lambda: len(os.listdir(f"/proc/{server.proc.pid}/fd"))
    before = fds()
    ids = [tenant.create()["id"] for _ in range(8)]
    assert fds() - before <= 8 * 4, (before, fds())
    # What opens the rest on use: a freeze, a reading, a capture.
    sid = ids[0]
    assert tenant.post(f"/v1/sandboxes/{sid}/pause").status == 200
    assert tenant.post(f"/v1/sandboxes/{sid}/resume").status == 200
    assert output(tenant.exec(sid, {"shell": "head -c 3000000 /dev/zero > /tmp/d"})) == b""
    wait_for(lambda: tenant.get(f"/v1/sandboxes/{sid}/metrics").json["current"]
             ["disk_used_bytes"] >= 3_000_000, 15)
    r = tenant.post(f"/v1/sandboxes/{sid}/snapshots")
    assert r.status in (200, 201), r
    for s in ids:
        assert tenant.delete(f"/v1/sandboxes/{s}").status in (200, 204)
    assert tenant.delete(f"/v1/snapshots/{r.json['id']}").status in (200, 204)
    wait_for(lambda: fds() <= before + 2, 10)


def children(pid):
    """{child pid: its name} of every thread of pid."""
    out = {}
    for task in os.listdir(f"/proc/{pid}/task"):
        for c in open(f"/proc/{pid}/task/{task}/children").read().split():
            out[int(c)] = open(f"/proc/{c}/comm").read().strip()
    return out


def test_sandboxes_are_cloned_by_a_spawner_that_holds_none_of_the_servers_fds(server, tmp_path):
    """Cloning from the server would copy its page tables and descriptors
    into each sandbox's first process (spawner.c): a process forked at
    start clones them instead, holding only its socket, and the agents
    stay the server's children. It ends with the server, even killed."""
    tenant = new_tenant(server)
    before = {p for p, n in children(server.proc.pid).items() if n == "hutch-agent"}
    sid = tenant.create()["id"]
    kids = children(server.proc.pid)
    spawners = [p for p, n in kids.items() if n == "hutch-spawner"]
    assert len(spawners) == 1, kids
    # stdin, stdout and stderr (the server's), and its socket
    fds = {int(f): os.readlink(f"/proc/{spawners[0]}/fd/{f}")
           for f in os.listdir(f"/proc/{spawners[0]}/fd")}
    high = [f for n, f in fds.items() if n > 2]
    assert len(high) == 1 and high[0].startswith("socket:"), fds
    agents = {p for p, n in kids.items() if n == "hutch-agent"} - before
    assert len(agents) == 1, kids
    assert output(tenant.exec(sid, {"cmd": ["echo", "ok"]})) == b"ok\n"
    assert tenant.delete(f"/v1/sandboxes/{sid}").status in (200, 204)
    other = Server(BUILD / "hutch-serve", tmp_path / "state").start()
    spawner = next(p for p, n in children(other.proc.pid).items() if n == "hutch-spawner")
    other.stop(signal.SIGKILL)
    wait_for(lambda: not os.path.exists(f"/proc/{spawner}"), 10)
