"""The Python SDK (sdk/python/hutch) against a real server, and the
example agent script."""
import os
import subprocess
import sys
import time

import pytest

from conftest import BUILD, ROOT
from serveapi import Server

sys.path.insert(0, str(ROOT / "sdk" / "python"))
import hutch  # noqa: E402
from hutch import Sandbox  # noqa: E402


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    # test_network's origin listens on the host's loopback, which the deny
    # floor keeps sandboxes from unless the operator lifts it.
    s = Server(BUILD / "hutch-serve", tmp_path_factory.mktemp("sdk") / "state",
               "--egress-permit", "127.0.0.1").start()
    yield s
    assert s.stop() == 0


@pytest.fixture
def env(server, monkeypatch):
    monkeypatch.setenv("HUTCH_API_URL", f"http://127.0.0.1:{server.port}")
    monkeypatch.setenv("HUTCH_API_KEY", server.admin_key)
    return server


def test_create_run_kill(env):
    with Sandbox.create(timeout=60, memory_mb=256, envs={"GREETING": "hi"},
                        metadata={"suite": "sdk"}) as sbx:
        seen = []
        r = sbx.commands.run("echo $GREETING; echo oops >&2; exit 4", on_stdout=seen.append)
        assert (r.stdout, r.stderr, r.exit_code, r.status) == ("hi\n", "oops\n", 4, "nonzero")
        assert "".join(seen) == "hi\n" and not r.ok
        r = sbx.commands.run(["python3", "-c", "import os; print(os.getcwd())"], cwd="/tmp")
        assert r.ok and r.stdout == "/tmp\n" and r.wall_ms > 0 and r.escape_attempts == 0
        r = sbx.commands.run("unshare -U true")  # refused: a user namespace
        assert not r.ok and r.escape_attempts == 1, (r, r.verdict)
        assert sbx.commands.run("cat", stdin="piped").stdout == "piped"
        (made,) = sbx.commands.run("echo report > report.md").artifacts
        assert (made.path, made.size, made.mime_type) == ("/home/user/report.md", 7,
                                                           "text/markdown")
        assert made.read() == b"report\n"
        assert [s["id"] for s in Sandbox.list(metadata={"suite": "sdk"})] == [sbx.id]
        assert Sandbox.connect(sbx.id).id == sbx.id
        before = sbx.info["expires_at"]
        sbx.set_timeout(3600)
        assert sbx.info["expires_at"] > before
        sid = sbx.id
    with pytest.raises(hutch.NotFound):
        Sandbox.connect(sid)


def test_pause_resume_metrics_usage(env):
    with Sandbox.create(timeout=60, auto_resume=False) as sbx:
        sbx.commands.run("sleep 600", background=True)
        assert sbx.pause()["state"] == "paused" and sbx.info["state"] == "paused"
        with pytest.raises(hutch.HutchError) as e:
            sbx.commands.run("true")
        assert e.value.status == 409 and e.value.code == "sandbox_paused"
        assert [s["state"] for s in Sandbox.list() if s["id"] == sbx.id] == ["paused"]
        assert sbx.resume(timeout=120)["state"] == "running"
        assert sbx.commands.run("echo on").stdout == "on\n"
        m = sbx.get_metrics()
        assert m["current"]["memory_limit_bytes"] == 1024 << 20 and m["current"]["pids"] >= 2
    assert Sandbox.usage()["sandbox_seconds"] > 0


def test_snapshot_fork(env):
    with Sandbox.create(timeout=60, envs={"K": "v"}) as sbx:
        sbx.files.write("/home/user/x", "1")
        snap = sbx.snapshot(name="sdk")
        assert snap["name"] == "sdk" and snap["id"] in [s["id"] for s in Sandbox.list_snapshots()]
        with Sandbox.create(template=snap["id"], timeout=60) as copy:
            assert copy.files.read("/home/user/x") == "1"
        forks = sbx.fork(2)
        try:
            assert [f.commands.run("cat /home/user/x; echo $K").stdout for f in forks] == \
                ["1v\n", "1v\n"]
        finally:
            for f in forks:
                f.kill()
        Sandbox.delete_snapshot(snap["id"])
        with pytest.raises(hutch.NotFound):
            Sandbox.delete_snapshot(snap["id"])


def test_volumes(env):
    Sandbox.create_volume("sdk-vol", 16)
    with Sandbox.create(timeout=60, volumes={"/data": "sdk-vol"}) as sbx:
        sbx.files.write("/data/x", "kept")
    with Sandbox.create(timeout=60, volumes=[{"name": "sdk-vol", "path": "/v",
                                              "read_only": True}]) as sbx:
        assert sbx.files.read("/v/x") == "kept"
    assert [v["name"] for v in Sandbox.list_volumes()] == ["sdk-vol"]
    Sandbox.delete_volume("sdk-vol")
    assert Sandbox.list_volumes() == []


def test_network(env, server):
    import http.client
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
    import threading
    seen = []

    class H(BaseHTTPRequestHandler):
        def do_GET(self):
            seen.append(self.headers.get("X-Key"))
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, *a):
            pass

    origin = ThreadingHTTPServer(("127.0.0.1", 0), H)
    threading.Thread(target=origin.serve_forever, daemon=True).start()
    port = origin.server_address[1]
    curl = f"curl --noproxy '' -sS -o /dev/null -w '%{{http_code}}' http://localhost:{port}/"
    try:
        with Sandbox.create(timeout=60, network={"allow": [f"localhost:{port}"]},
                            secrets=[{"host": "localhost", "header": "X-Key", "value": "sdk",
                                      "http_ports": [port]}]) as sbx:
            assert sbx.info["network"]["allow"] == [f"localhost:{port}"]
            assert sbx.commands.run(curl).stdout == "200" and seen == ["sdk"]
            assert sbx.set_network(mode="none")["mode"] == "none"
            assert sbx.commands.run(curl).stdout == "403"
            assert sbx.get_host(8000) == f"8000-{sbx.id}.localhost:{server.port}"
            sbx.commands.run("python3 -m http.server 8000 --directory /etc", background=True)
            sbx.set_network(public_ports=[8000])
            deadline = time.monotonic() + 60  # python3 starting, in an emulated guest too
            while True:
                c = http.client.HTTPConnection("127.0.0.1", server.port)
                c.request("GET", "/hostname", headers={"Host": sbx.get_host(8000)})
                r = c.getresponse()
                body = r.read()
                c.close()
                if r.status == 200 or time.monotonic() > deadline:
                    break
                time.sleep(0.05)
            assert body.strip() and r.status == 200
            assert len(sbx.traffic_token) == 40
            with pytest.raises(hutch.InvalidArgument):
                sbx.set_network(allow=["bad host"])
    finally:
        origin.shutdown()
        origin.server_close()


def test_typed_errors(env, server):
    with pytest.raises(hutch.AuthError):
        Sandbox.create(api_key="hk_" + "1" * 40)
    with pytest.raises(hutch.InvalidArgument):
        Sandbox.create(memory_mb=1)
    with pytest.raises(hutch.NotFound):
        Sandbox.create(template="nope")
    key = server.api().post("/v1/keys", {"tenant": "sdk-quota", "max_sandboxes": 0}).json["key"]
    with pytest.raises(hutch.RateLimited) as e:
        Sandbox.create(api_key=key)
    assert e.value.retry_after == 1 and e.value.code == "quota_exceeded"
    with Sandbox.create() as sbx:
        with pytest.raises(hutch.Timeout):
            sbx.commands.run("sleep 30", timeout=0.3)
        with pytest.raises(hutch.CommandExitError) as e:
            sbx.commands.run("exit 3", check=True)
        assert e.value.result.exit_code == 3
        sbx.kill()  # killed inside the block: leaving it is still fine


def test_background_commands(env):
    with Sandbox.create() as sbx:
        h = sbx.commands.run("echo up; cat; echo down", background=True, keep_stdin=True)
        assert h.pid > 0
        assert [p["pid"] for p in sbx.commands.list() if p["running"]] == [h.pid]
        h.send_stdin("ping\n", eof=True)
        seen = []
        r = sbx.commands.connect(h.pid).wait(on_stdout=seen.append)
        assert r.stdout == "up\nping\ndown\n" and r.ok and "".join(seen) == r.stdout
        h2 = sbx.commands.run(["sleep", "100"], background=True)
        h2.kill()
        assert (h2.wait().status, h2.wait().signal) == ("signaled", 9)
        with pytest.raises(hutch.HutchError) as e:
            h2.send_stdin("x")
        assert e.value.status == 409
        with pytest.raises(hutch.NotFound):
            sbx.commands.connect(99999).wait()


def test_files(env, tmp_path):
    with Sandbox.create() as sbx:
        f = sbx.files
        assert f.write("notes/a.txt", "caf\u00e9") == {"path": "notes/a.txt", "size": 5}
        assert f.read("notes/a.txt") == "caf\u00e9"
        big = tmp_path / "big"
        big.write_bytes(bytes(range(256)) * 40000)
        with open(big, "rb") as src:
            assert f.write("/tmp/big", src)["size"] == big.stat().st_size
        assert b"".join(f.read("/tmp/big", format="stream")) == big.read_bytes()
        assert f.read("/tmp/big", format="bytes") == big.read_bytes()
        assert f.make_dir("/tmp/d/e") is True and f.make_dir("/tmp/d/e") is False
        f.rename("notes/a.txt", "/tmp/d/b.txt")
        assert sorted(e["name"] for e in f.list("/tmp/d")) == ["b.txt", "e"]
        assert f.exists("/tmp/d/b.txt") and not f.exists("notes/a.txt")
        assert f.get_info("/tmp/d/b.txt")["size"] == 5
        with pytest.raises(hutch.HutchError) as e:
            f.remove("/tmp/d")
        assert e.value.code == "not_empty"
        f.remove("/tmp/d", recursive=True)
        assert not f.exists("/tmp/d")
        with pytest.raises(hutch.NotFound):
            f.read("/nope")
        with pytest.raises(hutch.PermissionDenied):
            f.write("/etc/passwd", "x")


def test_files_watch(env):
    with Sandbox.create() as sbx:
        sbx.files.make_dir("/tmp/obs")
        events = sbx.files.watch("/tmp/obs", recursive=True)  # watching from here on
        sbx.commands.run(["touch", "/tmp/obs/new"])
        ev = next(events)
        assert (ev["type"], ev["path"], ev["dir"]) == ("create", "/tmp/obs/new", False)
        events.close()


def test_example_agent(env):
    r = subprocess.run([sys.executable, str(ROOT / "examples" / "agent.py")],
                       env={**os.environ, "PYTHONPATH": str(ROOT / "sdk" / "python")},
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r
    assert "attempt 1: nonzero (exit 1): NameError" in r.stdout
    assert "attempt 2: ok" in r.stdout and "answer 2.5" in r.stdout
    assert "kept for the next prompt: ['attempt-1.txt']" in r.stdout


def test_run_code_and_contexts(env):
    with Sandbox.create() as sbx:
        out = []
        ex = sbx.run_code("x = 6\nprint('side')\nx * 7", on_stdout=out.append)
        assert ex.text == "42" and ex.logs.stdout == ["side\n"] == out and ex.error is None
        assert ex.execution_count == 1
        ex = sbx.run_code("import pandas as pd\npd.DataFrame({'a': [1]})")
        assert "<table" in ex.results[0].html and ex.results[0].is_main_result
        ex = sbx.run_code("1 / 0")
        assert ex.error.name == "ZeroDivisionError" and "1 / 0" in ex.error.traceback
        ex = sbx.run_code("import time\ntime.sleep(30)", timeout=0.5)
        assert ex.error.name == "TimeoutError"
        assert sbx.run_code("x").text == "6"
        # The files a cell made or changed, and only those, downloadable.
        ex = sbx.run_code("import matplotlib.pyplot as plt\nplt.plot([1, 2])\n"
                          "plt.savefig('plot.png')\nplt.close()\n"
                          "open('/tmp/out.csv', 'w').write('a,b\\n')")
        got = {a.path: a for a in ex.artifacts}
        assert {"/home/user/plot.png", "/tmp/out.csv"} <= set(got), ex.artifacts
        assert (got["/tmp/out.csv"].size, got["/tmp/out.csv"].mime_type) == (4, "text/csv")
        assert got["/home/user/plot.png"].mime_type == "image/png"
        assert got["/home/user/plot.png"].read().startswith(b"\x89PNG")
        assert sbx.run_code("x").artifacts == []
        js = sbx.create_code_context(language="javascript")
        assert sbx.run_code("let y = 2; y + 1", context=js).text == "3"
        assert sbx.run_code("y * 10", context=js.id).text == "20"
        assert js.id in [c.id for c in sbx.list_code_contexts()]
        sbx.restart_code_context(js)
        assert sbx.run_code("typeof y", context=js).text == "undefined"
        sbx.remove_code_context(js)
        with pytest.raises(hutch.NotFound):
            sbx.run_code("1", context=js)
        py = sbx.create_code_context()
        sbx.run_code("v = [1]", context=py)
        copy = sbx.fork_code_context(py)
        assert sbx.run_code("v.append(2); v", context=copy).text == "[1, 2]"
        assert sbx.run_code("v", context=py).text == "[1]"
