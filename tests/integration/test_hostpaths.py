"""The check every answer of the tests' client goes through
(hostpaths.py): it catches each kind of host path, in each body the server
sends, and lets the sandbox's own paths and a workload's output by. No
server: the rule alone, so that a check that could never fail is caught."""
import json
import os
import struct
import subprocess

import pytest

import hostpaths

STATE = "/tmp/pytest-of-root/pytest-9/serve0/state"
PID = os.getpid()  # the "server" of these answers
DIRS = hostpaths.host_dirs(STATE, hostpaths.REPO / "build" / "hutch-serve")


def check(body, ctype="application/json", status=200):
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    hostpaths.check("GET /x", status, ctype, raw, DIRS, PID)


@pytest.mark.parametrize("text", [
    f"{STATE}/images/tmp/<PID>-Ab12/upload",
    f"open {STATE}/hutch.db: no such file or directory",
    "/var/tmp/<PID>-3/x",
    "rename /srv/x.<PID>.tmp",
    "/proc/<PID>/ns/net",
    f"run {hostpaths.REPO}/build/hutch-template: not found",
    "mount /run/hutch/mnt/4 failed",
    "write /sys/fs/cgroup/hutch/12/memory.max: EBUSY",
    "path=/var/lib/hutch/images",
])
def test_a_host_path_fails_the_answer(text):
    # The pid goes in here, not in the test's name: every xdist worker
    # must collect the same names.
    text = text.replace("<PID>", str(PID))
    with pytest.raises(hostpaths.HostPathInAnswer):
        check({"error": {"code": "internal", "message": text}})
    with pytest.raises(hostpaths.HostPathInAnswer):
        check({text: 1})  # a key, too


@pytest.mark.parametrize("text", [
    "/home/user/notes.txt", "/tmp/x", "/code", "/proc/1/environ: not found", "/proc/37/status",
    "sha256:ab/cd", "http://127.0.0.1:8080/v1/sandboxes/sb-1", "/run/hutchy", "x/run/hutch",
    "upload@sha256:" + "a" * 64, "Dockerfile",
])
def test_a_sandbox_path_passes(text):
    check({"path": text, "message": f"open {text}: no such file"})


def test_proc_of_a_process_the_server_started():
    child = subprocess.Popen(["sleep", "30"])
    try:
        with pytest.raises(hostpaths.HostPathInAnswer):
            check({"message": f"/proc/{child.pid}/status"})
    finally:
        child.kill()
        child.wait()


def test_every_body_the_server_sends_is_read():
    leak = f"{STATE}/x"
    with pytest.raises(hostpaths.HostPathInAnswer):
        check(b'{"a":1}\n' + json.dumps({"b": [leak]}).encode(), "application/x-ndjson")
    msg = json.dumps({"error": {"message": leak}}).encode()
    with pytest.raises(hostpaths.HostPathInAnswer):
        check(struct.pack(">BI", 2, len(msg)) + msg, "application/connect+json")
    with pytest.raises(hostpaths.HostPathInAnswer):
        check(leak.encode(), "text/plain; charset=utf-8", status=500)
    # A 2xx text answer is a file's or a workload's; so is a process's output.
    check(leak.encode(), "text/plain", status=200)
    check(json.dumps({"type": "stdout", "data": leak}).encode() + b"\n", "application/x-ndjson")
