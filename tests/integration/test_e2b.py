"""The E2B-compatible API at the wire: what E2B's SDKs never send. Bad
tokens, sandboxes that are not there, malformed Connect messages and
multipart bodies get E2B's error shapes and leave the server serving (the
SDKs' own behaviour is tests/e2b). Against both builds: the sanitizers
watch the parsers."""
import base64
import gzip
import json
import struct
import time

import pytest

from conftest import serve_each_build
from serveapi import wait_for

E2B_ERROR_SHAPE = {"code", "message"}


@pytest.fixture(scope="module", params=["build", "asan"])
def server(request, tmp_path_factory):
    yield from serve_each_build(request, tmp_path_factory)


@pytest.fixture
def sbx(server):
    api = server.api()
    r = api.post("/v2/sandboxes", {"templateID": "base", "metadata": {"t": "wire"}},
                 headers={"X-API-Key": server.admin_key})
    assert r.status == 201, r
    yield r.json
    api.delete(f"/sandboxes/{r.json['sandboxID']}")


def envd(server, sbx, path, body=b"", token=True, port="49983", extra=None, method="POST"):
    h = {"E2b-Sandbox-Id": sbx["sandboxID"], "E2b-Sandbox-Port": port}
    if token:
        h["X-Access-Token"] = sbx["envdAccessToken"]
    h.update(extra or {})
    return server.api(None).request(method, path, body, headers=h)


def envelope(obj, flags=0):
    data = json.dumps(obj).encode()
    return struct.pack(">BI", flags, len(data)) + data


def frames(raw):
    out = []
    while raw:
        flags, n = struct.unpack(">BI", raw[:5])
        out.append((flags, json.loads(raw[5:5 + n])))
        raw = raw[5 + n:]
    return out


def test_create_answers_what_the_sdks_read(server, sbx):
    assert sbx["envdVersion"].count(".") == 2
    assert len(sbx["envdAccessToken"]) == 40 and len(sbx["trafficAccessToken"]) == 40
    assert sbx["trafficAccessToken"] != sbx["envdAccessToken"]
    assert sbx["domain"] == f"localhost:{server.port}"
    api = server.api()
    got = api.get(f"/sandboxes/{sbx['sandboxID']}").json
    assert got["sandboxID"] == sbx["sandboxID"] and got["state"] == "running"
    assert got["metadata"] == {"t": "wire"}
    # The same sandbox through the native API.
    assert api.get(f"/v1/sandboxes/{sbx['sandboxID']}").json["metadata"] == {"t": "wire"}


def test_network_settings_map_onto_hutchs(server):
    api = server.api()
    sid = api.post("/v2/sandboxes", {"templateID": "base"}).json["sandboxID"]
    try:
        got = api.get(f"/sandboxes/{sid}").json
        assert got["allowInternetAccess"] is True  # E2B's default: public hosts
        assert got["network"] == {"allowOut": [], "denyOut": [], "allowPublicTraffic": True}
        native = api.get(f"/v1/sandboxes/{sid}").json["network"]
        assert native["allow"] == ["*"] and native["public"] is True
        r = api.request("PUT", f"/sandboxes/{sid}/network",
                        {"allowOut": ["10.1.2.3", "2001:db8::/32", "*.pypi.org"],
                         "denyOut": ["0.0.0.0/0"],
                         "rules": {"api.example.com": [{"transform": {"headers": {"X-K": "v"}}}]}})
        assert r.status == 204, r
        got = api.get(f"/sandboxes/{sid}").json
        assert got["allowInternetAccess"] is False
        assert got["network"]["allowOut"] == ["10.1.2.3", "2001:db8::/32", "*.pypi.org"]
        assert "X-K" not in json.dumps(got) and '"v"' not in json.dumps(got)
        native = api.get(f"/v1/sandboxes/{sid}").json["network"]
        assert native["allow"] == ["10.1.2.3", "[2001:db8::/32]", "*.pypi.org"]
        assert native["public"] is True  # the update leaves ports alone
        r = api.request("PUT", f"/sandboxes/{sid}/network", {"denyOut": ["8.8.8.8"]})
        assert r.status == 204, r  # the Internet, less 8.8.8.8
        got = api.get(f"/sandboxes/{sid}").json
        assert got["allowInternetAccess"] is True and got["network"]["denyOut"] == ["8.8.8.8"]
        assert api.get(f"/v1/sandboxes/{sid}").json["network"]["deny"] == ["8.8.8.8"]
        r = api.request("PUT", f"/sandboxes/{sid}/network", {"denyOut": ["exa mple"]})
        assert (r.status, r.json["code"]) == (400, 400)
        r = api.request("PUT", "/sandboxes/0123456789abcdef/network", {})
        assert (r.status, r.json["code"]) == (404, 404)
    finally:
        api.delete(f"/sandboxes/{sid}")
    sid = api.post("/v2/sandboxes", {"templateID": "base", "allow_internet_access": False,
                                     "network": {"allowPublicTraffic": False}}).json["sandboxID"]
    got = api.get(f"/sandboxes/{sid}").json
    assert got["allowInternetAccess"] is False and got["network"]["allowPublicTraffic"] is False
    assert api.get(f"/v1/sandboxes/{sid}").json["network"]["mode"] == "none"
    api.delete(f"/sandboxes/{sid}")


@pytest.mark.parametrize("body,status", [
    ({}, 400),
    ({"templateID": "nope"}, 404),
    ({"templateID": "base", "timeout": 0}, 400),
    ({"templateID": "base", "autoResume": "yes"}, 400),
    ({"templateID": "base", "allow_internet_access": "yes"}, 400),
    ({"templateID": "base", "network": {"denyOut": ["10.0.0.0/99"]}}, 400),
    ({"templateID": "base", "network": {"maskRequestHost": "a\r\nb"}}, 400),
    ({"templateID": "base", "network": {"egressProxy": {"address": "a:1"}}}, 400),
    ({"templateID": "base", "network": {"allowOut": ["exa mple"]}}, 400),
    ({"templateID": "base", "network": {"rules": {"a.org": [{"drop": True}]}}}, 400),
    ({"templateID": "base", "volumeMounts": [{"name": "v", "path": "/v"}]}, 404),
    ({"templateID": "base", "volumeMounts": {"/v": "v"}}, 400),
    ({"templateID": "base", "volumeMounts": [{"name": "v", "path": "/proc/x"}]}, 400),
    ({"templateID": "base", "bogus": 1}, 400),
    ({"templateID": "base", "envVars": {"A": 1}}, 400),
])
def test_bad_creates_get_e2b_errors(server, body, status):
    r = server.api().post("/v2/sandboxes", body)
    assert r.status == status, r
    assert set(r.json) == E2B_ERROR_SHAPE and r.json["code"] == status


def test_control_plane_errors(server, sbx):
    api = server.api()
    r = api.delete("/sandboxes/0123456789abcdef")
    assert (r.status, r.json["code"]) == (404, 404)
    r = server.api("e2b_" + "0" * 40).get("/v2/sandboxes")
    assert (r.status, r.json["code"]) == (401, 401)
    assert api.get("/v2/sandboxes?limit=0").status == 400
    assert api.get("/v2/sandboxes?metadata=%25zz").status == 400
    r = api.post("/sandboxes/0123456789abcdef/pause")
    assert (r.status, r.json["code"]) == (404, 404)
    assert api.get("/sandboxes/0123456789abcdef/metrics").json["code"] == 404
    assert api.get(f"/sandboxes/{sbx['sandboxID']}/metrics?start=x").json["code"] == 400
    r = api.post(f"/sandboxes/{sbx['sandboxID']}/timeout", {"timeout": -5})
    assert r.status == 400


def test_e2b_form_of_a_key_is_accepted(server):
    key = server.admin_key
    r = server.api(None).get("/v2/sandboxes", headers={"X-API-KEY": "e2b_" + key[3:]})
    assert r.status == 200, r


def test_data_plane_wants_the_sandbox_token(server, sbx):
    r = envd(server, sbx, "/filesystem.Filesystem/Stat", json.dumps({"path": "/"}), token=False,
             extra={"Content-Type": "application/json"})
    assert r.status == 401 and r.json["code"] == "unauthenticated"
    other = dict(sbx, envdAccessToken="0" * 40)
    r = envd(server, other, "/filesystem.Filesystem/Stat", json.dumps({"path": "/"}))
    assert r.status == 401
    # An API key is not a sandbox token.
    r = envd(server, sbx, "/filesystem.Filesystem/Stat", json.dumps({"path": "/"}), token=False,
             extra={"X-API-Key": server.admin_key})
    assert r.status == 401
    # Health needs none; a sandbox that is not there is a 502, as at E2B.
    assert envd(server, sbx, "/health", None, token=False, method="GET").status == 204
    gone = dict(sbx, sandboxID="0123456789abcdef")
    assert envd(server, gone, "/health", None, method="GET").status == 502
    assert envd(server, sbx, "/health", None, port="1234", method="GET").status == 502


def test_connect_unary_errors_are_connect_json(server, sbx):
    r = envd(server, sbx, "/filesystem.Filesystem/Stat", "not json")
    assert r.status == 400 and r.json["code"] == "invalid_argument"
    r = envd(server, sbx, "/filesystem.Filesystem/Stat", json.dumps({"path": "/no/such"}))
    assert r.status == 404 and r.json == {"code": "not_found", "message": r.json["message"]}
    r = envd(server, sbx, "/filesystem.Filesystem/MakeDir", json.dumps({"path": "/home/user"}))
    assert r.json["code"] == "already_exists"
    r = envd(server, sbx, "/process.Process/SendSignal",
             json.dumps({"process": {"pid": 99999}, "signal": "SIGNAL_SIGKILL"}))
    assert r.json["code"] == "not_found"
    r = envd(server, sbx, "/filesystem.Filesystem/Stat", json.dumps({"path": "/"}),
             extra={"Authorization": "Basic " + base64.b64encode(b"mallory:").decode()})
    assert r.json["code"] == "invalid_argument"


@pytest.mark.parametrize("body", [
    b"",
    b"\x00\x00\x00",
    b"\x00\x00\x00\x00\x10{}",            # a length longer than the body
    b"\x01" + envelope({"process": {"cmd": "true"}})[1:],  # compressed
    envelope({"process": {"cmd": 5}}),
    envelope({"process": {"cmd": "true", "args": [1]}}),
    envelope(["not", "an", "object"]),
])
def test_malformed_stream_requests_end_the_stream_with_an_error(server, sbx, body):
    r = envd(server, sbx, "/process.Process/Start", body,
             extra={"Content-Type": "application/connect+json"})
    assert r.status == 200 and r.headers["Content-Type"] == "application/connect+json"
    (flags, end), = frames(r.raw)
    assert flags == 2 and end["error"]["code"] == "invalid_argument", end


def test_a_process_stream_is_start_data_end(server, sbx):
    r = envd(server, sbx, "/process.Process/Start",
             envelope({"process": {"cmd": "/bin/sh", "args": ["-c", "printf 'a\\377'; exit 4"]}}))
    got = frames(r.raw)
    assert got[0][1]["event"]["start"]["pid"] > 0
    data = b"".join(base64.b64decode(m["event"]["data"]["stdout"]) for _, m in got
                    if "data" in m.get("event", {}))
    assert data == b"a\xff"  # bytes, not text
    assert got[-2][1]["event"]["end"]["exitCode"] == 4
    assert got[-1] == (2, {})


def test_uploads(server, sbx):
    def upload(body, ctype, query="", extra=None):
        return envd(server, sbx, "/files" + query, body,
                    extra={"Content-Type": ctype, **(extra or {})})

    b = "XyZ"
    form = (f"--{b}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"up/one.txt\"\r\n"
            f"Content-Type: application/octet-stream\r\n\r\nline\r\n--{b}--\r\n")
    r = upload(form, f"multipart/form-data; boundary={b}")
    assert r.status == 200 and r.json == [{"name": "one.txt", "type": "file",
                                           "path": "/home/user/up/one.txt"}], r
    r = envd(server, sbx, "/files?path=up/one.txt", None, method="GET")
    assert r.raw == b"line"
    r = upload(b"raw bytes", "application/octet-stream", "?path=%2Ftmp%2Fraw")
    assert r.json[0]["path"] == "/tmp/raw"
    for bad in (form[:30], f"--{b}\r\nno-end-of-headers", "no boundary at all"):
        r = upload(bad, f"multipart/form-data; boundary={b}")
        assert r.status == 400 and r.json["code"] == 400, (bad, r)
    assert upload(form, "multipart/form-data").status == 400  # no boundary
    assert upload(b"x", "application/octet-stream").status == 400  # no path
    r = upload(b"x", "application/octet-stream", "?path=/etc/passwd")
    assert r.status == 403, r
    envd(server, sbx, "/process.Process/Start",
         envelope({"process": {"cmd": "mkfifo", "args": ["/tmp/fifo"]}}))
    r = upload(b"x", "application/octet-stream", "?path=/tmp/fifo")  # a FIFO no one reads
    assert r.status == 400 and r.json["code"] == 400 and "regular" in r.json["message"], r
    r = upload(gzip.compress(b"inflated"), "application/octet-stream", "?path=/tmp/z",
               {"Content-Encoding": "gzip"})
    assert r.status == 200 and r.json[0]["path"] == "/tmp/z", r
    assert envd(server, sbx, "/files?path=/tmp/z", None, method="GET").raw == b"inflated"
    for bad in (b"not gzip at all", gzip.compress(b"cut short" * 100)[:-12]):
        r = upload(bad, "application/octet-stream", "?path=/tmp/z", {"Content-Encoding": "gzip"})
        assert r.status == 400 and r.json["code"] == 400, r
    r = upload(form, f"multipart/form-data; boundary={b}", extra={"Content-Encoding": "gzip"})
    assert r.status == 415  # gzip is for a file's bytes alone, as envd's
    assert upload(b"x", "application/octet-stream", "?path=/tmp/z",
                  {"Content-Encoding": "br"}).status == 415
    # The server still serves, and the sandbox is whole.
    r = envd(server, sbx, "/files?path=/tmp/raw", None, method="GET")
    assert r.raw == b"raw bytes"


def test_an_upload_whose_sandbox_ends_between_parts(server, sbx):
    """A tenant killing its own sandbox in the middle of a multipart upload
    gets an error for the upload, and the server (the sanitizer build too)
    goes on: the next part must not reach a sandbox that is gone."""
    import socket
    b = "QwE"
    head = (f"POST /files HTTP/1.1\r\nHost: x\r\nE2b-Sandbox-Id: {sbx['sandboxID']}\r\n"
            f"E2b-Sandbox-Port: 49983\r\nX-Access-Token: {sbx['envdAccessToken']}\r\n"
            f"Content-Type: multipart/form-data; boundary={b}\r\n"
            f"Transfer-Encoding: chunked\r\n\r\n")
    def chunk(s):
        s = s.encode()
        return b"%x\r\n%s\r\n" % (len(s), s)
    part = lambda name: (f"--{b}\r\nContent-Disposition: form-data; name=\"file\"; "
                         f"filename=\"{name}\"\r\n\r\nbytes\r\n")
    with socket.create_connection(("127.0.0.1", server.port), timeout=20) as s:
        s.sendall(head.encode() + chunk(part("one.txt")))
        # The first part is on its way into the sandbox when it ends.
        wait_for(lambda: envd(server, sbx, "/files?path=one.txt", None, method="GET").status == 200)
        r = server.api().delete(f"/sandboxes/{sbx['sandboxID']}")
        assert r.status == 204, r
        s.sendall(chunk(part("two.txt")) + chunk(f"--{b}--\r\n") + b"0\r\n\r\n")
        out = b""
        while (got := s.recv(65536)):
            out += got
            if b"\r\n\r\n" in out and (b"}" in out or b"]" in out):
                break
    assert out.startswith(b"HTTP/1.1 ") and not out.startswith(b"HTTP/1.1 200"), out
    assert server.api().get("/healthz").status == 200


def test_interpreter_routes(server, sbx):
    def interp(path, body=None, method="POST"):
        return envd(server, sbx, path, None if body is None else json.dumps(body),
                    port="49999", method=method)
    assert interp("/health", method="GET").status == 200
    r = interp("/execute", {"code": "1 + 1", "context_id": None, "language": None,
                            "env_vars": None})
    lines = [json.loads(l) for l in r.raw.splitlines()]
    assert {"type": "result", "is_main_result": True, "text": "2"}.items() <= lines[0].items()
    assert lines[-1] == {"type": "end_of_execution"}
    r = interp("/execute", {"code": "print('é'); open('/tmp/e2b.txt', 'w').write('x')"})
    assert "artifacts" not in r.raw.decode(), "E2B's SDKs get E2B's lines only"
    assert r.raw.isascii() and "é" in json.loads(r.raw.splitlines()[0])["text"]
    assert interp("/execute", {"code": "1", "context_id": "x", "language": "python"}).status == 400
    r = interp("/execute", {"code": "1", "context_id": "nope"})
    assert r.status == 404 and r.headers["Content-Type"].startswith("text/plain")
    assert interp("/contexts/nope", method="DELETE").status == 404
    ctxs = interp("/contexts", method="GET").json
    assert [c["language"] for c in ctxs][:2] == ["python", "javascript"]


def test_polled_watcher(server, sbx):
    def rpc(method, body):
        r = envd(server, sbx, f"/filesystem.Filesystem/{method}", json.dumps(body))
        return r.status, r.json

    status, got = rpc("CreateWatcher", {"path": "/tmp"})
    assert status == 200, got
    wid = got["watcherId"]
    r = envd(server, sbx, "/files?path=/tmp/seen.txt", b"x",
             extra={"Content-Type": "application/octet-stream"})
    assert r.status == 200, r
    events = []
    for _ in range(100):
        status, got = rpc("GetWatcherEvents", {"watcherId": wid})
        assert status == 200, got
        events += got["events"]
        if any(e["type"] == "EVENT_TYPE_WRITE" for e in events):
            break
        time.sleep(0.05)
    assert {"name": "seen.txt", "type": "EVENT_TYPE_CREATE"} in events, events
    assert rpc("RemoveWatcher", {"watcherId": wid})[0] == 200
    assert rpc("GetWatcherEvents", {"watcherId": wid})[1]["code"] == "not_found"
    assert rpc("CreateWatcher", {"path": "/no/such/dir"})[1]["code"] == "not_found"


def test_upload_metadata(server, sbx):
    """X-Metadata-* headers become the file's metadata (replaced by each
    upload), shown by Stat and ListDir; bad keys or values are a 400 and
    write nothing."""
    def upload(path, data, meta):
        h = {"Content-Type": "application/octet-stream"}
        h.update({f"X-Metadata-{k}": v for k, v in meta.items()})
        return envd(server, sbx, f"/files?path={path}", data, extra=h)

    def stat(path):
        return envd(server, sbx, "/filesystem.Filesystem/Stat", json.dumps({"path": path})).json

    r = upload("/tmp/m", b"x", {"Author": "mish", "purpose": "a b"})
    assert r.status == 200 and r.json[0]["metadata"] == {"author": "mish", "purpose": "a b"}, r
    assert stat("/tmp/m")["entry"]["metadata"] == {"author": "mish", "purpose": "a b"}
    r = envd(server, sbx, "/filesystem.Filesystem/ListDir", json.dumps({"path": "/tmp"}))
    assert [e.get("metadata") for e in r.json["entries"] if e["name"] == "m"] == \
        [{"author": "mish", "purpose": "a b"}]
    assert "metadata" not in upload("/tmp/m", b"y", {}).json[0]
    assert "metadata" not in stat("/tmp/m")["entry"]
    for bad in ({"k": "caf\u00e9".encode().decode("latin-1")}, {"k" * 247: "v"},
                {f"k{i}": "v" * 400 for i in range(12)}):
        r = upload("/tmp/never", b"x", bad)
        assert r.status == 400 and r.json["code"] == 400, (bad, r)
    assert stat("/tmp/never")["code"] == "not_found"


def test_gzip_bomb_meets_the_disk_quota(server):
    """256 MiB of zeros in 256 KiB of gzip, into a sandbox of 32 MiB: the
    upload ends with the sandbox's no_space, inflated as the agent takes
    it, so the server's memory does not grow by what it inflated."""
    api = server.api()
    r = api.post("/v1/sandboxes", {"disk_mb": 32})
    assert r.status == 201, r
    sid = r.json["id"]
    try:
        sbx = api.get(f"/sandboxes/{sid}").json
        bomb = gzip.compress(bytes(256 << 20), 9)
        assert len(bomb) < 1 << 20

        def rss_kb():
            with open(f"/proc/{server.proc.pid}/status") as f:
                return next(int(l.split()[1]) for l in f if l.startswith("VmRSS"))
        before = rss_kb()
        r = envd(server, sbx, "/files?path=/tmp/bomb", bomb,
                 extra={"Content-Type": "application/octet-stream", "Content-Encoding": "gzip"})
        assert r.status == 507 and r.json["code"] == 507, r
        assert rss_kb() - before < 64 << 10
        assert api.get("/healthz").status == 200
    finally:
        api.delete(f"/v1/sandboxes/{sid}")


def test_uploads_make_missing_parents_for_the_user(server, sbx):
    """As envd: an upload outside the user's home makes the missing
    parents (the sandbox's root makes them, the user owns them), while the
    file itself is written as the user: what exists stays as unix
    permissions say."""
    def upload(path):
        return envd(server, sbx, f"/files?path={path}", b"x",
                    extra={"Content-Type": "application/octet-stream"})

    def stat(path):
        return envd(server, sbx, "/filesystem.Filesystem/Stat", json.dumps({"path": path})).json

    r = upload("/0/a/b/c.txt")
    assert r.status == 200 and r.json[0]["path"] == "/0/a/b/c.txt", r
    for p in ("/0", "/0/a", "/0/a/b", "/0/a/b/c.txt"):
        assert stat(p)["entry"]["owner"] == "user", p
    assert upload("/home/user/n1/n2/f").status == 200
    for p in ("/etc/passwd", "/etc/x", "/usr/newdir/x"):
        assert upload(p).status == 403, p
    assert stat("/etc/passwd")["entry"]["owner"] != "user"

    def mkdir(path):
        return envd(server, sbx, "/filesystem.Filesystem/MakeDir", json.dumps({"path": path}))
    r = mkdir("/mk/a/b")
    assert r.status == 200 and r.json["entry"]["path"] == "/mk/a/b", r
    assert stat("/mk/a/b")["entry"]["owner"] == "user" and stat("/mk")["entry"]["owner"] == "user"
    assert mkdir("/mk/a/b").status == 409  # there already
    assert mkdir("/usr/newdir").status == 403
    # A link the user planted on the way ends root's part: through it, the
    # user's own permissions hold (review: root made and gave away a
    # directory inside /etc through such a link).
    api = server.api()
    lines = api.exec(sbx["sandboxID"], {"cmd": ["ln", "-s", "/etc", "/home/user/out"]})
    assert lines[-1].get("exit_code") == 0, lines
    assert upload("/home/user/out/planted/x.conf").status == 403
    assert mkdir("/home/user/out/planted2").status == 403
    assert stat("/etc/planted")["code"] == "not_found"
    assert stat("/etc/planted2")["code"] == "not_found"


def sign(path, op, user, token, exp=None):
    import hashlib
    raw = f"{path}:{op}:{user}:{token}" + (f":{exp}" if exp is not None else "")
    return "v1_" + base64.b64encode(hashlib.sha256(raw.encode()).digest()).decode().rstrip("=")


def test_signed_file_urls(server, sbx):
    """envd's signed URLs, as downloadUrl/uploadUrl make them: /files with
    no sandbox headers (the server's own URL, E2B_SANDBOX_URL), the sandbox
    found by the token the signature was made with; expired, wrong or
    missing signatures are E2B's 401."""
    from urllib.parse import quote
    tok = sbx["envdAccessToken"]
    anon = server.api(None)

    def url(path, op, user="", exp=None, sig=None):
        q = f"/files?path={quote(path, safe='')}"
        q += f"&username={user}" if user else ""
        q += f"&signature={quote(sig or sign(path, op, user, tok, exp), safe='')}"
        return q + (f"&signature_expiration={exp}" if exp is not None else "")

    r = envd(server, sbx, "/files?path=s.txt", b"signed", extra={"Content-Type": "application/octet-stream"})
    assert r.status == 200, r
    later = int(time.time()) + 600
    assert anon.request("GET", url("s.txt", "read")).raw == b"signed"
    assert anon.request("GET", url("s.txt", "read", exp=later)).raw == b"signed"
    r = anon.request("GET", url("s.txt", "read", exp=int(time.time()) - 10))
    assert r.status == 401 and r.json == {"code": 401, "message": "signature is already expired"}
    for bad in (url("s.txt", "write"), url("s.txt", "read", user="root", sig=sign("s.txt", "read", "", tok)),
                url("s.txt", "read", sig="v1_" + "A" * 43), "/files?path=s.txt"):
        r = anon.request("GET", bad)
        assert r.status == 401 and r.json["code"] == 401, (bad, r)
    # A read signature does not write, nor does another sandbox's token.
    h = {"Content-Type": "application/octet-stream"}
    assert anon.request("POST", url("w.txt", "read"), b"x", headers=h).status == 401
    r = anon.request("POST", url("w.txt", "write", user="root"), b"as root", headers=h)
    assert r.status == 200 and r.json[0]["path"] == "/root/w.txt", r
    # With the sandbox's headers, the signature stands for the token.
    h = {"E2b-Sandbox-Id": sbx["sandboxID"], "E2b-Sandbox-Port": "49983"}
    assert anon.request("GET", url("s.txt", "read"), headers=h).raw == b"signed"
    assert anon.request("GET", url("s.txt", "write"), headers=h).status == 401


def test_a_killed_sandbox_cuts_its_streams(server, sbx):
    """As E2B's proxy does: a process stream (and a cell's) whose sandbox
    is killed is cut, with no end message; the SDKs then find the sandbox
    gone and say it was killed. The server goes on."""
    import socket
    body = envelope({"process": {"cmd": "sleep", "args": ["60"]}})
    head = (f"POST /process.Process/Start HTTP/1.1\r\nHost: x\r\n"
            f"E2b-Sandbox-Id: {sbx['sandboxID']}\r\nE2b-Sandbox-Port: 49983\r\n"
            f"X-Access-Token: {sbx['envdAccessToken']}\r\n"
            f"Content-Type: application/connect+json\r\nContent-Length: {len(body)}\r\n\r\n")
    with socket.create_connection(("127.0.0.1", server.port), timeout=20) as s:
        s.sendall(head.encode() + body)
        out = b""
        while b'"start"' not in out:
            out += s.recv(65536)
        assert server.api().delete(f"/sandboxes/{sbx['sandboxID']}").status == 204
        while (got := s.recv(65536)):
            out += got
    assert out.startswith(b"HTTP/1.1 200"), out
    assert b'"end"' not in out and not out.endswith(b"0\r\n\r\n"), out  # cut, not ended
    assert server.api().get("/healthz").status == 200


def test_volumes_and_their_content_by_token(server):
    """E2B's /volumes are hutch's; their content is reached with the volume's
    token alone, through a worker sandbox, and only that volume's."""
    api = server.api()
    tenant = server.api(api.post("/v1/keys", {"tenant": f"vol{time.monotonic_ns()}"}).json["key"])
    r = api.post("/volumes", {"name": "e2bdata"})
    assert r.status == 201 and set(r.json) == {"volumeID", "name", "token"}, r
    vid, token = r.json["volumeID"], r.json["token"]
    assert api.get(f"/volumes/{vid}").json["token"] == token
    assert {"volumeID": vid, "name": "e2bdata"} in api.get("/volumes").json
    assert tenant.get(f"/volumes/{vid}").status == 404  # another tenant's is not there
    assert tenant.get("/volumes").json == []
    assert api.post("/volumes", {"name": "bad name"}).status == 400
    assert api.post("/volumes", {"name": "e2bdata"}).status == 409
    content = server.api(token)
    base = f"/volumecontent/{vid}"
    r = content.request("PUT", f"{base}/file?path=/dir/hello.txt", b"hi",
                        headers={"Content-Type": "application/octet-stream"})
    assert r.status == 201 and r.json["path"] == "/dir/hello.txt" and r.json["size"] == 2, r
    assert r.json["type"] == "file" and {"atime", "mtime", "ctime", "uid", "gid", "mode"} <= set(r.json)
    r = content.request("POST", f"{base}/dir?path=/dir")  # the write made it
    assert (r.status, r.json["code"]) == (409, "already_exists"), r
    r = content.request("POST", f"{base}/dir?path=/dir&force=true")
    assert r.status == 201 and r.json["type"] == "directory", r
    r = content.request("PUT", f"{base}/file?path=/dir/hello.txt", b"again")
    assert (r.status, r.json["code"]) == (409, "already_exists"), r  # without force
    assert content.request("PUT", f"{base}/file?path=/dir/hello.txt&force=true", b"again").status == 201
    assert content.get(f"{base}/file?path=/dir/hello.txt").raw == b"again"
    r = content.get(f"{base}/dir?path=/&depth=2")
    assert {"/dir", "/dir/hello.txt"} <= {e["path"] for e in r.json}, r
    assert content.get(f"{base}/path?path=/dir").json["type"] == "directory"
    # Bad input: leaving the volume, ownership, depth, no or another token.
    for bad in (f"{base}/path?path=/../etc/passwd", f"{base}/dir?path=/&depth=0",
                f"{base}/path"):
        assert content.get(bad).status == 400, bad
    assert content.request("DELETE", f"{base}/path?path=/").status == 400  # not the volume's root
    r = content.request("POST", f"{base}/dir?path=/x&uid=0")
    assert (r.status, r.json["code"]) == (400, "unimplemented"), r
    assert content.request("PATCH", f"{base}/path?path=/dir", {"mode": 511}).status == 400
    assert server.api(None).get(f"{base}/path?path=/").status == 401
    assert server.api("0" * 64).get(f"{base}/path?path=/").status == 401
    assert server.api(token).get("/volumecontent/vol_0123456789abcdef/path?path=/").status == 401
    assert api.get(f"{base}/path?path=/").status == 401  # an API key is not the volume's token
    r = content.request("DELETE", f"{base}/path?path=/dir")
    assert r.status == 204, r
    assert content.get(f"{base}/path?path=/dir").status == 404
    assert content.request("DELETE", f"{base}/path?path=/dir").status == 404
    # The worker is the tenant's own sandbox; deleting the volume ends it.
    workers = [s for s in api.get("/v2/sandboxes").json if s["metadata"].get("hutch.volume") == vid]
    assert len(workers) == 1, workers
    assert api.delete(f"/volumes/{vid}").status == 204
    assert api.delete(f"/volumes/{vid}").status == 404
    assert content.get(f"{base}/path?path=/").status == 401
    assert not [s for s in api.get("/v2/sandboxes").json if s["metadata"].get("hutch.volume") == vid]


def test_a_volumes_token_opens_that_volume_alone(server):
    """Review's attacks on the content API: workers made at once are one;
    links a mounting sandbox plants lead nowhere; another tenant's token or
    delete reaches nothing; a native delete ends the worker first."""
    import threading
    api = server.api()
    other = server.api(api.post("/v1/keys", {"tenant": f"vo{time.monotonic_ns()}"}).json["key"])
    vol = api.post("/volumes", {"name": "attacked"}).json
    vid, content = vol["volumeID"], server.api(vol["token"])
    base = f"/volumecontent/{vid}"
    results = []

    def stat():
        results.append(content.get(f"{base}/path?path=/").status)
    threads = [threading.Thread(target=stat) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [200] * 6, results
    workers = [s for s in api.get("/v2/sandboxes").json if s["metadata"].get("hutch.volume") == vid]
    assert len(workers) == 1, workers

    # A sandbox that mounts the volume plants links out of it.
    sb = api.create(volumes=[{"name": vid, "path": "/data"}])
    r = api.exec(sb["id"], {"cmd": ["/bin/sh", "-c", "ln -s / /data/esc && ln -s /etc/passwd /data/pw"
                                     " && mkdir /data/d && ln -s /proc /data/d/p"]})
    assert r[-1].get("exit_code") == 0, r
    for bad in ("dir?path=/esc", "file?path=/pw", "file?path=/esc/etc/passwd", "dir?path=/d/p",
                "path?path=/esc/etc"):
        r = content.get(f"{base}/{bad}")
        assert r.status == 400 and r.json["code"] == "invalid_argument", (bad, r)
    r = content.request("PUT", f"{base}/file?path=/esc/tmp/planted&force=true", b"x")
    assert r.status == 400, r
    r = content.get(f"{base}/path?path=/esc")  # the link itself, never where it leads
    assert r.status == 200 and r.json["type"] == "symlink" and r.json["target"] == "/", r
    assert content.request("DELETE", f"{base}/path?path=/pw").status == 204
    assert api.delete(f"/v1/sandboxes/{sb['id']}").status == 204

    # Another tenant: its token and key reach nothing, nor end the worker.
    theirs = other.post("/volumes", {"name": "theirs"}).json
    assert server.api(theirs["token"]).get(f"{base}/path?path=/").status == 401
    assert other.delete(f"/volumes/{vid}").status == 404
    assert other.delete(f"/v1/volumes/{vid}").status == 404
    assert content.get(f"{base}/path?path=/").status == 200
    assert len([s for s in api.get("/v2/sandboxes").json
                if s["metadata"].get("hutch.volume") == vid]) == 1
    # The native delete ends the worker first, as E2B's does.
    assert api.delete(f"/v1/volumes/{vid}").status == 204
    assert not [s for s in api.get("/v2/sandboxes").json if s["metadata"].get("hutch.volume") == vid]
    assert other.delete(f"/volumes/{theirs['volumeID']}").status == 204
