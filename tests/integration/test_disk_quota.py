"""Every byte a tenant causes on the state filesystem is charged to it
when reserved and released when collected (docs/security.md,
"Resources"): its build cache (a build ending in a failing step, a
template built then deleted), uploads side by side, an import's body
before it is read. From the attacker's side: a tenant with a small
quota tries to leave more than its quota on the disk."""
import http.client
import json
import os
import pathlib
import socket
import tarfile
import threading

import pytest

from conftest import serve_each_build
from serveapi import error_of, wait_for
from test_templates_api import busybox_layer, oci_archive, tar_of, upload

QUOTA_MB = 20
MiB = 1 << 20


@pytest.fixture(params=["build", "asan"])
def server(request, tmp_path_factory):
    """A server of each build's own for each test: what the store holds is
    measured whole."""
    yield from serve_each_build(request, tmp_path_factory)


def small_tenant(server, name):
    key = server.api().post("/v1/keys", {"tenant": name, "max_disk_mb": QUOTA_MB}).json["key"]
    return server.api(key)


def layer_bytes(server):
    """The data of every layer in the store, as each layer's meta says."""
    d = server.state_dir / "images" / "layers"
    return sum(json.loads(p.read_text())["size"] for p in d.glob("*.json"))


def layer_names(server):
    d = server.state_dir / "images" / "layers"
    return {p.name for p in d.iterdir()} if d.is_dir() else set()


def build(t, name, dockerfile):
    return t.post("/v1/templates", {"name": name, "dockerfile": dockerfile}, timeout=300)


def fill(i, mb):
    """A RUN step leaving mb MiB of its own content (no two steps share it)."""
    return (f"RUN echo {i} > /n{i} && /bin/busybox dd if=/dev/urandom of=/f{i} bs=1M "
            f"count={mb} 2>/dev/null\n")


def test_build_cache_layers_stay_within_the_quota(server):
    """Builds ending in RUN false, and templates built then deleted, each
    leave their steps' layers in the build cache: counted against no
    quota and kept from collection, a tenant with 20 MiB left 60 MiB in
    layers/ and was still given a 16 MiB volume. The cache is charged to
    the tenant, collected least recently used first when it needs room,
    and goes with its templates."""
    t = small_tenant(server, "cachefill")
    before = layer_names(server)
    assert upload(t, "/v1/templates/import?name=box", oci_archive([busybox_layer()])).status == 201
    for i in range(6):
        r = build(t, f"fails{i}", "FROM box\n" + fill(i, 4) + "RUN false\n")
        assert r.status >= 400 and error_of(r) in ("step_failed", "too_large"), r
        wait_for(lambda: layer_bytes(server) <= QUOTA_MB * MiB, 30)
    for i in range(3):
        r = build(t, f"gone{i}", "FROM box\n" + fill(10 + i, 4))
        assert r.status == 201, r
        assert t.delete(f"/v1/templates/gone{i}").status == 204
        wait_for(lambda: layer_bytes(server) <= QUOTA_MB * MiB, 30)

    # What the volume needs comes out of the cache: layers and volume
    # together stay within the quota; a volume past what is left is refused.
    r = build(t, "kept", "FROM box\n" + fill(20, 6) + "RUN false\n")
    assert r.status >= 400, r
    r = t.post("/v1/volumes", {"name": "v", "size_mb": 16})
    assert r.status == 201, r
    wait_for(lambda: layer_bytes(server) + 16 * MiB <= QUOTA_MB * MiB, 30)
    r = t.post("/v1/volumes", {"name": "w", "size_mb": 16})
    assert (r.status, error_of(r)) == (429, "quota_exceeded"), r
    assert t.delete("/v1/volumes/v").status == 204

    # Its templates gone, none of its layers is left in the store.
    assert t.delete("/v1/templates/box").status == 204
    wait_for(lambda: layer_names(server) == before, 30)


def long_job(t, base):
    """A build of t's that made a layer and sleeps: its child works in
    tmp/ until it ends. Its job's path."""
    df = f"FROM {base}\nRUN echo made > /made\nRUN sleep 120\n"
    r = t.post("/v1/templates", {"name": "long", "dockerfile": df},
               headers={"Prefer": "respond-async"})
    assert r.status == 202, r
    job = r.headers["Location"]
    wait_for(lambda: any(e["event"] == "step" and e["step"] == 3 for e in t.get(job).json["log"]),
             30)
    return job


def test_cache_let_go_of_stays_charged_until_collected(server):
    """The store removes no layer while any job works in its tmp/: another
    tenant's long build keeps every layer this tenant's cache lets go of
    on the disk. Charged to nobody once dropped, failed builds in a loop
    would fill it; they stay charged to the tenant until collected, so
    its builds get less and less room, and all goes once the other's
    build ends."""
    other = small_tenant(server, "sleeper")
    assert upload(other, "/v1/templates/import?name=box",
                  oci_archive([busybox_layer()])).status == 201
    job = long_job(other, "box")

    t = small_tenant(server, "looper")
    assert upload(t, "/v1/templates/import?name=box", oci_archive([busybox_layer()])).status == 201
    for i in range(12):
        r = build(t, f"fails{i}", "FROM box\n" + fill(i, 4) + "RUN false\n")
        assert r.status >= 400, r
    assert layer_bytes(server) <= 2 * QUOTA_MB * MiB + 4 * MiB
    assert other.delete(job).status == 204
    wait_for(lambda: layer_bytes(server) <= QUOTA_MB * MiB + 4 * MiB, 30)


def raw_upload(port, path, key, length, body, barrier=None, half=0):
    """An upload over its own socket: headers, half of the body, the
    barrier (every upload has started), the rest; the answer's status and
    error code. A refusal may come (and the connection close) before the
    body is all sent."""
    s = socket.create_connection(("127.0.0.1", port), timeout=60)
    auth = f"Authorization: Bearer {key}\r\n" if key else ""
    head = (f"PUT {path} HTTP/1.1\r\nHost: x\r\n{auth}Content-Type: application/x-tar\r\n"
            f"Content-Length: {length}\r\n\r\n").encode()
    if path.startswith("/v1/"):
        head = head.replace(b"PUT ", b"POST ", 1)
    waited = False
    try:
        s.sendall(head + body[:half])
        waited = True
        if barrier:
            barrier.wait()
        s.sendall(body[half:])
    except OSError:
        if barrier and not waited:
            barrier.wait()
    try:
        return answer_of(s)
    finally:
        s.close()


def answer_of(s):
    data = b""
    while b"\r\n\r\n" not in data:
        got = s.recv(65536)
        if not got:
            raise AssertionError(f"no answer: {data!r}")
        data += got
    head, _, rest = data.partition(b"\r\n\r\n")
    status = int(head.split()[1])
    length = int(next((l.split(b":")[1] for l in head.split(b"\r\n")
                       if l.lower().startswith(b"content-length:")), b"0"))
    while len(rest) < length:
        got = s.recv(65536)
        if not got:
            break
        rest += got
    if status < 400 or not rest:
        return status, None
    body = json.loads(rest)
    # E2B's routes answer in E2B's shape: {"code": status, "message"}.
    return status, body["error"]["code"] if "error" in body else body["message"]


def head(path, key, length):
    return (f"POST {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {key}\r\n"
            f"Content-Length: {length}\r\n\r\n").encode()


def headers_only(server, path, key, length):
    """The answer to an upload's headers, its body never sent."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as s:
        s.sendall(head(path, key, length))
        return answer_of(s)


def upload_paths(server, t, n, route):
    """n upload paths and the key each takes: E2B's one-use URLs (no key)
    or the native contexts route."""
    if route == "contexts":
        return [("/v1/templates/contexts", t.key)] * n
    r = t.post("/v3/templates", {"name": "parallel", "cpuCount": 1, "memoryMB": 512})
    assert r.status == 202, r
    out = []
    for i in range(n):
        f = t.get(f"/templates/parallel/files/{'%064x' % i}")
        assert f.status == 201, f
        out.append((f.json["url"].split(str(server.port), 1)[1], None))
    return out


def stored_bytes(server):
    d = server.state_dir / "template-files"
    return sum(p.stat().st_size for p in d.rglob("*.tar")) if d.exists() else 0


@pytest.mark.parametrize("route", ["e2b", "contexts"])
def test_parallel_uploads_share_one_quota(server, route):
    """Each upload was capped at the quota left when it began, uploads in
    flight uncounted: five parallel PUTs of 15 MiB put 76 MiB on the disk
    of a tenant with 20. Each now reserves its length before a byte is
    read: at most the quota lands, the rest are refused 429."""
    t = small_tenant(server, f"par{route}")
    n, size = 5, 6 * MiB
    paths = upload_paths(server, t, n, route)
    barrier = threading.Barrier(n, timeout=60)
    got = [None] * n

    def one(i):
        path, key = paths[i]
        got[i] = raw_upload(server.port, path, key, size, os.urandom(size), barrier, size // 2)
    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    ok = [g for g in got if g[0] in (200, 201)]
    refused = [g for g in got if g not in ok]
    assert all(g[0] == 429 and (g[1] == "quota_exceeded" or "at most 20 MiB" in g[1])
               for g in refused), got
    assert 1 <= len(ok) and len(ok) * size <= QUOTA_MB * MiB, got
    assert stored_bytes(server) <= QUOTA_MB * MiB
    assert server.api(None).get("/healthz").status == 200


def test_an_import_past_the_quota_is_refused_before_its_body(server):
    """An upload under way holds part of the quota: an import whose
    Content-Length fits the quota alone but not beside it is refused at
    once, before its body is read (it never comes here)."""
    t = small_tenant(server, "importer")
    slow = socket.create_connection(("127.0.0.1", server.port), timeout=30)
    slow.sendall(head("/v1/templates/contexts", t.key, 12 * MiB) + b"\0" * 4096)
    try:
        # Once the upload's headers are in, nothing past 8 MiB more fits;
        # each answer comes with no byte of its body sent.
        wait_for(lambda: headers_only(server, "/v1/templates/contexts", t.key, 9 * MiB)
                 == (429, "quota_exceeded"), 10)
        assert headers_only(server, "/v1/templates/import?name=big", t.key, 10 * MiB) == \
            (429, "quota_exceeded")
    finally:
        slow.close()
    # The upload that went away gave its reservation back.
    wait_for(lambda: upload(t, "/v1/templates/contexts", b"\0" * (15 * MiB)).status == 201, 10)


def test_uploads_under_way_are_bounded(server):
    """Each upload under way holds a connection, a file and a reservation:
    a tenant has at most 8 at once, the next refused 429 naming the bound."""
    t = small_tenant(server, "many")
    socks = []
    try:
        for _ in range(8):
            s = socket.create_connection(("127.0.0.1", server.port), timeout=30)
            s.sendall(head("/v1/templates/contexts", t.key, 1024) + b"x")
            socks.append(s)
        r = {}

        def refused():
            r["r"] = upload(t, "/v1/templates/contexts", b"y" * 1024)
            return r["r"].status == 429
        wait_for(refused, 10)
        assert error_of(r["r"]) == "quota_exceeded" and "8 uploads" in r["r"].json["error"]["message"]
    finally:
        for s in socks:
            s.close()
    wait_for(lambda: upload(t, "/v1/templates/contexts", b"z" * 1024).status == 201, 10)


def public_box(server):
    """A public busybox template, charged to no tenant."""
    r = upload(server.api(), "/v1/templates/import?name=pbox&public=true",
               oci_archive([busybox_layer()]))
    assert r.status == 201, r


def test_a_tenant_at_its_quota_gets_no_uncapped_job(server):
    """At exactly its quota, what the quota left (0) was the job's cap,
    and 0 meant none: the child's own 16 GiB. A job now asks at least a
    byte: refused before any step runs, nothing written."""
    public_box(server)
    t = small_tenant(server, "atquota")
    assert t.post("/v1/volumes", {"name": "v", "size_mb": QUOTA_MB}).status == 201
    before = layer_names(server)
    r = t.post("/v1/templates", {"name": "big", "dockerfile": "FROM pbox\n" + fill(0, 30)},
               headers={"Prefer": "respond-async"})
    assert (r.status, error_of(r)) == (429, "quota_exceeded"), r
    assert str(QUOTA_MB) in r.json["error"]["message"]
    assert layer_names(server) == before


def test_jobs_side_by_side_share_one_quota(server):
    """Two jobs side by side were each capped at the same room left, so
    together they could write twice it. A running job's cap is held of
    the quota: the second job's cap is what the first's left."""
    public_box(server)
    t = small_tenant(server, "twojobs")
    job = long_job(t, "pbox")
    r = build(t, "wide", "FROM pbox\n" + fill(0, 15))
    assert r.status >= 400 and error_of(r) in ("step_failed", "too_large"), r
    assert layer_bytes(server) <= QUOTA_MB * MiB + 4 * MiB
    assert t.delete(job).status == 204


def random_layer(mb):
    """A layer of mb MiB that no other shares."""
    return tar_of([("blob", os.urandom(mb * MiB), 0o644, None, tarfile.REGTYPE)])


def test_a_deleted_template_kept_for_a_snapshot_stays_charged(server):
    """A template deleted while a snapshot holds it is kept, its layers
    with it, and was charged to nobody: import, sandbox, snapshot, delete
    in a loop filled the disk with the quota never reached. A kept
    template stays its owner's charge."""
    t = small_tenant(server, "keeper")
    for i in range(2):
        r = upload(t, f"/v1/templates/import?name=t{i}",
                   oci_archive([busybox_layer(), random_layer(3)]))
        assert r.status == 201, r
        sid = t.create(template=f"t{i}")["id"]
        assert t.post(f"/v1/sandboxes/{sid}/snapshots", {}).status == 201
        assert t.delete(f"/v1/sandboxes/{sid}").status == 204
        assert t.delete(f"/v1/templates/t{i}").status == 204
    assert len(list((server.state_dir / "images" / "templates").glob("*.gone"))) == 2
    r = t.post("/v1/volumes", {"name": "v", "size_mb": 16})
    assert (r.status, error_of(r)) == (429, "quota_exceeded"), r


def test_a_deleted_template_stays_charged_until_collected(server):
    """The store removes no layer while any job works in its tmp/, and a
    deleted template's layers (and the cache entries that followed it)
    left the charge at once: build and delete in a loop beside another
    tenant's long build filled the disk, charged to nobody. They stay
    charged until collected."""
    public_box(server)
    other = small_tenant(server, "sleeper")
    job = long_job(other, "pbox")

    t = small_tenant(server, "deleter")
    for i in range(2):
        assert build(t, f"made{i}", "FROM pbox\n" + fill(i, 4)).status == 201
        assert t.delete(f"/v1/templates/made{i}").status == 204
    # Its 8 MiB let go of are still on the disk, and still its charge.
    r = t.post("/v1/volumes", {"name": "v", "size_mb": 16})
    assert (r.status, error_of(r)) == (429, "quota_exceeded"), r
    assert other.delete(job).status == 204
    wait_for(lambda: t.post("/v1/volumes", {"name": "v", "size_mb": 16}).status == 201, 30)


def chunked_upload(port, path, key, body):
    """An upload without a Content-Length: its body chunked. Its status."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    conn.request("POST", path, body=iter([body]), encode_chunked=True,
                 headers={"Authorization": f"Bearer {key}", "Content-Type": "application/x-tar",
                          "Transfer-Encoding": "chunked"})
    status = conn.getresponse().status
    conn.close()
    return status


def test_an_uploads_step_ahead_keeps_the_build_cache(server):
    """A chunked upload reserves a MiB ahead of what it has: that step
    collected the tenant's build cache for bytes never sent. Only what
    is written makes room; the cache entry stays."""
    t = small_tenant(server, "ahead")
    assert upload(t, "/v1/templates/import?name=box", oci_archive([busybox_layer()])).status == 201
    before = layer_names(server)
    r = build(t, "fails", "FROM box\n" + fill(0, 1) + "RUN false\n")
    assert r.status >= 400, r
    layers = server.state_dir / "images" / "layers"
    cached = [json.loads((layers / n).read_text()) for n in layer_names(server) - before
              if n.endswith(".json")]
    box = next(json.loads(p.read_text())
               for p in (server.state_dir / "images" / "templates").glob("*.json"))
    vfs = os.statvfs(server.state_dir)
    entry = max(4096, vfs.f_blocks * vfs.f_frsize // vfs.f_files)
    used = box["size_bytes"] + box["files"] * entry + sum(c["size"] + c["files"] * entry
                                                          for c in cached)
    assert t.post("/v1/volumes", {"name": "v", "size_mb": 16}).status == 201
    # What is left: 64 KiB.
    pad = (QUOTA_MB - 16) * MiB - used - 64 * 1024
    assert pad > 0
    got = raw_upload(server.port, "/v1/templates/contexts", t.key, pad, os.urandom(pad))
    assert got[0] == 201, got
    entries = list((server.state_dir / "images" / "cache").rglob("*.json"))
    assert chunked_upload(server.port, "/v1/templates/contexts", t.key, os.urandom(8192)) == 201
    assert list((server.state_dir / "images" / "cache").rglob("*.json")) == entries != []
