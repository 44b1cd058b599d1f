"""Network (docs/network.md): the egress proxy and its allow-list, secrets
the sandbox never sees, a sandbox's ports reached through the server.

Only loopback is used: the hosts "out there" are HTTP servers of this test
on the host's 127.0.0.1, which a sandbox (whose 127.0.0.1 is its own)
reaches only through its proxy, and only because the operator lifted the
deny floor for them (--egress-permit). The floor itself is tested at the
end, with services on the host's loopback it must keep sandboxes from.
Against both builds of the server."""
import base64
import hashlib
import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from conftest import BUILD, leftovers, require, serve_each_build
from serveapi import Server, WebSocket, error_of, output, wait_for

SECRET = "Bearer s3cr3t-" + "7f3a9c" * 4

# A service a sandbox runs on a port: /headers echoes the request's
# headers, POST /sum counts and hashes the body, /ws echoes WebSocket frames.
SERVICE = r'''
import base64, hashlib, json, sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def reply(self, body, ctype="application/json"):
        self.send_response(200)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def do_GET(self):
        if self.path.startswith("/ws"):
            return self.ws()
        if self.path.startswith("/headers"):
            return self.reply(json.dumps(dict(self.headers.items())).encode())
        self.reply(("hello from " + self.path).encode(), "text/plain")
    def do_POST(self):
        n = int(self.headers["Content-Length"])
        h, left = hashlib.sha256(), n
        while left:
            piece = self.rfile.read(min(left, 1 << 16))
            h.update(piece)
            left -= len(piece)
        self.reply(json.dumps({"len": n, "sha256": h.hexdigest()}).encode())
    def ws(self):
        key = self.headers["Sec-WebSocket-Key"] + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
        self.send_response(101)
        self.send_header("Upgrade", "websocket")
        self.send_header("Connection", "Upgrade")
        self.send_header("Sec-WebSocket-Accept",
                         base64.b64encode(hashlib.sha1(key.encode()).digest()).decode())
        self.end_headers()
        self.wfile.flush()
        while True:
            b0, b1 = self.rfile.read(2)
            n = b1 & 0x7F
            if n == 126:
                n = int.from_bytes(self.rfile.read(2), "big")
            elif n == 127:
                n = int.from_bytes(self.rfile.read(8), "big")
            mask = self.rfile.read(4)
            data = bytes(b ^ mask[i % 4] for i, b in enumerate(self.rfile.read(n)))
            if b0 & 0x0F == 8:
                self.wfile.write(b"\x88\x00")
                return
            data = b"echo:" + data
            head = bytes([0x81, len(data)]) if len(data) < 126 else \
                bytes([0x81, 126]) + len(data).to_bytes(2, "big")
            self.wfile.write(head + data)
            self.wfile.flush()
    def log_message(self, *a):
        pass

ThreadingHTTPServer((sys.argv[2], int(sys.argv[1])), H).serve_forever()
'''


@pytest.fixture(scope="module", params=["build", "asan"])
def server(request, tmp_path_factory):
    # The origins listen on ports of 127.0.0.1 chosen as they start: the
    # whole address is lifted from the floor (hutch's own port stays in).
    yield from serve_each_build(request, tmp_path_factory, "--egress-permit", "127.0.0.1")


class Origin:
    """An HTTP server on the host's loopback (or host, an address of a
    namespace the test made) that records what it got; HTTPS with tls (an
    ssl.SSLContext). With reflect, it hands each request header back as
    X-Echo-NAME, and in base64 as X-Echo64-NAME (a hostile host's way to
    give a secret to the sandbox). lines: each request line it got; a
    TRACE or TRACK gets the request back in the body, as Apache and IIS
    answer them."""

    def __init__(self, host="127.0.0.1", tls=None, reflect=False, port=0):
        seen = self.seen = []
        lines = self.lines = []

        class H(BaseHTTPRequestHandler):
            def do_GET(self):
                seen.append(dict(self.headers.items()))
                lines.append(self.requestline)
                body = f"origin {self.path}".encode()
                if self.command in ("TRACE", "TRACK"):
                    body = f"{self.requestline}\r\n{self.headers}".encode()
                self.send_response(200)
                for k, v in self.headers.items() if reflect else ():
                    self.send_header(f"X-Echo-{k}", v)
                    self.send_header(f"X-Echo64-{k}", base64.b64encode(v.encode()).decode())
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_OPTIONS = do_TRACE = do_TRACK = do_GET

            def log_message(self, *a):
                pass

        kind = ThreadingHTTPServer
        if ":" in host:
            kind = type("Server6", (ThreadingHTTPServer,), {"address_family": socket.AF_INET6})
        self.httpd = kind((host, port), H)
        if tls:
            self.httpd.socket = tls.wrap_socket(self.httpd.socket, server_side=True)
        self.port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def origins():
    made = [Origin(), Origin()]
    yield made
    for o in made:
        o.close()


def sh(api, sid, script, timeout=60):
    """(exit code, stdout, stderr) of a shell script in the sandbox."""
    lines = api.exec(sid, {"shell": script}, timeout=timeout)
    return (lines[-1]["exit_code"], output(lines).decode(errors="replace"),
            output(lines, "stderr").decode(errors="replace"))


# The sandbox's own 127.0.0.1 is in NO_PROXY: reaching the host's goes
# through the proxy by asking for it.
CURL = "curl --noproxy '' -sS -m 10 -o /dev/null -w '%{http_code}'"


def audit(server):
    return [json.loads(l) for l in (server.state_dir / "audit.jsonl").read_text().splitlines()]


def test_allowlist_lets_through_what_it_lists(server, tenant, origins):
    a, b = origins
    sb = tenant.create(network={"allow": [f"127.0.0.1:{a.port}"]})
    assert sb["network"] == {"mode": "allowlist", "allow": [f"127.0.0.1:{a.port}"],
                             "public_ports": [], "public": False}
    code, out, err = sh(tenant, sb["id"], f"{CURL} http://127.0.0.1:{a.port}/plain; echo; "
                                          f"{CURL} -p http://127.0.0.1:{a.port}/tunnel; echo; "
                                          f"{CURL} http://127.0.0.1:{b.port}/other; echo; "
                                          f"curl --noproxy '' -sS http://127.0.0.1:{b.port}/")
    assert code == 0, err
    assert out.splitlines()[:3] == ["200", "200", "403"], out
    assert "not in the sandbox's allow-list" in out
    assert [h for h in a.seen if h.get("Host") == f"127.0.0.1:{a.port}"]
    assert not b.seen
    # The environment tells every workload where the proxy is.
    code, out, _ = sh(tenant, sb["id"], "env")
    env = dict(l.split("=", 1) for l in out.splitlines() if "=" in l)
    for var in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy"):
        assert env[var] == "http://127.0.0.1:3128"
    assert "127.0.0.1" in env["NO_PROXY"] and "localhost" in env["no_proxy"]


def test_no_route_out_but_the_proxy(server, tenant, origins):
    sb = tenant.create()  # mode none
    assert sb["network"]["mode"] == "none"
    probe = r'''
import socket
for kind, addr in (("tcp-host", ("127.0.0.1", %d)), ("tcp-out", ("192.0.2.1", 80))):
    s = socket.socket()
    s.settimeout(3)
    print(kind, s.connect_ex(addr))
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
try:
    u.sendto(b"x", ("192.0.2.1", 53)); print("udp sent")
except OSError as e:
    print("udp", e.errno)
try:
    socket.getaddrinfo("example.com", 80); print("dns resolved")
except OSError as e:
    print("dns failed")
''' % origins[0].port
    code, out, err = sh(tenant, sb["id"], f"python3 - <<'EOF'\n{probe}\nEOF\n"
                                          f"{CURL} http://127.0.0.1:{origins[0].port}/")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == "tcp-host 111", lines  # its own loopback: nothing listens
    assert lines[1] == "tcp-out 101", lines   # ENETUNREACH: there is no route
    assert lines[2] == "udp 101" and lines[3] == "dns failed", lines
    assert lines[4] == "403"
    assert not origins[0].seen


def test_names_wildcards_and_private_addresses(server, tenant, origins):
    a = origins[0]
    # A name listed exactly may lead to a private address (localhost is in
    # the host's /etc/hosts); through a wildcard it may not.
    sb = tenant.create(network={"allow": [f"localhost:{a.port}"]})
    code, out, _ = sh(tenant, sb["id"], f"{CURL} http://localhost:{a.port}/exact")
    assert out == "200"
    r = tenant.request("PATCH", f"/v1/sandboxes/{sb['id']}/network", {"allow": ["*"]})
    assert r.status == 200 and r.json["network"]["allow"] == ["*"]
    code, out, _ = sh(tenant, sb["id"], f"curl --noproxy '' -sS http://localhost:{a.port}/wild; "
                                        f"{CURL} http://127.0.0.1:{a.port}/literal")
    assert "127.0.0.1, an address of a private network" in out and out.endswith("403"), out
    # The metadata service: never by name, nor as a literal unless listed,
    # nor hidden in an IPv6 form.
    code, out, _ = sh(tenant, sb["id"], f"{CURL} http://169.254.169.254/latest/meta-data/; echo; "
                                        f"curl -sS -m 10 -p -o /dev/null -w '%{{http_connect}}' "
                                        f"http://169.254.169.254/; echo; "
                                        f"{CURL} 'http://[::ffff:169.254.169.254]/'")
    assert out.split() == ["403", "403", "403"], out
    assert [h["Host"] for h in a.seen] == [f"localhost:{a.port}"]


def test_policy_changes_on_a_running_sandbox(server, tenant, origins):
    a = origins[0]
    sb = tenant.create()
    url = f"http://127.0.0.1:{a.port}/"
    assert sh(tenant, sb["id"], f"{CURL} {url}")[1] == "403"
    r = tenant.request("PATCH", f"/v1/sandboxes/{sb['id']}/network",
                       {"mode": "allowlist", "allow": [f"127.0.0.1:{a.port}"]})
    assert r.status == 200, r
    assert sh(tenant, sb["id"], f"{CURL} {url}")[1] == "200"
    # A tunnel open when the policy forbids its host again is cut.
    holder = socket.create_server(("127.0.0.1", 0))
    held = []
    threading.Thread(target=lambda: held.append(holder.accept()), daemon=True).start()
    tunnel = r'''
import socket, sys
s = socket.create_connection(("127.0.0.1", 3128))
s.sendall(b"CONNECT 127.0.0.1:%d HTTP/1.1\r\n\r\n")
print(s.recv(100).split(b"\r\n")[0].decode(), flush=True)
print("cut" if s.recv(100) == b"" else "data", flush=True)
''' % holder.getsockname()[1]
    tenant.request("PATCH", f"/v1/sandboxes/{sb['id']}/network",
                   {"allow": [f"127.0.0.1:{a.port}", f"127.0.0.1:{holder.getsockname()[1]}"]})
    conn, resp = tenant.exec_stream(sb["id"], {"cmd": ["python3", "-c", tunnel]})
    first = json.loads(resp.readline())
    assert first["type"] == "start"
    line = json.loads(resp.readline())
    assert line["data"].startswith("HTTP/1.1 200"), line
    wait_for(lambda: held)
    r = tenant.request("PATCH", f"/v1/sandboxes/{sb['id']}/network", {"mode": "none"})
    assert r.status == 200 and r.json["network"] == {"mode": "none", "allow": [],
                                                     "public_ports": [], "public": False}
    rest = [json.loads(l) for l in resp.read().splitlines()]
    conn.close()
    holder.close()
    assert output(rest) == b"cut\n" and rest[-1]["exit_code"] == 0, rest
    assert sh(tenant, sb["id"], f"{CURL} {url}")[1] == "403"


def test_secrets_reach_the_host_but_never_the_sandbox(server, tenant, origins):
    a = origins[0]
    sb = tenant.create(network={"allow": [f"localhost:{a.port}"]},
                       secrets=[{"host": "localhost", "header": "Authorization", "value": SECRET,
                                 "http_ports": [a.port]}],
                       env={"OTHER": "x"})
    assert "secrets" not in sb and SECRET not in json.dumps(tenant.get(
        f"/v1/sandboxes/{sb['id']}").json)
    code, out, _ = sh(tenant, sb["id"],
                      f"{CURL} -H 'Authorization: Bearer forged' http://localhost:{a.port}/api")
    assert out == "200"
    assert a.seen[-1]["Authorization"] == SECRET  # replaced, not added to
    needle = SECRET.split()[1]
    code, out, err = sh(tenant, sb["id"],
                        f"env; cat /proc/*/environ | tr '\\0' '\\n'; "
                        f"grep -rsl --exclude-dir=proc --exclude-dir=sys --exclude-dir=usr "
                        f"--exclude-dir=dev {needle} / ; true")
    assert needle not in out and needle not in err
    assert "OTHER=x" in out


def test_forks_keep_the_network(server, tenant, origins):
    a = origins[0]
    sb = tenant.create(network={"allow": [f"localhost:{a.port}"]},
                       secrets=[{"host": "localhost", "header": "X-Key", "value": "fork-k",
                                 "http_ports": [a.port]}])
    r = tenant.post(f"/v1/sandboxes/{sb['id']}/fork", {"count": 1})
    assert r.status == 201, r
    fork = r.json["sandboxes"][0]
    assert fork["network"] == sb["network"] and fork["traffic_token"] != sb["traffic_token"]
    assert sh(tenant, fork["id"], f"{CURL} http://localhost:{a.port}/f")[1] == "200"
    assert a.seen[-1]["X-Key"] == "fork-k"


def test_ports_are_reached_by_path_and_by_host(server, tenant):
    sb = tenant.create()
    sid = sb["id"]
    r = tenant.request("PUT", f"/v1/sandboxes/{sid}/files?path=/tmp/service.py", SERVICE)
    assert r.status in (200, 201), r
    tenant.post(f"/v1/sandboxes/{sid}/exec",
                {"cmd": ["python3", "/tmp/service.py", "8000", "0.0.0.0"], "background": True})
    by_path = f"/v1/sandboxes/{sid}/ports/8000"
    wait_for(lambda: tenant.get(f"{by_path}/").status == 200, 20)
    r = tenant.get(f"{by_path}/a/b?c=d")
    assert r.status == 200 and r.raw == b"hello from /a/b?c=d"
    host = f"8000-{sid}.{sb['domain']}:{server.port}"
    r = tenant.get("/x/y", headers={"Host": host})
    assert r.status == 200 and r.raw == b"hello from /x/y"
    # Private: no credential, 401; another tenant's key, 404; the traffic
    # token, in. hutch's credentials never reach the service.
    anon = server.api(None)
    assert error_of(anon.get(f"{by_path}/")) == "unauthorized"
    assert anon.get("/", headers={"Host": host}).status == 401
    other = server.api(server.api().post("/v1/keys", {"tenant": "other-net"}).json["key"])
    assert error_of(other.get(f"{by_path}/")) == "not_found"
    r = anon.get("/headers", headers={"Host": host, "X-Hutch-Traffic-Token": sb["traffic_token"]})
    assert r.status == 200
    seen = {k.lower(): v for k, v in r.json.items()}
    assert "x-hutch-traffic-token" not in seen
    seen = {k.lower(): v for k, v in tenant.get(f"{by_path}/headers").json.items()}
    assert "authorization" not in seen
    # A body streams in, and the service's answer out.
    body = bytes(range(256)) * (5 << 12)
    r = tenant.request("POST", f"{by_path}/sum", body)
    assert r.json == {"len": len(body), "sha256": hashlib.sha256(body).hexdigest()}
    # Public on request: a port, or all.
    r = tenant.request("PATCH", f"/v1/sandboxes/{sid}/network", {"public_ports": [8000]})
    assert r.status == 200 and r.json["network"]["public_ports"] == [8000]
    assert anon.get(f"{by_path}/pub").raw == b"hello from /pub"
    assert error_of(anon.get(f"/v1/sandboxes/{sid}/ports/8001/")) == "unauthorized"
    r = tenant.request("PATCH", f"/v1/sandboxes/{sid}/network", {"public": True})
    assert r.json["network"]["public"] is True and r.json["network"]["public_ports"] == [8000]
    assert error_of(anon.get(f"/v1/sandboxes/{sid}/ports/8001/")) == "port_closed"
    # A client that keeps connections (http.client, as Node's keep-alive
    # agent) is told each ends, and makes a new one for its next request.
    keep = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    for n in range(3):
        keep.request("GET", f"{by_path}/again{n}", headers={"Authorization": f"Bearer {tenant.key}"})
        r = keep.getresponse()
        assert (r.status, r.read(), r.getheader("Connection")) == (
            200, f"hello from /again{n}".encode(), "close")
    keep.close()
    # Nothing listening: 502.
    assert error_of(tenant.get(f"/v1/sandboxes/{sid}/ports/8001/")) == "port_closed"
    # audit lines are written off the loop, moments after a connection ends
    def lines():
        return [l for l in audit(server) if l.get("action") == "sandbox.port" and
                l.get("sandbox") == sid and "bytes_in" in l]
    wait_for(lines)
    assert all(l["port"] == 8000 for l in lines())


# A service that answers every request and keeps the connection, whatever
# it is asked: it records all it receives.
GREEDY = r'''
import socket
srv = socket.create_server(("127.0.0.1", 8500))
while True:
    c, _ = srv.accept()
    with open("/tmp/got", "ab") as log:
        while data := c.recv(65536):
            log.write(data)
            log.flush()
            c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: keep-alive\r\n\r\nok")
'''


def serving(tenant, script, port):
    """A new sandbox of tenant's running the Python service script, which
    listens on port: the sandbox and the port's path, once it answers."""
    sb = tenant.create()
    sid = sb["id"]
    tenant.request("PUT", f"/v1/sandboxes/{sid}/files?path=/tmp/service{port}.py", script)
    tenant.post(f"/v1/sandboxes/{sid}/exec", {"cmd": ["python3", f"/tmp/service{port}.py"],
                                              "background": True})
    path = f"/v1/sandboxes/{sid}/ports/{port}"
    wait_for(lambda: tenant.get(f"{path}/up").status == 200, 20)
    return sb, path


def test_a_service_gets_one_request_a_connection(server, tenant):
    """A private port's service that keeps the connection open gets no
    second request on it (that would carry the caller's key unchecked)."""
    sb, path = serving(tenant, GREEDY, 8500)
    sid = sb["id"]
    s = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    auth = f"Authorization: Bearer {tenant.key}\r\nX-API-Key: {tenant.key}\r\n"
    s.sendall(f"POST {path}/first HTTP/1.1\r\nHost: x\r\n{auth}Content-Length: 5\r\n\r\nhello"
              .encode())
    first = b""
    while not first.endswith(b"\r\n\r\nok"):  # the whole answer, however it comes
        chunk = s.recv(4096)
        assert chunk, first
        first += chunk
    # The client is told the connection ends, before what the service says
    assert first.startswith(b"HTTP/1.1 200 OK\r\nConnection: close\r\n"), first
    s.sendall(f"GET {path}/second HTTP/1.1\r\nHost: x\r\n{auth}\r\n".encode())
    try:
        rest = s.recv(4096)
    except ConnectionResetError:
        rest = b""
    assert rest == b""  # the connection ends instead
    s.close()
    got = tenant.get(f"/v1/sandboxes/{sid}/files?path=/tmp/got").raw
    assert b"/first" in got and got.endswith(b"hello") and b"/second" not in got, got
    assert tenant.key.encode() not in got and b"Connection: close" in got
    # A chunked body cannot be bounded without reading it: refused.
    s = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    s.sendall(f"POST {path}/chunked HTTP/1.1\r\nHost: x\r\n{auth}"
              "Transfer-Encoding: chunked\r\n\r\n1\r\na\r\n0\r\n\r\n".encode())
    answer = b""
    while chunk := s.recv(4096):  # the answer ends the connection
        answer += chunk
    s.close()
    assert answer.startswith(b"HTTP/1.1 411") and b"length_required" in answer, answer


# A service that records each request's head in /tmp/heads and answers as
# its path asks: /interim a 100 with a page after it, /long a status line
# longer than hutch reads for one, else a small page.
SHOWN = r'''
import socket
srv = socket.create_server(("127.0.0.1", 8600))
page = b"<script>alert(1)</script>"
while True:
    c, _ = srv.accept()
    head = b""
    while b"\r\n\r\n" not in head and (data := c.recv(65536)):
        head += data
    with open("/tmp/heads", "ab") as log:
        log.write(head + b"\0")
    if b" /interim" in head:
        c.sendall(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Type: text/html\r\n"
                  b"Content-Length: %d\r\n\r\n%s" % (len(page), page))
    elif b" /long" in head:
        c.sendall(b"HTTP/1.1 200 " + b"x" * 300 + b"\r\nContent-Length: 2\r\n\r\nok")
    else:
        c.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: %d\r\n\r\n%s"
                  % (len(page), page))
    c.close()
'''


def raw(port, request, head_only=False):
    """request's bytes to the server; all it answers (until it closes, or
    with head_only its answer's head)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(request)
    got = b""
    try:
        while not (head_only and b"\r\n\r\n" in got) and (chunk := s.recv(65536)):
            got += chunk
    except ConnectionResetError:
        pass
    s.close()
    return got


def test_a_port_by_path_is_no_page_of_the_consoles_origin(server, tenant):
    """A port named by its path answers from the API's origin, the web
    console's: its pages get a sandboxed origin of their own, an answer
    that could slip past that policy ends the connection, and the key a
    browser's WebSocket offers as a subprotocol neither opens the port nor
    reaches the service."""
    sb, path = serving(tenant, SHOWN, 8600)
    sid = sb["id"]
    r = tenant.get(f"{path}/page")
    assert r.headers["Content-Security-Policy"].startswith("sandbox allow-scripts"), r.headers
    host = f"8600-{sid}.{sb['domain']}:{server.port}"
    r = tenant.get("/page", headers={"Host": host})  # an origin of its own already
    assert r.status == 200 and "Content-Security-Policy" not in r.headers, r.headers
    auth = f"Authorization: Bearer {tenant.key}\r\n"
    # An interim answer with the real one behind it, and a status line too
    # long to read, end the connection; Expect is not passed in.
    got = raw(server.port, f"POST {path}/interim HTTP/1.1\r\nHost: x\r\n{auth}"
              "Expect: 100-continue\r\nContent-Length: 2\r\n\r\nhi".encode())
    assert b"alert" not in got and not got.startswith(b"HTTP/1.1 100"), got
    got = raw(server.port, f"GET {path}/long HTTP/1.1\r\nHost: x\r\n{auth}\r\n".encode())
    assert got == b"", got
    # The subprotocol key: not a credential here (401), and taken off the
    # header on its way in whatever else opens the port.
    upgrade = ("Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
               "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
               f"Sec-WebSocket-Protocol: chat, hutch.key.{tenant.key}, hutch.v1\r\n")
    got = raw(server.port, f"GET {path}/ws HTTP/1.1\r\nHost: x\r\n{upgrade}\r\n".encode())
    assert got.startswith(b"HTTP/1.1 401"), got
    got = raw(server.port, f"GET {path}/ws HTTP/1.1\r\nHost: x\r\n{auth}{upgrade}\r\n".encode())
    assert got.startswith(b"HTTP/1.1 200"), got
    heads = tenant.get(f"/v1/sandboxes/{sid}/files?path=/tmp/heads").raw.split(b"\0")
    ws = [h for h in heads if b" /ws " in h]
    assert len(ws) == 1 and b"Sec-WebSocket-Protocol: chat, hutch.v1\r\n" in ws[0], ws
    assert tenant.key.encode() not in b"".join(heads)
    assert not any(b"Expect" in h for h in heads), heads
    # Nor is it a key for the rest of the API.
    got = raw(server.port, f"GET /v1/sandboxes HTTP/1.1\r\nHost: x\r\n{upgrade}\r\n".encode(),
              head_only=True)
    assert got.startswith(b"HTTP/1.1 401"), got


def test_a_public_port_never_sees_hutchs_credentials(server, tenant):
    """A public port named by its host has nothing to check, but any
    request on a connection may carry hutch's credentials (an SDK's default
    headers, a browser's pool reusing a connection): the relay does not
    read past the first head, so every connection carries one request,
    cleaned, whichever request comes first."""
    sb = tenant.create()
    sid = sb["id"]
    tenant.request("PUT", f"/v1/sandboxes/{sid}/files?path=/tmp/greedy.py", GREEDY)
    tenant.post(f"/v1/sandboxes/{sid}/exec", {"cmd": ["python3", "/tmp/greedy.py"],
                                              "background": True})
    wait_for(lambda: tenant.get(f"/v1/sandboxes/{sid}/ports/8500/up").status == 200, 20)
    assert tenant.request("PATCH", f"/v1/sandboxes/{sid}/network",
                          {"public_ports": [8500]}).status == 200
    host = f"Host: 8500-{sid}.{sb['domain']}\r\n"

    def exchange(s, path, extra=""):
        try:
            s.sendall(f"GET {path} HTTP/1.1\r\n{host}{extra}\r\n".encode())
            got = b""
            while not got.endswith(b"\r\n\r\nok"):
                chunk = s.recv(4096)
                if not chunk:
                    return got
                got += chunk
            return got
        except (ConnectionResetError, BrokenPipeError):
            return b""

    creds = (f"X-API-Key: {tenant.key}\r\nX-Access-Token: {sb['traffic_token']}\r\n"
             f"X-Hutch-Traffic-Token: {sb['traffic_token']}\r\n")
    for first, second in (("", creds), (creds, creds), ("", "")):
        s = socket.create_connection(("127.0.0.1", server.port), timeout=10)
        assert exchange(s, "/first", first).startswith(b"HTTP/1.1 200")
        assert exchange(s, "/second", second) == b""  # the connection ended
        s.close()
    got = tenant.get(f"/v1/sandboxes/{sid}/files?path=/tmp/got").raw
    assert got.count(b"GET /first") == 3 and b"/second" not in got, got
    assert tenant.key.encode() not in got and sb["traffic_token"].encode() not in got, got


def test_websocket_through_a_port(server, tenant):
    sb = tenant.create()
    sid = sb["id"]
    tenant.request("PUT", f"/v1/sandboxes/{sid}/files?path=/tmp/service.py", SERVICE)
    tenant.post(f"/v1/sandboxes/{sid}/exec",
                {"cmd": ["python3", "/tmp/service.py", "9000", "127.0.0.1"], "background": True})
    wait_for(lambda: tenant.get(f"/v1/sandboxes/{sid}/ports/9000/").status == 200, 20)
    for path, host, key in ((f"/v1/sandboxes/{sid}/ports/9000/ws", "x", tenant.key),
                            ("/ws", f"9000-{sid}.{sb['domain']}", tenant.key)):
        ws = WebSocket(server.port, path, key, host=host)
        assert ws.status == 101 and ws.accepted, ws.head
        for msg in ("one", "two" * 100):
            ws.send(msg)
            assert ws.recv() == (1, f"echo:{msg}".encode())
        ws.send(b"", opcode=8)
        assert ws.recv()[0] == 8
        ws.close()
    ws = WebSocket(server.port, f"/v1/sandboxes/{sid}/ports/9000/ws", None)
    assert ws.status == 401
    ws.close()


def test_audit_lists_every_attempt(server, tenant, origins):
    a = origins[0]
    sb = tenant.create(network={"allow": [f"127.0.0.1:{a.port}"]})
    sh(tenant, sb["id"], f"{CURL} http://127.0.0.1:{a.port}/audited; {CURL} http://pypi.org/")

    def mine():
        return [l for l in audit(server) if l.get("action") == "sandbox.egress" and
                l["sandbox"] == sb["id"]]
    wait_for(lambda: len(mine()) >= 2)  # written off the loop, moments after
    lines = mine()
    ok = [l for l in lines if l["allowed"]]
    denied = [l for l in lines if not l["allowed"]]
    assert len(ok) == 1 and ok[0]["host"] == "127.0.0.1" and ok[0]["port"] == a.port
    assert ok[0]["bytes_in"] > 0 and ok[0]["bytes_out"] > 0 and ok[0]["duration_ms"] >= 0
    assert len(denied) == 1 and denied[0]["host"] == "pypi.org" and denied[0]["status"] == 403
    assert "allow-list" in denied[0]["reason"]
    metrics = server.api().get("/metrics").raw.decode()
    for verdict in ("allowed", "denied"):
        line = f'hutch_egress_connections_total{{verdict="{verdict}"}} '
        assert int(metrics.split(line, 1)[1].split()[0]) >= 1


@pytest.mark.parametrize("network,secrets,code", [
    ({"mode": "open"}, None, "invalid_argument"),
    ({"allow": ["exa mple.com"]}, None, "invalid_argument"),
    ({"allow": ["pypi.org:0"]}, None, "invalid_argument"),
    ({"allow": ["pypi.org:99999"]}, None, "invalid_argument"),
    ({"allow": ["::1"]}, None, "invalid_argument"),
    ({"allow": ["*.*.com"]}, None, "invalid_argument"),
    ({"allow": ["10.0.0.0/33"]}, None, "invalid_argument"),
    ({"allow": ["x.org"] * 257}, None, "invalid_argument"),
    ({"allow": "pypi.org"}, None, "invalid_argument"),
    ({"mode": "none", "allow": ["pypi.org"]}, None, "invalid_argument"),
    ({"public_ports": [70000]}, None, "invalid_argument"),
    ({"bogus": 1}, None, "invalid_argument"),
    ({"public": "yes"}, None, "invalid_argument"),
    (None, [{"host": "a.org", "header": "Host", "value": "x"}], "invalid_argument"),
    (None, [{"host": "a.org", "header": "X-Key", "value": "a\r\nb"}], "invalid_argument"),
    (None, [{"host": "10.0.0.1", "header": "X-Key", "value": "v"}], "invalid_argument"),
    (None, {"host": "a.org"}, "invalid_argument"),
])
def test_bad_policies_are_refused(server, tenant, network, secrets, code):
    body = {k: v for k, v in (("network", network), ("secrets", secrets)) if v is not None}
    r = tenant.post("/v1/sandboxes", body)
    assert r.status == 400 and error_of(r) == code, r
    assert tenant.get("/v1/sandboxes").json["sandboxes"] == []


def test_hostile_proxy_clients_and_bad_routes(server, tenant, origins):
    sb = tenant.create(network={"allow": [f"127.0.0.1:{origins[0].port}"]})
    sid = sb["id"]
    hostile = r'''
import socket
def ask(data):
    s = socket.create_connection(("127.0.0.1", 3128))
    s.sendall(data)
    out = b""
    while chunk := s.recv(4096):
        out += chunk
    return out.split(b"\r\n")[0].decode()
print(ask(b"HELLO\r\n\r\n"))
print(ask(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"))
print(ask(b"GET https://127.0.0.1/ HTTP/1.1\r\n\r\n"))
print(ask(b"GET http://127.0.0.1/ HTTP/1.1\r\nX: " + b"a" * 20000 + b"\r\n\r\n"))
print(ask(b"CONNECT bad_host!:80 HTTP/1.1\r\n\r\n"))
print(ask(b"CONNECT 127.0.0.1:0 HTTP/1.1\r\n\r\n"))
'''
    code, out, err = sh(tenant, sid, f"python3 - <<'EOF'\n{hostile}\nEOF")
    assert code == 0, err
    statuses = [l.split()[1] for l in out.splitlines()]
    assert statuses == ["400", "400", "400", "431", "400", "400"], out
    # The proxy serves on.
    assert sh(tenant, sid, f"{CURL} http://127.0.0.1:{origins[0].port}/")[1] == "200"
    assert error_of(tenant.get(f"/v1/sandboxes/{sid}/ports/0/")) == "invalid_argument"
    assert error_of(tenant.get(f"/v1/sandboxes/{sid}/ports/abc/")) == "invalid_argument"
    assert error_of(tenant.get(f"/v1/sandboxes/{sid}/ports/99999/")) == "invalid_argument"
    assert error_of(tenant.get("/v1/sandboxes/0123456789abcdef/ports/80/")) == "not_found"
    r = tenant.request("PATCH", f"/v1/sandboxes/{sid}/network", {"secrets": "x"})
    assert error_of(r) == "invalid_argument"
    r = tenant.request("PATCH", "/v1/sandboxes/0123456789abcdef/network", {"mode": "none"})
    assert error_of(r) == "not_found"
    # The failed change left the policy as it was.
    assert tenant.get(f"/v1/sandboxes/{sid}").json["network"]["allow"] == [
        f"127.0.0.1:{origins[0].port}"]


def test_the_network_survives_restarts(tmp_path, origins):
    """SIGTERM and SIGKILL: the next server keeps the policy, the secrets
    and the traffic token, opens the proxy again, and reaches the ports."""
    a = origins[0]
    before = set(leftovers())
    s = Server(BUILD / "hutch-serve", tmp_path / "state",
               "--egress-permit", f"127.0.0.1:{a.port}").start()
    try:
        api = s.api()
        sb = api.create(network={"allow": [f"localhost:{a.port}"]},
                        secrets=[{"host": "localhost", "header": "X-Key", "value": "k1",
                                  "http_ports": [a.port]}])
        sid = sb["id"]
        # A change that leaves the secrets out keeps them, stored too.
        sb = api.request("PATCH", f"/v1/sandboxes/{sid}/network", {"public_ports": [8000]}).json
        api.request("PUT", f"/v1/sandboxes/{sid}/files?path=/tmp/service.py", SERVICE)
        api.post(f"/v1/sandboxes/{sid}/exec",
                 {"cmd": ["python3", "/tmp/service.py", "8000", "0.0.0.0"], "background": True})
        port = f"/v1/sandboxes/{sid}/ports/8000/up"
        wait_for(lambda: api.get(port).status == 200, 20)
        for sig in (signal.SIGTERM, signal.SIGKILL):
            s.stop(sig)
            s.start()
            got = api.get(f"/v1/sandboxes/{sid}").json
            assert got["network"] == sb["network"]
            assert got["traffic_token"] == sb["traffic_token"]
            code, out, _ = sh(api, sid, f"{CURL} http://localhost:{a.port}/again")
            assert out == "200" and a.seen[-1]["X-Key"] == "k1"
            assert s.api(None).get(port).raw == b"hello from /up"  # public, the same service
    finally:
        assert s.stop() == 0
    wait_for(lambda: not set(leftovers()) - before, 30)


def test_idle_relays_end(tmp_path):
    """--relay-idle: a tunnel through the proxy and a connection to a port
    that move no byte for that long are closed."""
    before = set(leftovers())
    holder = socket.create_server(("127.0.0.1", 0))
    held = []
    threading.Thread(target=lambda: held.append(holder.accept()), daemon=True).start()
    s = Server(BUILD / "hutch-serve", tmp_path / "state", "--relay-idle", "1",
               "--egress-permit", f"127.0.0.1:{holder.getsockname()[1]}").start()
    try:
        api = s.api()
        sid = api.create(network={"allow": [f"127.0.0.1:{holder.getsockname()[1]}"],
                                  "public": True})["id"]
        tunnel = r'''
import socket, time
s = socket.create_connection(("127.0.0.1", 3128))
s.sendall(b"CONNECT 127.0.0.1:%d HTTP/1.1\r\n\r\n")
assert s.recv(100).startswith(b"HTTP/1.1 200")
t = time.monotonic()
assert s.recv(100) == b""
print(round(time.monotonic() - t))
''' % holder.getsockname()[1]
        code, out, err = sh(api, sid, f"python3 - <<'EOF'\n{tunnel}\nEOF")
        assert code == 0, err
        assert 1 <= int(out) <= 4, out
        wait_for(lambda: any("no byte either way" in l.get("reason", "") for l in audit(s)
                             if l.get("action") == "sandbox.egress"))
        # A port: a connection that sends nothing after its head is closed.
        api.request("PUT", f"/v1/sandboxes/{sid}/files?path=/tmp/greedy.py", GREEDY)
        api.post(f"/v1/sandboxes/{sid}/exec", {"cmd": ["python3", "/tmp/greedy.py"],
                                               "background": True})
        wait_for(lambda: api.get(f"/v1/sandboxes/{sid}/ports/8500/up").status == 200, 20)
        c = socket.create_connection(("127.0.0.1", s.port), timeout=10)
        c.sendall(f"GET /x HTTP/1.1\r\nHost: 8500-{sid}.localhost\r\n\r\n".encode())
        got, t = b"", time.monotonic()
        while chunk := c.recv(4096):
            got += chunk
        assert got.startswith(b"HTTP/1.1 200") and 1 <= time.monotonic() - t <= 4
        c.close()
    finally:
        holder.close()
        assert s.stop() == 0
    wait_for(lambda: not set(leftovers()) - before, 30)


# ---- the operator's deny floor ----

def floor_refusals(server, api, sid, urls, seen):
    """Each URL asked for through the proxy, as a plain request and as a
    CONNECT tunnel, from the sandbox: every one must be refused (403) by
    the deny floor, with an audit line saying so, and reach nothing."""
    script = "; echo; ".join(
        f"curl --noproxy '' -sS -m 10 '{u}'; echo; "
        f"curl --noproxy '' -sS -m 10 -p -o /dev/null -w '%{{http_connect}}' '{u}'"
        for u in urls)
    code, out, err = sh(api, sid, script)
    lines = [l for l in out.splitlines() if l]
    assert len(lines) == 2 * len(urls), (out, err)
    for i, url in enumerate(urls):
        body, tunnel = lines[2 * i], lines[2 * i + 1]
        assert "is not allowed" in body and "deny floor" in body, (url, body)
        assert tunnel == "403", (url, out, err)
    assert not any(seen()), "a host service behind the floor was reached"

    def refused():
        return [l for l in audit(server) if l.get("action") == "sandbox.egress" and
                l["sandbox"] == sid]
    wait_for(lambda: len(refused()) >= 2 * len(urls))
    for line in refused():
        assert not line["allowed"] and line["status"] == 403, line
        assert "deny floor" in line["reason"], line
    return lines


class TestDenyFloor:
    """The operator's deny floor (docs/network.md): the host's loopback,
    hutch's own API, and the same addresses in other forms are out of
    every sandbox's reach, whatever its allow-list names; only the
    operator lifts the floor, by exactly what --egress-permit names.
    Services listen on the host's 127.0.0.1 and ::1 meanwhile: each must
    see nothing. Every target is one that, were the floor to fail, would
    reach the loopback (forms that lead elsewhere, NAT64 or 6to4, are
    tested in tests/unit/test_netpolicy.c, with no packet sent)."""

    @pytest.fixture(scope="class")
    def hosts(self):
        made = {"permitted": Origin(), "hidden": Origin(), "hidden6": Origin("::1")}
        yield made
        for o in made.values():
            o.close()

    @pytest.fixture(scope="class", params=["build", "asan"])
    def server(self, request, tmp_path_factory, hosts):
        yield from serve_each_build(request, tmp_path_factory,
                                    "--egress-permit", f"127.0.0.1:{hosts['permitted'].port}")

    @pytest.mark.parametrize("allow,url", [
        (["127.0.0.1:{h}"], "http://127.0.0.1:{h}/literal"),
        (["localhost:{h}"], "http://localhost:{h}/by-name"),  # DNS leads to the floor
        (["localhost"], "http://localhost:{h6}/by-name-v6"),
        (["0.0.0.0/0"], "http://127.0.0.1:{h}/everything"),
        (["0.0.0.0/0"], "http://127.0.0.2:{h}/another-loopback"),
        (["0.0.0.0/0"], "http://0.0.0.0:{h}/unspecified"),  # connect(2) makes it 127.0.0.1
        (["0.0.0.0/0", "[::/0]"], "http://[::ffff:127.0.0.1]:{h}/mapped"),
        (["[::1]"], "http://[::1]:{h6}/v6"),
        (["[::/0]"], "http://[::]:{h6}/v6-unspecified"),
    ])
    def test_no_allow_list_reaches_the_host(self, server, tenant, hosts, allow, url):
        ports = {"h": hosts["hidden"].port, "h6": hosts["hidden6"].port}
        allow = [a.format(**ports) for a in allow]
        sb = tenant.create(network={"allow": allow})
        assert sb["network"]["allow"] == allow  # taken: it is the floor that refuses
        floor_refusals(server, tenant, sb["id"], [url.format(**ports)],
                       lambda: [hosts["hidden"].seen, hosts["hidden6"].seen])

    def test_e2b_allow_out_everything_stops_at_the_floor(self, server, tenant, hosts):
        r = tenant.post("/v2/sandboxes", {"templateID": "base", "network":
                                          {"allowOut": ["0.0.0.0/0", "::/0"]}},
                        headers={"X-API-Key": tenant.key})
        assert r.status == 201, r
        h, h6 = hosts["hidden"].port, hosts["hidden6"].port
        floor_refusals(server, tenant, r.json["sandboxID"],
                       [f"http://127.0.0.1:{h}/e2b", f"http://[::1]:{h6}/e2b"],
                       lambda: [hosts["hidden"].seen, hosts["hidden6"].seen])

    def test_a_permit_lifts_exactly_what_it_names(self, server, tenant, hosts):
        p, h = hosts["permitted"].port, hosts["hidden"].port
        sb = tenant.create(network={"allow": ["0.0.0.0/0", "[::/0]", "localhost"]})
        code, out, err = sh(tenant, sb["id"], "; echo; ".join((
            f"{CURL} http://127.0.0.1:{p}/lifted",
            f"{CURL} http://localhost:{p}/by-name",  # ::1 is held; 127.0.0.1 is not
            f"{CURL} http://127.0.0.1:{h}/another-port",
            f"{CURL} http://0.0.0.0:{p}/unspecified",
            f"{CURL} http://[::1]:{p}/v6",
            f"{CURL} http://127.0.0.1:{server.port}/healthz",
            f"{CURL} http://localhost:{server.port}/healthz",
            f"curl --noproxy '' -sS http://127.0.0.1:{server.port}/healthz")))
        assert out.splitlines()[:7] == ["200", "200", "403", "403", "403", "403", "403"], (out, err)
        assert "hutch serve itself" in out, out
        assert [s["Host"] for s in hosts["permitted"].seen[-2:]] == [
            f"127.0.0.1:{p}", f"localhost:{p}"]
        assert not hosts["hidden"].seen and not hosts["hidden6"].seen


def test_bad_floor_options_are_refused(tmp_path):
    serve = BUILD / "hutch-serve"
    help_text = subprocess.run([str(serve), "--help"], capture_output=True, text=True).stdout
    for flag in ("--egress-deny", "--egress-permit", "--egress-allow-private"):
        assert flag in help_text
    for args in (["--egress-permit", "localhost"], ["--egress-permit", "::1"],
                 ["--egress-permit", "127.0.0.1:0"], ["--egress-deny", "bad host"],
                 ["--egress-permit"]):
        r = subprocess.run([str(serve), "--state-dir", str(tmp_path / "s"), *args],
                           capture_output=True, text=True, timeout=30)
        assert r.returncode == 125 and r.stderr.startswith("hutch serve: "), (args, r)
        assert "\n" not in r.stderr.strip(), r.stderr


@pytest.fixture
def private_service():
    """An HTTP server at 10.255.254.2, a private address that exists only in
    a network namespace this test makes, joined to the host by a veth pair
    (the host's end is 10.255.254.1): no packet leaves the machine."""
    require(shutil.which("ip"), "needs ip (iproute2) to make a network namespace")
    tag = f"hf{os.getpid() % 100000}"
    ns, outer = f"hutch-floor-{tag}", tag

    def ip(*args):
        return subprocess.run(["ip", *args], capture_output=True, text=True)
    made = ip("netns", "add", ns)
    require(made.returncode == 0, f"cannot make a network namespace: {made.stderr.strip()}")
    proc = None
    try:
        for args in (["link", "add", outer, "type", "veth", "peer", "name", "inner", "netns", ns],
                     ["addr", "add", "10.255.254.1", "peer", "10.255.254.2", "dev", outer],
                     ["link", "set", outer, "up"],
                     ["-n", ns, "addr", "add", "10.255.254.2", "peer", "10.255.254.1",
                      "dev", "inner"],
                     ["-n", ns, "link", "set", "inner", "up"],
                     ["-n", ns, "link", "set", "lo", "up"]):
            r = ip(*args)
            assert r.returncode == 0, (args, r.stderr)
        proc = subprocess.Popen(
            ["ip", "netns", "exec", ns, "python3", "-c",
             "import http.server as h; h.ThreadingHTTPServer(('10.255.254.2', 8080), "
             "h.SimpleHTTPRequestHandler).serve_forever()"],
            cwd="/usr/share/doc", stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

        def up():
            with socket.socket() as s:
                s.settimeout(1)
                return s.connect_ex(("10.255.254.2", 8080)) == 0
        wait_for(up, 20)
        yield "10.255.254.2:8080"
    finally:
        if proc:
            proc.kill()
            proc.wait()
        ip("link", "del", outer)
        ip("netns", "del", ns)


def test_allow_private_lifts_private_ranges_only(tmp_path, private_service):
    """--egress-allow-private: a private network is reached (here one made by
    the test); the host's loopback, its own addresses and hutch itself are
    not."""
    loop = Origin()
    before = set(leftovers())
    plain = Server(BUILD / "hutch-serve", tmp_path / "plain").start()
    opened = Server(BUILD / "hutch-serve", tmp_path / "opened", "--egress-allow-private").start()
    try:
        for s, private in ((plain, "403"), (opened, "200")):
            api = s.api()
            sid = api.create(network={"allow": ["10.0.0.0/8", "127.0.0.0/8"]})["id"]
            code, out, err = sh(api, sid, "; echo; ".join((
                f"{CURL} http://{private_service}/",
                f"{CURL} http://10.255.254.1:8080/",  # the host's own end
                f"{CURL} http://127.0.0.1:{loop.port}/",
                f"{CURL} http://127.0.0.1:{s.port}/healthz")))
            assert out.splitlines() == [private, "403", "403", "403"], (s.args, out, err)
        assert not loop.seen
    finally:
        loop.close()
        assert plain.stop() == 0 and opened.stop() == 0
    wait_for(lambda: not set(leftovers()) - before, 30)
