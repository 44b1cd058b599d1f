"""A small client of hutch serve's HTTP API for the tests (standard
library only), and a fixture-friendly way to run a server."""
import http.client
import json
import os
import pathlib
import signal
import socket
import subprocess
import time

import hostpaths


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """hutch serve on 127.0.0.1 with its own state dir. No warm pool unless
    args give one: a pool's sandboxes live as long as the server, across
    tests, and the host check after each test would count them."""

    def __init__(self, binary, state_dir, *args):
        self.binary = pathlib.Path(binary)
        self.state_dir = pathlib.Path(state_dir)
        self.args = list(args) if "--pool" in args else ["--pool", "host=0", *args]
        self.port = free_port()
        self.proc = None
        self.sanitized = False  # set for a server built with ASan/UBSan
        self.log = self.state_dir.parent / f"serve-{self.port}.log"

    def start(self):
        self.state_dir.mkdir(parents=True, exist_ok=True)
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(
                [str(self.binary), "--listen", f"127.0.0.1:{self.port}",
                 "--state-dir", str(self.state_dir), *self.args],
                stdout=log, stderr=subprocess.STDOUT)
        # A sanitizer build on the cgroup v2 guest's emulated CPU, beside
        # the host's own stages, takes tens of seconds to answer.
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"hutch serve exited {self.proc.returncode}: {self.log_text()}")
            try:
                if self.api(None).get("/healthz").status == 200:
                    return self
            except OSError:
                pass
            time.sleep(0.02)
        raise RuntimeError(f"hutch serve did not answer: {self.log_text()}")

    def stop(self, sig=signal.SIGINT):
        """SIGINT (the default) destroys the server's sandboxes; SIGTERM
        leaves them for the next start; SIGKILL, for the next start too."""
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(timeout=30)
        return self.proc.returncode

    def log_text(self):
        return self.log.read_text(errors="replace")[-3000:] if self.log.exists() else ""

    @property
    def admin_key(self):
        return (self.state_dir / "admin.key").read_text().strip()

    def api(self, key="admin"):
        return Api(self.port, self.admin_key if key == "admin" else key, self)

    def host_dirs(self):
        """The directories only the host has (hostpaths' rule)."""
        return hostpaths.host_dirs(self.state_dir, self.binary)


class Response:
    def __init__(self, status, headers, body):
        self.status, self.headers, self.raw = status, headers, body

    @property
    def json(self):
        return json.loads(self.raw)

    def __repr__(self):
        return f"Response({self.status}, {self.raw[:300]!r})"


class Api:
    """A client of one server. Every answer it reads whole goes through
    hostpaths.check, which fails the test on a host path in it."""

    def __init__(self, port, key, server=None):
        self.port, self.key = port, key
        self.dirs = server.host_dirs() if server else []
        self.pid = server.proc.pid if server and server.proc else 0

    def headers(self, extra=None):
        h = {"Authorization": f"Bearer {self.key}"} if self.key else {}
        h.update(extra or {})
        return h

    def request(self, method, path, body=None, headers=None, timeout=60):
        __tracebackhide__ = True
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        data = body if isinstance(body, (bytes, str)) or body is None else json.dumps(body)
        conn.request(method, path, body=data, headers=self.headers(headers))
        r = conn.getresponse()
        out = Response(r.status, dict(r.getheaders()), r.read())
        conn.close()
        hostpaths.check(f"{method} {path}", out.status, r.getheader("Content-Type"), out.raw,
                        self.dirs, self.pid)
        return out

    def get(self, path, **kw):
        return self.request("GET", path, **kw)

    def post(self, path, body=None, **kw):
        return self.request("POST", path, body if body is not None else {}, **kw)

    def delete(self, path, **kw):
        return self.request("DELETE", path, **kw)

    def create(self, **spec):
        r = self.post("/v1/sandboxes", spec)
        assert r.status == 201, r
        return r.json

    def request_stream(self, method, path, body=None, timeout=60):
        """(HTTP connection, response) to read from as it comes."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        conn.request(method, path, body=json.dumps(body) if body is not None else None,
                     headers=self.headers())
        return conn, conn.getresponse()

    def exec_stream(self, sid, body, timeout=60):
        """(HTTP connection, response) of an exec: read lines from it."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        conn.request("POST", f"/v1/sandboxes/{sid}/exec", body=json.dumps(body),
                     headers=self.headers())
        return conn, conn.getresponse()

    def exec(self, sid, body, timeout=60):
        """Every NDJSON line of an exec, parsed."""
        conn, r = self.exec_stream(sid, body, timeout)
        assert r.status == 200, (r.status, r.read())
        assert r.getheader("Content-Type") == "application/x-ndjson"
        raw = r.read()
        conn.close()
        hostpaths.check(f"exec in {sid}", r.status, "application/x-ndjson", raw, self.dirs, self.pid)
        return [json.loads(l) for l in raw.splitlines()]


    def code(self, sid, body, timeout=60):
        """Every NDJSON line of a /code request, parsed; the last must be
        end_of_execution."""
        conn, r = self.request_stream("POST", f"/v1/sandboxes/{sid}/code", body, timeout)
        assert r.status == 200, (r.status, r.read())
        assert r.getheader("Content-Type") == "application/x-ndjson"
        raw = r.read()
        conn.close()
        hostpaths.check(f"code in {sid}", r.status, "application/x-ndjson", raw, self.dirs, self.pid)
        lines = [json.loads(l) for l in raw.splitlines()]
        assert lines and lines[-1] == {"type": "end_of_execution"}, lines
        return lines


def wait_for(cond, seconds=10):
    """Poll cond until it holds; fail after seconds."""
    deadline = time.monotonic() + seconds
    while not cond():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.05)


def audit_log(state_dir, until=lambda lines: True, seconds=10):
    """The audit log's lines once until(lines) holds: the server writes
    them off its loop, moments after each action."""
    lines = []

    def read():
        nonlocal lines
        path = pathlib.Path(state_dir) / "audit.jsonl"
        lines = [json.loads(l) for l in path.read_text().splitlines()] if path.exists() else []
        return until(lines)
    wait_for(read, seconds)
    return lines


def error_of(r):
    """The code of an error answer, which must have the error shape."""
    body = r.json
    assert set(body) == {"error"} and set(body["error"]) == {"code", "message"}, body
    return body["error"]["code"]


def output(lines, kind="stdout"):
    import base64
    out = b""
    for l in lines:
        if l["type"] == kind:
            out += l["data"].encode() if "data" in l else base64.b64decode(l["data_b64"])
    return out


class WebSocket:
    """The smallest WebSocket client the tests need (RFC 6455): handshake,
    masked frames out, frames in."""

    def __init__(self, port, path, key, host="x"):
        import base64
        import hashlib
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        nonce = base64.b64encode(os.urandom(16)).decode()
        auth = f"Authorization: Bearer {key}\r\n" if key else ""
        self.sock.sendall((f"GET {path} HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\n"
                           f"Connection: Upgrade\r\nSec-WebSocket-Key: {nonce}\r\n"
                           f"Sec-WebSocket-Version: 13\r\n{auth}\r\n").encode())
        self.buf = b""
        while b"\r\n\r\n" not in self.buf:
            chunk = self.sock.recv(4096)
            if not chunk:
                break
            self.buf += chunk
        head, _, self.buf = self.buf.partition(b"\r\n\r\n")
        self.status = int(head.split()[1])
        want = base64.b64encode(hashlib.sha1(
            (nonce + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").encode()).digest())
        self.accepted = want in head
        self.head = head

    def send(self, payload, opcode=1):
        if isinstance(payload, str):
            payload = payload.encode()
        mask = os.urandom(4)
        n = len(payload)
        hdr = bytes([0x80 | opcode])
        if n < 126:
            hdr += bytes([0x80 | n])
        elif n < 65536:
            hdr += bytes([0x80 | 126]) + n.to_bytes(2, "big")
        else:
            hdr += bytes([0x80 | 127]) + n.to_bytes(8, "big")
        body = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        self.sock.sendall(hdr + mask + body)

    def send_json(self, obj):
        self.send(json.dumps(obj))

    def _need(self, n):
        while len(self.buf) < n:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise EOFError("the server closed the connection")
            self.buf += chunk

    def recv(self):
        """(opcode, payload) of the next frame."""
        self._need(2)
        opcode, n = self.buf[0] & 0x0F, self.buf[1] & 0x7F
        off = 2
        if n == 126:
            self._need(4)
            n, off = int.from_bytes(self.buf[2:4], "big"), 4
        elif n == 127:
            self._need(10)
            n, off = int.from_bytes(self.buf[2:10], "big"), 10
        self._need(off + n)
        payload, self.buf = self.buf[off:off + n], self.buf[off + n:]
        return opcode, payload

    def messages(self):
        """JSON messages until the server's close frame."""
        while True:
            opcode, payload = self.recv()
            if opcode == 8:
                return
            if opcode == 1:
                yield json.loads(payload)

    def close(self):
        self.sock.close()
