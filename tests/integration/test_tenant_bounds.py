"""What the server keeps per tenant is bounded (docs/security.md, "Per-tenant
state"): each collection filled to its bound by one tenant refuses one more
with 429 quota_exceeded naming the bound, and another tenant's requests of
the same kind still work. Connections held open (streams, WebSockets) are
test_fds.py's, code contexts test_code.py's. Against both builds of the
server; the latency another tenant sees meanwhile is bench/tenant_bounds'."""
import hashlib
import http.client
import json
import time

import pytest

from conftest import serve_each_build
from serveapi import error_of, wait_for

TOKENS = 256  # tpltokens.h: TPLTOKENS_TENANT
PROCS = 256   # procs.c: PROC_MAX, per sandbox
WATCHERS = 16  # e2b/fs.c: WATCHERS_MAX, per sandbox


@pytest.fixture(scope="module", params=["build", "asan"])
def server(request, tmp_path_factory):
    yield from serve_each_build(request, tmp_path_factory)


def new_tenant(server):
    return server.api(server.api().post("/v1/keys", {"tenant": f"t{time.monotonic_ns()}"})
                      .json["key"])


class KeptAlive:
    """Requests of one tenant over one kept-alive connection: a bound
    filled in a second, not one connection per request."""

    def __init__(self, server, key):
        self.conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
        self.key = key

    def request(self, method, path, body=None, headers=None):
        h = {"Authorization": f"Bearer {self.key}", **(headers or {})}
        self.conn.request(method, path, body=body if body is None else json.dumps(body),
                          headers=h)
        r = self.conn.getresponse()
        data = r.read()
        return r.status, json.loads(data) if data else None

    def close(self):
        self.conn.close()


def upload_url(client, i):
    return client.request("GET", f"/templates/bounds/files/{hashlib.sha256(b'%d' % i).hexdigest()}")


def test_upload_urls_stop_at_a_tenants_bound_and_others_still_get_theirs(server, tenant):
    """The red team's attack: GET /templates/{id}/files/{hash} in a loop
    made a token each, without end. Now the tenant's 257th URL not yet
    used is refused (429, E2B's form of quota_exceeded), naming the bound; another tenant still gets one; an
    upload to one of the tenant's URLs gives its room back."""
    client = KeptAlive(server, tenant.key)
    try:
        got = [upload_url(client, i) for i in range(TOKENS)]
        assert all(s == 201 and b["url"] for s, b in got), [g for g in got if g[0] != 201][:3]
        status, body = upload_url(client, TOKENS)
        assert status == 429, f"more than the bound of {TOKENS} tokens are all accepted: {status}"
        # E2B's shape of quota_exceeded, as its SDK reads it
        assert body["code"] == 429 and f"{TOKENS} upload URLs" in body["message"], body

        other = KeptAlive(server, new_tenant(server).key)
        status, body = upload_url(other, 0)
        other.close()
        assert status == 201 and body["present"] is False, body

        path = got[0][1]["url"].split(str(server.port), 1)[1]
        assert server.api(None).request("PUT", path, body=b"").status == 200
        assert upload_url(client, TOKENS)[0] == 201
        assert upload_url(client, TOKENS + 1)[0] == 429
    finally:
        client.close()


def test_a_used_or_unknown_upload_url_is_not_found(server, tenant):
    """A token is good once; what is not a token (wrong length, not hex,
    another's token with one digit changed) finds nothing."""
    status, body = upload_url(KeptAlive(server, tenant.key), 0)
    assert status == 201, body
    path = body["url"].split(str(server.port), 1)[1]
    token = path.rsplit("/", 1)[1]
    anon = server.api(None)
    flipped = token[:-1] + ("0" if token[-1] != "0" else "1")
    for bad in (flipped, token[:-1], token + "0", token.upper(), "../" + token):
        assert anon.request("PUT", f"/templates/uploads/{bad}", body=b"").status == 404, bad
    assert anon.request("PUT", path, body=b"").status == 200
    assert anon.request("PUT", path, body=b"").status == 404


def test_background_processes_stop_at_a_sandboxs_bound(server, tenant):
    """A sandbox remembers 256 background processes: one more while all
    run is refused naming the bound; another tenant's sandbox still starts
    one."""
    sid = tenant.create()["id"]
    client = KeptAlive(server, tenant.key)
    try:
        for i in range(PROCS):
            status, body = client.request("POST", f"/v1/sandboxes/{sid}/exec",
                                          {"cmd": ["sleep", "600"], "background": True})
            assert status == 201, (i, body)
        status, body = client.request("POST", f"/v1/sandboxes/{sid}/exec",
                                      {"cmd": ["sleep", "600"], "background": True})
    finally:
        client.close()
    assert status == 429 and body["error"]["code"] == "quota_exceeded", body
    assert f"{PROCS} background processes" in body["error"]["message"], body

    other = new_tenant(server)
    osid = other.create()["id"]
    r = other.post(f"/v1/sandboxes/{osid}/exec", {"cmd": ["true"], "background": True})
    assert r.status == 201, r
    other.delete(f"/v1/sandboxes/{osid}")


def test_polled_watchers_stop_at_a_sandboxs_bound(server, tenant):
    """E2B's polled watchers (CreateWatcher): 16 per sandbox, the 17th is
    refused naming the bound; another tenant's sandbox still makes one."""
    def sandbox(api):
        r = api.post("/v2/sandboxes", {"templateID": "base"})
        assert r.status == 201, r
        return r.json

    def create_watcher(sb):
        r = server.api(None).request(
            "POST", "/filesystem.Filesystem/CreateWatcher", json.dumps({"path": "/tmp"}),
            headers={"E2b-Sandbox-Id": sb["sandboxID"], "E2b-Sandbox-Port": "49983",
                     "X-Access-Token": sb["envdAccessToken"],
                     "Content-Type": "application/json"})
        return r

    sb = sandbox(tenant)
    for i in range(WATCHERS):
        r = create_watcher(sb)
        assert r.status == 200 and r.json["watcherId"], (i, r)
    r = create_watcher(sb)
    assert r.status == 429 and r.json["code"] == "resource_exhausted", r
    assert f"at most {WATCHERS} polled watchers" in r.json["message"], r

    other = new_tenant(server)
    osb = sandbox(other)
    assert create_watcher(osb).status == 200
    other.delete(f"/sandboxes/{osb['sandboxID']}")
