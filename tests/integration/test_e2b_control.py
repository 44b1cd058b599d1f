"""E2B's control plane at the wire, as E2B's own SDK tests need it: connect
in both forms, every error in E2B's {code, message}, isRunning() after a
pause, the lists' filters and pages, ports by path and by host, and the
refresh, metrics and logs routes (each only to the sandbox's owner).
Against both builds: the sanitizers watch the parsers."""
import json
import time
import urllib.parse

import pytest

from conftest import serve_each_build
from serveapi import wait_for

GONE = "0123456789abcdef"


@pytest.fixture(scope="module", params=["build", "asan"])
def server(request, tmp_path_factory):
    yield from serve_each_build(request, tmp_path_factory)


@pytest.fixture
def team(server):
    """A tenant of the test's own: (its name, its Api); its sandboxes and
    snapshots go after the test."""
    name = f"t{time.monotonic_ns()}"
    api = server.api(server.api().post("/v1/keys", {"tenant": name}).json["key"])
    yield name, api
    for sb in api.get("/v1/sandboxes").json["sandboxes"]:
        api.delete(f"/v1/sandboxes/{sb['id']}")
    for sn in api.get("/v1/snapshots").json["snapshots"]:
        api.delete(f"/v1/snapshots/{sn['id']}")


def make(api, **body):
    r = api.post("/sandboxes", dict({"templateID": "base"}, **body))
    assert r.status == 201, r
    return r.json


def envd_health(server, sid):
    return server.api(None).get("/health", headers={"E2b-Sandbox-Id": sid,
                                                    "E2b-Sandbox-Port": "49983"})


def test_connect_in_both_forms_and_errors_in_e2bs_shape(server, team):
    _, api = team
    sid = make(api)["sandboxID"]
    for path in (f"/sandboxes/{sid}/connect", f"/v2/sandboxes/{sid}/connect"):
        r = api.post(path, {"timeout": 60})
        assert r.status == 200 and r.json["sandboxID"] == sid, r
    # Paused: 502 on envd's health (the SDK's isRunning() is false), and a
    # connect resumes it (201).
    assert api.post(f"/sandboxes/{sid}/pause").status == 204
    r = envd_health(server, sid)
    assert (r.status, r.json["code"]) == (502, 502), r
    r = api.post(f"/sandboxes/{sid}/connect", {"timeout": 60})
    assert r.status == 201 and r.json["envdAccessToken"], r
    assert envd_health(server, sid).status == 204
    # Not there: 404 with code 404 (the SDK's SandboxNotFoundError), as is
    # any path E2B's API does not have; the native API keeps its own shape.
    r = api.post(f"/sandboxes/{GONE}/connect", {"timeout": 60})
    assert (r.status, r.json) == (404, {"code": 404, "message": f"no sandbox {GONE}"})
    for method, path in (("GET", f"/sandboxes/{sid}/nothing"), ("POST", "/v9/anything"),
                         ("PATCH", f"/sandboxes/{sid}")):
        r = api.request(method, path)
        assert set(r.json) == {"code", "message"} and r.json["code"] == r.status, r
    assert api.get("/v1/nothing").json["error"]["code"] == "not_found"
    # Refused by the transport before any route: the same shapes.
    big = b"x" * ((1 << 20) + 1)
    assert api.request("POST", "/sandboxes", big).json == {
        "code": 413, "message": "request body exceeds 1048576 bytes"}
    assert api.request("POST", "/v1/sandboxes", big).json["error"]["code"] == "body_too_large"
    # Another tenant's sandbox is not there either.
    other = server.api(server.api().post("/v1/keys", {"tenant": "ctl-other"}).json["key"])
    assert other.post(f"/sandboxes/{sid}/connect", {}).status == 404


def test_autoresume_sandbox_wakes_on_health(server, team):
    _, api = team
    sid = make(api, autoResume={"enabled": True})["sandboxID"]
    assert api.post(f"/sandboxes/{sid}/pause").status == 204
    assert envd_health(server, sid).status == 204
    assert api.get(f"/sandboxes/{sid}").json["state"] == "running"


def page(api, path):
    """Every item of a paged list, and the pages' sizes."""
    items, sizes, token = [], [], None
    while True:
        r = api.get(path + (f"&nextToken={urllib.parse.quote(token)}" if token else ""))
        assert r.status == 200, r
        items += r.json
        sizes.append(len(r.json))
        token = r.headers.get("X-Next-Token")
        if not token:
            return items, sizes


def test_sandbox_list_filters_and_pages(server, team):
    _, api = team
    ids = [make(api, metadata={"k": "v"})["sandboxID"] for _ in range(3)]
    api.post(f"/sandboxes/{ids[0]}/pause")
    got, sizes = page(api, "/v2/sandboxes?limit=1&metadata=k%3Dv")
    assert [s["sandboxID"] for s in got] == ids[::-1] and sizes == [1, 1, 1]
    got, _ = page(api, "/v2/sandboxes?limit=2&order=asc")
    assert [s["sandboxID"] for s in got] == ids
    got, _ = page(api, "/v2/sandboxes?limit=1&state=paused")
    assert [s["sandboxID"] for s in got] == ids[:1]
    for name, n in (("base", 3), ("host", 3), ("code-interpreter-v1", 3), ("unknown", 0)):
        assert len(api.get(f"/v2/sandboxes?template={name}").json) == n, name
    for both in ("state=paused,running", "state=paused&state=running"):
        assert len(api.get(f"/v2/sandboxes?{both}").json) == 3
    assert [s["sandboxID"] for s in api.get("/v2/sandboxes?state=running").json] == ids[:0:-1]
    # A page's last sandbox gone before the next page: the next goes on.
    r = api.get("/v2/sandboxes?limit=1")
    api.delete(f"/sandboxes/{r.json[0]['sandboxID']}")
    r = api.get("/v2/sandboxes?limit=5&nextToken=" + urllib.parse.quote(r.headers["X-Next-Token"]))
    assert [s["sandboxID"] for s in r.json] == ids[1::-1]
    # startedAfter: at or after; with an offset too.
    started = api.get(f"/sandboxes/{ids[1]}").json["startedAt"]
    r = api.get("/v2/sandboxes?startedAfter=" + urllib.parse.quote(started))
    assert [s["sandboxID"] for s in r.json] == [ids[1]]
    moved = started[:11] + "%02d" % ((int(started[11:13]) + 2) % 24) + started[13:-1] + "+02:00"
    if moved[11:13] > started[11:13]:  # the same day
        r = api.get("/v2/sandboxes?startedAfter=" + urllib.parse.quote(moved))
        assert [s["sandboxID"] for s in r.json] == [ids[1]]
    for bad in ("startedAfter=yesterday", "startedAfter=2026-01-01T00:00:00Zx", "nextToken=zz",
                "limit=101", "order=up"):
        r = api.get("/v2/sandboxes?" + bad)
        assert (r.status, r.json["code"]) == (400, 400), bad


def test_snapshot_list_name_and_pages(server, team):
    _, api = team
    sid = make(api)["sandboxID"]
    made = [api.post(f"/sandboxes/{sid}/snapshots", {"name": n} if n else {}).json
            for n in ("one", "two", None)]
    ids = [m["snapshotID"] for m in made]
    assert [m["names"] for m in made] == [["one"], ["two"], []]
    assert [s["snapshotID"] for s in api.get("/snapshots?name=two").json] == ids[1:2]
    assert [s["snapshotID"] for s in api.get("/snapshots?name=team/one").json] == ids[:1]
    assert [s["snapshotID"] for s in api.get(f"/snapshots?name={ids[2]}").json] == ids[2:]
    assert api.get("/snapshots?name=nope").json == []
    got, sizes = page(api, "/snapshots?limit=1")
    assert [s["snapshotID"] for s in got] == ids and sizes == [1, 1, 1]
    got, sizes = page(api, f"/snapshots?limit=2&sandboxID={sid}")
    assert [s["snapshotID"] for s in got] == ids and sizes == [2, 1]
    assert api.get("/snapshots?limit=0").json["code"] == 400


def test_ports_by_path_and_a_gone_sandbox(server, team):
    _, api = team
    sb = make(api)
    sid = sb["sandboxID"]
    api.post(f"/v1/sandboxes/{sid}/exec", {"cmd": ["python3", "-m", "http.server", "8000",
                                                   "--bind", "127.0.0.1", "-d", "/"],
                                           "background": True})
    path = f"/sandboxes/{sid}/ports/8000"
    wait_for(lambda: api.get(f"{path}/").status == 200, 20)
    r = server.api(None).get(f"{path}/etc/hostname")
    assert r.status == 200, r  # public, as E2B's ports are by default
    host = f"8000-{sid}.{sb['domain']}"
    assert server.api(None).get("/etc/hostname", headers={"Host": host}).raw == r.raw
    # A sandbox not there: E2B's proxy's 502, by host, by path and on envd.
    want = {"code": 502, "message": "The sandbox was not found", "sandboxId": GONE}
    for r in (server.api(None).get("/", headers={"Host": f"3000-{GONE}.{sb['domain']}"}),
              server.api(None).get(f"/sandboxes/{GONE}/ports/3000/x"),
              envd_health(server, GONE)):
        assert (r.status, r.json) == (502, want), r
    # Nothing listening: 502 too, in E2B's shape.
    r = api.get(f"/sandboxes/{sid}/ports/8001/")
    assert (r.status, r.json) == (502, {"code": 502, "sandboxId": sid, "port": 8001,
                                        "message": "The sandbox is running but port is not open"})


def test_refresh_metrics_and_logs_for_the_owner_only(server, team):
    name, api = team
    sid = make(api, timeout=30)["sandboxID"]
    end = api.get(f"/sandboxes/{sid}").json["endAt"]
    assert api.post(f"/sandboxes/{sid}/refreshes", {"duration": 600}).status == 204
    later = api.get(f"/sandboxes/{sid}").json["endAt"]
    assert later > end
    assert api.post(f"/sandboxes/{sid}/refreshes", {"duration": 5}).status == 204
    assert api.get(f"/sandboxes/{sid}").json["endAt"] == later  # never sooner
    assert api.post(f"/sandboxes/{sid}/refreshes", {"duration": 3601}).status == 400
    assert api.post(f"/sandboxes/{GONE}/refreshes").status == 404

    r = api.get(f"/sandboxes/metrics?sandbox_ids={sid},{GONE}")
    assert list(r.json["sandboxes"]) == [sid]
    assert r.json["sandboxes"][sid]["memTotal"] > 0
    assert api.get("/sandboxes/metrics").status == 400

    r = api.get(f"/teams/{name}/metrics")
    assert r.status == 200 and r.json[0]["concurrentSandboxes"] == 1, r
    assert r.json[0]["sandboxStartRate"] > 0

    api.post(f"/sandboxes/{sid}/pause")
    logs = api.get(f"/v2/sandboxes/{sid}/logs").json["logs"]
    assert [l["message"] for l in logs][:1] == ["sandbox.create 201"]
    assert "sandbox.pause 204" in [l["message"] for l in logs]
    assert {l["level"] for l in logs} == {"info", "warn"}  # the 400 refresh
    assert logs[0]["fields"]["action"] == "sandbox.create"
    last = api.get(f"/v2/sandboxes/{sid}/logs?direction=backward&limit=1").json["logs"]
    assert [l["message"] for l in last] == ["sandbox.pause 204"]
    assert [l["level"] for l in api.get(f"/v2/sandboxes/{sid}/logs?level=warn").json["logs"]] == ["warn"]
    assert api.get(f"/v2/sandboxes/{sid}/logs?search=refresh").json["logs"]
    assert api.get(f"/v2/sandboxes/{sid}/logs?level=loud").status == 400
    old = api.get(f"/sandboxes/{sid}/logs").json
    # E2B's older lines are JSON objects' text, as its CLI parses them.
    first = json.loads(old["logs"][0]["line"])
    assert first["message"] == "sandbox.create 201" and first["level"] == "info", first
    assert first["logger"] == "hutch" and first["action"] == "sandbox.create", first
    assert len(old["logEntries"]) == len(logs)

    # Another tenant: none of it.
    other = server.api(server.api().post("/v1/keys", {"tenant": "ctl-other2"}).json["key"])
    assert other.get(f"/v2/sandboxes/{sid}/logs").status == 404
    assert other.post(f"/sandboxes/{sid}/refreshes").status == 404
    assert other.get(f"/sandboxes/metrics?sandbox_ids={sid}").json == {"sandboxes": {}}
    r = other.get(f"/teams/{name}/metrics")
    assert (r.status, r.json["code"]) == (403, 403)
