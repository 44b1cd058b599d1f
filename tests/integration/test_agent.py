"""The agent protocol itself (docs/protocol.md), spoken over the test
bridge: many streams on one connection, file operations as the sandbox
user, flow control, and a client that misbehaves."""
import hashlib
import json
import os
import queue
import struct
import threading

import pytest

from agentproto import (Agent, CLOSE, CONTROL, END_FLAG, EOF_FLAG, ERROR, EVENT, HEADER, OPEN,
                        STDIN, STDOUT, WINDOW_INITIAL)


@pytest.fixture
def agent(bridge):
    a = Agent(bridge)
    yield a
    assert a.close() == 0


def test_hello(agent):
    assert agent.hello["protocol"] == 1 and agent.hello["agent"] == "hutch-agent"


def test_many_concurrent_execs_on_one_connection(agent):
    n = 24
    for i in range(n):
        agent.send(OPEN, i + 1, {"op": "exec", "argv": ["sh", "-c", f"sleep 0.$((RANDOM % 3)); echo {i}; echo e{i} >&2; exit {i % 7}"]})
    results = {}

    def collect(i):
        results[i] = agent.collect(i + 1)
    threads = [threading.Thread(target=collect, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    for i in range(n):
        frames = results[i]
        out = b"".join(f.payload for f in frames if f.type == STDOUT)
        assert out == f"{i}\n".encode()
        ev = frames[-1].json()
        assert frames[-1].flags & END_FLAG and ev["event"] == "exit" and ev["exit_code"] == i % 7
        assert frames[0].json()["event"] == "started" and frames[0].json()["pid"] > 1


def test_stdin_and_exit_verdict(agent):
    data = os.urandom(5 << 20)
    r = agent.exec(1, ["sha256sum"], stdin=data)
    assert r.stdout.split()[0].decode() == hashlib.sha256(data).hexdigest()
    assert r.event["status"] == "ok"


def test_signal_control_reaches_process_group(agent):
    agent.send(OPEN, 1, {"op": "exec", "argv": ["sh", "-c", "trap 'echo got TERM; exit 3' TERM; echo ready; while :; do sleep 0.01; done"]})
    f = agent.next_frame(1)
    assert f.json()["event"] == "started"
    assert agent.next_frame(1).payload == b"ready\n"
    agent.send(CONTROL, 1, {"signal": 15})
    r = agent.collect(1)
    assert b"got TERM" in b"".join(f.payload for f in r if f.type == STDOUT)
    assert r[-1].json()["exit_code"] == 3


def test_kill_control_and_close(agent):
    agent.send(OPEN, 1, {"op": "exec", "argv": ["sleep", "1000"]})
    agent.next_frame(1)
    agent.send(CONTROL, 1, {"kill": True})
    ev = agent.collect(1)[-1].json()
    assert ev["status"] == "signaled" and ev["signal"] == 9
    agent.send(OPEN, 2, {"op": "exec", "argv": ["sh", "-c", "yes"]})
    agent.next_frame(2)
    agent.send(CLOSE, 2)
    frames = agent.collect(2)
    assert frames[-1].json()["event"] == "exit"


def test_close_output_control(agent):
    # An unknown stream name changes nothing; closing stdout makes the
    # workload's next write meet a pipe with no reader (SIGPIPE), with or
    # without a terminal (which hangs up: SIGHUP for the shell).
    agent.send(OPEN, 1, {"op": "exec", "argv": ["sh", "-c", "echo ready; read x; yes"], "stdin": True})
    agent.next_frame(1)
    assert agent.next_frame(1).payload == b"ready\n"
    agent.send(CONTROL, 1, {"close": "bogus"})
    agent.send(CONTROL, 1, {"close": "stdout"})
    agent.send_stdin(1, b"go\n")
    ev = agent.collect(1)[-1].json()
    assert ev["event"] == "exit" and ev["exit_code"] == 128 + 13, ev  # sh reports yes's SIGPIPE
    agent.send(OPEN, 2, {"op": "exec", "argv": ["sh", "-c", "echo ready; read x"], "pty": {"rows": 24, "cols": 80},
                         "stdin": True})
    agent.next_frame(2)
    agent.send(CONTROL, 2, {"close": "stdout"})
    agent.send(CONTROL, 2, {"close": "stdout"})  # twice: no harm
    ev = agent.collect(2)[-1].json()
    assert ev["event"] == "exit" and ev["signal"] == 1, ev


def test_pty_and_resize(agent):
    agent.send(OPEN, 1, {"op": "exec", "argv": ["sh", "-c", "stty size; read x; stty size; echo x=$x"],
                         "pty": {"rows": 30, "cols": 100}, "stdin": True})
    out = b""
    agent.next_frame(1)
    while b"30 100" not in out:
        out += agent.next_frame(1).payload
    # The agent takes a stream's frames in order: the resize is made before
    # the line reaches the terminal.
    agent.send(CONTROL, 1, {"resize": {"rows": 50, "cols": 132}})
    agent.send(STDIN, 1, b"hello\n")
    frames = agent.collect(1)
    out += b"".join(f.payload for f in frames if f.type == STDOUT)
    assert b"50 132" in out and b"x=hello" in out, out
    assert frames[-1].json()["status"] == "ok"


def test_file_write_read_roundtrip_streamed(agent):
    data = os.urandom(64 << 20)
    w = agent.file_op(1, "write", path="/home/user/big.bin", data=data)
    assert w.event == {"event": "done", "size": len(data)}, w.error
    r = agent.file_op(2, "read", path="/home/user/big.bin")
    assert r.event["size"] == len(data)
    assert hashlib.sha256(r.stdout).digest() == hashlib.sha256(data).digest()
    s = agent.file_op(3, "stat", path="/home/user/big.bin").event
    assert s["type"] == "file" and s["size"] == len(data) and s["uid"] == 1000 and s["mode"] == 0o644


def test_file_ops(agent):
    assert agent.file_op(1, "mkdir", path="/home/user/a/b/c", parents=True).event["created"] is True
    assert agent.file_op(2, "mkdir", path="/home/user/a/b/c").event["created"] is False
    assert agent.file_op(3, "write", path="/home/user/a/b/c/f.txt", data=b"hello").event["size"] == 5
    assert agent.file_op(4, "write", path="/home/user/a/new/dir/g.txt", parents=True, data=b"x").event["size"] == 1
    entries = [json.loads(l) for l in agent.file_op(5, "list", path="/home/user/a", depth=3).stdout.splitlines()]
    paths = {e["path"]: e for e in entries}
    assert paths["/home/user/a/b/c/f.txt"]["size"] == 5 and paths["/home/user/a/b"]["type"] == "dir"
    assert agent.file_op(6, "move", path="/home/user/a/b/c/f.txt", to="/home/user/f2.txt").event is not None
    assert agent.file_op(7, "read", path="/home/user/f2.txt").stdout == b"hello"
    assert agent.file_op(8, "remove", path="/home/user/a").error["code"] == "not_empty"
    assert agent.file_op(9, "remove", path="/home/user/a", recursive=True).event is not None
    assert agent.file_op(10, "stat", path="/home/user/a").error["code"] == "not_found"
    # A name a workload made of any bytes is listed (lossily), not lost.
    agent.exec(13, ["python3", "-c", "open(b'/home/user/caf\\xe9', 'w')"])
    names = [json.loads(l)["name"] for l in agent.file_op(14, "list", path="/home/user").stdout.splitlines()]
    assert "caf?" in names, names
    agent.exec(11, ["ln", "-s", "f2.txt", "/home/user/link"])
    st = agent.file_op(12, "stat", path="/home/user/link").event
    assert st["type"] == "symlink" and st["target"] == "/home/user/f2.txt"  # absolute: where it leads


def test_file_ops_run_as_the_sandbox_user(agent):
    # The agent's own memory and files are not reachable through file
    # operations: they run in a worker with the user's rights only.
    for path in ("/proc/1/mem", "/proc/1/environ", "/root/x", "/etc/x"):
        op = "write" if path != "/proc/1/environ" else "read"
        r = agent.file_op(1, op, path=path, data=b"x" if op == "write" else None)
        assert r.error and r.error["code"] in ("permission_denied", "invalid", "not_found"), (path, r.error)
    agent.exec(2, ["ln", "-s", "/proc/1/mem", "/home/user/mem"])
    r = agent.file_op(3, "read", path="/home/user/mem")
    assert r.error["code"] in ("permission_denied", "invalid", "not_found"), r.error
    # A FIFO would block a reader forever: refused, not hung.
    agent.exec(4, ["mkfifo", "/home/user/fifo"])
    r = agent.file_op(5, "read", path="/home/user/fifo", timeout=10)
    assert r.error["code"] == "invalid"
    r = agent.file_op(6, "write", path="/home/user/fifo", data=b"x", timeout=10)
    assert r.error is not None
    # Root of the sandbox may write its own files, still not the host's /usr.
    assert agent.file_op(7, "write", path="/etc/motd", user="root", data=b"hi").event["size"] == 2
    assert agent.file_op(8, "write", path="/usr/bin/x", user="root", data=b"hi").error["code"] == "permission_denied"


def test_flow_control_blocks_the_writer_not_the_agent(bridge):
    a = Agent(bridge, auto_window=False)
    try:
        a.send(OPEN, 1, {"op": "exec", "argv": ["sh", "-c", "head -c 100000000 /dev/zero"]})
        a.send(OPEN, 2, {"op": "exec", "argv": ["sh", "-c", "sleep 0.3; echo other"]})
        # Stream 2 finishes although stream 1 is stalled on its window.
        frames2 = a.collect(2)
        a.window(2, 1 << 20)
        assert b"other" in b"".join(f.payload for f in frames2 if f.type == STDOUT)
        got = 0
        while True:
            try:
                f = a.next_frame(1, timeout=0.5)
            except queue.Empty:
                break
            got += len(f.payload) if f.type == STDOUT else 0
        assert got <= WINDOW_INITIAL, got  # never more than the window
        a.window(1, 200 << 20)
        rest = a.collect(1)
        total = got + sum(len(f.payload) for f in rest if f.type == STDOUT)
        assert total == 100000000 and rest[-1].json()["status"] == "ok"
    finally:
        a.close()


def test_bad_requests_get_errors_and_the_agent_goes_on(agent):
    agent.send(OPEN, 1, b"{not json")
    assert agent.collect(1)[-1].json()["code"] == "invalid"
    agent.send(OPEN, 2, {"op": "teleport"})
    assert "unknown op" in agent.collect(2)[-1].json()["message"]
    agent.send(OPEN, 3, {"op": "exec", "argv": []})
    assert agent.collect(3)[-1].json()["code"] == "invalid"
    agent.send(OPEN, 4, {"op": "exec", "argv": ["true"], "env": {"A=B": "c"}})
    assert agent.collect(4)[-1].json()["code"] == "invalid"
    agent.send(OPEN, 5, {"op": "read"})
    assert agent.collect(5)[-1].type == ERROR
    agent.send(OPEN, 6, {"op": "list", "path": "/", "depth": 1000})
    assert agent.collect(6)[-1].json()["code"] == "invalid"
    # A duplicate stream id is refused without ending the stream that has it.
    agent.send(OPEN, 7, {"op": "exec", "argv": ["sh", "-c", "read x; echo $x"], "stdin": True})
    agent.next_frame(7)
    agent.send(OPEN, 7, {"op": "exec", "argv": ["true"]})
    dup = agent.next_frame(7)
    assert dup.type == ERROR and not dup.flags & END_FLAG
    agent.send(STDIN, 7, b"still here\n", EOF_FLAG)
    assert b"still here" in b"".join(f.payload for f in agent.collect(7) if f.type == STDOUT)
    # Frames for streams that do not exist are ignored.
    agent.send(STDIN, 99, b"x")
    agent.send(CONTROL, 98, {"signal": 9})
    assert agent.exec(8, ["echo", "alive"]).stdout == b"alive\n"


def test_broken_framing_ends_the_connection(bridge):
    a = Agent(bridge)
    a.proc.stdin.write(HEADER.pack(1 << 30, OPEN, 0, 0, 1))
    a.proc.stdin.flush()
    with pytest.raises(EOFError):
        a.next_frame(1, timeout=10)
    a.close()
