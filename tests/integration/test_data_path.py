"""The data path (docs/performance.md, "The data path"): large transfers
through the egress proxy, the port route and the file routes arrive
intact, a client that reads slowly holds the server to a bounded buffer,
and a client that asks to hear before it sends its body (Expect:
100-continue) is told at once. Only loopback is used. Against both builds
of the server."""
import hashlib
import http.client
import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from conftest import serve_each_build
from serveapi import output, wait_for

BIG = 64 << 20


def content(n):
    """n bytes that are not one repeated block (a block dropped or sent
    twice changes the hash)."""
    out = bytearray()
    i = 0
    while len(out) < n:
        out += hashlib.sha256(i.to_bytes(8, "big")).digest() * 2048
        i += 1
    return bytes(out[:n])


@pytest.fixture(scope="module")
def data():
    d = content(BIG)
    return d, hashlib.sha256(d).hexdigest()


@pytest.fixture(scope="module", params=["build", "asan"])
def server(request, tmp_path_factory):
    yield from serve_each_build(request, tmp_path_factory, "--egress-permit", "127.0.0.1")


@pytest.fixture
def origin(data):
    body = data[0]

    class H(BaseHTTPRequestHandler):
        def do_GET(self):  # HTTP/1.0: the connection ends with the body
            self.wfile.write(b"HTTP/1.0 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body))
            self.wfile.write(body)

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), H)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield httpd.server_address[1]
    httpd.shutdown()
    httpd.server_close()


def shell(api, sid, script):
    lines = api.exec(sid, {"shell": script}, timeout=300)
    assert lines[-1].get("exit_code") == 0, lines[-3:]
    return output(lines).decode()


def test_big_transfers_through_the_proxy_and_a_port_arrive_intact(server, tenant, origin,
                                                                  data):
    body, want = data
    sb = tenant.create(network={"allow": [f"127.0.0.1:{origin}"]}, memory_mb=512)
    sid = sb["id"]
    url = f"http://127.0.0.1:{origin}/big"
    # Out through the proxy: a plain request, and a CONNECT tunnel.
    got = shell(tenant, sid, f"curl --noproxy '' -sS {url} | sha256sum; "
                             f"curl --noproxy '' -sS -p {url} | sha256sum")
    assert [l.split()[0] for l in got.splitlines()] == [want, want]
    # In through the port route: a download of a file the sandbox serves,
    # and an upload its service hashes.
    shell(tenant, sid, f"curl --noproxy '' -sS -o /tmp/big {url}")
    tenant.post(f"/v1/sandboxes/{sid}/exec",
                {"cmd": ["python3", "-m", "http.server", "-d", "/tmp", "8000"],
                 "background": True})
    port = f"/v1/sandboxes/{sid}/ports/8000"
    wait_for(lambda: tenant.get(f"{port}/").status == 200, 20)
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=300)
    conn.request("GET", f"{port}/big", headers=tenant.headers())
    r = conn.getresponse()
    h = hashlib.sha256()
    while chunk := r.read(1 << 20):
        h.update(chunk)
    conn.close()
    assert r.status == 200 and h.hexdigest() == want


def test_a_slow_reader_holds_the_server_to_a_bounded_buffer(server, tenant, data):
    body, want = data
    sb = tenant.create(memory_mb=512, disk_mb=256)
    path = f"/v1/sandboxes/{sb['id']}/files?path=/tmp/big"
    assert tenant.request("PUT", path, body, timeout=300).status == 200

    def rss_kib():
        with open(f"/proc/{server.proc.pid}/status") as f:
            return int(next(l for l in f if l.startswith("VmRSS:")).split()[1])

    before = rss_kib()
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=300)
    conn.request("GET", path, headers=tenant.headers())
    r = conn.getresponse()
    h = hashlib.sha256(r.read(1 << 20))
    time.sleep(2)  # the reader stalls: what is in flight stays bounded
    grown = rss_kib() - before
    while chunk := r.read(1 << 20):
        h.update(chunk)
    conn.close()
    assert h.hexdigest() == want
    assert grown < 16 << 10, f"server RSS grew {grown} KiB behind a stalled reader"


def test_a_client_that_expects_100_continue_hears_it(server, tenant):
    sb = tenant.create()
    body = b"y" * (3 << 20)
    head = (f"PUT /v1/sandboxes/{sb['id']}/files?path=/tmp/c HTTP/1.1\r\n"
            f"Host: x\r\nAuthorization: {tenant.headers()['Authorization']}\r\n"
            f"Content-Length: {len(body)}\r\nExpect: 100-continue\r\n\r\n").encode()
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as s:
        s.sendall(head)
        s.settimeout(0.5)  # curl waits a second before it sends anyway
        assert s.recv(100) == b"HTTP/1.1 100 Continue\r\n\r\n"
        s.settimeout(30)
        s.sendall(body)
        r = http.client.HTTPResponse(s)
        r.begin()
        assert r.status == 200 and json.loads(r.read())["size"] == len(body)
    # A body refused before it was sent is never asked for.
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as s:
        s.sendall(head.replace(sb["id"].encode(), b"0000000000000000"))
        got = s.recv(4096)
    assert got.startswith(b"HTTP/1.1 404 ")
