"""Pause and resume, metrics and usage, over HTTP (native and E2B routes):
a paused sandbox's processes stop and use no CPU, go on where they were on
resume (after a server restart too), and its paused time is not charged.
Against both builds of the server."""
import signal
import time

import pytest

from conftest import BUILD, leftovers, serve_each_build
from serveapi import Server, error_of, output, wait_for

COUNTER = ("i=0; while :; do i=$((i+1)); echo $i > /tmp/c.new; mv /tmp/c.new /tmp/c; "
           "sleep 0.1; done")


@pytest.fixture(scope="module", params=["build", "asan"])
def server(request, tmp_path_factory):
    yield from serve_each_build(request, tmp_path_factory)


def background(api, sid, shell):
    r = api.post(f"/v1/sandboxes/{sid}/exec", {"shell": shell, "background": True})
    assert r.status == 201, r
    return r.json["pid"]


def counter(api, sid):
    r = api.get(f"/v1/sandboxes/{sid}/files?path=/tmp/c")
    assert r.status == 200, r
    return int(r.raw)


def test_pause_stops_the_processes_and_resume_goes_on(server, tenant):
    sid = tenant.create(auto_resume=False)["id"]
    background(tenant, sid, COUNTER)
    wait_for(lambda: tenant.get(f"/v1/sandboxes/{sid}/files?path=/tmp/c").status == 200)
    wait_for(lambda: counter(tenant, sid) >= 3)
    before = counter(tenant, sid)
    r = tenant.post(f"/v1/sandboxes/{sid}/pause")
    assert r.status == 200 and r.json["state"] == "paused", r
    assert r.json["expires_at"] is None and 0 < r.json["timeout_left_s"] <= 300
    assert r.json["paused_at"] and r.json["deleted_at"]
    listed = tenant.get("/v1/sandboxes?state=paused").json["sandboxes"]
    assert [s["id"] for s in listed] == [sid]
    assert tenant.get("/v1/sandboxes?state=running").json["sandboxes"] == []
    text = server.api().get("/metrics").raw.decode()
    assert 'hutch_sandboxes{state="paused"} ' in text and \
        'hutch_sandboxes{state="paused"} 0' not in text
    time.sleep(1.5)  # 15 ticks, were it running
    # auto_resume false: work on it is refused, not done
    assert error_of(tenant.get(f"/v1/sandboxes/{sid}/files?path=/tmp/c")) == "sandbox_paused"
    r = tenant.post(f"/v1/sandboxes/{sid}/exec", {"shell": "true"})
    assert r.status == 409 and error_of(r) == "sandbox_paused"
    m = tenant.get(f"/v1/sandboxes/{sid}/metrics").json
    assert m["state"] == "paused" and m["current"]["cpu_pct"] == 0
    r = tenant.post(f"/v1/sandboxes/{sid}/resume", {"timeout_s": 120})
    assert r.status == 200 and r.json["state"] == "running" and r.json["expires_at"], r
    after = counter(tenant, sid)
    assert before <= after <= before + 4, (before, after)
    wait_for(lambda: counter(tenant, sid) >= after + 3)  # it goes on


def test_pauses_resumes_and_deletes_at_once(server, tenant):
    """A freeze runs off the server's loop, so requests for the same
    sandbox come while it is under way: two pauses at once both end paused
    (or the second hears it already is), a resume then runs it again, and a
    delete in the middle of a pause leaves nothing and the server serving."""
    import concurrent.futures
    pool = concurrent.futures.ThreadPoolExecutor(4)
    sid = tenant.create(auto_resume=False)["id"]
    background(tenant, sid, COUNTER)
    wait_for(lambda: tenant.get(f"/v1/sandboxes/{sid}/files?path=/tmp/c").status == 200)
    a, b = (pool.submit(tenant.post, f"/v1/sandboxes/{sid}/pause") for _ in range(2))
    statuses = sorted((a.result().status, b.result().status))
    assert statuses in ([200, 200], [200, 409]), statuses
    assert tenant.get(f"/v1/sandboxes/{sid}").json["state"] == "paused"
    assert tenant.post(f"/v1/sandboxes/{sid}/resume").status == 200
    n = counter(tenant, sid)
    wait_for(lambda: counter(tenant, sid) > n)
    for _ in range(5):  # a delete racing the freeze, however they fall
        sid = tenant.create()["id"]
        pause = pool.submit(tenant.post, f"/v1/sandboxes/{sid}/pause")
        assert tenant.delete(f"/v1/sandboxes/{sid}").status == 204
        assert pause.result().status in (200, 404), pause.result()
        assert tenant.get(f"/v1/sandboxes/{sid}").status == 404
    assert server.api(None).get("/healthz").status == 200


def test_auto_resume_on_a_request(tenant):
    sid = tenant.create()["id"]
    assert tenant.post(f"/v1/sandboxes/{sid}/pause").status == 200
    assert output(tenant.exec(sid, {"shell": "echo up"})) == b"up\n"
    assert tenant.get(f"/v1/sandboxes/{sid}").json["state"] == "running"


def test_python_context_survives_pause(server, tenant):
    sid = tenant.create()["id"]
    lines = tenant.code(sid, {"code": "x = 41\nimport os; pid = os.getpid()"})
    assert not [l for l in lines if l["type"] == "error"], lines
    assert tenant.post(f"/v1/sandboxes/{sid}/pause").status == 200
    time.sleep(0.3)
    assert tenant.post(f"/v1/sandboxes/{sid}/resume").status == 200
    lines = tenant.code(sid, {"code": "x + 1, pid == os.getpid()"})
    results = [l for l in lines if l["type"] == "result"]
    assert results and results[0]["text"] == "(42, True)", lines


@pytest.mark.serial  # counts CPU seconds a busy loop earns in a given time
def test_paused_time_is_not_charged_and_metrics_see_the_load(tenant):
    sid = tenant.create(cpus=1, memory_mb=512)["id"]
    background(tenant, sid, "while :; do :; done")
    background(tenant, sid, "exec python3 -c 'a = bytearray(150 << 20); import time; "
                            "open(\"/tmp/held\", \"w\").close(); time.sleep(600)'")
    assert output(tenant.exec(sid, {"shell": "head -c 20000000 /dev/zero > /tmp/disk"})) == b""
    # Once the memory is held (an emulated guest on a busy machine may take
    # seconds), at least one sample is taken while both run.
    wait_for(lambda: output(tenant.exec(sid, {"shell": "test -e /tmp/held && echo y"})) == b"y\n", 60)
    metrics = lambda: tenant.get(f"/v1/sandboxes/{sid}/metrics").json
    last_tick = lambda: metrics()["samples"][-1]["time"]
    held = last_tick()
    wait_for(lambda: last_tick() > held, 30)  # a sample taken while both run
    m = metrics()
    now = m["current"]
    assert now["cpus"] == 1 and now["cpu_pct"] > 40, now
    assert now["memory_used_bytes"] > 150 << 20 and now["memory_limit_bytes"] == 512 << 20, now
    assert now["disk_used_bytes"] >= 20_000_000 and now["disk_limit_bytes"] == 1024 << 20, now
    assert now["pids"] >= 3, now
    times = [s["time"] for s in m["samples"]]
    assert len(times) >= 2 and times == sorted(times)
    assert max(s["cpu_pct"] for s in m["samples"]) > 40
    # Charged at each sample: a CPU second and a tenth of a GiB-second first.
    used = lambda: tenant.get("/v1/usage").json
    wait_for(lambda: used()["cpu_seconds"] > 1 and used()["memory_gb_seconds"] > 0.1, 30)
    assert tenant.post(f"/v1/sandboxes/{sid}/pause").status == 200
    u1 = tenant.get("/v1/usage").json
    assert u1["cpu_seconds"] > 1 and u1["memory_gb_seconds"] > 0.1 and u1["paused"] == 1, u1
    paused_at = last_tick()
    wait_for(lambda: last_tick() > paused_at, 30)  # a sample tick passes while paused
    u2 = tenant.get("/v1/usage").json
    assert u2["cpu_seconds"] - u1["cpu_seconds"] < 0.05, (u1, u2)
    assert u2["sandbox_seconds"] == pytest.approx(u1["sandbox_seconds"], abs=0.05), (u1, u2)
    assert u2["memory_gb_seconds"] == pytest.approx(u1["memory_gb_seconds"], abs=0.01)
    assert tenant.post(f"/v1/sandboxes/{sid}/resume").status == 200
    wait_for(lambda: tenant.get("/v1/usage").json["cpu_seconds"] - u2["cpu_seconds"] > 1, 30)
    u3 = tenant.get("/v1/usage").json
    assert u3["cpu_seconds"] - u2["cpu_seconds"] > 1, (u2, u3)
    # what it used stays counted after it is gone
    assert tenant.delete(f"/v1/sandboxes/{sid}").status == 204
    u4 = tenant.get("/v1/usage").json
    assert u4["cpu_seconds"] >= u3["cpu_seconds"] and u4["running"] == 0


@pytest.mark.parametrize("path,body", [
    ("/pause", None), ("/resume", {}), ("/metrics", None)])
def test_unknown_sandbox(tenant, path, body):
    sid = "0123456789abcdef"
    r = (tenant.get if body is None and path == "/metrics" else tenant.post)(
        f"/v1/sandboxes/{sid}{path}")
    assert r.status == 404 and error_of(r) == "not_found"


def test_bad_input(server, tenant):
    sid = tenant.create()["id"]
    r = tenant.post(f"/v1/sandboxes/{sid}/resume")
    assert r.status == 409 and error_of(r) == "not_paused"
    assert tenant.post(f"/v1/sandboxes/{sid}/pause").status == 200
    r = tenant.post(f"/v1/sandboxes/{sid}/pause")
    assert r.status == 409 and error_of(r) == "already_paused"
    for body in ({"timeout_s": 0}, {"timeout_s": "1"}, {"bogus": 1}):
        assert tenant.post(f"/v1/sandboxes/{sid}/resume", body).status == 400, body
    assert tenant.get(f"/v1/sandboxes/{sid}").json["state"] == "paused"
    assert tenant.get(f"/v1/sandboxes/{sid}/metrics?start=yesterday").status == 400
    for body in ({"on_timeout": "sleep"}, {"auto_resume": "yes"}, {"on_timeout": 1}):
        r = tenant.post("/v1/sandboxes", body)
        assert r.status == 400 and error_of(r) == "invalid_argument", (body, r)
    # another tenant's: not found
    other = server.api()
    assert other.post(f"/v1/sandboxes/{sid}/resume").status == 404
    assert other.get(f"/v1/sandboxes/{sid}/metrics").status == 404
    r = other.get(f"/v1/usage?tenant=someone")  # the admin may
    assert r.status == 200 and r.json["cpu_seconds"] == 0
    assert tenant.get("/v1/usage?tenant=admin").status == 403
    # the paused sandbox can still be deleted
    assert tenant.delete(f"/v1/sandboxes/{sid}").status == 204


def test_e2b_pause_connect_and_metrics(server):
    api = server.api(None)
    h = {"X-API-Key": server.admin_key}
    r = api.post("/v2/sandboxes", {"templateID": "base", "autoPause": True,
                                   "autoResume": {"enabled": False}}, headers=h)
    assert r.status == 201, r
    sid = r.json["sandboxID"]
    try:
        info = api.get(f"/sandboxes/{sid}", headers=h).json
        assert info["lifecycle"] == {"onTimeout": "pause", "autoResume": False}
        assert api.post(f"/sandboxes/{sid}/pause", {"memory": True}, headers=h).status == 204
        r = api.post(f"/sandboxes/{sid}/pause", headers=h)
        assert (r.status, r.json["code"]) == (409, 409)
        listed = api.get("/v2/sandboxes?state=paused", headers=h).json
        assert [s["sandboxID"] for s in listed] == [sid] and listed[0]["state"] == "paused"
        assert api.get("/v2/sandboxes?state=running", headers=h).json == []
        # its envd refuses traffic while paused (no autoResume)
        r = api.post("/process.Process/List", b"{}", headers={
            "E2b-Sandbox-Id": sid, "E2b-Sandbox-Port": "49983",
            "X-Access-Token": info["envdAccessToken"], "Content-Type": "application/json"})
        assert r.status == 409, r
        r = api.post(f"/v2/sandboxes/{sid}/connect", {"timeout": 60}, headers=h)
        assert r.status == 201 and r.json["sandboxID"] == sid, r
        r = api.post(f"/v2/sandboxes/{sid}/connect", {"timeout": 60}, headers=h)
        assert r.status == 200
        m = api.get(f"/sandboxes/{sid}/metrics", headers=h).json
        assert m and {"timestamp", "timestampUnix", "cpuCount", "cpuUsedPct", "memUsed",
                      "memTotal", "memCache", "diskUsed", "diskTotal"} <= set(m[-1]), m
        assert m[-1]["memTotal"] == 1024 << 20
        assert api.get(f"/sandboxes/{sid}/metrics?start=4000000000", headers=h).json == []
    finally:
        api.delete(f"/sandboxes/{sid}", headers=h)


def test_timeout_pauses_and_retention_ends(tmp_path):
    """on_timeout "pause": the timeout pauses the sandbox (a request
    resumes it, with its timeout again); --paused-retention ends a paused
    one."""
    before = set(leftovers())
    s = Server(BUILD / "hutch-serve", tmp_path / "state", "--paused-retention", "2").start()
    try:
        api = s.api()
        sid = api.create(timeout_s=1, on_timeout="pause")["id"]
        wait_for(lambda: api.get(f"/v1/sandboxes/{sid}").json["state"] == "paused", 5)
        info = api.get(f"/v1/sandboxes/{sid}").json
        assert info["timeout_left_s"] == 1
        assert output(api.exec(sid, {"shell": "echo back"})) == b"back\n"
        # Paused again a second later, then ended two after that: a slow
        # machine may poll past that window, so the audit log says it paused.
        wait_for(lambda: api.get(f"/v1/sandboxes/{sid}").status == 404, 15)
        audit = (tmp_path / "state" / "audit.jsonl").read_text()
        assert audit.count('"action":"sandbox.pause"') >= 2, audit
    finally:
        assert s.stop() == 0
    wait_for(lambda: not set(leftovers()) - before, 30)


def test_paused_sandbox_survives_a_restart(tmp_path):
    before = set(leftovers())
    s = Server(BUILD / "hutch-serve", tmp_path / "state").start()
    api = s.api()
    sid = api.create(auto_resume=False)["id"]
    background(api, sid, COUNTER)
    wait_for(lambda: api.get(f"/v1/sandboxes/{sid}/files?path=/tmp/c").status == 200)
    wait_for(lambda: counter(api, sid) >= 3)
    paused = api.post(f"/v1/sandboxes/{sid}/pause").json
    assert s.stop(signal.SIGKILL) == -signal.SIGKILL
    time.sleep(1)
    s.start()
    try:
        got = api.get(f"/v1/sandboxes/{sid}")
        assert got.status == 200 and got.json == paused, got
        assert api.post(f"/v1/sandboxes/{sid}/exec", {"shell": "true"}).status == 409
        assert api.post(f"/v1/sandboxes/{sid}/resume").status == 200
        at = counter(api, sid)
        wait_for(lambda: counter(api, sid) >= at + 3)  # the same loop goes on
        procs = api.get(f"/v1/sandboxes/{sid}/processes").json["processes"]
        assert [p["running"] for p in procs] == [True]
        assert output(api.exec(sid, {"shell": "cat /tmp/c >/dev/null && echo ok"})) == b"ok\n"
    finally:
        assert s.stop() == 0
    wait_for(lambda: not set(leftovers()) - before, 30)
