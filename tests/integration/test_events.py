"""The event stream and webhooks (docs/events.md) against a real hutch
serve of each build: each tenant sees only its own events, in order, kept, followed, as
NDJSON or SSE, filtered; a reader asking for what the ring no longer keeps
is told so; webhooks deliver signed events to a loopback receiver this
module runs, retry a 500 and a receiver that hangs (while others are
delivered), are refused targets the deny floor holds, are disabled after
failing event after event, and outlive a restart."""
import hashlib
import hmac
import http.client
import http.server
import json
import os
import signal
import socket
import threading

import pytest

from conftest import serve_each_build
from serveapi import free_port, wait_for

RING = 100  # --events-max: small enough for the gap test to pass it


class Receiver:
    """An HTTP server on 127.0.0.1: POST /ok answers 200, /flaky 500 then
    200, /down always 500, /hang waits for release (then 200)."""

    def __init__(self):
        self.port = free_port()
        self.seen = []  # (path, headers, body, status), as answered
        self.arrived = []  # paths, as they come
        self.lock = threading.Lock()
        self.release = threading.Event()
        rec = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                with rec.lock:
                    earlier = [p for p in rec.arrived if p == self.path]
                    rec.arrived.append(self.path)
                if self.path == "/hang" and not earlier:
                    rec.release.wait(20)
                status = {"/ok": 200, "/down": 500, "/hang": 200}.get(self.path, 500 if not earlier else 200)
                with rec.lock:
                    rec.seen.append((self.path, dict(self.headers), body, status))
                try:
                    self.send_response(status)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                except OSError:
                    pass  # hutch gave up on it (its timeout)

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self.httpd.daemon_threads = True
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def of(self, path):
        with self.lock:
            return [s for s in self.seen if s[0] == path]


@pytest.fixture(scope="module", params=["build", "asan"])
def server(request, tmp_path_factory):
    """A server of each build (the sanitizers watch the new parsers), with
    a receiver of its own that its webhooks may reach."""
    rec = Receiver()
    denied = free_port()  # the operator's --egress-deny, which its --webhook-allow does not lift
    try:
        for s in serve_each_build(request, tmp_path_factory, "--events-max", str(RING),
                                  "--webhook-allow", f"127.0.0.1:{rec.port}",
                                  "--webhook-allow", f"localhost:{rec.port}",
                                  "--egress-deny", f"127.0.0.1:{denied}",
                                  "--egress-deny", "denied.invalid",
                                  "--webhook-allow", f"127.0.0.1:{denied}",
                                  "--webhook-allow", f"localhost:{denied}",
                                  "--webhook-allow", "denied.invalid",
                                  "--webhook-timeout-ms", "1000", "--webhook-backoff-ms", "10"):
            s.receiver, s.denied = rec, denied
            yield s
    finally:
        rec.release.set()
        rec.httpd.shutdown()


@pytest.fixture
def receiver(server):
    return server.receiver


@pytest.fixture(autouse=True)
def tenants(server):
    """The tenants a test makes (new_tenant): their sandboxes go after it."""
    made = []
    yield made
    for t in made:
        for sb in t.get("/v1/sandboxes").json["sandboxes"]:
            t.delete(f"/v1/sandboxes/{sb['id']}")


def new_tenant(server, tenants, name):
    t = server.api(server.api().post("/v1/keys", {"tenant": name}).json["key"])
    tenants.append(t)
    return t


def events(api, query=""):
    r = api.get(f"/v1/events?{query}")
    assert r.status == 200 and r.headers["Content-Type"] == "application/x-ndjson", r
    return [json.loads(line) for line in r.raw.decode().splitlines() if line]


def last_seq(server):
    seqs = [e["seq"] for e in events(server.api()) if e["seq"]]
    return max(seqs) if seqs else 0


def test_each_tenant_sees_its_own_events_in_order(server, tenants):
    a, b = new_tenant(server, tenants, "ev-a"), new_tenant(server, tenants, "ev-b")
    since = last_seq(server)
    mine = [a.create()["id"] for _ in range(4)]
    theirs = b.create()["id"]
    a.delete(f"/v1/sandboxes/{mine[0]}")

    seen = events(a, f"since={since}")
    assert {e["tenant"] for e in seen} == {"ev-a"}, seen
    assert theirs not in {e["sandbox"] for e in seen}
    seqs = [e["seq"] for e in seen]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs) and seqs[0] > since
    created = [e["sandbox"] for e in seen if e["type"] == "sandbox.created"]
    assert created == mine, seen
    first = [e for e in seen if e["sandbox"] == mine[0]]
    assert [e["type"] for e in first] == ["sandbox.created", "sandbox.started", "sandbox.killed"]
    assert first[0]["data"]["template"] == "host" and first[0]["data"]["tier"] == "ns"
    assert first[2]["data"]["reason"] == "request"

    assert {e["sandbox"] for e in events(b, f"since={since}")} == {theirs}
    both = {e["tenant"] for e in events(server.api(), f"since={since}")}
    assert {"ev-a", "ev-b"} <= both
    only_b = events(server.api(), f"since={since}&tenant=ev-b")
    assert {e["tenant"] for e in only_b} == {"ev-b"}
    r = a.get("/v1/events?tenant=ev-b")
    assert r.status == 403 and r.json["error"]["code"] == "forbidden", r


def test_timeouts_snapshots_and_forks(server, tenants):
    a = new_tenant(server, tenants, "ev-life")
    since = last_seq(server)
    short = a.create(timeout_s=1)["id"]
    wait_for(lambda: "sandbox.killed" in [e["type"] for e in events(a, f"since={since}&sandbox={short}")],
             30)
    life = events(a, f"since={since}&sandbox={short}")
    assert [e["type"] for e in life] == ["sandbox.created", "sandbox.started",
                                         "sandbox.timed_out", "sandbox.killed"], life
    assert life[2]["data"] == {"then": "kill"} and life[3]["data"] == {"reason": "timeout"}

    sid = a.create()["id"]
    snap = a.post(f"/v1/sandboxes/{sid}/snapshots", {"name": "s1"})
    assert snap.status == 201, snap
    fork = a.post(f"/v1/sandboxes/{sid}/fork", {"count": 2})
    assert fork.status == 201, fork
    copies = [f["id"] for f in fork.json["sandboxes"]]
    seen = events(a, f"since={since}&sandbox={sid}&type=sandbox.snapshotted,sandbox.forked")
    assert [e["type"] for e in seen] == ["sandbox.snapshotted", "sandbox.forked"], seen
    assert seen[0]["data"] == {"snapshot": snap.json["id"], "name": "s1"}
    assert seen[1]["data"] == {"snapshot": fork.json["snapshot_id"], "sandboxes": copies}
    made = {e["sandbox"] for e in events(a, f"since={since}&type=sandbox.created")}
    assert set(copies) <= made, made
    a.delete(f"/v1/snapshots/{snap.json['id']}")


def agents_of(server):
    """The pids of the server's sandboxes' agents (its children)."""
    out = set()
    for d in os.listdir("/proc"):
        try:
            stat = open(f"/proc/{d}/stat").read()
        except (OSError, ValueError):
            continue
        comm, rest = stat.split("(", 1)[1].rsplit(")", 1)
        if comm == "hutch-agent" and int(rest.split()[1]) == server.proc.pid:
            out.add(int(d))
    return out


def test_a_sandbox_whose_agent_dies_is_lost(server, tenants):
    a = new_tenant(server, tenants, "ev-lost")
    before = agents_of(server)
    sid = a.create()["id"]
    mine = agents_of(server) - before
    assert len(mine) == 1, mine
    os.kill(mine.pop(), signal.SIGKILL)
    wait_for(lambda: a.get(f"/v1/sandboxes/{sid}").status == 404)
    seen = events(a, f"sandbox={sid}&type=sandbox.lost,sandbox.killed")
    assert [e["type"] for e in seen] == ["sandbox.lost", "sandbox.killed"], seen
    assert "agent" in seen[0]["data"]["reason"] and seen[1]["data"] == {"reason": "lost"}


def test_a_quota_refusal_is_an_event(server, tenants):
    key = server.api().post("/v1/keys", {"tenant": "ev-quota", "max_sandboxes": 1}).json["key"]
    a = server.api(key)
    tenants.append(a)
    since = last_seq(server)
    a.create()
    assert a.post("/v1/sandboxes", {}).status == 429
    refused = events(a, f"since={since}&type=quota.refused")
    assert len(refused) == 1 and refused[0]["sandbox"] is None, refused
    assert refused[0]["data"]["action"] == "sandbox.create"
    assert refused[0]["data"]["code"] == "quota_exceeded" and "at most 1" in refused[0]["data"]["message"]


def test_follow_sse_and_filters(server, tenants):
    a = new_tenant(server, tenants, "ev-follow")
    sid = a.create()["id"]
    since = last_seq(server)
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    conn.request("GET", f"/v1/events?follow=1&type=exec.*&since={since}",
                 headers=a.headers())
    follow = conn.getresponse()
    assert follow.status == 200

    out = a.exec(sid, {"cmd": ["sh", "-c", "exit 3"]})
    assert out[-1]["exit_code"] == 3
    lines = [json.loads(follow.readline()) for _ in range(2)]
    assert [e["type"] for e in lines] == ["exec.started", "exec.ended"], lines
    assert lines[0]["data"]["cmd"] == lines[1]["data"]["cmd"] == ["sh", "-c", "exit 3"]
    assert lines[1]["data"]["exit_code"] == 3 and lines[1]["data"]["status"] == "nonzero"
    assert lines[1]["data"]["signal"] is None and lines[1]["data"]["duration_ms"] >= 0
    assert lines[1]["data"]["background"] is False
    # A background process reports as an exec does.
    r = a.post(f"/v1/sandboxes/{sid}/exec", {"cmd": ["sh", "-c", "exit 4"], "background": True})
    assert r.status == 201, r
    bg = [json.loads(follow.readline()) for _ in range(2)]
    assert [(e["type"], e["data"]["background"]) for e in bg] == [
        ("exec.started", True), ("exec.ended", True)], bg
    assert bg[0]["data"]["pid"] == r.json["pid"] and bg[1]["data"]["exit_code"] == 4
    a.post(f"/v1/sandboxes/{sid}/pause")  # not an exec: filtered out of the stream
    a.exec(sid, {"cmd": ["true"]})
    assert json.loads(follow.readline())["type"] == "exec.started"
    conn.close()

    # SSE, and Last-Event-ID as since.
    sse = a.get(f"/v1/events?since={since}&type=exec.ended,sandbox.paused",
                headers={"Accept": "text/event-stream"})
    assert sse.headers["Content-Type"] == "text/event-stream", sse
    blocks = [b for b in sse.raw.decode().split("\n\n") if b]
    parsed = [dict(line.split(": ", 1) for line in b.splitlines()) for b in blocks]
    assert [p["event"] for p in parsed] == ["exec.ended"] * 2 + ["sandbox.paused", "exec.ended"], parsed
    assert all(json.loads(p["data"])["seq"] == int(p["id"]) for p in parsed)
    later = a.get("/v1/events?type=exec.ended",
                  headers={"Accept": "text/event-stream", "Last-Event-ID": parsed[0]["id"]})
    assert [b.split("\n")[0] for b in later.raw.decode().split("\n\n") if b] == [
        f"id: {parsed[1]['id']}", f"id: {parsed[3]['id']}"]

    # The sandbox filter and prefixes; bad queries.
    other = a.create()["id"]
    assert {e["sandbox"] for e in events(a, f"since={since}&sandbox={sid}")} == {sid}
    assert {e["type"] for e in events(a, f"since={since}&type=sandbox.*")} == {
        "sandbox.paused", "sandbox.resumed", "sandbox.created", "sandbox.started"}
    assert other in {e["sandbox"] for e in events(a, f"since={since}&type=sandbox.created")}
    for bad in ["since=x", "type=Sandbox", "type=a..b", "follow=2", "sandbox="]:
        r = a.get(f"/v1/events?{bad}")
        assert r.status == 400 and r.json["error"]["code"] == "invalid_argument", (bad, r)


def test_a_reader_behind_the_ring_is_told(server, tenants):
    a = new_tenant(server, tenants, "ev-ring")
    sid = a.create()["id"]
    for _ in range(RING // 2 + 1):
        a.exec(sid, {"cmd": ["true"]})
    seen = events(a, "since=0")
    assert seen[0]["type"] == "events.gap" and seen[0]["data"]["after"] == 0, seen[:2]
    assert seen[1]["seq"] == seen[0]["data"]["next"] or seen[1]["seq"] > seen[0]["data"]["next"]
    assert len([e for e in events(server.api()) if e["seq"]]) == RING


def test_what_an_event_carries_is_bounded(server, tenants):
    """An exec's argv is cut to 1 KiB in its events (cmd_cut), so one
    tenant's long command lines take no more of the shared ring than that."""
    a = new_tenant(server, tenants, "ev-big")
    sid = a.create()["id"]
    since = last_seq(server)
    a.exec(sid, {"cmd": ["true", "x" * 7000, "y" * 100]})
    mine = [e for e in events(a, f"since={since}") if e["type"].startswith("exec.")]
    assert [e["type"] for e in mine] == ["exec.started", "exec.ended"], mine
    for e in mine:
        cmd = e["data"]["cmd"]
        assert cmd[0] == "true" and sum(len(c) for c in cmd) == 1024, cmd
        assert e["data"]["cmd_cut"] is True and len(cmd) == 2


def webhook(api, path, receiver, **more):
    r = api.post("/v1/webhooks", {"url": f"http://127.0.0.1:{receiver.port}{path}", **more})
    assert r.status == 201, r
    return r.json


def verify(secret, headers, body):
    mac = hmac.new(secret.encode(), f"{headers['X-Hutch-Timestamp']}.".encode() + body,
                   hashlib.sha256).hexdigest()
    return hmac.compare_digest(headers["X-Hutch-Signature"], f"sha256={mac}")


def test_webhook_signed_and_a_500_retried(server, receiver, tenants):
    a, b = new_tenant(server, tenants, "wh-a"), new_tenant(server, tenants, "wh-b")
    hook = webhook(a, "/flaky", receiver, types=["sandbox.created"])
    assert hook["state"] == "active" and hook["types"] == ["sandbox.created"]
    assert hook["secret"].startswith("whsec_") and len(hook["secret"]) > 30
    b.create()  # another tenant's: never delivered to a's webhook
    sid = a.create()["id"]

    wait_for(lambda: len(receiver.of("/flaky")) == 2)
    (p1, h1, b1, s1), (p2, h2, b2, s2) = receiver.of("/flaky")
    assert (s1, s2) == (500, 200)
    assert b1 == b2 and h1["X-Hutch-Delivery"] == h2["X-Hutch-Delivery"]
    ev = json.loads(b2)
    assert ev["type"] == "sandbox.created" and ev["sandbox"] == sid and ev["tenant"] == "wh-a"
    assert h2["X-Hutch-Event"] == "sandbox.created" and h2["Content-Type"] == "application/json"
    assert verify(hook["secret"], h2, b2) and not verify("whsec_wrong" * 3, h2, b2)

    got = a.get(f"/v1/webhooks/{hook['id']}").json
    assert "secret" not in got and got["delivered"] == 1 and got["failed"] == 0
    assert [(d["attempt"], d["status"]) for d in got["deliveries"]] == [(2, 200), (1, 500)]
    assert got["deliveries"][0]["seq"] == ev["seq"] and got["deliveries"][0]["latency_ms"] > 0
    listed = a.get("/v1/webhooks").json["webhooks"]
    assert [w["id"] for w in listed] == [hook["id"]] and "secret" not in listed[0]
    assert b.get(f"/v1/webhooks/{hook['id']}").status == 404
    assert b.delete(f"/v1/webhooks/{hook['id']}").status == 404
    assert b.get("/v1/webhooks").json["webhooks"] == []
    assert a.delete(f"/v1/webhooks/{hook['id']}").status == 204
    assert a.get(f"/v1/webhooks/{hook['id']}").status == 404


def test_a_hanging_receiver_holds_only_its_own_delivery(server, receiver, tenants):
    a = new_tenant(server, tenants, "wh-hang")
    hang = webhook(a, "/hang", receiver, types=["sandbox.killed"])
    ok = webhook(a, "/ok", receiver, types=["sandbox.killed"])
    sid = a.create()["id"]
    a.delete(f"/v1/sandboxes/{sid}")

    # /ok is delivered while /hang's first attempt is held by the receiver,
    # which hutch gives up on (its timeout) and tries again.
    wait_for(lambda: len(receiver.of("/ok")) == 1)
    assert receiver.of("/hang") == []
    wait_for(lambda: receiver.arrived.count("/hang") == 2)
    receiver.release.set()
    wait_for(lambda: a.get(f"/v1/webhooks/{hang['id']}").json["delivered"] == 1)
    tries = a.get(f"/v1/webhooks/{hang['id']}").json["deliveries"]
    assert tries[-1]["attempt"] == 1 and tries[-1]["status"] is None
    assert "timeout" in tries[-1]["error"].lower(), tries
    assert tries[0]["status"] == 200
    assert json.loads(receiver.of("/ok")[0][2])["sandbox"] == sid
    for h in (hang, ok):
        a.delete(f"/v1/webhooks/{h['id']}")


def test_targets_the_floor_refuses(server, receiver, tenants):
    a = new_tenant(server, tenants, "wh-floor")
    other = free_port()
    for url in ["http://169.254.169.254/latest/meta-data", f"http://127.0.0.1:{other}/x",
                f"http://localhost:{other}/x", "http://10.1.2.3/x", f"http://127.0.0.1:{server.port}/v1"]:
        r = a.post("/v1/webhooks", {"url": url})
        assert r.status == 400 and r.json["error"]["code"] == "webhook_target_refused", (url, r)
        assert "floor" in r.json["error"]["message"]
    for body in [{"url": "ftp://127.0.0.1/x"}, {"url": "not a url"}, {},
                 {"url": f"http://u:p@127.0.0.1:{receiver.port}/"},
                 {"url": f"http://127.0.0.1:{receiver.port}/", "types": "sandbox.*"},
                 {"url": f"http://127.0.0.1:{receiver.port}/", "secret": "short"},
                 {"url": f"http://127.0.0.1:{receiver.port}/", "extra": 1}]:
        r = a.post("/v1/webhooks", body)
        assert r.status == 400 and r.json["error"]["code"] == "invalid_argument", (body, r)
    assert a.get("/v1/webhooks").json["webhooks"] == []
    # The operator's --egress-deny wins over its --webhook-allow: by address
    # (after DNS), and by name (before it is resolved: .invalid never is).
    for url in [f"http://127.0.0.1:{server.denied}/x", f"http://localhost:{server.denied}/x",
                "http://denied.invalid/x"]:
        r = a.post("/v1/webhooks", {"url": url})
        assert r.status == 400 and r.json["error"]["code"] == "webhook_target_refused", (url, r)
        assert "--egress-deny" in r.json["error"]["message"], r
    # A name the operator trusts (--webhook-allow localhost:PORT), at its port only.
    trusted = a.post("/v1/webhooks", {"url": f"http://localhost:{receiver.port}/ok"})
    assert trusted.status == 201, trusted
    assert a.delete(f"/v1/webhooks/{trusted.json['id']}").status == 204


def test_parallel_creates_stay_within_the_cap(server, receiver, tenants):
    """Creates waiting on DNS count against the cap of 16: 40 sent at once
    from one tenant (each whole request written before any answer is read,
    so the server reads them all before one resolve ends) make exactly 16,
    the rest refused with the quota's code."""
    a = new_tenant(server, tenants, "wh-cap")
    body = json.dumps({"url": f"http://127.0.0.1:{receiver.port}/ok"}).encode()
    request = (f"POST /v1/webhooks HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {a.key}\r\n"
               f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
               "Connection: close\r\n\r\n").encode() + body
    conns = [socket.create_connection(("127.0.0.1", server.port), timeout=60) for _ in range(40)]
    for c in conns:
        c.sendall(request)
    answers = []
    for c in conns:
        r = http.client.HTTPResponse(c)
        r.begin()
        answers.append((r.status, json.loads(r.read())))
        c.close()
    made = [j for st, j in answers if st == 201]
    refused = [(st, j) for st, j in answers if st != 201]
    assert len(made) == 16, [st for st, _ in answers]
    assert all(st == 429 and j["error"]["code"] == "too_many_webhooks" for st, j in refused), refused
    listed = a.get("/v1/webhooks").json["webhooks"]
    assert sorted(w["id"] for w in listed) == sorted(j["id"] for j in made)
    for j in made:
        assert a.delete(f"/v1/webhooks/{j['id']}").status == 204


def test_disabled_after_failing_events_and_kept_across_a_restart(server, receiver, tenants):
    a = new_tenant(server, tenants, "wh-down")
    down = webhook(a, "/down", receiver, types=["exec.ended"], secret="a-secret-of-my-own-1234")
    assert down["secret"] == "a-secret-of-my-own-1234"
    sid = a.create()["id"]
    for _ in range(5):
        a.exec(sid, {"cmd": ["true"]})
    wait_for(lambda: a.get(f"/v1/webhooks/{down['id']}").json["state"] == "disabled", 30)
    got = a.get(f"/v1/webhooks/{down['id']}").json
    assert got["failed"] == 5 and got["delivered"] == 0
    assert len(receiver.of("/down")) == 5 * 6  # six tries of each
    a.exec(sid, {"cmd": ["true"]})  # disabled: not attempted
    assert len(receiver.of("/down")) == 30

    # Kept across a restart, secret and state with it; numbers go on.
    before = last_seq(server)
    assert server.stop() == 0
    server.start()
    again = a.get(f"/v1/webhooks/{down['id']}").json
    assert again["state"] == "disabled" and again["url"] == down["url"] and "secret" not in again
    a.create()
    after = events(a, f"since={before}")
    assert after[0]["type"] == "events.gap" and all(e["seq"] > before for e in after[1:]), after
