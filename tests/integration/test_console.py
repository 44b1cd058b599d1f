"""The web console at /ui. First a real browser: Debian's chromium,
headless, driven by the pinned playwright-core (tests/console/console.mjs)
logs in, sees a sandbox the API made appear without a reload, types
`echo hi` in its terminal and sees `hi`, uploads a file (by the picker and
by a drop) and sees it listed, kills the sandbox and sees it go, is told
"not found" for another tenant's sandbox, and lists 500 sandboxes; its
screenshots go to BUILD/console-shots. Then, by hand, what a hostile
client sends: paths that climb out of the console's directory or through a
symlink, a WebSocket from another origin, a key offered as a subprotocol
that must not come back, terminals of 0x0 and 65535x65535; and --no-ui."""
import base64
import hashlib
import http.client
import json
import os
import shutil
import subprocess
import time

import pytest

from conftest import BUILD, ROOT, require
from serveapi import Server, WebSocket, output, wait_for

CONSOLE_DIR = ROOT / "tests" / "console"
SHOTS = BUILD / "console-shots"
CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; "
       "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    s = Server(BUILD / "hutch-serve", tmp_path_factory.mktemp("console") / "state").start()
    yield s
    assert s.stop() == 0, s.log_text()


def new_tenant(server, prefix):
    tenant = f"{prefix}{time.monotonic_ns()}"
    r = server.api().post("/v1/keys", {"tenant": tenant})
    assert r.status == 201, r
    return tenant, r.json["key"]


def get(port, path, headers=None):
    """(status, headers, body) of a GET sent as written: http.client leaves
    the path alone (no folding of .. or %2e)."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    c.request("GET", path, headers=headers or {})
    r = c.getresponse()
    body = r.read()
    c.close()
    return r.status, {k.lower(): v for k, v in r.getheaders()}, body


def ws_open(port, path, headers):
    """A WebSocket handshake with these headers (no Authorization unless
    given): the status, the answer's header lines, and the socket as
    serveapi's WebSocket to talk on."""
    import socket
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    nonce = base64.b64encode(os.urandom(16)).decode()
    lines = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    sock.sendall((f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\n"
                  f"Connection: Upgrade\r\nSec-WebSocket-Key: {nonce}\r\n"
                  f"Sec-WebSocket-Version: 13\r\n{lines}\r\n").encode())
    buf = b""
    while b"\r\n\r\n" not in buf:
        chunk = sock.recv(4096)
        if not chunk:
            break
        buf += chunk
    head, _, rest = buf.partition(b"\r\n\r\n")
    ws = WebSocket.__new__(WebSocket)
    ws.sock, ws.buf = sock, rest
    want = base64.b64encode(hashlib.sha1(
        (nonce + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").encode()).digest())
    ws.accepted = want in head
    status = int(head.split()[1])
    return status, head.decode(errors="replace").split("\r\n")[1:], ws


# --- the browser -----------------------------------------------------------


@pytest.fixture(scope="module")
def browser_ready():
    """tests/console's playwright-core installed (npm ci, once) and Debian's
    chromium there: else a skip saying which is missing."""
    require(shutil.which("npm"), "npm is not installed (scripts/deps.sh --test installs it)")
    require(os.access("/usr/bin/chromium", os.X_OK),
            "chromium is not installed (scripts/deps.sh --test installs Debian's)")
    r = subprocess.run([str(CONSOLE_DIR / "run"), "--install"], capture_output=True, text=True,
                       timeout=300)
    require(r.returncode == 0, f"tests/console could not install playwright-core: {r.stderr[-800:]}")


@pytest.fixture(scope="module")
def report(server, browser_ready):
    """The browser's run, as tenant of its own; another tenant's sandbox
    for it to be refused."""
    _, key = new_tenant(server, "console-")
    _, other = new_tenant(server, "other-")
    foreign = server.api(other).create()["id"]
    shutil.rmtree(SHOTS, ignore_errors=True)
    env = dict(os.environ, HUTCH_URL=f"http://127.0.0.1:{server.port}", HUTCH_API_KEY=key,
               HUTCH_FOREIGN=foreign, HUTCH_SHOTS=str(SHOTS), HUTCH_MANY="500")
    p = subprocess.run([str(CONSOLE_DIR / "run"), "console.mjs"], env=env, capture_output=True,
                       text=True, timeout=600)
    assert p.stdout.strip(), f"no report: exit {p.returncode}: {p.stderr[-2000:]}"
    out = json.loads(p.stdout.strip().splitlines()[-1])
    server.api(other).delete(f"/v1/sandboxes/{foreign}")
    left = server.api(key).get("/v1/sandboxes").json["sandboxes"]
    for s in left:
        server.api(key).delete(f"/v1/sandboxes/{s['id']}")
    out["left"] = left
    return out


def step(report, name):
    s = report["steps"].get(name)
    assert s is not None, f"the run ended before {name}: {json.dumps(report)[-3000:]}"
    assert s["ok"], s["error"]
    return s


def test_login(report):
    refused = step(report, "login_refused")
    assert any("valid API key" in t for t in refused["shown"]), refused
    ok = step(report, "login")
    assert ok["stored_in_session"] and not ok["url_has_key"] and ok["cookies"] == 0, ok


def test_sandbox_appears_without_reload(report):
    s = step(report, "appears")
    assert s["mode"].startswith("live"), s


def test_terminal_echo_hi(report):
    t = step(report, "terminal")
    # The terminal takes the WebSocket (its HTTP path is for a proxy in
    # between that cannot pass one).
    assert t["transport"] == "WebSocket", report


def test_upload_listed(report):
    u = step(report, "upload")
    assert u["uploaded"] == "hello from the console\n" and u["dropped"] == "dropped bytes", u
    assert {"hello.txt", "dropped.txt"} <= set(u["listed"]), u


def test_phone_width(report):
    assert step(report, "phone")["scroll_width"] <= 390 + 1


def test_kill_and_gone(report):
    assert step(report, "kill")["api_after"] == 404
    assert report["left"] == [], report["left"]


def test_foreign_sandbox_not_found(report):
    assert "Sandbox not found" in step(report, "foreign")["text"]


def test_templates_and_their_errors(report):
    t = step(report, "templates")
    assert "host" in t["names"], t
    assert any("POST /v1/templates" in x for x in t["shown"]), t


def test_keys_page_shows_the_refusal(report):
    k = step(report, "keys_refused")
    assert any("POST /v1/keys" in x and "admin" in x for x in k["shown"]), k
    assert "console-" in k["usage"], k  # the tenant's own usage, by its name


def test_500_listed(report):
    assert step(report, "many")["rows"] == 500


def test_no_csp_violation_nor_page_error(report):
    assert report["csp"] == [] and report["page_errors"] == [], report


def test_screenshots(report):
    for name in ("list", "sandbox", "sandbox-phone", "foreign", "keys", "list-many"):
        p = SHOTS / f"{name}.png"
        assert p.stat().st_size > 1000 and p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", p
    assert sorted(report["shots"]) == sorted(str(SHOTS / f"{n}.png") for n in (
        "list", "sandbox", "sandbox-phone", "foreign", "keys", "list-many"))


# --- by hand ---------------------------------------------------------------


def test_files_served_with_policy(server):
    status, h, body = get(server.port, "/ui/")
    assert status == 200 and b'<script type="module" src="app.js">' in body
    assert h["content-security-policy"] == CSP
    assert h["x-content-type-options"] == "nosniff" and h["referrer-policy"] == "no-referrer"
    assert b"<script>" not in body and b"style=" not in body
    for path, kind in [("/ui/app.js", "text/javascript"), ("/ui/app.css", "text/css"),
                       ("/ui/vendor/xterm.mjs", "text/javascript"),
                       ("/ui/vendor/addon-fit.mjs", "text/javascript")]:
        status, h, body = get(server.port, path)
        assert status == 200 and h["content-type"].startswith(kind) and body, path
    _, h, _ = get(server.port, "/ui/app.js")
    again, h2, _ = get(server.port, "/ui/app.js", {"If-None-Match": h["etag"]})
    assert again == 304 and h2["etag"] == h["etag"]
    status, h, _ = get(server.port, "/ui")
    assert status == 308 and h["location"] == "/ui/"


HOSTILE = ["/ui/../etc/passwd", "/ui/%2e%2e/%2e%2e/etc/passwd", "/ui/vendor/../index.html",
           "/ui/vendor/npm/package.json", "/ui/.git/config", "/ui//etc/passwd",
           "/ui/app.js/..", "/ui/..%2fmeson.build", "/ui/vendor/..", "/ui/" + "a/" * 80 + "x.js",
           "/ui/README", "/ui/app.js%00.css"]


def test_hostile_paths_not_found(server):
    for path in HOSTILE:
        status, _, body = get(server.port, path)
        assert status == 404, (path, status, body[:200])
        assert json.loads(body)["error"]["code"] == "not_found", path
    assert get(server.port, "/ui/app.js")[0] == 200


def test_symlink_out_not_followed(server, tmp_path):
    """A --ui-dir holding a symlink to a file outside it, and one to a
    directory outside: neither is served."""
    ui = tmp_path / "ui"
    shutil.copytree(ROOT / "share" / "ui", ui)
    (tmp_path / "secret.js").write_text("secret")
    (ui / "leak.js").symlink_to(tmp_path / "secret.js")
    (ui / "out").symlink_to(tmp_path)
    s = Server(BUILD / "hutch-serve", tmp_path / "state", "--ui-dir", str(ui)).start()
    try:
        assert get(s.port, "/ui/app.js")[0] == 200
        for path in ("/ui/leak.js", "/ui/out/secret.js"):
            status, _, body = get(s.port, path)
            assert status == 404 and b"secret" not in body, path
    finally:
        assert s.stop() == 0, s.log_text()


def test_no_ui(tmp_path):
    s = Server(BUILD / "hutch-serve", tmp_path / "state", "--no-ui").start()
    try:
        for path in ("/ui/", "/ui/app.js", "/ui/vendor/xterm.mjs"):
            status, _, body = get(s.port, path)
            assert status == 404 and "--no-ui" in json.loads(body)["error"]["message"], path
        assert s.api().get("/v1/sandboxes").status == 200
    finally:
        assert s.stop() == 0, s.log_text()


@pytest.fixture(scope="module")
def shell(server):
    """A tenant's sandbox with a shell on a terminal, kept on stdin."""
    _, key = new_tenant(server, "ws-")
    api = server.api(key)
    sid = api.create()["id"]
    r = api.post(f"/v1/sandboxes/{sid}/exec", {"cmd": ["/bin/sh"], "background": True,
                                              "keep_stdin": True, "pty": {"rows": 24, "cols": 80}})
    assert r.status == 201, r
    yield key, sid, r.json["pid"]
    api.delete(f"/v1/sandboxes/{sid}")


def test_ws_key_as_subprotocol(server, shell):
    key, sid, pid = shell
    path = f"/v1/sandboxes/{sid}/exec/{pid}/ws"
    status, head, ws = ws_open(server.port, path, {
        "Sec-WebSocket-Protocol": f"hutch.v1, hutch.key.{key}",
        "Origin": f"http://127.0.0.1:{server.port}"})
    assert status == 101 and ws.accepted, head
    protocols = [h for h in head if h.lower().startswith("sec-websocket-protocol:")]
    assert protocols == ["Sec-WebSocket-Protocol: hutch.v1"], head
    assert key not in "\n".join(head)

    # The hostile sizes: each refused in a frame of its own, the session on.
    ws.send_json({"type": "resize", "rows": 0, "cols": 0})
    ws.send_json({"type": "resize", "rows": 65535, "cols": 65535})
    ws.send(b"echo al''ive\n", opcode=2)
    errors, lines = [], []
    for m in ws.messages():
        if m.get("type") == "error":
            errors.append(m["code"])
        lines.append(m)
        if b"alive" in output(lines):
            break
    ws.close()
    assert errors == ["invalid_argument", "invalid_argument"], lines


def test_ws_refusals(server, shell):
    key, sid, pid = shell
    path = f"/v1/sandboxes/{sid}/exec/{pid}/ws"
    _, other = new_tenant(server, "ws-other-")
    cases = [
        ({"Sec-WebSocket-Protocol": f"hutch.v1, hutch.key.{key}",
          "Origin": "http://evil.example"}, 403),
        ({"Sec-WebSocket-Protocol": f"hutch.v1, hutch.key.{key}",
          "Origin": f"http://127.0.0.1:{server.port}.evil.example"}, 403),
        ({"Sec-WebSocket-Protocol": f"hutch.v1, hutch.key.{other}"}, 404),
        ({"Sec-WebSocket-Protocol": "hutch.v1, hutch.key.hk_" + "0" * 40}, 401),
        ({"Sec-WebSocket-Protocol": "hutch.v1, hutch.key." + "x" * 5000}, 401),
        ({"Sec-WebSocket-Protocol": "hutch.v1"}, 401),
    ]
    for headers, want in cases:
        status, head, ws = ws_open(server.port, path, headers)
        ws.close()
        assert status == want, (headers, head)
    # The key as a subprotocol counts only on a WebSocket handshake.
    c = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    c.request("GET", "/v1/sandboxes", headers={"Sec-WebSocket-Protocol": f"hutch.key.{key}"})
    assert c.getresponse().status == 401
    c.close()


def test_bulk_metrics_only_the_tenants_own(server, shell):
    """GET /v1/sandboxes/metrics, the list's sparklines: every running
    sandbox of the caller with its newest sample, and no other tenant's."""
    key, sid, _ = shell
    _, other = new_tenant(server, "metrics-other-")
    theirs = server.api(other).create()["id"]
    try:
        mine = server.api(key)
        wait_for(lambda: sid in mine.get("/v1/sandboxes/metrics").json["sandboxes"])
        got = mine.get("/v1/sandboxes/metrics").json["sandboxes"]
        assert set(got) == {sid}, got
        assert got[sid]["memory_limit_bytes"] > 0 and "cpu_pct" in got[sid], got
        wait_for(lambda: theirs in server.api(other).get(
            "/v1/sandboxes/metrics").json["sandboxes"])
        assert sid not in server.api(other).get("/v1/sandboxes/metrics").json["sandboxes"]
        # The admin is a tenant of its own here, as in GET /v1/sandboxes.
        assert not {sid, theirs} & set(server.api().get("/v1/sandboxes/metrics").json["sandboxes"])
    finally:
        server.api(other).delete(f"/v1/sandboxes/{theirs}")
