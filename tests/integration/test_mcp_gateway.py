"""share/mcp-gateway/mcp-gateway on the host, no sandbox (docs/mcp-gateway.md):
its config, its start (detached, ready or failed with the reason), its
HTTP endpoint's refusals, its routing, and its bounds. The servers are
tests/e2b/mcp-echo/server.py; a clone comes from a local repository that
git's insteadOf puts where https://github.com/ would be (no network).
tests/e2b/mcp.test.mjs runs the same gateway in a sandbox with E2B's SDK."""
import http.client
import json
import os
import pathlib
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest

pytestmark = pytest.mark.userspace  # a program on the host: no kernel or cgroup in it

ROOT = pathlib.Path(__file__).resolve().parents[2]
GATEWAY = ROOT / "share" / "mcp-gateway" / "mcp-gateway"
ECHO = ROOT / "tests" / "e2b" / "mcp-echo" / "server.py"
TOKEN = "test-token-0123456789"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Gateway:
    """A gateway's dirs, its command line, and a client of its endpoint."""

    def __init__(self, tmp):
        self.tmp = tmp
        self.etc, self.opt = tmp / "etc", tmp / "opt"
        (self.etc / "catalog").mkdir(parents=True)
        for repo in ("hutch-tests/echo", "hutch-tests/twin", "other/echo"):
            d = self.opt / "github" / repo
            d.mkdir(parents=True)
            shutil.copy(ECHO, d / "server.py")
        self.port = free_port()
        self.env = dict(os.environ, MCP_GATEWAY_ETC=str(self.etc), MCP_GATEWAY_OPT=str(self.opt),
                        GATEWAY_ACCESS_TOKEN=TOKEN,
                        PATH=f"{pathlib.Path(sys.executable).parent}:{os.environ['PATH']}")
        self.pids = []
        self.sid = None

    def run(self, config, *args, timeout=60):
        cmd = [sys.executable, str(GATEWAY), "--listen", f"127.0.0.1:{self.port}",
               "--config", json.dumps(config), *args]
        p = subprocess.run(cmd, env=self.env, capture_output=True, text=True, timeout=timeout)
        if p.returncode == 0:
            self.pids.append(int((self.etc / "gateway.pid").read_text()))
        return p

    def start(self, config, *args):
        p = self.run(config, *args)
        assert p.returncode == 0, p.stderr
        return p

    def stop(self):
        for pid in self.pids:
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                continue
            for _ in range(600):  # its servers' own ends first, on a busy host too
                if not alive(pid):
                    break
                time.sleep(0.05)
        self.pids = []

    def request(self, method="POST", body=None, headers=None, raw=None, path="/mcp"):
        h = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json",
             "Accept": "application/json, text/event-stream"}
        if self.sid:
            h["Mcp-Session-Id"] = self.sid
        h.update(headers or {})
        h = {k: v for k, v in h.items() if v is not None}
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        c.request(method, path, body=data, headers=h)
        r = c.getresponse()
        text = r.read()
        c.close()
        return r.status, dict(r.getheaders()), json.loads(text) if text else None

    def initialize(self):
        self.sid = None
        status, headers, body = self.request(body={
            "jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                       "clientInfo": {"name": "test", "version": "1"}}})
        assert status == 200, body
        self.sid = headers["Mcp-Session-Id"]
        return body["result"]

    def rpc(self, method, params=None, rid=2):
        status, _, body = self.request(body={"jsonrpc": "2.0", "id": rid, "method": method,
                                             "params": params or {}})
        assert status == 200, body
        assert body["id"] == rid
        return body

    def call(self, name, **arguments):
        return self.rpc("tools/call", {"name": name, "arguments": arguments})["result"]

    def tools(self):
        return sorted(t["name"] for t in self.rpc("tools/list")["result"]["tools"])


def alive(pid):
    """Whether pid runs (a zombie its reaper has not collected yet does not)."""
    try:
        stat = pathlib.Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    fields = stat.rsplit(")", 1)[-1].split()  # empty while the process is being reaped
    return bool(fields) and fields[0] != "Z"


def text(result):
    return "".join(c["text"] for c in result["content"])


def servers_in(directory):
    """Processes whose working directory is directory (a server there)."""
    found = []
    for p in pathlib.Path("/proc").iterdir():
        try:
            if p.name.isdigit() and os.readlink(p / "cwd") == str(directory):
                found.append(int(p.name))
        except OSError:
            pass
    return found


@pytest.fixture
def gw(tmp_path):
    g = Gateway(tmp_path)
    yield g
    g.stop()


ECHO_CFG = {"github/hutch-tests/echo": {"runCmd": "python3 server.py",
                                        "envs": {"ECHO_PREFIX": "e:", "EXTRA": "x"}},
            "github/hutch-tests/twin": {"runCmd": "python3 server.py --only echo,env",
                                        "envs": {"ECHO_PREFIX": "t:"}}}


def test_starts_detached_and_serves_every_server_as_one(gw):
    p = gw.start(ECHO_CFG)
    assert "serving 8 tools of echo (6 tools), twin (2 tools)" in p.stdout
    pid = gw.pids[0]
    assert os.getsid(pid) != os.getsid(0), "the gateway runs in a session of its own"
    token = gw.etc / ".token"
    assert token.read_text() == TOKEN
    assert token.stat().st_mode & 0o777 == 0o600

    init = gw.initialize()
    assert init["protocolVersion"] == "2025-11-25"
    assert init["serverInfo"]["name"] == "hutch-mcp-gateway"
    assert init["capabilities"] == {"tools": {"listChanged": False}}
    # echo and env are the names both servers have: each with its server's name.
    assert gw.tools() == sorted(["echo__echo", "twin__echo", "echo__env", "twin__env",
                                 "add", "fail", "sleep", "exit"])
    assert text(gw.call("echo__echo", text="hi")) == "e:hi"
    assert text(gw.call("twin__echo", text="hi")) == "t:hi"
    assert gw.call("add", a=1, b=2)["structuredContent"] == {"sum": 3}
    env = json.loads(text(gw.call("echo__env")))
    assert env["EXTRA"] == "x"
    assert env["token_seen"] is False
    assert env["cwd"] == str(gw.opt / "github/hutch-tests/echo")

    servers = servers_in(gw.opt / "github/hutch-tests/echo") + \
        servers_in(gw.opt / "github/hutch-tests/twin")
    assert len(servers) >= 2  # each python3, and its shell where sh does not exec it
    gw.stop()
    assert not alive(pid)
    assert not [s for s in servers if alive(s)], \
        "SIGTERM ends the gateway's servers too"


def test_http_refusals(gw):
    gw.start(ECHO_CFG, "--max-body", "2000")
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}
    status, headers, body = gw.request(body=init, headers={"Authorization": None})
    assert status == 401 and headers["WWW-Authenticate"].startswith("Bearer")
    assert "Authorization: Bearer" in body["error"]["message"]
    assert gw.request(body=init, headers={"Authorization": f"Bearer {TOKEN}x"})[0] == 401
    assert gw.request(body=init, headers={"Authorization": TOKEN})[0] == 401
    assert gw.request(body=init, path="/other")[0] == 404

    assert gw.request(body={"jsonrpc": "2.0", "id": 2, "method": "tools/list"})[0] == 400
    gw.initialize()
    sid = gw.sid
    gw.sid = "f" * 32
    status, _, body = gw.request(body={"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
    assert status == 404 and "initialize again" in body["error"]["message"]
    gw.sid = sid
    ping = {"jsonrpc": "2.0", "id": 3, "method": "ping"}
    assert gw.request(body=ping, headers={"MCP-Protocol-Version": "1999-01-01"})[0] == 400
    assert gw.request(body=ping, headers={"MCP-Protocol-Version": "2025-06-18"})[2]["result"] == {}
    assert gw.request(raw=b"x" * 2001)[0] == 413
    assert gw.request(raw=b"{}", headers={"Content-Type": "text/plain"})[0] == 415
    status, _, body = gw.request(raw=b"{not json")
    assert status == 400 and body["error"]["code"] == -32700
    status, _, body = gw.request(body=[ping, ping])
    assert status == 400 and "batches" in body["error"]["message"]
    assert gw.request(body={"jsonrpc": "2.0", "method": "notifications/initialized"})[0] == 202

    c = http.client.HTTPConnection("127.0.0.1", gw.port, timeout=10)
    c.putrequest("POST", "/mcp")
    for k, v in (("Authorization", f"Bearer {TOKEN}"), ("Transfer-Encoding", "chunked"),
                 ("Content-Type", "application/json"), ("Mcp-Session-Id", sid)):
        c.putheader(k, v)
    c.endheaders()
    assert c.getresponse().status == 411
    c.close()

    assert gw.rpc("resources/list")["error"]["code"] == -32601
    assert gw.rpc("tools/call", {"name": "nosuch"})["error"]["message"] == "Unknown tool: nosuch"
    assert gw.rpc("tools/call", {"name": "add", "arguments": [1]})["error"]["code"] == -32602
    assert gw.rpc("tools/list", {"cursor": "x"})["error"]["code"] == -32602
    status, headers, _ = gw.request("GET")
    assert status == 405 and headers["Allow"] == "POST, DELETE"
    assert gw.request("DELETE")[0] == 204
    assert gw.request(body=ping)[0] == 404, "the session ended"


def test_errors_timeouts_and_a_dead_server_are_results(gw):
    gw.start(ECHO_CFG, "--call-timeout", "1")
    gw.initialize()
    failed = gw.call("fail", message="bad input")
    assert failed["isError"] is True
    assert text(failed) == "echo: bad input (JSON-RPC error -32000)"

    t0 = time.monotonic()
    slow = gw.call("sleep", seconds=30)
    assert slow["isError"] is True and "no answer to sleep within 1 s" in text(slow)
    assert time.monotonic() - t0 < 10
    assert text(gw.call("add", a=1, b=1)) == "2", "the server goes on after a timeout"

    gone = gw.call("exit", status=3)
    assert gone["isError"] is True
    assert "echo: the server is not running: exited with status 3" in text(gone)
    assert "not running" in text(gw.call("add", a=1, b=1))
    assert text(gw.call("twin__echo", text="on")) == "t:on"


def test_a_cancelled_call_ends_at_once(gw):
    gw.start(ECHO_CFG)
    gw.initialize()
    answer = {}
    t = threading.Thread(target=lambda: answer.update(gw.rpc("tools/call", {
        "name": "sleep", "arguments": {"seconds": 60}}, rid="slow")))
    t0 = time.monotonic()
    t.start()
    time.sleep(0.5)
    status = gw.request(body={"jsonrpc": "2.0", "method": "notifications/cancelled",
                              "params": {"requestId": "slow", "reason": "enough"}})[0]
    assert status == 202
    t.join(20)
    assert time.monotonic() - t0 < 10
    assert answer["result"]["isError"] is True
    assert "cancelled by the client" in text(answer["result"])


def test_servers_of_the_same_name_are_told_apart(gw):
    gw.start({"github/hutch-tests/echo": {"runCmd": "python3 server.py --only echo"},
              "github/other/echo": {"runCmd": "python3 server.py --only echo,add"}})
    gw.initialize()
    assert gw.tools() == ["add", "hutch-tests_echo__echo", "other_echo__echo"]


def test_start_failures_say_why(gw):
    p = gw.run({"github/hutch-tests/echo": {"runCmd": "echo oops >&2; exit 4"}})
    assert p.returncode == 1
    assert "github/hutch-tests/echo: exited with status 4" in p.stderr
    assert "oops" in p.stderr

    t0 = time.monotonic()
    p = gw.run({"github/hutch-tests/echo": {"runCmd": "sleep 60"}}, "--start-timeout", "1")
    assert p.returncode == 1 and "did not answer initialize" in p.stderr
    assert time.monotonic() - t0 < 15

    for cfg, said in (
            ("{", "--config is not JSON"),
            ({}, "at least one server"),
            ({"github/hutch-tests/echo": {}}, "runCmd is required"),
            ({"github/hutch-tests/echo": {"runCmd": "x", "cmd": 1}}, "unknown field(s) cmd"),
            ({"github/a/b/c": {"runCmd": "x"}}, "github/OWNER/REPO"),
            ({"github/../x": {"runCmd": "x"}}, "github/OWNER/REPO"),
            ({"github/a/b": {"runCmd": "x", "envs": {"A": 1}}}, "envs: must be an object of strings"),
            ({"../etc": {}}, "not a server name"),
            ({"brave": {"braveApiKey": "k"}}, "brave: this template has no catalog entry")):
        p = gw.run(cfg) if not isinstance(cfg, str) else subprocess.run(
            [sys.executable, str(GATEWAY), "--config", cfg], env=gw.env, capture_output=True,
            text=True, timeout=30)
        assert p.returncode == 2, (cfg, p.stderr)
        assert said in p.stderr, (cfg, p.stderr)
    assert "Docker Hub" in p.stderr

    gw.start({"github/hutch-tests/echo": {"runCmd": "python3 server.py"}})
    p = gw.run({"github/hutch-tests/twin": {"runCmd": "python3 server.py"}})
    assert p.returncode == 1 and "cannot listen on" in p.stderr
    assert "a gateway runs already" in p.stderr


def test_catalog_entries_and_pull(gw):
    entry = {"command": [sys.executable, str(ECHO), "--only", "env"], "env": {"FROM_CATALOG": "yes"}}
    (gw.etc / "catalog" / "echoCat.json").write_text(json.dumps(entry))
    (gw.etc / "catalog" / "odd.json").write_text(json.dumps(dict(entry, image="mcp/odd")))
    gw.start({"echoCat": {"githubPersonalAccessToken": "ghp_x", "portList": [1, 2],
                          "FROM_CATALOG": "overridden?"}})
    gw.initialize()
    env = json.loads(text(gw.call("env")))
    assert env["GITHUB_PERSONAL_ACCESS_TOKEN"] == "ghp_x"
    assert env["PORT_LIST"] == "[1,2]"
    assert env["FROM_CATALOG"] == "overridden?", "a config value wins over the entry's env"
    assert env["cwd"] == "/"
    gw.stop()

    p = gw.run({"odd": {}})
    assert p.returncode == 2 and "unknown field(s) image" in p.stderr

    pull = lambda *names: subprocess.run([sys.executable, str(GATEWAY), "pull", *names],
                                         env=gw.env, capture_output=True, text=True, timeout=30)
    p = pull("echoCat")
    assert p.returncode == 0 and "echoCat: the template's own" in p.stdout
    p = pull("echoCat", "brave", "../x")
    assert p.returncode == 1
    assert "pull: brave: this template has no catalog entry" in p.stderr
    assert "pull: ../x: not a server name" in p.stderr
    assert pull().returncode == 2


def git(*args, cwd):
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, timeout=30,
                   env=dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t",
                            GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@t"))


def test_a_repository_not_in_the_template_is_cloned_and_installed_once(gw):
    remote = gw.tmp / "remote"
    repo = remote / "someone" / "tools"
    repo.mkdir(parents=True)
    shutil.copy(ECHO, repo / "server.py")
    git("init", "-q", cwd=repo)
    git("add", ".", cwd=repo)
    git("commit", "-q", "-m", "server", cwd=repo)
    # git's insteadOf puts the local repositories where github.com's are.
    gw.env.update(GIT_CONFIG_COUNT="1", GIT_CONFIG_KEY_0=f"url.file://{remote}/.insteadOf",
                  GIT_CONFIG_VALUE_0="https://github.com/")
    count = gw.tmp / "installs"
    cfg = {"github/someone/tools": {"runCmd": "python3 server.py --only echo",
                                    "installCmd": f"echo run >> {count}; test -f server.py"}}
    gw.start(cfg)
    assert (gw.opt / "github/someone/tools/server.py").is_file()
    gw.stop()
    gw.port = free_port()
    gw.start(cfg)
    assert count.read_text() == "run\n", "installCmd ran once"
    gw.initialize()
    assert gw.tools() == ["echo"]

    gw.stop()
    p = gw.run({"github/someone/absent": {"runCmd": "true"}})
    assert p.returncode == 1
    assert "cloning it failed (it needs the sandbox's egress to allow github.com" in p.stderr
    assert not (gw.opt / "github/someone/absent").exists()
    p = gw.run({"github/someone/tools": {"runCmd": "true", "installCmd": "echo broke; exit 9"}})
    assert p.returncode == 1 and "installCmd: exited with status 9" in p.stderr
    assert "broke" in p.stderr
