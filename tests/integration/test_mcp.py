"""MCP, both ways in: `hutch mcp` (stdio, reaching hutch serve's native API)
and hutch serve's /mcp (Streamable HTTP). First the official TypeScript
SDK's client (tests/mcp/client.mjs, pinned in tests/mcp/package.json) drives
a whole session over each transport; then hostile input, written by hand:
wrong types, unknown fields and tools, huge and malformed bodies, foreign
origins, stale, forged and other tenants' session ids, other tenants'
sandboxes, floods. Each must be an answer (an error where it should be),
leave the server serving, and leave nothing behind."""
import concurrent.futures
import http.client
import json
import os
import queue
import re
import shutil
import signal
import socket
import subprocess
import threading
import time

import pytest

from conftest import BUILD, ROOT, require
from serveapi import Server, audit_log, output, wait_for

MCP_DIR = ROOT / "tests" / "mcp"
TOOLS = ["create", "run_code", "exec", "exec_start", "exec_read", "exec_write", "exec_signal",
         "read_file", "write_file", "list_files", "remove", "expose_port", "pause", "resume",
         "snapshot", "fork", "kill", "list", "templates"]
TASK_TOOLS = {"run_code", "exec", "snapshot", "fork"}
INIT = {"protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "hostile", "version": "1"}}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    s = Server(BUILD / "hutch-serve", tmp_path_factory.mktemp("mcp") / "state").start()
    yield s
    assert s.stop() == 0, s.log_text()


def new_tenant(server, prefix):
    """(tenant, key) of a tenant of its own."""
    tenant = f"{prefix}{time.monotonic_ns()}"
    r = server.api().post("/v1/keys", {"tenant": tenant})
    assert r.status == 201, r
    return tenant, r.json["key"]


def sandboxes(api):
    return [s["id"] for s in api.get("/v1/sandboxes").json["sandboxes"]]


# --- the SDK's client ------------------------------------------------------


@pytest.fixture(scope="module")
def node_ready():
    """tests/mcp's packages installed (npm ci, once): a skip, with npm's
    reason, where npm, node or the registry is missing."""
    require(shutil.which("npm"), "npm is not installed (scripts/deps.sh --test installs it; "
            "tests/mcp/run brings a node of its own where the machine's is old)")
    r = subprocess.run([str(MCP_DIR / "run"), "--install"], capture_output=True, text=True,
                       timeout=300)
    require(r.returncode == 0, f"tests/mcp could not install its npm packages: {r.stderr[-800:]}")


@pytest.fixture(scope="module")
def sdk(server, node_ready):
    """The SDK client's report of a whole session over each transport (run
    side by side, each as a tenant of its own), and what each tenant had
    left once its sessions ended; those survivors are then removed."""
    procs = {}
    for kind in ("stdio", "http"):
        tenant, key = new_tenant(server, f"sdk-{kind}-")
        env = dict(os.environ, HUTCH_URL=f"http://127.0.0.1:{server.port}", HUTCH_API_KEY=key,
                   HUTCH_MCP_BIN=str(BUILD / "hutch"))
        p = subprocess.Popen([str(MCP_DIR / "run"), "client.mjs", kind], env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        procs[kind] = (tenant, key, p)
    out = {}
    for kind, (tenant, key, p) in procs.items():
        try:
            stdout, stderr = p.communicate(timeout=180)
        except subprocess.TimeoutExpired:
            p.kill()
            stdout, stderr = p.communicate()
            pytest.fail(f"the SDK's {kind} client hung: {stderr.decode()[-2000:]}")
        assert p.returncode == 0, f"{kind}: {stderr.decode()[-3000:]}"
        report = json.loads(stdout)
        api = server.api(key)
        kept = {report["session"].get("kept")}
        # A session's end kills what it made on its own thread (HTTP): a
        # moment after the DELETE's answer.
        try:
            wait_for(lambda: set(sandboxes(api)) <= kept, 10)
        except AssertionError:
            pass
        report["left"] = sandboxes(api)
        for sid in report["left"]:
            api.delete(f"/v1/sandboxes/{sid}")
        report["key"], report["tenant"] = key, tenant
        out[kind] = report
    return out


@pytest.fixture(params=["stdio", "http"])
def run(request, sdk):
    return sdk[request.param]


def seen(run, name):
    got = run[name]
    assert got["ok"], got["error"]
    return got


def text(result):
    return "".join(b["text"] for b in result["content"] if b["type"] == "text")


def test_sdk_lists_the_tools(run):
    got = seen(run, "tools")
    assert [t["name"] for t in got["tools"]] == TOOLS
    assert got["again"] == TOOLS  # the same order every time
    for t in got["tools"]:
        assert t["type"] == "object" and t["additionalProperties"] is False, t
        assert set(t["required"]) <= set(t["properties"]), t
        assert t["taskSupport"] == ("optional" if t["name"] in TASK_TOOLS else None), t
        assert len(t["description"]) > 20, t
    assert got["server"]["name"] == "hutch"
    assert got["capabilities"]["tasks"]["requests"]["tools"]["call"] == {}
    assert "create" in got["instructions"]


def test_sdk_create_write_read_exec(run):
    got = seen(run, "basics")
    sid = got["sid"]
    assert re.fullmatch(r"[0-9a-f]{16}", sid or ""), got["made"]
    made = got["made"]["structuredContent"]
    assert made["killed_with_session"] is True and made["state"] == "running"
    assert made["metadata"] == {"made_by": "mcp"}
    assert got["wrote"]["isError"] is False
    assert got["wrote"]["structuredContent"]["size"] == len("one\nzwei ü\n".encode())
    assert text(got["read"]) == "one\nzwei ü\n" and not got["read"]["isError"]
    ran = got["ran"]
    assert ran["isError"] is False  # a command that fails is the model's to read
    assert ran["structuredContent"]["exit"]["exit_code"] == 3
    assert text(ran) == "exit code 3 (nonzero)\n--- stdout ---\n12\none\nzwei ü\n--- stderr ---\nbar\n"
    assert sid in [s["id"] for s in got["listed"]["structuredContent"]["sandboxes"]]


def test_sdk_run_code_keeps_state(run):
    got = seen(run, "state")
    assert got["first"] == "(no output)"
    assert got["second"] == "result:\n42\n"
    failed = got["failed"]
    assert failed["isError"] is False and "ZeroDivisionError" in text(failed), failed


def test_sdk_long_exec_streams_progress(run):
    got = seen(run, "progress")
    msgs = [p["message"] for p in got["seen"]]
    assert msgs == ["1\n", "2\n", "3\n", "[stderr] e\n"], got["seen"]
    assert [p["progress"] for p in got["seen"]] == [1, 2, 3, 4]
    # As the lines came, half a second apart, not all at the end.
    ats = [p["at"] for p in got["seen"]]
    assert ats[2] - ats[0] >= 800 and got["at"] - ats[0] >= 1200, got["seen"]
    assert text(got["result"]) == "exit code 0 (ok)\n--- stdout ---\n1\n2\n3\n--- stderr ---\ne\n"


def test_sdk_task_polled_to_its_result(run):
    got = seen(run, "task")
    task = got["created"]["task"]
    assert task["status"] == "working" and task["ttl"] == 60000
    assert got["statuses"][0] == "working" and got["statuses"][-1] == "completed", got["statuses"]
    result = got["result"]
    assert "done-42" in text(result) and result["structuredContent"]["exit"]["exit_code"] == 0
    assert result["_meta"]["io.modelcontextprotocol/related-task"]["taskId"] == task["taskId"]
    assert task["taskId"] in got["listed"]
    kinds = [m["type"] for m in got["stream"]]
    assert kinds[0] == "taskCreated" and kinds[-1] == "result", got["stream"]
    assert got["stream"][-2] == {"type": "taskStatus", "status": "completed",
                                 "taskId": got["stream"][0]["taskId"]}
    assert got["stream"][-1]["text"] == "result:\n42\n"


def test_sdk_matplotlib_figure_is_an_image(run):
    got = seen(run, "image")
    require(got["matplotlib"], f"the host's python3 has no working matplotlib: {got.get('why')}")
    assert got["isError"] is False
    images = [b for b in got["blocks"] if b["type"] == "image"]
    assert len(images) == 1, got["blocks"]
    assert images[0]["mimeType"] == "image/png" and images[0]["head"] == "89504e470d0a1a0a"
    assert images[0]["bytes"] > 1000
    # The image follows the line that names it.
    at = got["blocks"].index(images[0])
    assert got["blocks"][at - 1]["text"] == f"[image 1: image/png, {images[0]['bytes']} bytes, a figure the cell made]"


def test_sdk_ten_megabytes_cut_and_kept(run):
    got = seen(run, "bigout")
    m = re.fullmatch(r"\[\.\.\. (\d+) of (\d+) bytes left out: shown are the first (\d+) and the "
                     r"last (\d+); the whole output is in the sandbox at (/tmp/hutch-mcp/\S+) \.\.\.\]",
                     got["marker"] or "")
    assert m, got["marker"]
    left, total, head, tail = map(int, m.groups()[:4])
    assert total == 10_000_000 and head + tail + left == total and head + tail <= 32 << 10
    assert got["length"] < 40_000  # the model's context is spared
    assert got["head"].startswith("exit code 0 (ok)\n--- stdout ---\naaaa")
    assert got["structured"]["stdout_bytes"] == 10_000_000
    assert got["file"] == m.group(5)
    # The whole of it, in the sandbox: ten million a's.
    assert got["wc"] == "exit code 0 (ok)\n--- stdout ---\n10000000\n0\n--- stderr ---\n", got["wc"]


def test_sdk_abort_stops_the_command(run):
    got = seen(run, "cancel")
    assert got["before"] == 1, got  # it ran
    assert got["error"] is not None, got  # the call was given up
    assert got["after"] == 0 and got["stoppedMs"] < 5000, got


def test_sdk_session_end_kills_what_it_made(run):
    got = seen(run, "session")
    assert got["kill"]["isError"] is False
    # Killed by the session's end: what it made without keep (the main
    # session's sandbox too); the kept one outlived it.
    assert got["kept"] in run["left"]
    assert got["gone"] not in run["left"] and run["main"]["sid"] not in run["left"]
    assert run["left"] == [got["kept"]], run["left"]


def test_sdk_fork_goes_with_the_session(run):
    got = seen(run, "session")
    assert got["fork"]["isError"] is False, got["fork"]
    assert got.get("forked"), f"fork gave no sandbox_id: {got['fork']}"
    assert got["forked"] not in run["left"]


def test_sdk_stdio_closes_within_the_sdks_grace(sdk):
    # The SDK ends its stdio server with SIGTERM after 2 s: hutch mcp is out
    # by then, its sandboxes killed.
    assert sdk["stdio"]["main"]["closeMs"] < 2000
    assert sdk["stdio"]["session"]["closeMs"] < 2000


def test_sdk_every_tool_call_is_logged(server, sdk):
    # stdio: a line on hutch mcp's stderr per call.
    stdio = sdk["stdio"]
    logged = re.findall(r"^hutch mcp: tool (\w+)", stdio["stderr"], re.M)
    assert sorted(logged) == sorted(stdio["called"]), stdio["stderr"]
    # HTTP: an audit line per call, with its session.
    web = sdk["http"]
    ids = {web["main"]["sessionId"], web["session"]["sessionId"]}
    assert None not in ids
    lines = audit_log(server.state_dir, lambda ls: len(
        [l for l in ls if l.get("session") in ids]) >= len(web["called"]))
    mine = [l for l in lines if l.get("action") == "mcp.tool" and l.get("session") in ids]
    assert sorted(l["tool"] for l in mine) == sorted(web["called"])
    assert {l["tenant"] for l in mine} == {web["tenant"]}


# --- raw clients -----------------------------------------------------------


class Answer:
    def __init__(self, status, headers, raw):
        self.status, self.headers, self.raw = status, headers, raw
        ctype = headers.get("Content-Type", "")
        if ctype.startswith("text/event-stream"):
            self.messages = [json.loads(l[6:]) for l in raw.decode().splitlines()
                             if l.startswith("data: ")]
        elif raw and ctype.startswith("application/json"):
            self.messages = [json.loads(raw)]
        else:
            self.messages = []

    @property
    def final(self):
        """The message that answers the request (the last)."""
        assert self.messages, self
        return self.messages[-1]

    def __repr__(self):
        return f"Answer({self.status}, {self.raw[:400]!r})"


class HttpMcp:
    """One session of /mcp, by hand."""
    ACCEPT = "application/json, text/event-stream"

    def __init__(self, port, key):
        self.port, self.key, self.sid, self.n = port, key, None, 0

    def post(self, body, headers=None, key=True, session=True, timeout=30):
        h = {"Accept": self.ACCEPT, "Content-Type": "application/json"}
        if key and self.key:
            h["Authorization"] = f"Bearer {self.key}"
        if session and self.sid:
            h["Mcp-Session-Id"] = self.sid
        h.update(headers or {})
        h = {k: v for k, v in h.items() if v is not None}
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        return self.send("POST", data, h, timeout)

    def send(self, method, data, headers, timeout=30):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            conn.request(method, "/mcp", body=data, headers=headers)
            r = conn.getresponse()
            return Answer(r.status, r.msg, r.read())
        finally:
            conn.close()

    def progress_call(self, name, args, token):
        """(the notifications, the answer) of a tools/call asking for progress."""
        self.n += 1
        a = self.post({"jsonrpc": "2.0", "id": self.n, "method": "tools/call",
                       "params": {"name": name, "arguments": args, "_meta": {"progressToken": token}}})
        assert a.status == 200 and a.final["id"] == self.n, a
        return a.messages[:-1], a.final

    def initialize(self):
        a = self.post({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": INIT},
                      session=False)
        assert a.status == 200, a
        self.sid = a.headers["Mcp-Session-Id"]
        assert re.fullmatch(r"[0-9a-f]{32}", self.sid)
        note = self.post({"jsonrpc": "2.0", "method": "notifications/initialized"})
        assert note.status == 202 and note.raw == b"", note
        return self

    def request(self, method, params=None, **kw):
        self.n += 1
        msg = {"jsonrpc": "2.0", "id": self.n, "method": method}
        if params is not None:
            msg["params"] = params
        a = self.post(msg, **kw)
        assert a.status == 200, a
        assert a.final["id"] == self.n, a
        return a.final

    def call(self, name, args=None):
        return self.request("tools/call", {"name": name, "arguments": args or {}})

    def delete(self, sid=None, key=True):
        h = {"Mcp-Session-Id": sid or self.sid}
        if key:
            h["Authorization"] = f"Bearer {self.key}"
        return self.send("DELETE", None, h)

    def close(self):
        if self.sid:
            self.delete()
            self.sid = None


class StdioMcp:
    """build/hutch mcp, by hand: lines in, lines out."""

    def __init__(self, port, key):
        env = dict(os.environ, HUTCH_URL=f"http://127.0.0.1:{port}", HUTCH_API_KEY=key)
        self.p = subprocess.Popen([str(BUILD / "hutch"), "mcp"], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        self.lines = queue.Queue()
        self.got = {}  # id -> [answers]
        self.notes = []
        self.seq = []  # every message, in the order it came
        self.n = 0
        threading.Thread(target=self.read, daemon=True).start()
        self.err = []
        threading.Thread(target=lambda: self.err.extend(self.p.stderr), daemon=True).start()

    def read(self):
        for line in self.p.stdout:
            self.lines.put(json.loads(line))
        self.lines.put(None)

    def send_line(self, raw):
        self.p.stdin.write(raw if raw.endswith(b"\n") else raw + b"\n")
        self.p.stdin.flush()

    def next(self, timeout=30):
        msg = self.lines.get(timeout=timeout)
        assert msg is not None, "hutch mcp closed its stdout"
        self.seq.append(msg)
        if "id" in msg and "method" not in msg:
            self.got.setdefault(msg["id"], []).append(msg)
        elif "method" in msg:
            self.notes.append(msg)
        return msg

    def wait(self, rid, timeout=30):
        deadline = time.monotonic() + timeout
        while rid not in self.got:
            self.next(max(0.01, deadline - time.monotonic()))
        return self.got[rid][0]

    def request(self, method, params=None, timeout=30):
        self.n += 1
        msg = {"jsonrpc": "2.0", "id": self.n, "method": method}
        if params is not None:
            msg["params"] = params
        self.send_line(json.dumps(msg).encode())
        return self.wait(self.n, timeout)

    def progress_call(self, name, args, token):
        """(the notifications since the call, the answer) of a tools/call asking for progress."""
        start = len(self.seq)
        final = self.request("tools/call", {"name": name, "arguments": args,
                                            "_meta": {"progressToken": token}})
        return [m for m in self.seq[start:] if m is not final], final

    def initialize(self):
        assert self.request("initialize", INIT)["result"]["protocolVersion"] == "2025-11-25"
        self.send_line(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
        return self

    def call(self, name, args=None):
        return self.request("tools/call", {"name": name, "arguments": args or {}})

    def close(self, timeout=10):
        if self.p.poll() is None:
            self.p.stdin.close()
            try:
                self.p.wait(timeout)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()
        return self.p.returncode


@pytest.fixture
def key(server):
    """A tenant of the test's own; its sandboxes go after the test."""
    _, k = new_tenant(server, "raw-")
    yield k
    api = server.api(k)
    for sid in sandboxes(api):
        api.delete(f"/v1/sandboxes/{sid}")


@pytest.fixture(params=["stdio", "http"])
def mcp(request, server, key):
    c = (StdioMcp if request.param == "stdio" else HttpMcp)(server.port, key).initialize()
    c.kind = request.param
    yield c
    c.close()


def refused(answer):
    """The text of an isError tool result."""
    r = answer["result"]
    assert r["isError"] is True, answer
    return text(r)


def test_wrong_types_name_the_field(server, key, mcp):
    cases = [
        ("exec", {"sandbox_id": 5, "command": "true"},
         "invalid_argument: arguments.sandbox_id: must be string, not an integer"),
        ("create", {"memory_mb": "big"},
         "invalid_argument: arguments.memory_mb: must be integer, not a string"),
        ("create", {"memory_mb": 256.5}, "arguments.memory_mb: must be integer, not a number"),
        ("create", {"keep": "yes"}, "arguments.keep: must be boolean, not a string"),
        ("exec", {"sandbox_id": "x", "command": "true", "env": {"A": 1}},
         "arguments.env.A: must be string, not an integer"),
        ("create", {"allow_hosts": ["pypi.org", 3]},
         "arguments.allow_hosts[1]: must be string, not an integer"),
        ("create", {"isolation": "vm"}, 'arguments.isolation: must be one of ["ns","gvisor"]'),
        ("create", {"memory_mb": 1}, "arguments.memory_mb: at least 16"),
        ("exec", {"sandbox_id": "x"}, "arguments: 'command' is required"),
        ("exec", {"sandbox_id": "x", "command": ""}, "arguments.command: at least 1 characters"),
    ]
    for tool, args, want in cases:
        assert want in refused(mcp.call(tool, args)), (tool, args)
    # arguments that are not an object at all: the request's error.
    bad = mcp.request("tools/call", {"name": "exec", "arguments": [1]})
    assert bad["error"]["code"] == -32602 and "object" in bad["error"]["message"]
    assert sandboxes(server.api(key)) == []  # nothing was made of it


def test_unknown_field_is_named(mcp):
    got = refused(mcp.call("exec", {"sandbox_id": "x", "command": "true", "bogus": 1}))
    assert got.startswith("invalid_argument: arguments: unknown field 'bogus' (the schema names: "
                          "sandbox_id, command, cwd"), got
    assert "unknown field 'x'" in refused(mcp.call("list", {"x": 1}))


def test_string_past_its_max_length(mcp):
    got = refused(mcp.call("kill", {"sandbox_id": "a" * 65}))
    assert got == "invalid_argument: arguments.sandbox_id: at most 64 characters, not 65"
    if mcp.kind == "stdio":  # over HTTP a body this big is refused whole (413)
        got = refused(mcp.call("exec", {"sandbox_id": "x", "command": "a" * (1 << 20 | 1)}))
        assert got == "invalid_argument: arguments.command: at most 1048576 characters, not 1048577"


def test_unknown_tool_and_method(mcp):
    got = mcp.call("rm_rf", {})
    assert got["error"]["code"] == -32602 and "unknown tool 'rm_rf'" in got["error"]["message"]
    got = mcp.request("tools/destroy", {})
    assert got["error"]["code"] == -32601
    # A task of a tool that runs none.
    got = mcp.request("tools/call", {"name": "list", "arguments": {}, "task": {"ttl": 1000}})
    assert got["error"]["code"] == -32601 and "task" in got["error"]["message"]
    got = mcp.request("tasks/get", {"taskId": "0" * 32})
    assert got["error"]["code"] == -32602
    assert mcp.request("ping")["result"] == {}


def test_another_tenants_sandbox_is_not_found(server, mcp):
    admin = server.api()
    theirs = admin.create(timeout_s=120)["id"]
    try:
        for tool, args in [("exec", {"command": "id"}), ("read_file", {"path": "/etc/hostname"}),
                           ("write_file", {"path": "x", "content": "y"}),
                           ("run_code", {"code": "1"}), ("pause", {}), ("kill", {}),
                           ("snapshot", {}), ("expose_port", {"port": 80})]:
            r = mcp.call(tool, {"sandbox_id": theirs, **args})["result"]
            assert r["isError"] is True and r["structuredContent"]["error"]["code"] == "not_found", (tool, r)
            assert text(r).startswith("not_found: "), (tool, r)
        assert admin.get(f"/v1/sandboxes/{theirs}").json["state"] == "running"
        assert output(admin.exec(theirs, {"shell": "test -e /home/user/x || echo none"})) == b"none\n"
    finally:
        admin.delete(f"/v1/sandboxes/{theirs}")


def test_stdio_bad_lines(server, key):
    c = StdioMcp(server.port, key)
    try:
        c.send_line(b"not json")
        got = c.next()
        assert got["id"] is None and got["error"]["code"] == -32700, got
        c.send_line(b'[{"jsonrpc":"2.0","id":1,"method":"ping"}]')
        assert c.next()["error"]["code"] == -32600
        c.send_line(b'{"jsonrpc":"1.0","id":"a","method":"ping"}')
        assert c.next()["error"]["code"] == -32600
        c.send_line(b'{"jsonrpc":"2.0","id":{"x":1},"method":"ping"}')
        assert c.next()["error"]["code"] == -32600
        c.send_line(b'\xff\xfe{}')
        assert c.next()["error"]["code"] == -32700
        # A line past 16 MiB is refused whole; the next is read as ever.
        c.send_line(b'{"jsonrpc":"2.0","id":5,"method":"ping","params":{"x":"' + b"a" * (16 << 20) + b'"}}')
        got = c.next()
        assert got["error"]["code"] == -32600 and "at most 16777216" in got["error"]["message"], got
        # Before initialize, only initialize and ping.
        assert c.request("tools/list")["error"]["code"] == -32600
        c.initialize()
        assert len(c.request("tools/list")["result"]["tools"]) == 19
    finally:
        assert c.close() == 0


def rpc_code(answer):
    return answer.final["error"]["code"]


def test_http_refusals(server, key):
    c = HttpMcp(server.port, key).initialize()
    ping = {"jsonrpc": "2.0", "id": 9, "method": "ping"}
    try:
        a = c.post(ping, key=False)
        assert a.status == 401 and a.headers["WWW-Authenticate"].startswith("Bearer"), a
        a = c.post(ping, headers={"Authorization": "Bearer hk_forged"})
        assert a.status == 401 and "WWW-Authenticate" in a.headers, a
        a = c.post(ping, headers={"Origin": "https://evil.example"})
        assert a.status == 403 and rpc_code(a) == -32000, a
        # A rebound page names its own site as Host and as Origin alike.
        a = c.post(ping, headers={"Origin": "https://hutch.example", "Host": "hutch.example"})
        assert a.status == 403, a
        a = c.post(ping, headers={"Origin": f"http://localhost:{server.port}"})
        assert a.status == 200, a
        a = c.post(ping, headers={"Accept": None})
        assert a.status == 406, a
        a = c.post(ping, headers={"Accept": "application/json"})
        assert a.status == 406, a
        a = c.post(ping, headers={"Content-Type": "text/plain"})
        assert a.status == 415, a
        a = c.post(b"{not json", timeout=10)
        assert a.status == 400 and rpc_code(a) == -32700, a
        a = c.post([ping])
        assert a.status == 400 and rpc_code(a) == -32600, a
        a = c.post(ping, session=False)
        assert a.status == 400 and "Mcp-Session-Id" in a.final["error"]["message"], a
        a = c.post(ping, headers={"Mcp-Session-Id": "0" * 32})
        assert a.status == 404, a
        a = c.post(ping, headers={"MCP-Protocol-Version": "1999-01-01"})
        assert a.status == 400, a
        # Over 1 MiB: refused before it is parsed.
        huge = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                "params": {"name": "exec", "arguments": {"sandbox_id": "x", "command": "a" * (1 << 20)}}}
        a = c.post(huge)
        assert a.status == 413, a
        a = c.send("GET", None, {"Authorization": f"Bearer {key}", "Mcp-Session-Id": c.sid,
                                 "Accept": "text/event-stream"})
        assert a.status == 405 and "POST" in a.headers["Allow"], a
        # A notification is taken, with nothing to say.
        a = c.post({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 77}})
        assert a.status == 202 and a.raw == b""
        # Through it all the session held.
        assert c.request("ping")["result"] == {}
    finally:
        c.close()
    assert server.api(None).get("/healthz").status == 200


def test_http_session_ids(server, key):
    c = HttpMcp(server.port, key).initialize()
    other = HttpMcp(server.port, new_tenant(server, "other-")[1]).initialize()
    try:
        # Another tenant's id is not found, and ending it fails.
        a = other.post({"jsonrpc": "2.0", "id": 1, "method": "ping"}, headers={"Mcp-Session-Id": c.sid})
        assert a.status == 404, a
        assert other.delete(c.sid).status == 404
        assert c.request("ping")["result"] == {}  # still there
        # A forged one (the right shape).
        assert c.delete("f" * 32).status == 404
        # Stale: after DELETE, every use of it is not found.
        old = c.sid
        assert c.delete().status == 204
        a = c.post({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
        assert a.status == 404, a
        assert c.delete(old).status == 404
        c.sid = None
    finally:
        c.close()
        other.close()


def test_http_flood_on_one_session(server, key):
    """200 calls at once on one session, 3 of them creates: each is
    answered (a result, or a refusal of the 64 a session runs at once), the
    server serves after, and the session's end leaves nothing."""
    c = HttpMcp(server.port, key).initialize()

    def one(i):
        msg = {"jsonrpc": "2.0", "id": 1000 + i, "method": "tools/call",
               "params": {"name": "create" if i < 3 else "list", "arguments": {}}}
        try:
            return c.post(msg, timeout=60)
        except OSError as e:
            return e
    with concurrent.futures.ThreadPoolExecutor(200) as pool:
        got = list(pool.map(one, range(200)))
    errors = [g for g in got if isinstance(g, Exception)]
    assert not errors, errors[:3]
    statuses = [g.status for g in got]
    assert set(statuses) <= {200, 503}, statuses
    ok = busy = 0
    for i, g in enumerate(got):
        if g.status != 200:
            continue
        assert g.final["id"] == 1000 + i, g
        if "result" in g.final:
            assert g.final["result"]["isError"] is False, g
            ok += 1
        else:
            assert "calls already" in g.final["error"]["message"], g
            busy += 1
    assert ok >= 64, (ok, busy, statuses.count(503))
    made = sandboxes(server.api(key))
    assert len(made) == sum(1 for g in got[:3] if g.status == 200 and "result" in g.final)
    assert server.api(None).get("/healthz").status == 200
    assert c.request("ping")["result"] == {}
    c.close()
    wait_for(lambda: sandboxes(server.api(key)) == [], 15)


def test_http_many_sessions_at_once(server, key):
    """100 initializes at once for one tenant: each is answered with a
    session, and the tenant keeps 64 (its most): those idle longest ended
    to make room (a client that closes without DELETE must not lock its
    tenant out); ended, they are not found."""
    def init(_):
        c = HttpMcp(server.port, key)
        a = c.post({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": INIT},
                   session=False, timeout=60)
        c.sid = a.headers.get("Mcp-Session-Id")
        return c, a
    with concurrent.futures.ThreadPoolExecutor(100) as pool:
        got = list(pool.map(init, range(100)))
    statuses = sorted(a.status for _, a in got)
    assert statuses == [200] * 100, statuses
    assert len({c.sid for c, _ in got}) == 100
    pings = [c.post({"jsonrpc": "2.0", "id": 1, "method": "ping"}).status for c, _ in got]
    assert sorted(pings) == [200] * 64 + [404] * 36, pings
    live = [c for (c, _), p in zip(got, pings) if p == 200]
    with concurrent.futures.ThreadPoolExecutor(64) as pool:
        assert set(pool.map(lambda c: c.delete().status, live)) == {204}
    again = HttpMcp(server.port, key).initialize()
    assert again.request("ping")["result"] == {}
    again.close()
    assert server.api(None).get("/healthz").status == 200


def test_stdio_flood(server, key):
    c = StdioMcp(server.port, key).initialize()
    try:
        lines = b"".join(json.dumps({"jsonrpc": "2.0", "id": 1000 + i, "method": "tools/call",
                                     "params": {"name": "list", "arguments": {}}}).encode() + b"\n"
                         for i in range(200))
        c.send_line(lines)
        deadline = time.monotonic() + 60
        flood = {}
        while len(flood) < 200:
            c.next(max(0.01, deadline - time.monotonic()))
            flood = {k: v for k, v in c.got.items() if k >= 1000}
        assert sorted(flood) == list(range(1000, 1200))
        assert all(len(v) == 1 for v in flood.values())  # each answered once
        ok = 0
        for v in flood.values():
            if "result" in v[0]:
                assert v[0]["result"]["isError"] is False, v
                ok += 1
            else:
                assert "calls already" in v[0]["error"]["message"], v
        assert ok >= 64
        assert c.request("ping")["result"] == {}
    finally:
        assert c.close() == 0
    assert server.api(None).get("/healthz").status == 200


def test_stdio_eof_mid_call_cancels_and_cleans_up(server, key):
    c = StdioMcp(server.port, key).initialize()
    sid = c.call("create", {"timeout_s": 120})["result"]["structuredContent"]["sandbox_id"]
    c.send_line(json.dumps({"jsonrpc": "2.0", "id": 77, "method": "tools/call",
                            "params": {"name": "exec", "arguments": {"sandbox_id": sid,
                                                                     "command": "sleep 60"}}}).encode())
    time.sleep(0.5)
    t0 = time.monotonic()
    assert c.close(timeout=10) == 0
    assert time.monotonic() - t0 < 2  # within the SDK's grace before SIGTERM
    assert sandboxes(server.api(key)) == []


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_stdio_signal_still_kills_what_it_made(server, key, sig):
    """A client may end its server with SIGTERM (the SDK does after 2 s;
    MCP's lifecycle says so) or the terminal's SIGINT: what the session
    made goes with it as on EOF."""
    c = StdioMcp(server.port, key).initialize()
    made = c.call("create", {"timeout_s": 120})["result"]["structuredContent"]["sandbox_id"]
    c.p.send_signal(sig)
    c.p.wait(10)
    try:
        wait_for(lambda: made not in sandboxes(server.api(key)), 3)
    except AssertionError:
        pytest.fail(f"hutch mcp ended by {sig.name} left sandbox {made} running "
                    f"(exit {c.p.returncode})")


def test_http_audit_lines(server, key):
    c = HttpMcp(server.port, key).initialize()
    sid = c.sid
    made = c.call("create", {"timeout_s": 60})["result"]["structuredContent"]["sandbox_id"]
    c.call("exec", {"sandbox_id": made, "command": "true"})
    c.call("exec", {"sandbox_id": made, "command": "true", "bogus": 1})
    c.call("kill", {"sandbox_id": "nope"})
    c.call("list")
    c.close()

    def mine(ls):
        return [l for l in ls if l.get("action") == "mcp.tool" and l.get("session") == sid]
    lines = mine(audit_log(server.state_dir, lambda ls: len(mine(ls)) >= 5))
    tenant = lines[0]["tenant"]
    assert tenant.startswith("raw-")
    assert all(re.fullmatch(r"\d{4}-\d\d-\d\dT[\d:.]+Z", l.pop("time")) for l in lines)
    strip = lines
    assert strip == [
        {"tenant": tenant, "action": "mcp.tool", "tool": "create", "sandbox": made, "ok": True,
         "error": None, "session": sid},
        {"tenant": tenant, "action": "mcp.tool", "tool": "exec", "sandbox": made, "ok": True,
         "error": None, "session": sid},
        {"tenant": tenant, "action": "mcp.tool", "tool": "exec", "sandbox": None, "ok": False,
         "error": "invalid_argument", "session": sid},
        {"tenant": tenant, "action": "mcp.tool", "tool": "kill", "sandbox": "nope", "ok": False,
         "error": "not_found", "session": sid},
        {"tenant": tenant, "action": "mcp.tool", "tool": "list", "sandbox": None, "ok": True,
         "error": None, "session": sid},
    ], strip



def test_initialize_agrees_a_version(server, key):
    for asked, agreed in [("2025-06-18", "2025-06-18"), ("2025-03-26", "2025-03-26"),
                          ("2099-01-01", "2025-11-25")]:
        c = StdioMcp(server.port, key)
        got = c.request("initialize", {**INIT, "protocolVersion": asked})
        assert got["result"]["protocolVersion"] == agreed, got
        assert c.close() == 0
        h = HttpMcp(server.port, key)
        a = h.post({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                    "params": {**INIT, "protocolVersion": asked}}, session=False)
        h.sid = a.headers["Mcp-Session-Id"]
        assert a.final["result"]["protocolVersion"] == agreed, a
        h.close()


def running(api, sid, args):
    """How many processes of the sandbox run exactly args."""
    out = api.exec(sid, {"cmd": ["pgrep", "-c", "-f", "-x", args]})
    return int("".join(l.get("data", "") for l in out if l["type"] == "stdout") or 0)


def test_task_cancel_stops_the_command(server, key, mcp):
    sid = mcp.call("create", {"timeout_s": 120})["result"]["structuredContent"]["sandbox_id"]
    t = mcp.request("tools/call", {"name": "exec", "task": {"ttl": 60000},
                                   "arguments": {"sandbox_id": sid, "command": "sleep 41"}})
    tid = t["result"]["task"]["taskId"]
    api = server.api(key)
    wait_for(lambda: running(api, sid, "sleep 41") == 1, 10)
    got = mcp.request("tasks/cancel", {"taskId": tid})["result"]
    assert got["taskId"] == tid and got["status"] == "cancelled", got
    assert mcp.request("tasks/get", {"taskId": tid})["result"]["status"] == "cancelled"
    res = mcp.request("tasks/result", {"taskId": tid}, timeout=10)["result"]
    assert res["isError"] is True and "cancelled" in text(res), res
    wait_for(lambda: running(api, sid, "sleep 41") == 0, 10)
    # Ended, it cannot be cancelled again.
    assert mcp.request("tasks/cancel", {"taskId": tid})["error"]["code"] == -32602


def test_http_hang_up_stops_the_command(server, key):
    c = HttpMcp(server.port, key).initialize()
    try:
        sid = c.call("create", {"timeout_s": 120})["result"]["structuredContent"]["sandbox_id"]
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
        conn.request("POST", "/mcp", body=json.dumps(
            {"jsonrpc": "2.0", "id": 50, "method": "tools/call",
             "params": {"name": "exec", "arguments": {"sandbox_id": sid, "command": "sleep 42"}}}),
            headers={"Authorization": f"Bearer {key}", "Accept": c.ACCEPT,
                     "Content-Type": "application/json", "Mcp-Session-Id": c.sid})
        r = conn.getresponse()
        assert r.status == 200 and r.getheader("Content-Type") == "text/event-stream"
        api = server.api(key)
        wait_for(lambda: running(api, sid, "sleep 42") == 1, 10)
        conn.sock.shutdown(socket.SHUT_RDWR)
        conn.close()
        wait_for(lambda: running(api, sid, "sleep 42") == 0, 10)
        assert c.request("ping")["result"] == {}
    finally:
        c.close()


def test_http_delete_mid_task_ends_it_all(server, key):
    c = HttpMcp(server.port, key).initialize()
    sid = c.call("create", {"timeout_s": 120})["result"]["structuredContent"]["sandbox_id"]
    t = c.request("tools/call", {"name": "exec", "task": {"ttl": 60000},
                                 "arguments": {"sandbox_id": sid, "command": "sleep 43"}})
    assert t["result"]["task"]["status"] == "working"
    t0 = time.monotonic()
    assert c.delete().status == 204
    assert time.monotonic() - t0 < 1
    wait_for(lambda: sandboxes(server.api(key)) == [], 10)
    c.sid = None


def test_integer_valued_numbers_are_integers(mcp):
    """JSON Schema counts 2.0 as an integer, and so does the checker: the
    tool must then use it as the integer it is."""
    wrong = []
    made = mcp.call("create", {"timeout_s": 120, "memory_mb": 256.0})["result"]
    if made["isError"]:
        wrong.append(("create memory_mb 256.0", text(made)))
    sid = mcp.call("create", {"timeout_s": 120})["result"]["structuredContent"]["sandbox_id"]
    pid = mcp.call("exec_start", {"sandbox_id": sid, "command": "sleep 45"})["result"]["structuredContent"]["pid"]
    got = mcp.call("exec_signal", {"sandbox_id": sid, "pid": float(pid), "signal": 9.0})["result"]
    if got["isError"]:
        wrong.append((f"exec_signal pid {float(pid)} signal 9.0", text(got)))
    assert not wrong, wrong


def test_progress_comes_before_its_answer(mcp):
    """Each piece of output is a progress notification sent before the
    answer, every time (a client drops what comes after)."""
    sid = mcp.call("create", {"timeout_s": 120})["result"]["structuredContent"]["sandbox_id"]
    for i in range(10):
        notes, final = mcp.progress_call("exec", {"sandbox_id": sid, "command": "echo 1; echo e >&2"},
                                         f"p{i}")
        assert [n["method"] for n in notes] == ["notifications/progress"] * 2, (i, notes)
        assert [n["params"]["progressToken"] for n in notes] == [f"p{i}"] * 2
        assert [n["params"]["message"] for n in notes] == ["1\n", "[stderr] e\n"], notes
        assert [n["params"]["progress"] for n in notes] == [1, 2]
        assert "exit code 0" in text(final["result"])
