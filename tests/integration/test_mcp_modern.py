"""MCP's 2026-07-28 revision on hutch serve's /mcp and on `hutch mcp`, and
MCP resources. No client speaks the revision yet: the requests are built
by hand from the spec's own examples (schema/2026-07-28/examples in
modelcontextprotocol/modelcontextprotocol): no initialize and no session,
the protocol version, client and capabilities in params._meta, the
Mcp-Method and Mcp-Name headers mirroring the body, resultType on every
result, the io.modelcontextprotocol/tasks extension."""
import base64
import http.client
import json
import os
import socket
import subprocess
import time

import pytest

from conftest import BUILD
from serveapi import Server

V = "2026-07-28"
TASKS = "io.modelcontextprotocol/tasks"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    s = Server(BUILD / "hutch-serve", tmp_path_factory.mktemp("mcp26") / "state").start()
    yield s
    assert s.stop() == 0, s.log_text()


@pytest.fixture
def key(server):
    """A tenant of the test's own; its sandboxes go after the test."""
    r = server.api().post("/v1/keys", {"tenant": f"m{time.monotonic_ns()}"})
    assert r.status == 201, r
    yield r.json["key"]
    api = server.api(r.json["key"])
    for sb in api.get("/v1/sandboxes").json["sandboxes"]:
        api.delete(f"/v1/sandboxes/{sb['id']}")


def until(cond, seconds):
    """cond's first truthy value, polled every 0.3 s; fails after seconds."""
    deadline = time.monotonic() + seconds
    while True:
        got = cond()
        if got:
            return got
        assert time.monotonic() < deadline, "not reached in time"
        time.sleep(0.3)


def meta(tasks=False, version=V):
    caps = {"extensions": {TASKS: {}}} if tasks else {}
    return {"io.modelcontextprotocol/protocolVersion": version,
            "io.modelcontextprotocol/clientInfo": {"name": "by-hand", "version": "1.0.0"},
            "io.modelcontextprotocol/clientCapabilities": caps}


def messages(r, raw):
    ctype = r.getheader("Content-Type", "")
    if ctype.startswith("text/event-stream"):
        return [json.loads(l[6:]) for l in raw.decode().splitlines() if l.startswith("data: ")]
    return [json.loads(raw)] if raw else []


class Modern:
    """Requests of the revision to /mcp: no session, headers mirrored."""

    def __init__(self, port, key, tasks=False):
        self.port, self.key, self.tasks, self.n = port, key, tasks, 0

    def post(self, method, params=None, headers=None, timeout=60, version=V):
        self.n += 1
        params = dict(params or {})
        params["_meta"] = {**meta(self.tasks, version), **params.get("_meta", {})}
        body = {"jsonrpc": "2.0", "id": self.n, "method": method, "params": params}
        h = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json",
             "Authorization": f"Bearer {self.key}", "MCP-Protocol-Version": version,
             "Mcp-Method": method}
        if method == "tools/call":
            h["Mcp-Name"] = params["name"]
        h.update(headers or {})
        h = {k: v for k, v in h.items() if v is not None}
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            conn.request("POST", "/mcp", body=json.dumps(body).encode(), headers=h)
            r = conn.getresponse()
            raw = r.read()
            got = messages(r, raw)
            return r.status, r, (got[-1] if got else None)
        finally:
            conn.close()

    def result(self, method, params=None, **kw):
        status, r, msg = self.post(method, params, **kw)
        assert status == 200 and "result" in msg, (status, msg)
        assert msg["id"] == self.n
        assert r.getheader("Mcp-Session-Id") is None  # the revision has no sessions
        return msg["result"]

    def call(self, name, args):
        return self.result("tools/call", {"name": name, "arguments": args})


def text(result):
    return "".join(b["text"] for b in result["content"] if b["type"] == "text")


def test_discover(server, key):
    got = Modern(server.port, key).result("server/discover")
    assert got["resultType"] == "complete"
    assert got["supportedVersions"][0] == V and "2025-11-25" in got["supportedVersions"]
    assert set(got["capabilities"]) >= {"tools", "resources", "extensions"}
    assert TASKS in got["capabilities"]["extensions"]
    assert got["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "hutch"
    assert got["ttlMs"] > 0 and got["cacheScope"] in ("public", "private")


def test_a_whole_session_without_one(server, key):
    """create, write, run code, run a command, fork, kill: each a request
    of its own, each result complete."""
    m = Modern(server.port, key)
    tools = m.result("tools/list")
    assert tools["resultType"] == "complete" and len(tools["tools"]) == 19
    made = m.call("create", {"timeout_s": 120})
    assert made["resultType"] == "complete" and not made["isError"], made
    sid = made["structuredContent"]["sandbox_id"]
    got = m.call("write_file", {"sandbox_id": sid, "path": "/tmp/n.txt", "content": "41"})
    assert not got["isError"], got
    got = m.call("run_code", {"sandbox_id": sid, "code": "int(open('/tmp/n.txt').read()) + 1"})
    assert not got["isError"] and "42" in text(got), got
    got = m.call("exec", {"sandbox_id": sid, "command": "cat /tmp/n.txt; echo; exit 3"})
    assert got["structuredContent"]["exit"]["exit_code"] == 3 and "41" in text(got), got
    fork = m.call("fork", {"sandbox_id": sid})
    assert not fork["isError"], fork
    child = fork["structuredContent"]["sandbox_id"]
    got = m.call("exec", {"sandbox_id": child, "command": "cat /tmp/n.txt"})
    assert "41" in text(got), got
    for s in (child, sid):
        assert not m.call("kill", {"sandbox_id": s})["isError"]
    assert server.api(key).get("/v1/sandboxes").json["sandboxes"] == []


def test_headers_must_match_the_body(server, key):
    m = Modern(server.port, key)
    status, _, msg = m.post("tools/list", headers={"Mcp-Method": "tools/call"})
    assert status == 400 and msg["error"]["code"] == -32020, msg
    assert "Mcp-Method" in msg["error"]["message"]
    status, _, msg = m.post("tools/call", {"name": "list", "arguments": {}},
                            headers={"Mcp-Name": "kill"})
    assert status == 400 and msg["error"]["code"] == -32020, msg
    status, _, msg = m.post("tools/call", {"name": "list", "arguments": {}},
                            headers={"Mcp-Name": None})
    assert status == 400 and msg["error"]["code"] == -32020, msg
    status, _, msg = m.post("tools/list", headers={"MCP-Protocol-Version": "2025-11-25"})
    assert status == 400 and msg["error"]["code"] == -32020, msg
    # The base64 sentinel, decoded before it is compared.
    enc = "=?base64?" + base64.b64encode(b"list").decode() + "?="
    status, _, msg = m.post("tools/call", {"name": "list", "arguments": {}},
                            headers={"Mcp-Name": enc})
    assert status == 200 and msg["result"]["resultType"] == "complete", msg
    status, _, msg = m.post("tools/call", {"name": "list", "arguments": {}},
                            headers={"Mcp-Name": "=?base64?%%%%?="})
    assert status == 400 and msg["error"]["code"] == -32020, msg


def test_unsupported_version_and_unknown_method(server, key):
    m = Modern(server.port, key)
    status, _, msg = m.post("tools/list", version="1900-01-01")
    assert status == 400 and msg["error"]["code"] == -32022, msg
    assert msg["error"]["data"]["requested"] == "1900-01-01"
    assert V in msg["error"]["data"]["supported"]
    status, _, msg = m.post("prompts/list")
    assert status == 404 and msg["error"]["code"] == -32601, msg
    for method in ("GET", "DELETE"):
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
        conn.request(method, "/mcp", headers={"Authorization": f"Bearer {key}",
                                              "MCP-Protocol-Version": V})
        assert conn.getresponse().status == 405, method
        conn.close()


def test_a_long_call_becomes_a_task(server, key):
    """With the tasks extension declared, a call still running after 5 s is
    answered as a task, polled with tasks/get to its result; a short one is
    answered whole. Without it, tasks/get is -32021."""
    m = Modern(server.port, key, tasks=True)
    sid = m.call("create", {"timeout_s": 120})["structuredContent"]["sandbox_id"]
    quick = m.call("exec", {"sandbox_id": sid, "command": "echo quick"})
    assert quick["resultType"] == "complete" and "quick" in text(quick), quick
    t0 = time.monotonic()
    task = m.call("exec", {"sandbox_id": sid, "command": "sleep 8; echo slow"})
    assert task["resultType"] == "task" and task["status"] == "working", task
    assert time.monotonic() - t0 < 8
    tid = task["taskId"]

    def done():
        got = m.result("tasks/get", {"taskId": tid})
        assert got["resultType"] == "complete"
        return got if got["status"] != "working" else None
    got = until(done, 30)
    assert got["status"] == "completed", got
    assert "slow" in text(got["result"]), got
    status, _, msg = Modern(server.port, key).post("tasks/get", {"taskId": tid})
    assert msg["error"]["code"] == -32021, msg


def test_a_task_cancelled(server, key):
    m = Modern(server.port, key, tasks=True)
    sid = m.call("create", {"timeout_s": 120})["structuredContent"]["sandbox_id"]
    task = m.call("exec", {"sandbox_id": sid, "command": "sleep 60"})
    assert task["resultType"] == "task", task
    assert m.result("tasks/cancel", {"taskId": task["taskId"]})["resultType"] == "complete"
    got = m.result("tasks/get", {"taskId": task["taskId"]})
    assert got["status"] == "cancelled", got
    # The command itself is gone: its stream was cut.
    until(lambda: "sleep 60" not in ps(m, sid), 15)


def ps(m, sid):
    return text(m.call("exec", {"sandbox_id": sid, "command": "ps -eo args"}))


def test_closing_the_stream_cancels(server, key):
    """The revision's cancellation: the client closes the SSE stream."""
    m = Modern(server.port, key)
    sid = m.call("create", {"timeout_s": 120})["structuredContent"]["sandbox_id"]
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                       "params": {"name": "exec", "arguments": {"sandbox_id": sid,
                                                                "command": "sleep 60"},
                                  "_meta": meta()}}).encode()
    s = socket.create_connection(("127.0.0.1", server.port))
    s.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
              b"Accept: application/json, text/event-stream\r\n"
              + f"Authorization: Bearer {key}\r\nMCP-Protocol-Version: {V}\r\n".encode()
              + b"Mcp-Method: tools/call\r\nMcp-Name: exec\r\n"
              + f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
    assert s.recv(4096).startswith(b"HTTP/1.1 200")
    until(lambda: "sleep 60" in ps(m, sid), 15)
    s.close()
    until(lambda: "sleep 60" not in ps(m, sid), 15)


def test_stdio_speaks_it_too(server, key):
    """`hutch mcp`: server/discover and a call with no initialize."""
    env = dict(os.environ, HUTCH_URL=f"http://127.0.0.1:{server.port}", HUTCH_API_KEY=key)
    p = subprocess.Popen([str(BUILD / "hutch"), "mcp"], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    try:
        for i, (method, params) in enumerate([("server/discover", {}),
                                              ("tools/call", {"name": "list", "arguments": {}})]):
            msg = {"jsonrpc": "2.0", "id": i, "method": method,
                   "params": {**params, "_meta": meta()}}
            p.stdin.write((json.dumps(msg) + "\n").encode())
            p.stdin.flush()
            got = json.loads(p.stdout.readline())
            assert got["id"] == i and got["result"]["resultType"] == "complete", got
        assert not got["result"]["isError"]
    finally:
        p.stdin.close()
        assert p.wait(timeout=30) == 0


def legacy_session(server, key):
    """A 2025-11-25 session's id, initialized."""
    h = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json",
         "Authorization": f"Bearer {key}"}
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    conn.request("POST", "/mcp", headers=h, body=json.dumps(
        {"jsonrpc": "2.0", "id": 0, "method": "initialize",
         "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                    "clientInfo": {"name": "r", "version": "1"}}}).encode())
    r = conn.getresponse()
    r.read()
    conn.close()
    return {**h, "Mcp-Session-Id": r.getheader("Mcp-Session-Id"),
            "MCP-Protocol-Version": "2025-11-25"}


def legacy(server, h, n, method, params):
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
    conn.request("POST", "/mcp", headers=h, body=json.dumps(
        {"jsonrpc": "2.0", "id": n, "method": method, "params": params}).encode())
    r = conn.getresponse()
    got = messages(r, r.read())[-1]
    conn.close()
    assert got["id"] == n, got
    return got


def test_resources(server, key):
    """The caller's sandboxes as resources, a file read by the template;
    another tenant's sandbox is not found, as anything not there is."""
    h = legacy_session(server, key)
    init = legacy(server, h, 1, "tools/call", {"name": "create", "arguments": {}})
    sid = init["result"]["structuredContent"]["sandbox_id"]
    legacy(server, h, 2, "tools/call", {"name": "write_file", "arguments": {
        "sandbox_id": sid, "path": "/tmp/r.txt", "content": "as a resource"}})
    listed = legacy(server, h, 3, "resources/list", {})["result"]["resources"]
    assert [r["uri"] for r in listed] == [f"hutch://sandboxes/{sid}"], listed
    tpl = legacy(server, h, 4, "resources/templates/list", {})["result"]["resourceTemplates"]
    assert tpl[0]["uriTemplate"] == "hutch://sandboxes/{sandbox_id}/files/{+path}"
    got = legacy(server, h, 5, "resources/read", {"uri": f"hutch://sandboxes/{sid}/files/tmp/r.txt"})
    assert got["result"]["contents"][0]["text"] == "as a resource", got
    got = legacy(server, h, 6, "resources/read", {"uri": f"hutch://sandboxes/{sid}"})
    assert json.loads(got["result"]["contents"][0]["text"])["id"] == sid
    r = server.api().post("/v1/keys", {"tenant": f"other{time.monotonic_ns()}"})
    other = legacy_session(server, r.json["key"])
    got = legacy(server, other, 1, "resources/read",
                 {"uri": f"hutch://sandboxes/{sid}/files/tmp/r.txt"})
    assert got["error"]["code"] == -32002, got
    got = legacy(server, other, 2, "resources/read", {"uri": "file:///etc/passwd"})
    assert got["error"]["code"] == -32002, got
