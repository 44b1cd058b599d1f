"""Secrets over HTTPS (docs/network.md): the egress proxy terminates TLS
for a CONNECT to a host that carries a secret, with the sandbox's own CA,
adds the secret and verifies the host's certificate; other hosts stay a
blind tunnel.

Only loopback: the hosts "out there" are TLS servers of this test on the
host's 127.0.0.1 with certificates of a CA the test makes, which the
server trusts through --egress-ca (the host's trust store does not hold
it); the floor is lifted for 127.0.0.1 (--egress-permit). Against both
builds of the server."""
import contextlib
import fcntl
import json
import socket
import time
import ssl
import subprocess

import pytest

from conftest import serve_each_build
from test_network import SERVICE, Origin, sh

SECRET = "Bearer tls-s3cr3t-" + "9c4e1b" * 4


def openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    """A test CA, a certificate it signs for localhost, and a self-signed
    one for localhost that nothing trusts."""
    d = tmp_path_factory.mktemp("certs")
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]
    openssl("req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.crt", "-days", "2",
            "-subj", "/CN=hutch test CA", "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,keyCertSign", cwd=d)
    openssl("req", *ec, "-keyout", "good.key", "-out", "good.csr", "-subj", "/CN=localhost",
            cwd=d)
    (d / "ext").write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\n"
                           "extendedKeyUsage=serverAuth\n")
    openssl("x509", "-req", "-in", "good.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
            "-CAcreateserial", "-out", "good.crt", "-days", "2", "-extfile", "ext", cwd=d)
    openssl("req", "-x509", *ec, "-keyout", "bad.key", "-out", "bad.crt", "-days", "2",
            "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost", cwd=d)
    return d


@pytest.fixture(scope="module", params=["build", "asan"])
def server(request, tmp_path_factory, certs):
    yield from serve_each_build(request, tmp_path_factory, "--egress-permit", "127.0.0.1",
                                "--egress-ca", str(certs / "ca.crt"))


def tls_origin(cert, key, **kw):
    """An HTTPS server on the host's loopback that records the headers it
    got (test_network's Origin: reflect, port)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    return Origin(tls=ctx, **kw)


@pytest.fixture
def origins(certs):
    made = [tls_origin(certs / "good.crt", certs / "good.key"),
            tls_origin(certs / "bad.crt", certs / "bad.key")]
    yield made
    for o in made:
        o.close()


CURL = "curl --noproxy '' -sS -m 20 -o /dev/null -w '%{http_code}\\n'"


def test_secret_reaches_the_host_over_https_never_the_sandbox(server, tenant, origins):
    good, bad = origins
    sb = tenant.create(network={"allow": [f"localhost:{good.port}", f"127.0.0.1:{good.port}",
                                          f"localhost:{bad.port}"]},
                       secrets=[{"host": "localhost", "header": "Authorization",
                                 "value": SECRET, "https_ports": [good.port, bad.port]}])
    sid = sb["id"]
    # curl trusts the system bundle, which now holds the sandbox's CA.
    code, out, err = sh(tenant, sid, f"{CURL} -v -H 'Authorization: Bearer forged' "
                                     f"https://localhost:{good.port}/api")
    assert out.strip() == "200", (out, err)
    assert "hutch egress CA" in err  # the certificate curl saw is the proxy's
    assert good.seen[-1]["Authorization"] == SECRET  # replaced, not added to
    assert good.seen[-1]["Host"] == f"localhost:{good.port}"
    # Python's ssl finds it by SSL_CERT_FILE; Node would by NODE_EXTRA_CA_CERTS.
    code, out, err = sh(tenant, sid, "env; NO_PROXY= no_proxy= python3 -c \"import urllib.request; print("
                                     f"urllib.request.urlopen('https://localhost:{good.port}/py')"
                                     ".status)\"")
    assert code == 0, err
    env = dict(l.split("=", 1) for l in out.splitlines() if "=" in l)
    assert env["SSL_CERT_FILE"] == env["REQUESTS_CA_BUNDLE"] == "/etc/hutch/ca-bundle.crt"
    assert env["NODE_EXTRA_CA_CERTS"] == "/etc/hutch/egress-ca.crt"
    assert out.splitlines()[-1] == "200"
    assert good.seen[-1]["Authorization"] == SECRET
    n = len(good.seen)
    # A host without secrets: a blind tunnel, the host's own certificate.
    code, out, err = sh(tenant, sid, f"{CURL} -k -v -H 'Authorization: Bearer forged' "
                                     f"https://127.0.0.1:{good.port}/blind")
    assert out.strip() == "200", (out, err)
    assert "hutch test CA" in err and "hutch egress CA" not in err
    assert len(good.seen) == n + 1 and good.seen[-1]["Authorization"] == "Bearer forged"
    # A host whose certificate the server does not trust gets no request.
    code, out, err = sh(tenant, sid, f"curl --noproxy '' -sS -m 20 "
                                     f"https://localhost:{bad.port}/x")
    assert "certificate is not trusted" in out, (out, err)
    assert not bad.seen
    # Nothing of the secret, nor any key, is inside the sandbox.
    needle = SECRET.split()[1]
    code, out, err = sh(tenant, sid,
                        f"env; cat /proc/*/environ | tr '\\0' '\\n'; "
                        f"grep -rsl --exclude-dir=proc --exclude-dir=sys --exclude-dir=usr "
                        f"--exclude-dir=dev -e {needle} -e 'PRIVATE KEY' / ; true")
    assert needle not in out and needle not in err
    assert "PRIVATE KEY" not in out
    audit = [json.loads(l) for l in (server.state_dir / "audit.jsonl").read_text().splitlines()]
    mine = [a for a in audit if a.get("sandbox") == sid and a["action"] == "sandbox.egress"]
    assert any(a["status"] == 502 and "not trusted" in a.get("reason", "") for a in mine)
    assert any(a["status"] == 200 and a["host"] == "localhost" and a["bytes_in"] > 0
               for a in mine)


def test_the_host_trust_store_is_untouched(server, tenant, origins):
    """The sandbox's bundle is its own file: the host's is not written."""
    host_bundle = "/etc/ssl/certs/ca-certificates.crt"
    before = open(host_bundle, "rb").read()
    sb = tenant.create(network={"allow": [f"localhost:{origins[0].port}"]},
                       secrets=[{"host": "localhost", "header": "X-Key", "value": "k"}])
    code, out, err = sh(tenant, sb["id"], "grep -c 'BEGIN CERTIFICATE' /etc/hutch/egress-ca.crt; "
                                          "tail -c 200 /etc/hutch/ca-bundle.crt")
    assert out.splitlines()[0] == "1", (out, err)
    assert open(host_bundle, "rb").read() == before
    # Without secrets, nothing is installed.
    other = tenant.create(network={"allow": [f"localhost:{origins[0].port}"]})
    code, out, _ = sh(tenant, other["id"], "ls /etc/hutch 2>&1; env | grep -c SSL_CERT_FILE")
    assert "No such file" in out and out.splitlines()[-1] == "0", out


# A CONNECT through the sandbox's proxy, and its status line.
TUNNEL = r'''
import socket, ssl, sys, time
def tunnel(port):
    s = socket.create_connection(("127.0.0.1", 3128))
    s.sendall(b"CONNECT localhost:%d HTTP/1.1\r\nHost: localhost\r\n\r\n" % port)
    buf = b""
    while b"\r\n\r\n" not in buf:
        buf += s.recv(1)
    return s, buf.split(b"\r\n")[0].decode()
'''

HOSTILE = TUNNEL + r'''
PORT, RAW = int(sys.argv[1]), int(sys.argv[2])
s, line = tunnel(PORT)
print(line, flush=True)
s.sendall(b"NOT TLS AT ALL\r\n\r\n")
s.settimeout(20)
try:
    got = s.recv(100)
except ConnectionResetError:
    got = b""
print("garbage:", got, flush=True)
many = [tunnel(RAW) for _ in range(16)]
print("17th:", tunnel(RAW)[1], flush=True)
for t, _ in many:
    t.close()
time.sleep(1)
s, line = tunnel(PORT)
t = ssl.create_default_context().wrap_socket(s, server_hostname="localhost")
print("held", flush=True)
time.sleep(600)
'''


def test_hostile_clients_and_an_end_mid_connection(server, tenant, origins):
    good = origins[0]
    # A host that completes TCP handshakes and says nothing (the origins
    # accept one connection at a time, doing its TLS handshake first).
    raw = socket.socket()
    raw.bind(("127.0.0.1", 0))
    raw.listen(64)
    sb = tenant.create(network={"allow": [f"localhost:{good.port}",
                                          f"localhost:{raw.getsockname()[1]}"]},
                       secrets=[{"host": "localhost", "header": "X-Key", "value": "k",
                                 "https_ports": [good.port, raw.getsockname()[1]]}])
    sid = sb["id"]
    r = tenant.request("PUT", f"/v1/sandboxes/{sid}/files?path=/tmp/hostile.py", HOSTILE)
    assert r.status in (200, 201), r
    r = tenant.post(f"/v1/sandboxes/{sid}/exec",
                    {"shell": f"python3 /tmp/hostile.py {good.port} {raw.getsockname()[1]} "
                              "> /tmp/out 2>&1",
                     "background": True})
    assert r.status in (200, 201, 202), r
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        out = sh(tenant, sid, "cat /tmp/out")[1]
        if "held" in out:
            break
        time.sleep(0.3)
    assert "HTTP/1.1 200" in out and "garbage: b''" in out and "held" in out, out
    assert "17th: HTTP/1.1 503" in out, out  # 16 intercepted at once, a sandbox
    assert not good.seen  # neither sent a request
    assert tenant.delete(f"/v1/sandboxes/{sid}").status in (200, 204)
    # The held connection's thread ended with the sandbox; the server serves on.
    def lines():
        return [json.loads(l) for l in (server.state_dir / "audit.jsonl").read_text().splitlines()
                if '"sandbox.egress"' in l and sid in l]
    while time.monotonic() < deadline + 10 and len(lines()) < 19:
        time.sleep(0.2)
    got = lines()
    assert len(got) == 19, got
    assert any("handshake failed" in a.get("reason", "") for a in got), got
    assert tenant.get("/v1/sandboxes").status == 200
    raw.close()


HOLD = TUNNEL + r'''
n, port = int(sys.argv[1]), int(sys.argv[2])
held = [tunnel(port) for _ in range(n)]
print(" ".join(line.split()[1] for _, line in held), flush=True)
time.sleep(float(sys.argv[3]))
'''


def test_one_tenant_holds_at_most_half_the_interception_threads(server, tenant):
    # Two of a tenant's sandboxes hold 16 intercepted connections each (to a
    # host that never answers a handshake): the tenant's 32 are taken, so
    # its third sandbox's first is refused while another tenant's goes.
    raw = socket.socket()
    raw.bind(("127.0.0.1", 0))
    raw.listen(128)
    port = raw.getsockname()[1]
    other = server.api(server.api().post("/v1/keys", {"tenant": f"o{time.monotonic_ns()}"})
                       .json["key"])
    spec = {"network": {"allow": [f"localhost:{port}"]},
            "secrets": [{"host": "localhost", "header": "X-Key", "value": "k",
                         "https_ports": [port]}]}
    sbs = [tenant.create(**spec)["id"] for _ in range(3)] + [other.create(**spec)["id"]]
    try:
        for api, sid in zip([tenant] * 3 + [other], sbs):
            assert api.request("PUT", f"/v1/sandboxes/{sid}/files?path=/tmp/hold.py",
                               HOLD).status in (200, 201)
        for sid in sbs[:2]:
            r = tenant.post(f"/v1/sandboxes/{sid}/exec", {
                "shell": f"python3 /tmp/hold.py 16 {port} 30 > /tmp/out 2>&1", "background": True})
            assert r.status == 201, r
        deadline = time.monotonic() + 8  # within the threads' 10 s for a handshake
        outs = []
        while time.monotonic() < deadline:
            outs = [sh(tenant, sid, "cat /tmp/out")[1].strip() for sid in sbs[:2]]
            if all(outs):
                break
            time.sleep(0.1)
        assert outs == ["200 " * 15 + "200"] * 2, outs
        assert sh(tenant, sbs[2], f"python3 /tmp/hold.py 1 {port} 0")[1].strip() == "503"
        assert sh(other, sbs[3], f"python3 /tmp/hold.py 1 {port} 0")[1].strip() == "200"
    finally:
        for sid in sbs[:3]:
            tenant.delete(f"/v1/sandboxes/{sid}")
        other.delete(f"/v1/sandboxes/{sbs[3]}")
        raw.close()


@contextlib.contextmanager
def on_port_443(make):
    """An origin make(port=443) makes on 443, the port a rule without ports
    names: one at a time on the host (xdist runs a module's build and asan
    groups side by side), each waiting for the last to close."""
    with open("/tmp/hutch-test-port-443.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        o = make(port=443)
        try:
            yield o
        finally:
            o.close()


@pytest.fixture
def origin_443(certs):
    """The good origin on 443."""
    with on_port_443(lambda **kw: tls_origin(certs / "good.crt", certs / "good.key", **kw)) as o:
        yield o


def test_e2b_secrets_api_and_placeholders(server, tenant, origin_443):
    """E2B's /secrets: names, versions and metadata, never a value; a
    network rule's ${e2b.secrets.NAME} is the value the proxy adds, over
    HTTPS to 443 (E2B's rules name no port: the native default), never in
    clear. Another tenant sees none of them."""
    good = origin_443
    e2b = server.api(None)
    h = {"X-API-Key": tenant.key}
    r = e2b.post("/secrets", {"name": "My-Key", "value": SECRET, "metadata": {"env": "t"}},
                 headers=h)
    assert r.status == 201, r
    s = r.json
    assert s["secretID"].startswith("sec_") and s["name"] == "my-key"
    assert s["currentVersion"] == 1 and s["metadata"] == {"env": "t"}
    assert set(s) == {"secretID", "name", "currentVersion", "metadata", "createdAt", "updatedAt"}
    assert e2b.post("/secrets", {"name": "my-key", "value": "x"}, headers=h).status == 409
    for bad in ({"name": "sec_x", "value": "v"}, {"name": "a b", "value": "v"},
                {"name": "k", "value": "line\nbreak"}, {"name": "k"}, {"name": "k", "value": 1}):
        r = e2b.post("/secrets", bad, headers=h)
        assert r.status == 400 and set(r.json) == {"code", "message"}, (bad, r)
    for name in ("a", "b"):
        assert e2b.post("/secrets", {"name": name, "value": "v"}, headers=h).status == 201
    r = e2b.get("/secrets?limit=2", headers=h)
    assert r.status == 200 and len(r.json) == 2 and r.headers.get("X-Next-Token") == "2", r
    r = e2b.get("/secrets?limit=2&nextToken=2", headers=h)
    assert [x["name"] for x in r.json] == ["b"] and "X-Next-Token" not in r.headers
    assert e2b.get("/secrets/MY-KEY", headers=h).json["secretID"] == s["secretID"]
    assert e2b.get(f"/secrets/{s['secretID']}", headers=h).json["name"] == "my-key"
    r = e2b.post(f"/secrets/{s['secretID']}", {"value": SECRET}, headers=h)
    assert r.status == 200 and r.json["currentVersion"] == 2 and r.json["metadata"] == {"env": "t"}
    assert e2b.post("/secrets/missing", {"value": "v"}, headers=h).status == 404
    # Another tenant: none of them.
    other = server.api(server.api().post("/v1/keys", {"tenant": f"o{time.monotonic_ns()}"})
                       .json["key"])
    oh = {"X-API-Key": other.key}
    assert e2b.get("/secrets", headers=oh).json == []
    assert e2b.get(f"/secrets/{s['secretID']}", headers=oh).status == 404
    assert e2b.request("DELETE", f"/secrets/{s['secretID']}", headers=oh).status == 404
    # The placeholder in a rule, and nothing of the value anywhere it can be read.
    rule = {f"localhost": [{"transform": {"headers": {
        "Authorization": "${e2b.secrets.my-key}", "X-Other": "plain"}}}]}
    r = e2b.post("/v2/sandboxes", {"templateID": "base", "network": {
        "allowOut": [f"localhost:{good.port}"], "denyOut": ["0.0.0.0/0"], "rules": rule}},
        headers=h)
    assert r.status == 201, r
    sid = r.json["sandboxID"]
    assert SECRET.split()[1] not in json.dumps(e2b.get(f"/sandboxes/{sid}", headers=h).json)
    assert SECRET.split()[1] not in json.dumps(e2b.get("/secrets", headers=h).json)
    for f in server.state_dir.glob("hutch.db*"):  # sealed in the store
        assert SECRET.split()[1].encode() not in f.read_bytes(), f
    code, out, err = sh(tenant, sid, f"{CURL} https://localhost:{good.port}/e2b")
    assert out.strip() == "200", (out, err)
    assert good.seen[-1]["Authorization"] == SECRET and good.seen[-1]["X-Other"] == "plain"
    assert good.seen[-1]["Host"] == "localhost"
    # The same rule as the native API's: never in clear, to any port.
    clear = Origin()
    try:
        r = e2b.request("PUT", f"/sandboxes/{sid}/network", {
            "allowOut": [f"localhost:{good.port}", f"localhost:{clear.port}"],
            "denyOut": ["0.0.0.0/0"], "rules": rule}, headers=h)
        assert r.status == 204, r
        code, out, err = sh(tenant, sid, f"{CURL} http://localhost:{clear.port}/e2b")
        assert out.strip() == "200", (out, err)
        assert "Authorization" not in clear.seen[-1] and "X-Other" not in clear.seen[-1]
    finally:
        clear.close()
    # A rule naming a secret the team does not have is refused.
    bad = {"localhost": [{"transform": {"headers": {"A": "${e2b.secrets.nope}"}}}]}
    r = e2b.post("/v2/sandboxes", {"templateID": "base", "network": {"rules": bad}}, headers=h)
    assert r.status == 400 and "nope" in r.json["message"], r
    r = e2b.request("DELETE", f"/secrets/{s['secretID']}", headers=h)
    assert r.status == 204
    assert e2b.get("/secrets/my-key", headers=h).status == 404
    assert e2b.request("DELETE", f"/secrets/{s['secretID']}", headers=h).status == 404
    e2b.delete(f"/sandboxes/{sid}", headers=h)


def test_deny_lists_native_and_e2b(server, tenant, origins):
    """A deny list takes back from "*" what it names; an allow entry that
    names a host wins over it (E2B's allowOut over denyOut)."""
    good = origins[0]
    url = f"https://localhost:{good.port}/deny"
    sb = tenant.create(network={"allow": ["*"], "deny": ["localhost", "10.0.0.0/8"]})
    assert sb["network"]["deny"] == ["localhost", "10.0.0.0/8"]
    plain = f"http://localhost:{good.port}/deny"  # a refusal's reason is its body
    code, out, _ = sh(tenant, sb["id"], f"curl --noproxy '' -sS -m 20 {plain}")
    assert "or its deny list holds it" in out, out
    r = tenant.request("PATCH", f"/v1/sandboxes/{sb['id']}/network",
                       {"allow": ["*", f"localhost:{good.port}"]})
    assert r.status == 200 and r.json["network"]["deny"] == ["localhost", "10.0.0.0/8"], r
    code, out, err = sh(tenant, sb["id"], f"{CURL} -k {url}")
    assert out.strip() == "200", (out, err)
    assert good.seen and good.seen[-1]["Host"] == f"localhost:{good.port}"
    r = tenant.request("PATCH", f"/v1/sandboxes/{sb['id']}/network", {"deny": ["*"]})
    assert r.status == 400, r
    # E2B: denyOut with addresses and blocks; all traffic is still "nothing but allowOut".
    e2b = server.api(None)
    h = {"X-API-Key": tenant.key}
    r = e2b.post("/v2/sandboxes", {"templateID": "base", "network": {
        "denyOut": ["8.8.8.8", "10.0.0.0/8", "2606:4700::1111", "localhost"]}}, headers=h)
    assert r.status == 201, r
    sid = r.json["sandboxID"]
    d = e2b.get(f"/sandboxes/{sid}", headers=h).json
    assert d["allowInternetAccess"] is True
    assert d["network"]["denyOut"] == ["8.8.8.8", "10.0.0.0/8", "2606:4700::1111", "localhost"]
    native = tenant.get(f"/v1/sandboxes/{sid}").json["network"]
    assert native["allow"] == ["*"] and "[2606:4700::1111]" in native["deny"]
    code, out, _ = sh(tenant, sid, f"curl --noproxy '' -sS -m 20 {plain}")
    assert "or its deny list holds it" in out, out
    r = e2b.request("PUT", f"/sandboxes/{sid}/network",
                    {"allowOut": [f"localhost:{good.port}"], "denyOut": ["0.0.0.0/0"]}, headers=h)
    assert r.status == 204, r
    d = e2b.get(f"/sandboxes/{sid}", headers=h).json
    assert d["allowInternetAccess"] is False and d["network"]["denyOut"] == ["0.0.0.0/0"]
    assert d["network"]["allowOut"] == [f"localhost:{good.port}"]
    assert sh(tenant, sid, f"{CURL} -k {url}")[1].strip() == "200"
    e2b.delete(f"/sandboxes/{sid}", headers=h)


def test_mask_host_is_the_host_a_port_gets(server, tenant):
    """network.mask_host (E2B's maskRequestHost): the Host header a port's
    service gets, ${PORT} the port."""
    bad = tenant.post("/v1/sandboxes", {"network": {"mask_host": "a\r\nX-Evil: 1"}})
    assert bad.status == 400, bad
    bad = tenant.post("/v1/sandboxes", {"network": {"mask_host": "${HOME}"}})
    assert bad.status == 400, bad
    e2b = server.api(None)
    h = {"X-API-Key": tenant.key}
    r = e2b.post("/v2/sandboxes", {"templateID": "base", "network": {
        "maskRequestHost": "custom-host.example.com:${PORT}"}}, headers=h)
    assert r.status == 201, r
    sid = r.json["sandboxID"]
    d = e2b.get(f"/sandboxes/{sid}", headers=h).json
    assert d["network"]["maskRequestHost"] == "custom-host.example.com:${PORT}"
    r = tenant.request("PUT", f"/v1/sandboxes/{sid}/files?path=/tmp/service.py", SERVICE)
    assert r.status in (200, 201), r
    tenant.post(f"/v1/sandboxes/{sid}/exec",
                {"cmd": ["python3", "/tmp/service.py", "8000", "0.0.0.0"], "background": True})
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        r = tenant.get(f"/v1/sandboxes/{sid}/ports/8000/headers")
        if r.status == 200:
            break
        time.sleep(0.2)
    assert r.status == 200, r
    assert r.json["Host"] == "custom-host.example.com:8000", r.json
    # An E2B network change keeps it; a native PATCH may clear it.
    r = e2b.request("PUT", f"/sandboxes/{sid}/network", {"allowOut": []}, headers=h)
    assert r.status == 204, r
    assert tenant.get(f"/v1/sandboxes/{sid}/ports/8000/headers").json["Host"] == \
        "custom-host.example.com:8000"
    r = tenant.request("PATCH", f"/v1/sandboxes/{sid}/network", {"mask_host": None})
    assert r.status == 200 and "mask_host" not in r.json["network"], r
    assert tenant.get(f"/v1/sandboxes/{sid}/ports/8000/headers").json["Host"] != \
        "custom-host.example.com:8000"
    e2b.delete(f"/sandboxes/{sid}", headers=h)


def test_secrets_given_later_go_over_https_too(server, tenant, origins):
    """A PATCH that gives a running sandbox secrets installs its CA then."""
    good = origins[0]
    sb = tenant.create(network={"allow": [f"localhost:{good.port}"]})
    sid = sb["id"]
    r = tenant.request("PATCH", f"/v1/sandboxes/{sid}/network",
                       {"secrets": [{"host": "localhost", "header": "X-Key", "value": "later",
                                     "https_ports": [good.port]}]})
    assert r.status == 200, r
    deadline = time.monotonic() + 20
    # Set, as the interception starts, once the files are there.
    while sh(tenant, sid, 'test -n "$CURL_CA_BUNDLE"')[0] != 0:
        assert time.monotonic() < deadline, "the CA was not installed"
        time.sleep(0.2)
    code, out, err = sh(tenant, sid, f"{CURL} https://localhost:{good.port}/later")
    assert out.strip() == "200", (out, err)
    assert good.seen[-1]["X-Key"] == "later"


# Where a secret goes (issue 41, finding 4): only over TLS to a host that
# proves its name, on the ports its rule names (443 unless it says), and
# in clear only on a port the rule opts in for; and no header of the
# answer hands it back.

HEADERS = "curl --noproxy '' -sS -m 20 -D - -o /dev/null"


@pytest.fixture
def clear_origins():
    """Two plain-HTTP hosts on the host's loopback that reflect every
    request header in their answer's headers."""
    made = [Origin(reflect=True), Origin(reflect=True)]
    yield made
    for o in made:
        o.close()


def no_secret(o):
    return all(SECRET not in v and SECRET.split()[1] not in v for v in o.seen[-1].values())


def test_plain_http_to_the_secrets_host_gets_no_secret(server, tenant, clear_origins):
    """The attack: the secret is the sandbox's for a host; a plain request
    to that host, on any port, used to carry it in clear to whatever
    answered there, which handed it back. Now none gets it."""
    a, b = clear_origins
    with on_port_443(lambda **kw: Origin(reflect=True, **kw)) as on_443:  # the rule's port
        sb = tenant.create(network={"allow": [f"localhost:{a.port}", f"localhost:{b.port}",
                                              "localhost:443"]},
                           secrets=[{"host": "localhost", "header": "Authorization",
                                     "value": SECRET}])
        sid = sb["id"]
        for o in (on_443, a, b):
            code, out, err = sh(tenant, sid, f"{HEADERS} -H 'Authorization: mine' "
                                             f"http://localhost:{o.port}/clear")
            assert out.startswith("HTTP/1.0 200"), (out, err)
            assert o.seen[-1]["Authorization"] == "mine", o.seen  # the sandbox's own
            assert SECRET.split()[1] not in out
    # A rule that names a port for TLS: a plain request to that same port
    # gets none either.
    r = tenant.request("PATCH", f"/v1/sandboxes/{sid}/network", {"secrets": [
        {"host": "localhost", "header": "Authorization", "value": SECRET,
         "https_ports": [a.port]}]})
    assert r.status == 200, r
    code, out, err = sh(tenant, sid, f"{HEADERS} http://localhost:{a.port}/same-port")
    assert out.startswith("HTTP/1.0 200"), (out, err)
    assert no_secret(a) and SECRET.split()[1] not in out, a.seen[-1]


def test_tls_on_a_port_the_rule_does_not_name_gets_no_secret(server, tenant, certs, origins):
    good = origins[0]
    other = tls_origin(certs / "good.crt", certs / "good.key")
    try:
        sb = tenant.create(network={"allow": [f"localhost:{good.port}", f"localhost:{other.port}"]},
                           secrets=[{"host": "localhost", "header": "Authorization",
                                     "value": SECRET, "https_ports": [good.port]}])
        sid = sb["id"]
        code, out, err = sh(tenant, sid, f"{CURL} https://localhost:{good.port}/named")
        assert out.strip() == "200", (out, err)
        assert good.seen[-1]["Authorization"] == SECRET
        # Another port of the same host: a blind tunnel, the host's own
        # certificate (not the sandbox's CA), and no secret.
        code, out, err = sh(tenant, sid, f"{CURL} -k -v https://localhost:{other.port}/unnamed")
        assert out.strip() == "200", (out, err)
        assert "hutch test CA" in err and "hutch egress CA" not in err
        assert "Authorization" not in other.seen[-1], other.seen
    finally:
        other.close()


def test_plain_http_only_where_the_rule_opts_in(server, tenant, clear_origins):
    a, b = clear_origins
    sb = tenant.create(network={"allow": [f"localhost:{a.port}", f"localhost:{b.port}"]},
                       secrets=[{"host": "localhost", "header": "Authorization", "value": SECRET,
                                 "https_ports": [], "http_ports": [a.port]},
                                {"host": "localhost", "header": "X-Other", "value": "x"}])
    sid = sb["id"]
    code, out, err = sh(tenant, sid, f"{HEADERS} -H 'Authorization: forged' "
                                     f"http://localhost:{a.port}/opted-in")
    assert out.startswith("HTTP/1.0 200"), (out, err)
    assert a.seen[-1]["Authorization"] == SECRET  # replaced, not added to
    assert "X-Other" not in a.seen[-1]  # that one's rule names no plain port
    # The answer reflected it: the sandbox gets none of those headers.
    assert SECRET.split()[1] not in out and "X-Echo-Authorization" not in out, out
    assert "X-Echo-Host:" in out  # what carries no secret goes on
    code, out, err = sh(tenant, sid, f"{HEADERS} http://localhost:{b.port}/not")
    assert out.startswith("HTTP/1.0 200"), (out, err)
    assert no_secret(b) and "Authorization" not in b.seen[-1]
    # A request with a body gets its answer (the thread relays both ways).
    code, out, err = sh(tenant, sid, f"{CURL} -d hello http://localhost:{a.port}/post")
    assert out.strip() in ("501", "200"), (out, err)
    bad = tenant.post("/v1/sandboxes", {"secrets": [
        {"host": "localhost", "header": "X-K", "value": "v", "http_ports": [80, "81"]}]})
    assert bad.status == 400 and "http_ports" in bad.json["error"]["message"], bad


def test_a_reflecting_host_over_tls_hands_no_secret_back(server, tenant, certs):
    """A host that proved its name, on 443 (the rule's default), reflects
    the request's headers in its answer's: the sandbox gets none that
    carries the secret."""
    with on_port_443(lambda **kw: tls_origin(certs / "good.crt", certs / "good.key",
                                             reflect=True, **kw)) as mirror:
        sb = tenant.create(network={"allow": [f"localhost:{mirror.port}"]},
                           secrets=[{"host": "localhost", "header": "Authorization",
                                     "value": SECRET}])
        code, out, err = sh(tenant, sb["id"], f"{HEADERS} -H 'X-Mine: kept' "
                                              f"https://localhost:{mirror.port}/mirror")
        assert "HTTP/1.0 200 OK" in out, (out, err)  # after the proxy's 200 to the CONNECT
        assert mirror.seen[-1]["Authorization"] == SECRET  # it got it, and reflected it
        token = SECRET.split()[1]
        assert token not in out and "X-Echo-Authorization" not in out, out
        assert "X-Echo64-Authorization" not in out, out  # nor in base64
        assert "X-Echo-X-Mine: kept" in out, out


BODY = "curl --noproxy '' -sS -m 20 -w '\\n%{http_code}\\n'"


def test_a_request_inside_the_tls_names_no_other_host(server, tenant, origins, clear_origins):
    """Review 41, finding 4. The attack: CONNECT localhost:P, whose host
    proves that name, then inside the TLS a request for another host's URI
    (absolute form): a shared front routes on it, and the secret added for
    localhost would reach a virtual host that proved nothing. Now the
    proxy answers 400 and sends nothing on; an absolute URI on the proven
    host itself goes on in origin form."""
    good, a = origins[0], clear_origins[0]
    p = good.port
    sb = tenant.create(network={"allow": [f"localhost:{p}", f"localhost:{a.port}"]},
                       secrets=[{"host": "localhost", "header": "Authorization", "value": SECRET,
                                 "https_ports": [p], "http_ports": [a.port]}])
    sid = sb["id"]
    for target in ("https://victim-b.example/steal", f"https://victim-b.example:{p}/steal",
                   "https://localhost/other-port", f"http://localhost:{p}/other-scheme",
                   f"https://u@localhost:{p}/user", "*", f"localhost:{p}"):
        code, out, err = sh(tenant, sid, f"{BODY} --request-target '{target}' "
                                         f"https://localhost:{p}/")
        assert out.splitlines()[-1] == "400", (target, out, err)
        assert SECRET.split()[1] not in out
    assert "is not this connection's host" in sh(
        tenant, sid, f"{BODY} --request-target https://victim-b.example/ https://localhost:{p}/")[1]
    assert not good.lines, good.lines  # nothing went on, so no secret did
    for target, line in ((f"https://localhost:{p}/mine?q=1", "GET /mine?q=1 HTTP/1.1"),
                         (f"HTTPS://LOCALHOST:{p}", "GET / HTTP/1.1"),
                         ("/origin-form", "GET /origin-form HTTP/1.1")):
        code, out, err = sh(tenant, sid, f"{BODY} --request-target '{target}' "
                                         f"https://localhost:{p}/")
        assert out.splitlines()[-1] == "200", (target, out, err)
        assert good.lines[-1] == line and good.seen[-1]["Authorization"] == SECRET
        assert good.seen[-1]["Host"] == f"localhost:{p}"
    code, out, err = sh(tenant, sid, f"{BODY} -X OPTIONS --request-target '*' "
                                     f"https://localhost:{p}/")
    assert out.splitlines()[-1] == "200" and good.lines[-1] == "OPTIONS * HTTP/1.1", (out, err)
    # Plain HTTP where the rule opts in: the target and Host that go on are
    # the URI's own, whatever Host the client names.
    code, out, err = sh(tenant, sid, f"{BODY} -H 'Host: victim-b.example' "
                                     f"http://localhost:{a.port}/plain?x=1")
    assert out.splitlines()[-1] == "200", (out, err)
    assert a.lines[-1] == "GET /plain?x=1 HTTP/1.1" and a.seen[-1]["Host"] == f"localhost:{a.port}"
    assert a.seen[-1]["Authorization"] == SECRET


def test_trace_with_a_secret_is_refused(server, tenant, origins, clear_origins):
    """Review 41, finding 7. The attack: TRACE (or TRACK) to the secret's
    host, which echoes the request, the secret in it, in its body, where
    the scrubber does not look. Now none such goes on where a secret
    would be added, over TLS or plain; elsewhere TRACE is the client's."""
    good, (a, b) = origins[0], clear_origins
    sb = tenant.create(network={"allow": [f"localhost:{good.port}", f"localhost:{a.port}",
                                          f"localhost:{b.port}"]},
                       secrets=[{"host": "localhost", "header": "Authorization", "value": SECRET,
                                 "https_ports": [good.port], "http_ports": [a.port]}])
    sid = sb["id"]
    token = SECRET.split()[1]
    for url in (f"https://localhost:{good.port}/t", f"http://localhost:{a.port}/t"):
        code, out, err = sh(tenant, sid, f"{BODY} -X TRACE {url}")
        assert out.splitlines()[-1] == "405" and token not in out, (url, out, err)
        assert "TRACE" in out
        code, out, err = sh(tenant, sid, f"{BODY} -X TRACK {url}")
        assert out.splitlines()[-1] == "400" and token not in out, (url, out, err)
    assert not good.lines and not a.lines, (good.lines, a.lines)
    code, out, err = sh(tenant, sid, f"{BODY} -X TRACE http://localhost:{b.port}/mine")
    assert out.splitlines()[-1] == "200" and b.lines[-1].startswith("TRACE "), (out, err)
    assert "Authorization" not in b.seen[-1]
