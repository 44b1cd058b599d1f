"""hutch serve, driven over HTTP: sandbox lifecycle, streamed exec, keys and
tenants, the timeout reaper, the audit log, overload and bad input. Each
test runs against the normal and the sanitizer build of the server."""
import datetime
import http.client
import json
import os
import pathlib
import re
import signal
import socket
import time

import pytest

from conftest import BUILD, ROOT, leftovers, serve_each_build
from serveapi import Server, WebSocket, audit_log, error_of, output, wait_for


@pytest.fixture(scope="module", params=["build", "asan"])
def server(request, tmp_path_factory):
    yield from serve_each_build(request, tmp_path_factory)


@pytest.fixture
def api(server):
    return server.api()


@pytest.fixture
def sandbox(api):
    """A sandbox of the admin tenant, deleted after the test."""
    sb = api.create()
    yield sb
    api.delete(f"/v1/sandboxes/{sb['id']}")


# ---- lifecycle ----

def test_healthz_needs_no_key(server):
    r = server.api(None).get("/healthz")
    # It says the server's version (hutch version shows it): meson.build's.
    version = re.search(r"version: '([^']+)'", (ROOT / "meson.build").read_text()).group(1)
    assert r.status == 200 and r.json == {"status": "ok", "version": version}


def test_create_get_list_delete(api):
    sb = api.create(metadata={"owner": "t1", "run": "a"}, memory_mb=256, cpus=0.5, pids=64,
                    disk_mb=32, timeout_s=60)
    sid = sb["id"]
    assert sb["state"] == "running" and sb["template"] == "host"
    assert (sb["memory_mb"], sb["cpus"], sb["pids"], sb["disk_mb"]) == (256, 0.5, 64, 32)
    assert sb["metadata"] == {"owner": "t1", "run": "a"}
    assert sb["created_at"] < sb["expires_at"]
    got = api.get(f"/v1/sandboxes/{sid}")
    assert got.status == 200 and got.json == sb
    ids = lambda q: [s["id"] for s in api.get("/v1/sandboxes" + q).json["sandboxes"]]
    assert sid in ids("")
    assert sid in ids("?metadata.owner=t1&state=running")
    assert sid not in ids("?metadata.owner=t2")
    assert sid not in ids("?metadata.missing=x")
    assert sid not in ids("?state=paused")
    r = api.delete(f"/v1/sandboxes/{sid}")
    assert r.status == 204 and r.raw == b""
    assert api.get(f"/v1/sandboxes/{sid}").status == 404
    assert api.delete(f"/v1/sandboxes/{sid}").status == 404
    assert sid not in ids("")


def test_limits_reach_the_sandbox(api):
    sb = api.create(memory_mb=64, pids=32)
    try:
        lines = api.exec(sb["id"], {"shell": "python3 -c 'b = bytearray(200 << 20)'"})
        assert lines[-1]["status"] == "oom", lines[-1]
    finally:
        api.delete(f"/v1/sandboxes/{sb['id']}")


def test_files_persist_between_execs(api, sandbox):
    sid = sandbox["id"]
    api.exec(sid, {"shell": "echo kept > /tmp/state"})
    lines = api.exec(sid, {"cmd": ["cat", "/tmp/state"]})
    assert output(lines) == b"kept\n"


def test_sandbox_env_under_exec_env(api):
    sb = api.create(env={"A": "sandbox", "B": "sandbox"})
    try:
        lines = api.exec(sb["id"], {"shell": "echo $A $B", "env": {"B": "exec"}})
        assert output(lines) == b"sandbox exec\n"
    finally:
        api.delete(f"/v1/sandboxes/{sb['id']}")


# ---- exec ----

def test_tight_pids_limit_with_execs_files_and_root(api):
    # pids=1: one workload process at a time. Execs as the user (the way of
    # the spare the agent forks ahead of an exec, spare.c) and as root (the
    # slow way), and file operations in between, all fit, and pids=2 is two
    # processes of the command's own: nothing forked ahead of time takes a
    # pid the limit gives the workload.
    sb = api.create(pids=1)
    try:
        sid = sb["id"]
        for user in ["user", "root", "user", "user"]:
            lines = api.exec(sid, {"cmd": ["id", "-un"], "user": user})
            assert lines[-1]["status"] == "ok" and output(lines) == f"{user}\n".encode(), lines
            r = api.get(f"/v1/sandboxes/{sid}/files/stat?path=/tmp")
            assert r.status == 200, r
        # sh and its child: two pids. Debian's sh (dash) gives up on the
        # fork's EAGAIN at once, where bash (a "shell" exec's) retries 15 s.
        two = {"cmd": ["sh", "-c", "/bin/true && echo ok"]}
        lines = api.exec(sid, two)
        assert lines[-1]["status"] == "nonzero", lines
        assert b"fork" in output(lines, "stderr").lower(), lines
        sb2 = api.create(pids=2)
        try:
            lines = api.exec(sb2["id"], two)
            assert output(lines) == b"ok\n", lines
        finally:
            api.delete(f"/v1/sandboxes/{sb2['id']}")
    finally:
        api.delete(f"/v1/sandboxes/{sid}")


def test_exec_stream_shape(api, sandbox):
    lines = api.exec(sandbox["id"], {"shell": "echo out; echo err >&2; exit 3"})
    assert lines[0]["type"] == "start" and isinstance(lines[0]["pid"], int)
    assert output(lines) == b"out\n" and output(lines, "stderr") == b"err\n"
    last = lines[-1]
    assert last["type"] == "exit" and last["status"] == "nonzero" and last["exit_code"] == 3
    assert {"signal", "wall_ms", "cpu_ms", "peak_memory_kb", "message"} <= set(last)
    assert [l["type"] for l in lines].count("exit") == 1


def test_exec_reports_the_files_it_made(api, sandbox):
    sid = sandbox["id"]
    api.exec(sid, {"shell": "mkdir -p ~/w && echo old > ~/w/old.txt"})
    lines = api.exec(sid, {"shell": "echo 1 > a.csv && mkdir -p d/.cache && "
                                    "printf 12 > d/b.png && echo x > d/.cache/c && "
                                    "ln -s /etc/passwd link && echo t > /tmp/t.json && "
                                    "echo h > ~/h.txt", "cwd": "/home/user/w/"})
    assert lines[-1]["status"] == "ok", lines
    assert lines[-1]["artifacts"] == [
        {"path": "/home/user/h.txt", "size": 2, "mime_type": "text/plain"},
        {"path": "/home/user/w/a.csv", "size": 2, "mime_type": "text/csv"},
        {"path": "/home/user/w/d/b.png", "size": 2, "mime_type": "image/png"},
        {"path": "/tmp/t.json", "size": 2, "mime_type": "application/json"}]
    # one that changes nothing has none, right after (in the same clock
    # tick, maybe) as before; as root, root's home is looked in
    assert "artifacts" not in api.exec(sid, {"shell": "cat ~/w/old.txt"})[-1]
    last = api.exec(sid, {"shell": "echo r > /root/r.bin", "user": "root"})[-1]
    assert last["artifacts"] == [
        {"path": "/root/r.bin", "size": 2, "mime_type": "application/octet-stream"}]
    # a UID without a name has / for a home: not looked in
    last = api.exec(sid, {"shell": "echo n > /tmp/n.txt", "user": "4242"})[-1]
    assert [a["path"] for a in last["artifacts"]] == ["/tmp/n.txt"], last
    last = api.exec(sid, {"shell": "sleep 1 & echo s > /tmp/s.txt", "cwd": "/"})[-1]
    assert [a["path"] for a in last["artifacts"]] == ["/tmp/s.txt"], last
    # From "/", the read-only /usr (190,000 entries on a Debian host) is not
    # looked in: it took the whole budget, and /etc came after it
    last = api.exec(sid, {"shell": "echo e > /etc/made.conf", "user": "root", "cwd": "/"})[-1]
    assert [a["path"] for a in last["artifacts"]] == ["/etc/made.conf"], last


def test_an_execs_artifacts_are_only_what_its_user_can_see(api, sandbox):
    # The agent looks for them itself, with the user's file-system ids: a
    # file root keeps changing in a directory only root may enter shows to
    # a root exec, never to the user's, which sees its own file only.
    sid = sandbox["id"]
    assert api.exec(sid, {"shell": "mkdir -m 700 /tmp/priv", "user": "root"})[-1]["status"] == "ok"
    r = api.post(f"/v1/sandboxes/{sid}/exec", {
        "shell": "while :; do date +%s%N > /tmp/priv/x; sleep 0.02; done", "user": "root",
        "background": True})
    assert r.status == 201, r
    mine = api.exec(sid, {"shell": "sleep 0.2; echo u > /tmp/u.txt"})[-1]
    assert [a["path"] for a in mine["artifacts"]] == ["/tmp/u.txt"], mine
    # (the root exec lasts until the loop has written the file again, however
    # busy the host)
    roots = api.exec(sid, {"shell": 'until [ -s /tmp/priv/x ]; do sleep 0.02; done; '
                                    't=$(cat /tmp/priv/x); '
                                    'while [ "$(cat /tmp/priv/x)" = "$t" ]; do sleep 0.02; done',
                           "user": "root", "cwd": "/root"})[-1]
    assert [a["path"] for a in roots["artifacts"]] == ["/tmp/priv/x"], roots
    # the kernel's file systems are not looked in, the agent's /proc/1 above all
    assert "artifacts" not in api.exec(sid, {"shell": "true", "cwd": "/proc/1"})[-1]
    # nor what a link swapped in for a directory leads to: the agent's own
    # descriptors (its storage's upper layer holds this exec's file), its root
    for target in ("/proc/1/fd/16", "/proc/1/root", "/proc/1/cwd/tmp"):
        assert api.exec(sid, {"shell": "mkdir /tmp/w"})[-1]["status"] == "ok"
        last = api.exec(sid, {"shell": f"echo s > /tmp/swap.txt; cd /; rmdir /tmp/w; "
                                       f"ln -s {target} /tmp/w", "cwd": "/tmp/w"})[-1]
        got = [a["path"] for a in last["artifacts"]]
        assert got == ["/tmp/swap.txt"], (target, last)
        assert api.exec(sid, {"shell": "rm /tmp/w"})[-1]["status"] == "ok"


def test_exec_argv_cwd_user_stdin(api, sandbox):
    sid = sandbox["id"]
    lines = api.exec(sid, {"cmd": ["sh", "-c", "pwd; id -u; cat"], "cwd": "/tmp",
                           "stdin": "from stdin\n"})
    assert output(lines) == b"/tmp\n1000\nfrom stdin\n"
    lines = api.exec(sid, {"cmd": ["id", "-u"], "user": "root"})
    assert output(lines) == b"0\n"


def test_exec_large_stdin_respects_windows(api, sandbox):
    data = "x" * (900 << 10)  # more than the agent's first window of input
    lines = api.exec(sandbox["id"], {"cmd": ["wc", "-c"], "stdin": data})
    assert output(lines).strip() == str(len(data)).encode()


def test_exec_large_output(api, sandbox):
    n = 20 << 20
    lines = api.exec(sandbox["id"], {"shell": f"head -c {n} /dev/zero | tr '\\0' a"},
                     timeout=120)
    assert lines[-1]["status"] == "ok"
    assert output(lines) == b"a" * n


def test_exec_bytes_that_are_not_utf8(api, sandbox):
    # a multi-byte character cut across writes stays text; a bad byte is base64
    lines = api.exec(sandbox["id"], {"shell": "printf '\\xc3'; sleep 0.05; printf '\\xa9\\n'; "
                                              "sleep 0.05; printf '\\xff\\xfe\\n'"})
    assert output(lines) == "é\n".encode() + b"\xff\xfe\n"
    assert any("data_b64" in l for l in lines)
    assert any(l.get("data") == "é\n" for l in lines)


def test_exec_verdicts(api, sandbox):
    sid = sandbox["id"]
    last = api.exec(sid, {"cmd": ["no-such-command"]})[-1]
    assert last["status"] == "nonzero" and last["exit_code"] == 127
    last = api.exec(sid, {"cmd": ["sleep", "30"], "timeout_s": 0.3})[-1]
    assert last["status"] == "timeout", last
    last = api.exec(sid, {"shell": "kill -TERM $$"})[-1]
    assert last["status"] == "signaled" and last["signal"] == signal.SIGTERM


def test_concurrent_execs_on_one_sandbox(api, sandbox):
    sid = sandbox["id"]
    streams = [api.exec_stream(sid, {"shell": f"sleep 0.3; echo {i}"}) for i in range(5)]
    for i, (conn, r) in enumerate(streams):
        lines = [json.loads(l) for l in r.read().splitlines()]
        conn.close()
        assert output(lines) == f"{i}\n".encode() and lines[-1]["status"] == "ok"


def processes_matching(api, sid, start):
    """How many of the sandbox user's processes have a command line that
    starts so (/proc shows a workload no one else's)."""
    lines = api.exec(sid, {"shell": "for f in /proc/[0-9]*/cmdline; do tr '\\0' ' ' <$f; echo; "
                                    f"done | grep -c '^{start}'"})
    return int(output(lines))


def test_client_gone_kills_the_exec(api, sandbox):
    sid = sandbox["id"]
    conn, r = api.exec_stream(sid, {"shell": "echo started; exec sleep 4242"})
    assert json.loads(r.readline())["type"] == "start"
    assert json.loads(r.readline())["data"] == "started\n"
    wait_for(lambda: processes_matching(api, sid, "sleep 4242") == 1)  # exec'd
    conn.sock.shutdown(socket.SHUT_RDWR)
    conn.close()
    wait_for(lambda: processes_matching(api, sid, "sleep 4242") == 0)


def metric(server, name):
    text = server.api().get("/metrics").raw.decode()
    return float(next(l.split()[1] for l in text.splitlines() if l.startswith(name + " ")))


def metric_labeled(server, name, pool):
    text = server.api().get("/metrics").raw.decode()
    return float(next(l.split()[1] for l in text.splitlines()
                      if l.startswith(f'{name}{{pool="{pool}"}} ')))


def test_slow_reader_slows_the_workload_not_the_server(server, api, sandbox):
    sid = sandbox["id"]
    conn, r = api.exec_stream(sid, {"shell": "head -c 100000000 /dev/zero"})
    r.read(1000)  # then stop reading: the workload must block, the server must go on
    wait_for(lambda: metric(server, "hutch_http_queued_bytes") > 0)  # it waits for this client
    rss = lambda: int(next(l for l in open(f"/proc/{server.proc.pid}/status")
                           if l.startswith("VmRSS:")).split()[1])
    before = rss()
    time.sleep(0.5)
    assert server.api().get("/healthz").status == 200
    # what waits for this client: a window's worth, not the 100 MB
    assert metric(server, "hutch_http_queued_bytes") < 2 << 20
    if not server.sanitized:  # ASan's quarantine moves RSS about
        assert rss() - before < 8 << 10  # KiB
    conn.close()


# ---- background processes ----

def start_bg(api, sid, **body):
    r = api.post(f"/v1/sandboxes/{sid}/exec", {"background": True, **body})
    assert r.status == 201 and r.json["background"] is True, r
    return r.json["pid"]


def attach(api, sid, pid):
    r = api.get(f"/v1/sandboxes/{sid}/processes/{pid}/output")
    assert r.status == 200 and r.headers["Content-Type"] == "application/x-ndjson", r
    return [json.loads(l) for l in r.raw.splitlines()]


def test_background_process_outlives_its_request(api, sandbox):
    sid = sandbox["id"]
    pid = start_bg(api, sid, shell="echo early; sleep 0.5; echo late >&2; exit 7")
    procs = api.get(f"/v1/sandboxes/{sid}/processes").json["processes"]
    assert [(p["pid"], p["running"]) for p in procs] == [(pid, True)]
    assert procs[0]["cmd"][-1].startswith("echo early")
    lines = attach(api, sid, pid)  # from the start, though attached late
    assert output(lines) == b"early\n" and output(lines, "stderr") == b"late\n"
    assert lines[-1]["type"] == "exit" and lines[-1]["exit_code"] == 7
    # attaching again after the end replays it
    assert attach(api, sid, pid) == lines
    (p,) = api.get(f"/v1/sandboxes/{sid}/processes").json["processes"]
    assert p["running"] is False and p["exit"]["exit_code"] == 7


def test_background_stdin_signal_kill(api, sandbox):
    sid = sandbox["id"]
    base = f"/v1/sandboxes/{sid}/processes"
    pid = start_bg(api, sid, cmd=["sh", "-c", "cat; echo done"], keep_stdin=True)
    assert api.post(f"{base}/{pid}/stdin", {"data": "one\n"}).status == 204
    assert api.post(f"{base}/{pid}/stdin", {"data": "two\n", "eof": True}).status == 204
    lines = attach(api, sid, pid)
    assert output(lines) == b"one\ntwo\ndone\n" and lines[-1]["status"] == "ok"
    r = api.post(f"{base}/{pid}/stdin", {"data": "late"})
    assert r.status == 409 and error_of(r) == "stdin_closed"
    r = api.post(f"{base}/{pid}/signal", {"signal": 15})
    assert r.status == 409 and error_of(r) == "not_running"

    pid = start_bg(api, sid, shell="trap 'echo got TERM; exit 3' TERM; echo ready; "
                                   "while :; do sleep 0.05; done")
    conn, r = api.request_stream("GET", f"{base}/{pid}/output")
    assert json.loads(r.readline())["data"] == "ready\n"
    assert api.post(f"{base}/{pid}/signal", {"signal": 15}).status == 204
    rest = [json.loads(l) for l in r.read().splitlines()]
    conn.close()
    assert output(rest) == b"got TERM\n" and rest[-1]["exit_code"] == 3

    pid = start_bg(api, sid, cmd=["sleep", "1000"])
    r = api.post(f"{base}/{pid}/stdin", {"data": "x"})
    assert r.status == 409  # started without keep_stdin
    assert api.delete(f"{base}/{pid}").status == 204
    last = attach(api, sid, pid)[-1]
    assert (last["status"], last["signal"]) == ("signaled", 9), last


def test_background_many_readers_and_a_sandbox_that_goes(api):
    sb = api.create()
    sid = sb["id"]
    pid = start_bg(api, sid, shell="echo one; sleep 30")
    readers = [api.request_stream("GET", f"/v1/sandboxes/{sid}/processes/{pid}/output")
               for _ in range(3)]
    for conn, r in readers:
        assert json.loads(r.readline())["data"] == "one\n"
    assert api.delete(f"/v1/sandboxes/{sid}").status == 204
    for conn, r in readers:
        last = json.loads(r.readline())
        conn.close()
        assert last["type"] == "exit" and last["status"] == "sandbox_error"


def test_background_output_kept_is_the_latest(api, sandbox):
    sid = sandbox["id"]
    pid = start_bg(api, sid, shell="seq 1 400000")  # about 2.7 MB, more than is kept
    wait_for(lambda: not api.get(f"/v1/sandboxes/{sid}/processes").json["processes"][0]["running"])
    out = output(attach(api, sid, pid))
    everything = "".join(f"{i}\n" for i in range(1, 400001)).encode()
    # the latest output (whole NDJSON lines of it: about 1 MiB of JSON)
    assert everything.endswith(out) and (512 << 10) < len(out) <= (1 << 20), len(out)


@pytest.mark.parametrize("suffix,method,body,status", [
    ("/processes/999/output", "GET", None, 404),
    ("/processes/abc/output", "GET", None, 404),
    ("/processes/-1", "DELETE", None, 404),
    ("/processes/999/signal", "POST", {"signal": 9}, 404),
])
def test_background_refusals(api, sandbox, suffix, method, body, status):
    r = api.request(method, f"/v1/sandboxes/{sandbox['id']}{suffix}",
                    body=json.dumps(body) if body else None)
    assert r.status == status and error_of(r), r


def test_background_bad_requests(api, sandbox):
    sid = sandbox["id"]
    pid = start_bg(api, sid, cmd=["sleep", "100"])
    base = f"/v1/sandboxes/{sid}"
    for path, body in [(f"/processes/{pid}/signal", {}), (f"/processes/{pid}/signal", {"signal": 0}),
                       (f"/processes/{pid}/signal", {"signal": 65}),
                       (f"/processes/{pid}/signal", {"signal": "TERM"}),
                       (f"/processes/{pid}/stdin", {"data": 5}),
                       ("/exec", {"cmd": ["true"], "keep_stdin": True}),
                       ("/exec", {"cmd": ["true"], "background": "yes"})]:
        r = api.post(base + path, body)
        assert r.status == 400 and error_of(r) == "invalid_argument", (path, body, r)
    api.delete(f"{base}/processes/{pid}")


def test_websocket_pty_session(server, api, sandbox):
    sid = sandbox["id"]
    pid = start_bg(api, sid, cmd=["bash", "--norc", "-i"], pty={"rows": 24, "cols": 80},
                   keep_stdin=True)
    ws = WebSocket(server.port, f"/v1/sandboxes/{sid}/exec/{pid}/ws", server.admin_key)
    assert ws.status == 101 and ws.accepted, ws.head
    ws.send_json({"type": "resize", "rows": 50, "cols": 132})
    ws.send(b"stty size; tty; echo $((6*7))\n", opcode=2)  # binary frame: raw input
    seen = ""
    msgs = ws.messages()
    while "42" not in seen or "50 132" not in seen:
        m = next(msgs)
        assert m["type"] in ("stdout", "stderr"), m
        seen += m.get("data", "")
    assert "/dev/pts/" in seen
    ws.send_json({"type": "stdin", "data": "exit 5\n"})
    rest = list(msgs)  # up to the close frame
    assert rest[-1]["type"] == "exit" and rest[-1]["exit_code"] == 5, rest[-3:]
    ws.close()


def test_websocket_refusals(server, api, sandbox):
    sid = sandbox["id"]
    pid = start_bg(api, sid, cmd=["sleep", "30"])
    ws = WebSocket(server.port, f"/v1/sandboxes/{sid}/exec/{pid}/ws", server.admin_key)
    assert ws.status == 101
    for cmd, code in [({"type": "stdin", "data": "x"}, "stdin_closed"),
                      ({"type": "resize", "rows": 0, "cols": 5}, "invalid_argument"),
                      ({"type": "dance"}, "invalid_argument"), ({"nope": 1}, "invalid_argument")]:
        ws.send_json(cmd)
        m = next(ws.messages())
        assert m["type"] == "error" and m["code"] == code, (cmd, m)
    ws.send("not json")
    assert next(ws.messages())["code"] == "invalid_argument"
    ws.send_json({"type": "signal", "signal": 9})
    last = list(ws.messages())[-1]
    assert (last["type"], last["signal"]) == ("exit", 9)
    ws.close()
    # not a handshake; no such process; another tenant
    r = api.get(f"/v1/sandboxes/{sid}/exec/{pid}/ws")
    assert r.status == 400 and error_of(r) == "invalid_argument"
    assert WebSocket(server.port, f"/v1/sandboxes/{sid}/exec/99999/ws",
                     server.admin_key).status == 404
    other = api.post("/v1/keys", {"tenant": "ws-other"}).json["key"]
    assert WebSocket(server.port, f"/v1/sandboxes/{sid}/exec/{pid}/ws", other).status == 404
    assert WebSocket(server.port, f"/v1/sandboxes/{sid}/exec/{pid}/ws", "hk_x").status == 401


# ---- files ----

def test_files_round_trip(api, sandbox):
    base = f"/v1/sandboxes/{sandbox['id']}/files"
    r = api.request("PUT", base + "?path=/tmp/d/%C3%A9t%C3%A9.txt", body=b"caf\xc3\xa9\n")
    assert r.status == 200 and r.json == {"path": "/tmp/d/été.txt", "size": 6}
    r = api.get(base + "?path=/tmp/d/%C3%A9t%C3%A9.txt")
    assert r.status == 200 and r.raw == "café\n".encode()
    assert r.headers["Content-Type"] == "application/octet-stream"
    st = api.get(base + "/stat?path=/tmp/d/%C3%A9t%C3%A9.txt").json
    assert (st["type"], st["size"], st["uid"]) == ("file", 6, 1000)
    # the sandbox's own commands see it, and what they write is readable
    lines = api.exec(sandbox["id"], {"shell": "cat /tmp/d/*.txt; echo made > ~/made"})
    assert output(lines) == "café\n".encode()
    assert api.get(base + "?path=made").raw == b"made\n"  # relative to /home/user
    assert api.get(base + "?path=/tmp/empty").status == 404
    assert api.request("PUT", base + "?path=/tmp/empty", body=b"").json["size"] == 0
    r = api.get(base + "?path=/tmp/empty")
    assert r.status == 200 and r.raw == b""


def test_files_list_mkdir_move_delete(api, sandbox):
    base = f"/v1/sandboxes/{sandbox['id']}/files"
    assert api.post(base + "/mkdir", {"path": "/tmp/t/a/b", "parents": True}).json == \
        {"created": True}
    assert api.post(base + "/mkdir", {"path": "/tmp/t/a/b"}).json == {"created": False}
    api.request("PUT", base + "?path=/tmp/t/a/f", body=b"x")
    names = lambda q: sorted(e["path"] for e in api.get(base + "/list?path=/tmp/t" + q)
                             .json["entries"])
    assert names("") == ["/tmp/t/a"]
    assert names("&depth=3") == ["/tmp/t/a", "/tmp/t/a/b", "/tmp/t/a/f"]
    assert api.post(base + "/move", {"path": "/tmp/t/a/f", "to": "/tmp/t/g"}).status == 204
    assert names("&depth=3") == ["/tmp/t/a", "/tmp/t/a/b", "/tmp/t/g"]
    r = api.delete(base + "?path=/tmp/t")
    assert r.status == 409 and error_of(r) == "not_empty"
    assert api.delete(base + "?path=/tmp/t&recursive=true").status == 204
    assert api.get(base + "/stat?path=/tmp/t").status == 404


@pytest.mark.parametrize("method,suffix,body,status,code", [
    ("GET", "?path=/etc/shadow", None, 404, "not_found"),
    ("GET", "?path=/proc/1/environ", None, 404, "not_found"),  # the agent is invisible
    ("DELETE", "?path=/etc/passwd", None, 403, "permission_denied"),
    ("PUT", "?path=/usr/bin/evil", b"x", 403, "permission_denied"),
    ("GET", "?path=/tmp", None, 400, "is_a_directory"),
    ("GET", "?path=/dev/zero", None, 400, "invalid"),
    ("GET", "", None, 400, "invalid_argument"),
    ("GET", "?path=", None, 400, "invalid_argument"),
    ("GET", "?path=%zz", None, 400, "invalid_argument"),
    ("GET", "?path=/tmp&user=admin", None, 400, "invalid_argument"),
    ("GET", "/list?path=/tmp&depth=0", None, 400, "invalid_argument"),
    ("GET", "/list?path=/tmp&depth=65", None, 400, "invalid_argument"),
    ("POST", "/mkdir", b"{}", 400, "invalid_argument"),
    ("POST", "/move", b'{"path": "/tmp/x"}', 400, "invalid_argument"),
    ("POST", "/move", b'{"path": "/nope", "to": "/tmp/y"}', 404, "not_found"),
])
def test_files_refuse(api, sandbox, method, suffix, body, status, code):
    r = api.request(method, f"/v1/sandboxes/{sandbox['id']}/files{suffix}", body=body)
    assert r.status == status and error_of(r) == code, r


def test_a_file_written_to_a_fifo_no_one_reads_is_refused(api, sandbox):
    sid = sandbox["id"]
    assert output(api.exec(sid, {"cmd": ["mkfifo", "/tmp/fifo"]})) == b""
    r = api.request("PUT", f"/v1/sandboxes/{sid}/files?path=/tmp/fifo", body=b"x")
    assert r.status == 400 and error_of(r) == "invalid", r
    assert "not a regular file" in r.json["error"]["message"], r


def test_files_watch_sees_what_a_new_directory_already_holds(api, sandbox):
    """mkdir -p makes a directory and its children faster than the watch
    can add a watch for each: what was made before the watch was in place
    is still reported (created, and written when it has content)."""
    sid = sandbox["id"]
    base = f"/v1/sandboxes/{sid}/files"
    api.post(base + "/mkdir", {"path": "/tmp/deep", "parents": True})
    conn, r = api.request_stream("GET", base + "/watch?path=/tmp/deep&recursive=true")
    assert json.loads(r.readline()) == {"type": "ready"}
    api.exec(sid, {"shell": "mkdir -p /tmp/deep/a/b/c && echo x > /tmp/deep/a/b/c/f"})
    want = {("create", "/tmp/deep/a"), ("create", "/tmp/deep/a/b"),
            ("create", "/tmp/deep/a/b/c"), ("create", "/tmp/deep/a/b/c/f"),
            ("write", "/tmp/deep/a/b/c/f")}
    got = set()
    while not want <= got:
        ev = json.loads(r.readline())
        got.add((ev["type"], ev["path"]))
    conn.close()


def test_files_watch_does_not_follow_a_swapped_in_link(api, sandbox):
    """A workload that makes a directory and swaps it for a link to /etc
    before the watch reaches it gets no events for what the link points
    at: the watch names only what is under the watched path."""
    sid = sandbox["id"]
    base = f"/v1/sandboxes/{sid}/files"
    api.post(base + "/mkdir", {"path": "/tmp/sw", "parents": True})
    conn, r = api.request_stream("GET", base + "/watch?path=/tmp/sw&recursive=true")
    assert json.loads(r.readline()) == {"type": "ready"}
    api.exec(sid, {"cmd": ["python3", "-c",
                           "import os\nfor i in range(300):\n    d = f'/tmp/sw/d{i}'\n"
                           "    os.mkdir(d); os.rmdir(d); os.symlink('/etc', d)\n"
                           "open('/tmp/sw/done', 'w').close()\n"]})
    below = []
    while True:
        ev = json.loads(r.readline())
        if ev["path"].count("/") > 3:  # /tmp/sw/dN/... : through a link
            below.append(ev["path"])
        if ev["path"] == "/tmp/sw/done":
            break
    conn.close()
    assert not below, below[:5]


def test_files_watch(api, sandbox):
    sid = sandbox["id"]
    base = f"/v1/sandboxes/{sid}/files"
    api.post(base + "/mkdir", {"path": "/tmp/w/sub", "parents": True})
    conn, r = api.request_stream("GET", base + "/watch?path=/tmp/w&recursive=true")
    assert r.status == 200 and r.getheader("Content-Type") == "application/x-ndjson"
    assert json.loads(r.readline()) == {"type": "ready"}
    api.exec(sid, {"shell": "echo a > /tmp/w/f; mkdir /tmp/w/new; echo b > /tmp/w/new/g; "
                            "echo c > /tmp/w/sub/h; mv /tmp/w/f /tmp/w/f2; rm /tmp/w/sub/h"})
    want = [("create", "/tmp/w/f"), ("write", "/tmp/w/f"), ("create", "/tmp/w/new"),
            ("create", "/tmp/w/new/g"), ("write", "/tmp/w/new/g"), ("create", "/tmp/w/sub/h"),
            ("write", "/tmp/w/sub/h"),
            ("rename", "/tmp/w/f"), ("create", "/tmp/w/f2"), ("remove", "/tmp/w/sub/h")]
    got = []
    while len(got) < len(want):
        ev = json.loads(r.readline())
        if (ev["type"], ev["path"]) not in got:  # writes may come more than once
            got.append((ev["type"], ev["path"]))
    conn.close()
    assert sorted(got) == sorted(want), got
    assert got.index(("rename", "/tmp/w/f")) < got.index(("create", "/tmp/w/f2"))
    # not recursive: only the directory itself
    conn, r = api.request_stream("GET", base + "/watch?path=/tmp/w")
    assert json.loads(r.readline())["type"] == "ready"
    api.exec(sid, {"shell": "echo x > /tmp/w/sub/deep; echo y > /tmp/w/top"})
    assert json.loads(r.readline())["path"] == "/tmp/w/top"
    conn.close()
    r = api.get(base + "/watch?path=/nope")
    assert r.status == 404 and error_of(r) == "not_found"
    # a sandbox that goes while its files are watched and read: the streams
    # end early (cut short), the server goes on
    sb = api.create()
    api.request("PUT", f"/v1/sandboxes/{sb['id']}/files?path=/tmp/big", body=b"z" * (8 << 20))
    watch, wr = api.request_stream("GET", f"/v1/sandboxes/{sb['id']}/files/watch?path=/tmp")
    read, rr = api.request_stream("GET", f"/v1/sandboxes/{sb['id']}/files?path=/tmp/big")
    assert json.loads(wr.readline())["type"] == "ready" and rr.read(10) == b"z" * 10
    assert api.delete(f"/v1/sandboxes/{sb['id']}").status == 204
    for r in (rr, wr):
        with pytest.raises(http.client.IncompleteRead):
            r.read()
    watch.close()
    read.close()
    assert api.get("/healthz").status == 200
    r = api.get(base + "/watch?path=/etc/passwd")
    assert r.status == 400 and error_of(r) == "not_a_directory"


def test_files_quota_is_enforced(api):
    sb = api.create(disk_mb=4)
    try:
        r = api.request("PUT", f"/v1/sandboxes/{sb['id']}/files?path=/tmp/big",
                        body=b"x" * (8 << 20))
        assert r.status == 507 and error_of(r) == "no_space", r
        assert output(api.exec(sb["id"], {"cmd": ["echo", "alive"]})) == b"alive\n"
    finally:
        api.delete(f"/v1/sandboxes/{sb['id']}")


@pytest.fixture(scope="module")
def plain_server(tmp_path_factory):
    """A server of the normal build only (for what takes too long under ASan)."""
    s = Server(BUILD / "hutch-serve", tmp_path_factory.mktemp("plain") / "state").start()
    yield s
    assert s.stop() == 0


def test_files_one_gib_round_trip_in_bounded_memory(plain_server):
    import hashlib
    import http.client
    server = plain_server
    api = server.api()
    sb = api.create(memory_mb=1600, disk_mb=1100)
    path = f"/v1/sandboxes/{sb['id']}/files?path=/tmp/big"
    block = hashlib.sha256(b"hutch").digest() * 2048  # 64 KiB
    n = (1 << 30) // len(block)
    try:
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=300)
        conn.request("PUT", path, body=(block for _ in range(n)), encode_chunked=True,
                     headers=api.headers({"Transfer-Encoding": "chunked"}))
        r = conn.getresponse()
        assert r.status == 200 and json.loads(r.read())["size"] == 1 << 30
        conn.close()
        want = hashlib.sha256(block * 16).hexdigest()  # per MiB
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=300)
        conn.request("GET", path, headers=api.headers())
        r = conn.getresponse()
        assert r.status == 200
        total = 0
        while chunk := r.read(1 << 20):
            if len(chunk) == 1 << 20:
                assert hashlib.sha256(chunk).hexdigest() == want
            total += len(chunk)
        conn.close()
        assert total == 1 << 30
        hwm = int(next(l for l in open(f"/proc/{server.proc.pid}/status")
                       if l.startswith("VmHWM:")).split()[1])
        assert hwm < 64 << 10, f"server peak RSS {hwm} KiB for a 1 GiB round trip"
    finally:
        api.delete(f"/v1/sandboxes/{sb['id']}")


def test_upload_cut_short_leaves_the_server_serving(server, api, sandbox):
    with socket.create_connection(("127.0.0.1", server.port)) as s:
        s.sendall(f"PUT /v1/sandboxes/{sandbox['id']}/files?path=/tmp/part HTTP/1.1\r\n"
                  f"Authorization: Bearer {server.admin_key}\r\n"
                  "Content-Length: 10000000\r\n\r\n".encode() + b"x" * 100000)
    audit_log(server.state_dir, lambda lines: any(
        l["action"] == "file.write" and l["sandbox"] == sandbox["id"] and l["status"] == 499
        for l in lines))  # the server has seen it end
    assert api.get("/healthz").status == 200
    assert output(api.exec(sandbox["id"], {"cmd": ["echo", "fine"]})) == b"fine\n"


def host_pid_of(cmdline):
    for d in pathlib.Path("/proc").glob("[0-9]*"):
        try:
            if (d / "cmdline").read_bytes() == cmdline:
                return int(d.name)
        except OSError:
            pass
    return None


def test_destroy_with_a_frozen_exec(server, api):
    """An agent killed while it had an exec's cgroup frozen (to kill it)
    leaves it frozen; destroying the sandbox must still end everything."""
    sb = api.create()
    conn, r = api.exec_stream(sb["id"], {"shell": "exec sleep 4343"})
    assert json.loads(r.readline())["type"] == "start"
    wait_for(lambda: host_pid_of(b"sleep\x004343\x00"))
    pid = host_pid_of(b"sleep\x004343\x00")
    for line in pathlib.Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        _, ctls, path = line.split(":", 2)
        if ctls == "freezer":
            (pathlib.Path("/sys/fs/cgroup/freezer") / path.lstrip("/") / "freezer.state") \
                .write_text("FROZEN")
        elif ctls == "" and pathlib.Path("/sys/fs/cgroup/cgroup.controllers").exists():
            (pathlib.Path("/sys/fs/cgroup") / path.lstrip("/") / "cgroup.freeze").write_text("1")
    wait_for(lambda: "State:\tD" in pathlib.Path(f"/proc/{pid}/status").read_text() or
             "State:\tS" in pathlib.Path(f"/proc/{pid}/status").read_text())
    started = time.monotonic()
    assert api.delete(f"/v1/sandboxes/{sb['id']}").status == 204
    assert time.monotonic() - started < 10
    assert not pathlib.Path(f"/proc/{pid}").exists()
    conn.close()


# ---- timeouts ----

def test_timeout_reaper_and_extension(server, api):
    sb = api.create(timeout_s=1)
    keep = api.create(timeout_s=1)
    r = api.post(f"/v1/sandboxes/{keep['id']}/timeout", {"timeout_s": 60})
    assert r.status == 200 and r.json["expires_at"] > keep["expires_at"]
    deadline = time.monotonic() + 10
    while api.get(f"/v1/sandboxes/{sb['id']}").status == 200 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert api.get(f"/v1/sandboxes/{sb['id']}").status == 404
    assert api.get(f"/v1/sandboxes/{keep['id']}").status == 200
    api.delete(f"/v1/sandboxes/{keep['id']}")
    audit_log(server.state_dir, lambda audit: any(
        a["action"] == "sandbox.expire" and a["sandbox"] == sb["id"] for a in audit))


# ---- keys and tenants ----

def test_keys_are_required_and_checked(server):
    none = server.api(None)
    for method, path in [("GET", "/v1/sandboxes"), ("POST", "/v1/sandboxes"),
                         ("GET", "/v1/sandboxes/0123456789abcdef"), ("POST", "/v1/keys")]:
        r = none.request(method, path, body="{}")
        assert r.status == 401 and error_of(r) == "unauthorized", (method, path)
    wrong = server.api("hk_" + "0" * 40)
    assert wrong.get("/v1/sandboxes").status == 401
    assert server.api("nonsense").get("/v1/sandboxes").status == 401
    key = server.admin_key
    r = none.get("/v1/sandboxes", headers={"X-API-Key": key})
    assert r.status == 200
    assert (server.state_dir / "admin.key").stat().st_mode & 0o777 == 0o600


def wal_salt(wal):
    """The WAL header's checkpoint sequence number and salts, which change
    when it starts over (sqlite.org/walformat)."""
    with open(wal, "rb") as f:
        return f.read(24)[12:]


def commit_key(api, tenant):
    """Two commits to the store: a key made and deleted."""
    k = api.post("/v1/keys", {"tenant": tenant})
    assert k.status == 201 and api.delete(f"/v1/keys/{k.json['id']}").status == 204


def test_the_store_wal_is_checkpointed_and_starts_over(server, api):
    """The server copies its store's WAL into the database once it holds
    1000 pages (off the loop, looked at every second), and the WAL then
    starts over (a new salt in its header), no longer than 4 MiB
    (state/store.c): it does not grow by every commit for the server's
    life, nor keep deleted rows. A checkpoint from a connection that had not
    read the database found no WAL and did nothing: 838 MB of WAL after
    5,000 sandboxes came and went."""
    wal = server.state_dir / "hutch.db-wal"
    salt = lambda: wal_salt(wal)
    commit = lambda: commit_key(api, "wal")
    commit()
    before = salt()
    for _ in range(3000):  # past 4 MiB: over the 1000 pages a checkpoint waits for
        if wal.stat().st_size > 4 << 20 or salt() != before:
            break
        commit()
    # Quiet, so that a (passive) checkpoint catches up; then the next commit
    # starts the WAL over, cut back to 4 MiB. Steady commits would put that
    # off: a checkpoint never blocks them.
    deadline = time.monotonic() + 20
    while salt() == before:
        assert time.monotonic() < deadline, "the WAL never started over"
        time.sleep(0.3)
        commit()
    assert wal.stat().st_size <= 4 << 20


def test_the_store_wal_is_emptied_once_grown_past_16_mib(server, api):
    """A passive checkpoint catches up only between commits, and the WAL
    starts over (cut back to 4 MiB) only after one has: commits closer
    together than a checkpoint takes grew it through a whole crowd, 148 MB
    in 6 s. Past 16 MiB the server's checkpoint empties it (state/store.c):
    it falls below 1 MiB. Here a reader of the test's own holds the WAL
    until it is past 16 MiB, as a crowd's commits did (and as an operator's
    sqlite3 shell would: the server leaves the WAL for it, and says so once)."""
    import sqlite3
    wal = server.state_dir / "hutch.db-wal"
    salt = lambda: wal_salt(wal)
    commit = lambda: commit_key(api, "wal-grown")

    def hold():
        """A read begun right after a commit, so on a WAL that holds
        frames not yet copied: it keeps the WAL from starting over."""
        commit()
        reader.execute("BEGIN")
        reader.execute("SELECT count(*) FROM keys").fetchone()
        return salt()

    reader = sqlite3.connect(server.state_dir / "hutch.db", isolation_level=None)
    try:
        held = hold()
        deadline = time.monotonic() + 120
        while wal.stat().st_size <= 17 << 20:  # 4096 frames of 4 KiB, with their heads
            assert time.monotonic() < deadline, f"the WAL reached only {wal.stat().st_size} bytes"
            commit()
            if salt() != held:  # a checkpoint came between: the read began on none
                reader.execute("COMMIT")
                held = hold()
        # the server's checkpoints (every second) find the reader there
        wait_for(lambda: "holds its WAL" in server.log_text(), 10)
        reader.execute("COMMIT")
    finally:
        reader.close()
    # With no commit, a WAL that a checkpoint caught up with keeps its size
    # until the next commit starts it over (cut back to 4 MiB): the server
    # empties it, 5 s after the reader kept it from that.
    wait_for(lambda: wal.stat().st_size < 1 << 20, 30)


def test_tenants_see_only_their_own(server, api):
    ka = api.post("/v1/keys", {"tenant": "alice"})
    kb = api.post("/v1/keys", {"tenant": "bob"})
    assert ka.status == 201 and kb.status == 201, (ka, kb)
    alice, bob = server.api(ka.json["key"]), server.api(kb.json["key"])
    sb = alice.create()
    sid = sb["id"]
    try:
        for r in [bob.get(f"/v1/sandboxes/{sid}"), bob.delete(f"/v1/sandboxes/{sid}"),
                  bob.post(f"/v1/sandboxes/{sid}/timeout", {"timeout_s": 5}),
                  bob.post(f"/v1/sandboxes/{sid}/exec", {"cmd": ["true"]})]:
            assert r.status == 404 and error_of(r) == "not_found", r
        assert bob.get("/v1/sandboxes").json["sandboxes"] == []
        assert api.get(f"/v1/sandboxes/{sid}").status == 404  # the admin is a tenant too
        assert alice.get(f"/v1/sandboxes/{sid}").status == 200
        # tenants cannot make keys; a deleted key stops working
        assert alice.post("/v1/keys", {"tenant": "mallory"}).status == 403
        assert api.delete(f"/v1/keys/{kb.json['id']}").status == 204
        assert bob.get("/v1/sandboxes").status == 401
        assert api.delete(f"/v1/keys/{kb.json['id']}").status == 404
    finally:
        alice.delete(f"/v1/sandboxes/{sid}")


def test_a_deleted_key_is_refused_at_once(server, api):
    """The server caches keys it has found: a key used just before it is
    deleted, in each of the forms it is accepted in, is refused by the very
    next request; another key of the same tenant still works."""
    made = api.post("/v1/keys", {"tenant": "cached"}).json
    other = server.api(api.post("/v1/keys", {"tenant": "cached"}).json["key"])
    key = made["key"]
    none = server.api(None)
    forms = [{"X-API-Key": key}, {"Authorization": f"Bearer {key}"},
             {"Authorization": "Bearer e2b_" + key[3:]}]
    for _ in range(2):
        for h in forms:
            assert none.get("/v1/sandboxes", headers=h).status == 200, h
    assert other.get("/v1/sandboxes").status == 200
    assert api.delete(f"/v1/keys/{made['id']}").status == 204
    for h in forms:
        r = none.get("/v1/sandboxes", headers=h)
        assert r.status == 401 and error_of(r) == "unauthorized", h
    assert other.get("/v1/sandboxes").status == 200


def test_tenant_quotas(server, api):
    k = api.post("/v1/keys", {"tenant": "quota", "max_sandboxes": 1, "max_memory_mb": 300})
    t = server.api(k.json["key"])
    a = t.create(memory_mb=200)
    try:
        r = t.post("/v1/sandboxes", {"memory_mb": 64})
        assert r.status == 429 and error_of(r) == "quota_exceeded"
        assert r.headers.get("Retry-After") == "1"
    finally:
        t.delete(f"/v1/sandboxes/{a['id']}")
    r = t.post("/v1/sandboxes", {"memory_mb": 400})
    assert r.status == 429 and "memory" in r.json["error"]["message"]


# ---- bad input ----

@pytest.mark.parametrize("body,code", [
    ("{", "invalid_json"),
    ("[]", "invalid_json"),
    ('{"memory_mb": -1}', "invalid_argument"),
    ('{"memory_mb": "64"}', "invalid_argument"),
    ('{"memory_mb": 1}', "invalid_argument"),
    ('{"memory_mb": 1000000000}', "invalid_argument"),
    ('{"disk_mb": 0}', "invalid_argument"),
    ('{"pids": 100000000}', "invalid_argument"),
    ('{"cpus": 0}', "invalid_argument"),
    ('{"cpus": 100000}', "invalid_argument"),
    ('{"timeout_s": 0}', "invalid_argument"),
    ('{"timeout_s": 1e300}', "invalid_argument"),
    ('{"env": {"A": 1}}', "invalid_argument"),
    ('{"env": {"A=B": "x"}}', "invalid_argument"),
    ('{"metadata": []}', "invalid_argument"),
    ('{"surprise": true}', "invalid_argument"),
    ('{"a": 1, "a": 2}', "invalid_json"),
])
def test_create_refuses_bad_input(api, body, code):
    r = api.post("/v1/sandboxes", body)
    assert r.status == 400 and error_of(r) == code, r
    assert api.get("/v1/sandboxes").json["sandboxes"] == []


def test_unknown_template(api):
    r = api.post("/v1/sandboxes", {"template": "no-such"})
    assert r.status == 404 and error_of(r) == "template_not_found"


@pytest.mark.parametrize("body", [
    {}, {"cmd": []}, {"cmd": "ls"}, {"cmd": ["ls", 1]}, {"cmd": ["ls"], "shell": "ls"},
    {"shell": "true", "user": "Admin!"}, {"shell": "true", "timeout_s": -1},
    {"shell": "true", "env": {"A": None}}, {"shell": "true", "nope": 1},
    {"shell": "true", "keep_stdin": True},
])
def test_exec_refuses_bad_input(api, sandbox, body):
    r = api.post(f"/v1/sandboxes/{sandbox['id']}/exec", body)
    assert r.status == 400, r
    error_of(r)
    assert output(api.exec(sandbox["id"], {"cmd": ["echo", "fine"]})) == b"fine\n"


def test_routes_methods_and_ids(api):
    r = api.get("/v1/nothing")
    assert r.status == 404 and error_of(r) == "not_found"
    r = api.request("PATCH", "/v1/sandboxes")
    assert r.status == 405 and error_of(r) == "method_not_allowed"
    for sid in ["nope", "..", "%2e%2e", "0123456789abcdef0"]:
        assert api.get(f"/v1/sandboxes/{sid}").status == 404
    assert api.post("/v1/sandboxes/x/exec", {"cmd": ["true"]}).status == 404


def raw_exchange(port, data, timeout=10, until=None):
    """Send data, then read until the server closes (or until the bytes
    read end with `until`; without it we half-close: a streamed response
    takes that as the client leaving)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(data)
        if until is None:
            s.shutdown(socket.SHUT_WR)
        out = b""
        while not (until and out.endswith(until)) and (chunk := s.recv(65536)):
            out += chunk
        return out


def test_malformed_and_oversized_requests(server, api):
    out = raw_exchange(server.port, b"NONSENSE\r\n\r\n")
    assert out.startswith(b"HTTP/1.1 400 ") and b'"bad_request"' in out
    out = raw_exchange(server.port, b"GET /healthz HTTP/1.1\r\nX-Big: " + b"a" * 20000 + b"\r\n\r\n")
    assert out.startswith(b"HTTP/1.1 431 ")
    key = server.admin_key.encode()
    out = raw_exchange(server.port, b"POST /v1/sandboxes HTTP/1.1\r\nAuthorization: Bearer " + key +
                       b"\r\nContent-Length: 5000000\r\n\r\n")
    assert out.startswith(b"HTTP/1.1 413 ")
    # the server goes on serving
    assert api.get("/healthz").status == 200


def test_requests_that_are_not_utf8_are_refused_whole(server, api):
    """What a handler reads of a request is UTF-8 (it may go into JSON, a
    message or the audit log), or the request is refused: the path, a
    header, a query value raw or escaped. A request relayed to a sandbox's
    port is the service's business: only its target is checked."""
    key = server.admin_key.encode()
    auth = b"Authorization: Bearer " + key + b"\r\n"
    for bad, why in ((b"DELETE /v1/sandboxes/\xff\xfe HTTP/1.1\r\n" + auth + b"\r\n", b"target"),
                     (b"GET /v1/sandboxes?state=\xc0\xaf HTTP/1.1\r\n" + auth + b"\r\n", b"target"),
                     (b"GET /v1/sandboxes HTTP/1.1\r\n" + auth + b"X-Thing: caf\xc3\r\n\r\n",
                      b"headers"),
                     (b"GET /v1/sandboxes?state=%FF%FE HTTP/1.1\r\n" + auth + b"\r\n", b"query"),
                     (b"GET /v1/sandboxes?user=50% HTTP/1.1\r\n" + auth + b"\r\n", b"query")):
        out = raw_exchange(server.port, bad)
        code = b"invalid_argument" if why == b"query" else b"bad_request"
        assert out.startswith(b"HTTP/1.1 400 ") and code in out and why in out, out
    # A port's route does not look at the headers it relays.
    out = raw_exchange(server.port, b"GET /v1/sandboxes/0123456789abcdef/ports/8000/ HTTP/1.1\r\n"
                       + auth + b"Cookie: caf\xe9\r\n\r\n")
    assert out.startswith(b"HTTP/1.1 404 "), out
    assert api.get("/healthz").status == 200


def test_keep_alive_pipelining(server):
    req = b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
    out = raw_exchange(server.port, req * 3)
    assert out.count(b"HTTP/1.1 200 OK") == 3


def test_keep_alive_after_a_streamed_upload(server, sandbox):
    auth = f"Authorization: Bearer {server.admin_key}\r\n".encode()
    base = f"/v1/sandboxes/{sandbox['id']}/files?path=/tmp/ka".encode()
    put = b"PUT " + base + b" HTTP/1.1\r\n" + auth + b"Content-Length: 5\r\n\r\nhello"
    get = b"GET " + base + b" HTTP/1.1\r\n" + auth + b"\r\n"
    out = raw_exchange(server.port, put + get, until=b"\r\n0\r\n\r\n")
    assert out.count(b"HTTP/1.1 200 OK") == 2 and b"\r\n5\r\nhello\r\n" in out, out


def test_early_answer_to_an_upload_is_read_by_the_client(server, api):
    # refused before the body is read (no such sandbox): the client still
    # gets the answer, not a reset, while it sends a large body
    r = api.request("PUT", "/v1/sandboxes/0000000000000000/files?path=/x", body=b"x" * (16 << 20))
    assert r.status == 404 and error_of(r) == "not_found"


def test_an_action_whose_client_left_is_audited(server, api):
    """A DELETE is answered once the sandbox is torn down; a client that
    sends it and leaves at once must not keep it out of the audit log."""
    sid = api.create()["id"]
    s = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    s.sendall(f"DELETE /v1/sandboxes/{sid} HTTP/1.1\r\nHost: x\r\n"
              f"Authorization: Bearer {api.key}\r\n\r\n".encode())
    s.close()
    wait_for(lambda: api.get(f"/v1/sandboxes/{sid}").status == 404)
    lines = audit_log(server.state_dir, lambda lines: any(
        l["action"] == "sandbox.delete" and l["sandbox"] == sid for l in lines))
    line = [l for l in lines if l["action"] == "sandbox.delete" and l["sandbox"] == sid][0]
    assert line["status"] in (204, 499), line


def test_audit_log_records_actions(server, api):
    sb = api.create()
    api.exec(sb["id"], {"cmd": ["true"]})
    api.delete(f"/v1/sandboxes/{sb['id']}")
    api.post("/v1/sandboxes", "{")
    audit = audit_log(server.state_dir, lambda audit: audit[-1]["error"] == "invalid_json")
    mine = [a for a in audit if a["sandbox"] == sb["id"]]
    assert [a["action"] for a in mine] == ["sandbox.create", "sandbox.exec", "sandbox.delete"]
    assert [a["status"] for a in mine] == [201, 200, 204]
    assert all(a["tenant"] == "admin" and a["duration_ms"] >= 0 for a in mine)
    assert audit[-1]["action"] == "sandbox.create" and audit[-1]["error"] == "invalid_json"


def test_metrics(server, api, sandbox):
    api.exec(sandbox["id"], {"cmd": ["true"]})
    text = server.api().get("/metrics").raw.decode()
    assert 'hutch_sandboxes{state="running"} 1' in text
    assert "hutch_create_seconds_count" in text and "hutch_exec_start_seconds_bucket" in text
    count = int(next(l.split()[1] for l in text.splitlines()
                     if l.startswith("hutch_exec_start_seconds_count")))
    assert count >= 1
    api.post("/v1/sandboxes", "{")
    before = metric(server, 'hutch_errors_by_code_total{code="invalid_json"}')
    api.post("/v1/sandboxes", "{")
    assert metric(server, 'hutch_errors_by_code_total{code="invalid_json"}') == before + 1


# ---- capacity and restarts (own servers) ----

def accepted(server):
    """The connections the server holds: its sockets on its own port, but
    the listener (an fd is there once it has accepted one)."""
    port = f":{server.port:04X}"
    inodes = {f[9] for f in (l.split() for l in open("/proc/net/tcp").readlines()[1:])
              if f[1].endswith(port) and f[3] != "0A"}
    held = 0
    for fd in pathlib.Path(f"/proc/{server.proc.pid}/fd").iterdir():
        try:
            held += os.readlink(fd)[8:-1] in inodes
        except OSError:
            pass  # closed meanwhile
    return held


def test_capacity_answers_503(tmp_path):
    s = Server(BUILD / "hutch-serve", tmp_path / "state", "--max-sandboxes", "1",
               "--max-connections", "3").start()
    try:
        api = s.api()
        sb = api.create()
        r = api.post("/v1/sandboxes", {})
        assert r.status == 503 and error_of(r) == "at_capacity" and r.headers["Retry-After"]
        wait_for(lambda: accepted(s) == 0)  # the server has seen the requests' connections close
        socks = [socket.create_connection(("127.0.0.1", s.port)) for _ in range(3)]
        wait_for(lambda: accepted(s) == 3)
        out = raw_exchange(s.port, b"GET /healthz HTTP/1.1\r\n\r\n")
        assert out.startswith(b"HTTP/1.1 503 ") and b"Retry-After: 1" in out
        for k in socks:  # the three were let in, and are left waiting
            k.setblocking(False)
            with pytest.raises(BlockingIOError):
                k.recv(1)
        for k in socks:
            k.close()
        wait_for(lambda: accepted(s) == 0)
        assert api.get("/healthz").status == 200
        assert api.delete(f"/v1/sandboxes/{sb['id']}").status == 204
    finally:
        s.stop()


def test_warm_pools(tmp_path):
    s = Server(BUILD / "hutch-serve", tmp_path / "state", "--pool", "host=2",
               "--pool", "host,memory_mb=256,pids=64=1").start()
    try:
        ready = lambda spec: metric_labeled(s, "hutch_pool_ready", spec)
        wait_for(lambda: ready("host") == 2 and ready("host,memory_mb=256,pids=64") == 1)
        api = s.api()
        taken = lambda spec: metric_labeled(s, "hutch_pool_taken_total", spec)
        pooled = api.create(metadata={"k": "v"}, env={"E": "1"}, timeout_s=30)
        assert taken("host") == 1  # taken from the pool ...
        wait_for(lambda: ready("host") == 2)  # ... which refills
        small = api.create(memory_mb=256, pids=64)
        assert taken("host,memory_mb=256,pids=64") == 1
        other = api.create(memory_mb=300)  # no pool matches: made on demand
        assert taken("host") == 1 and taken("host,memory_mb=256,pids=64") == 1
        # a pooled sandbox is a tenant's like any other
        assert pooled["metadata"] == {"k": "v"} and pooled["memory_mb"] == 1024
        assert output(api.exec(pooled["id"], {"shell": "echo $E"})) == b"1\n"
        assert (small["memory_mb"], small["pids"]) == (256, 64)
        lines = api.exec(small["id"], {"shell": "python3 -c 'b = bytearray(400 << 20)'"})
        assert lines[-1]["status"] == "oom"
        ids = {x["id"] for x in api.get("/v1/sandboxes").json["sandboxes"]}
        assert ids == {pooled["id"], small["id"], other["id"]}
        # another tenant never gets a sandbox someone used
        k = api.post("/v1/keys", {"tenant": "t2"}).json["key"]
        fresh = s.api(k).create()
        assert fresh["id"] not in ids
        assert output(s.api(k).exec(fresh["id"], {"shell": "ls /tmp | wc -l"})) == b"0\n"
    finally:
        assert s.stop() == 0


def test_bad_pool_options(tmp_path):
    import subprocess
    for spec in ["host", "host=x", "host=1000", "nope=1", "host,memory_mb=1=1",
                 "host,bogus=1=1", "host,cpus=x=1", "host,memory_mb=999999999=1",
                 "host=4:2", "host=1:x", "host=1:1000", "host=1:"]:
        r = subprocess.run([str(BUILD / "hutch"), "serve", "--state-dir", str(tmp_path / "s"),
                            "--listen", "127.0.0.1:1", "--pool", spec],
                           capture_output=True, text=True, timeout=30)
        assert r.returncode == 125 and r.stderr.count("\n") == 1, (spec, r.stderr)
        assert "--pool" in r.stderr, (spec, r.stderr)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
def test_restart_takes_sandboxes_over(tmp_path, sig):
    """A server stopped by SIGTERM or killed leaves its sandboxes running;
    the next start takes them over with their files and processes, and
    ends those that expired meanwhile."""
    before = set(leftovers())
    s = Server(BUILD / "hutch-serve", tmp_path / "state").start()
    api = s.api()
    key = s.admin_key
    tenant = s.api(api.post("/v1/keys", {"tenant": "t"}).json["key"])
    sb = tenant.create(metadata={"k": "v"}, env={"E": "e"}, timeout_s=120)
    sid = sb["id"]
    short = tenant.create(timeout_s=1)
    assert tenant.request("PUT", f"/v1/sandboxes/{sid}/files?path=/tmp/kept",
                          body=b"kept").status == 200
    ticker = start_bg(tenant, sid, shell="i=0; while :; do echo tick $i; i=$((i+1)); "
                                         "sleep 0.05; done")
    reader = start_bg(tenant, sid, cmd=["sh", "-c", "cat; echo fin"], keep_stdin=True)
    assert s.stop(sig) == (0 if sig == signal.SIGTERM else -signal.SIGKILL)
    # `short` expires while no server runs
    expires = datetime.datetime.fromisoformat(short["expires_at"].replace("Z", "+00:00"))
    time.sleep(max(0.0, expires.timestamp() - time.time()) + 0.1)
    assert [l for l in set(leftovers()) - before if l.startswith("process")]  # still running
    s.start()
    try:
        assert s.admin_key == key
        got = tenant.get(f"/v1/sandboxes/{sid}")
        assert got.status == 200 and got.json == sb
        assert tenant.get(f"/v1/sandboxes/{short['id']}").status == 404
        assert tenant.get(f"/v1/sandboxes/{sid}/files?path=/tmp/kept").raw == b"kept"
        procs = {p["pid"]: p for p in tenant.get(f"/v1/sandboxes/{sid}/processes")
                 .json["processes"]}
        assert procs[ticker]["running"] and procs[reader]["running"]
        # the ticker went on (or waited for us): its output comes again
        conn, r = tenant.request_stream("GET", f"/v1/sandboxes/{sid}/processes/{ticker}/output")
        assert json.loads(r.readline())["data"].startswith("tick ")
        conn.close()
        assert tenant.post(f"/v1/sandboxes/{sid}/processes/{reader}/stdin",
                           {"data": "again\n", "eof": True}).status == 204
        lines = attach(tenant, sid, reader)
        assert output(lines) == b"again\nfin\n" and lines[-1]["status"] == "ok"
        assert tenant.delete(f"/v1/sandboxes/{sid}/processes/{ticker}").status == 204
        # new execs, and the sandbox's env, as before
        assert output(tenant.exec(sid, {"shell": "echo $E"})) == b"e\n"
        assert tenant.delete(f"/v1/sandboxes/{sid}").status == 204
    finally:
        assert s.stop() == 0
    wait_for(lambda: not set(leftovers()) - before, 30)


def test_sigint_ends_the_sandboxes(tmp_path):
    before = set(leftovers())
    s = Server(BUILD / "hutch-serve", tmp_path / "state").start()
    sid = s.api().create()["id"]
    assert s.stop(signal.SIGINT) == 0
    wait_for(lambda: not set(leftovers()) - before, 30)
    s.start()
    try:
        assert s.api().get(f"/v1/sandboxes/{sid}").status == 404
    finally:
        s.stop()


def test_bad_options(tmp_path):
    import subprocess
    for args in (["--listen", "nope"], ["--listen", "127.0.0.1:65536"], ["--max-sandboxes", "-1"],
                 ["--bogus"], ["extra"], ["--state-dir", "relative/dir"],
                 ["--listen", "256.1.1.1:80"]):
        r = subprocess.run([str(BUILD / "hutch"), "serve", "--state-dir", str(tmp_path / "s"),
                            *args], capture_output=True, text=True, timeout=30)
        assert r.returncode == 125, (args, r)
        assert r.stderr.count("\n") == 1 and r.stderr.startswith("hutch serve: "), (args, r.stderr)
