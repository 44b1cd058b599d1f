"""Template jobs from the attacker's side (docs/templates.md, "Template
jobs"): the server's few job slots are shared fairly (two tenants holding
them with long builds make a third tenant's build wait its turn, not a
429), a tenant's queue is bounded, a build's RUN sandbox counts against its
tenant's sandbox and memory quotas, an import the queue or the disk quota
would refuse is refused before its body is sent, and a stopping server
fails the queued jobs cleanly. Against both builds of the server."""
import json
import socket
import time

import pytest

from conftest import build_binary, serve_each_build
from serveapi import Server, error_of, wait_for
from test_templates_api import busybox_layer, oci_archive, tmp_left, upload

SLOTS, SHARE, QUEUED = 4, 2, 8  # TEMPLATE_JOBS_SERVER, _TENANT, _QUEUED


@pytest.fixture(scope="module", params=["build", "asan"])
def server(request, tmp_path_factory):
    yield from serve_each_build(request, tmp_path_factory)


@pytest.fixture(scope="module")
def box(server):
    """A public template the tenants build from."""
    r = upload(server.api(), "/v1/templates/import?name=jobbox&public=true",
               oci_archive([busybox_layer()]))
    assert r.status == 201, r
    return "jobbox"


def tenant_of(server, **quota):
    name = f"j{time.monotonic_ns()}"
    return server.api(server.api().post("/v1/keys", {"tenant": name, **quota}).json["key"])


def build(api, box, run):
    """A build asked for at once (202, the job); run is its RUN step."""
    df = f"FROM {box}\nRUN {run}\n"
    return api.post("/v1/templates", {"name": f"b{time.monotonic_ns()}", "dockerfile": df},
                    headers={"Prefer": "respond-async"})


def job(api, r):
    """The job of an answer (or of a job id)."""
    jid = r if isinstance(r, str) else r.json["id"]
    return api.get(f"/v1/templates/jobs/{jid}").json


def long_build(api, box):
    """A build that holds a slot until it is cancelled."""
    r = build(api, box, f"sleep 600 # {time.monotonic_ns()}")
    assert r.status == 202, r
    return r


def cancel_all(jobs):
    """Cancel each (api, answer or job id), the queued ones first (so that
    no slot a cancel frees starts one of them), and wait until every one
    has ended."""
    order = sorted(jobs, key=lambda x: job(*x)["status"] != "queued")
    for api, r in order:
        assert api.delete(f"/v1/templates/jobs/{job(api, r)['id']}").status == 204
    for api, r in order:
        wait_for(lambda: job(api, r)["status"] in ("ready", "error"), 60)


def test_two_tenants_cannot_hold_every_slot_and_a_later_tenant_waits_its_turn(server, box):
    """Two tenants start two long builds each: they get three of the
    server's four slots, the last being kept for a tenant running none. A
    third tenant's build (through E2B's routes) runs at once. A fourth's,
    with every slot held, is queued, its status "waiting" as E2B's SDK
    polls on, not refused; when a slot frees it goes to the fourth tenant,
    although an attacker queued a job before it."""
    m1, m2, third, fourth = (tenant_of(server) for _ in range(4))
    held = [(m, long_build(m, box)) for m in (m1, m2) for _ in range(SHARE)]
    try:
        assert [job(api, r)["status"] for api, r in held] == ["building"] * 3 + ["queued"]
        assert any("last free slot" in (ev.get("message") or "")
                   for ev in job(m2, held[3][1])["log"]), job(m2, held[3][1])
        early = long_build(m1, box)  # m1's, queued before the fourth's
        held.append((m1, early))
        assert job(m1, early)["status"] == "queued", job(m1, early)

        def e2b_build(api, name):
            bid = api.post("/v3/templates", {"name": name}).json["buildID"]
            spec = {"fromTemplate": box,
                    "steps": [{"type": "RUN", "args": [f"sleep 600 # {time.monotonic_ns()}"]}]}
            r = api.post(f"/v2/templates/{name}/builds/{bid}", spec)
            assert r.status == 202, r
            held.append((api, bid))
            return lambda: api.get(f"/templates/{name}/builds/{bid}/status").json

        third_status = e2b_build(third, "third")
        wait_for(lambda: third_status()["status"] == "building", 60)
        fourth_status = e2b_build(fourth, "fourth")
        assert fourth_status()["status"] == "waiting", fourth_status()
        assert any("queued" in line for line in fourth_status()["logs"]), fourth_status()

        # A slot frees: the fourth's turn comes before m1's older job.
        assert m1.delete(f"/v1/templates/jobs/{held[0][1].json['id']}").status == 204
        wait_for(lambda: fourth_status()["status"] != "waiting", 60)
        assert fourth_status()["status"] == "building", fourth_status()
        assert job(m1, early)["status"] == "queued", job(m1, early)
    finally:
        cancel_all(held)
    assert tmp_left(server) == []


def test_an_import_the_queue_would_refuse_is_refused_before_its_body(server, box):
    """A tenant holds its share of the slots and queues jobs until one is
    refused. An import then (8 GiB announced, Expect: 100-continue) is
    refused from its headers: not one byte of the body is asked for or
    read, where the old server took the whole body to disk before the
    job's 429. The refusal is the queue's bound, named, with Retry-After;
    another tenant is not held up by this one's queue."""
    t = tenant_of(server)
    jobs = []
    try:
        for _ in range(SHARE + QUEUED + 1):
            r = build(t, box, f"sleep 600 # {time.monotonic_ns()}")
            if r.status != 202:
                break
            jobs.append((t, r))
        assert (r.status, error_of(r)) == (429, "quota_exceeded"), r

        status, body = headers_only(server.port, t.key, "/v1/templates/import?name=big",
                                    8 << 30)
        assert status == 429 and body["error"]["code"] == "quota_exceeded", (status, body)
        assert f"{QUEUED} template jobs queued" in body["error"]["message"], body

        assert len(jobs) == SHARE + QUEUED, jobs
        assert f"maximum of {QUEUED} template jobs queued" in r.json["error"]["message"], r
        assert r.headers.get("Retry-After"), r
        assert [job(t, r)["status"] for _, r in jobs[SHARE:]] == ["queued"] * QUEUED
        other = tenant_of(server)
        r = upload(other, "/v1/templates/import?name=mine", oci_archive([busybox_layer()]),
                   headers={"Prefer": "respond-async"})
        assert r.status == 202, r
        jobs.append((other, r))
        assert job(other, r)["status"] in ("queued", "building", "ready"), job(other, r)
    finally:
        cancel_all(jobs)
    assert tmp_left(server) == []


def test_an_import_past_the_disk_quota_is_refused_before_the_body(server):
    t = tenant_of(server, max_disk_mb=1)
    status, body = headers_only(server.port, t.key, "/v1/templates/import?name=big", 64 << 20)
    assert status == 429 and body["error"]["code"] == "quota_exceeded", (status, body)


def headers_only(port, key, path, length):
    """POST path's headers announcing length bytes, and no body: the
    answer's status and JSON, which must come without a byte of the body
    (a server that waits for the body fails here)."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.sendall((f"POST {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {key}\r\n"
                   f"Content-Type: application/x-tar\r\nContent-Length: {length}\r\n"
                   f"Expect: 100-continue\r\n\r\n").encode())
        got = b""
        s.settimeout(30)
        while b"\r\n\r\n" not in got or len(got.partition(b"\r\n\r\n")[2]) < body_length(got):
            try:
                chunk = s.recv(65536)
            except socket.timeout:
                break
            if not chunk:
                break
            got += chunk
    head, _, rest = got.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 "), got
    status = int(head.split()[1])
    return status, json.loads(rest) if rest else None


def body_length(got):
    head = got.partition(b"\r\n\r\n")[0].decode(errors="replace").lower()
    for line in head.split("\r\n"):
        if line.startswith("content-length:"):
            return int(line.split(":")[1])
    return 0


def test_a_builds_run_sandbox_counts_against_the_tenants_quotas(server, box):
    """A tenant at its sandbox quota gets no RUN sandbox beyond it; a build
    running holds one sandbox and its RUN memory, so the tenant's creates
    meet its quota sooner; a second build waits for the first (its own
    room), and runs once it ended."""
    t = tenant_of(server, max_sandboxes=1, max_memory_mb=1536)
    sb = t.create(timeout_s=60)
    r = build(t, box, "echo no")
    assert (r.status, error_of(r)) == (429, "quota_exceeded"), r
    assert "at most 1 sandboxes" in r.json["error"]["message"], r
    assert "RUN" in r.json["error"]["message"], r
    assert t.delete(f"/v1/sandboxes/{sb['id']}").status == 204

    first = long_build(t, box)
    jobs = [(t, first)]
    try:
        assert job(t, first)["status"] == "building", job(t, first)
        got = t.post("/v1/sandboxes", {"timeout_s": 60})
        assert (got.status, error_of(got)) == (429, "quota_exceeded"), got
        assert "at most 1 sandboxes" in got.json["error"]["message"], got

        second = build(t, box, f"echo second # {time.monotonic_ns()}")
        assert second.status == 202, second
        jobs.append((t, second))
        assert job(t, second)["status"] == "queued", job(t, second)
        assert any("quota" in e.get("message", "") for e in job(t, second)["log"]), job(t, second)
        assert t.delete(f"/v1/templates/jobs/{first.json['id']}").status == 204
        wait_for(lambda: job(t, second)["status"] in ("ready", "error"), 120)
        assert job(t, second)["status"] == "ready", job(t, second)
    finally:
        cancel_all(jobs)

    # Memory: a running build holds its 1024 MiB of the tenant's 1536.
    m = tenant_of(server, max_memory_mb=1536)
    r = long_build(m, box)
    try:
        assert job(m, r)["status"] == "building", job(m, r)
        got = m.post("/v1/sandboxes", {"timeout_s": 60, "memory_mb": 1024})
        assert (got.status, error_of(got)) == (429, "quota_exceeded"), got
        assert "1536 MiB" in got.json["error"]["message"], got
    finally:
        cancel_all([(m, r)])
    sb = m.create(timeout_s=60, memory_mb=1024)  # given back once it ended
    assert m.delete(f"/v1/sandboxes/{sb['id']}").status == 204
    assert tmp_left(server) == []


@pytest.mark.parametrize("build", ["build", "asan"])
def test_a_stopping_server_fails_its_queued_jobs(tmp_path, build):
    """The server stops with a job queued behind running ones: its
    follower hears it queued, then failed "stopping"; the server exits
    cleanly and leaves nothing in tmp/. The admin key's pulls from a
    registry on loopback that never answers hold the slots (no sandbox
    needed)."""
    import http.client
    quiet = socket.socket()
    quiet.bind(("127.0.0.1", 0))
    quiet.listen(16)
    ref = f"127.0.0.1:{quiet.getsockname()[1]}/slow/image:1"
    s = Server(build_binary(build, "hutch-serve"), tmp_path / "state").start()
    try:
        admin = s.api()
        for i in range(SHARE):
            r = admin.post("/v1/templates", {"name": f"held{i}", "from": ref, "insecure": True},
                           headers={"Prefer": "respond-async"})
            assert r.status == 202 and r.json["status"] == "building", r
        conn = http.client.HTTPConnection("127.0.0.1", s.port, timeout=60)
        conn.request("POST", "/v1/templates",
                     body=json.dumps({"name": "waits", "from": ref, "insecure": True}),
                     headers=admin.headers({"Accept": "application/x-ndjson"}))
        follow = conn.getresponse()
        assert follow.status == 200, follow.status
        first = [json.loads(follow.readline()) for _ in range(2)]
        assert [e["event"] for e in first] == ["job", "queued"], first
    finally:
        code = s.stop()
        quiet.close()
    rest = [json.loads(l) for l in follow.read().splitlines()]
    conn.close()
    assert code == 0, s.log_text()
    assert "Sanitizer" not in s.log_text(), s.log_text()
    assert rest and rest[-1]["event"] == "failed" and rest[-1]["code"] == "stopping", rest
    assert list((tmp_path / "state" / "images" / "tmp").iterdir()) == []
