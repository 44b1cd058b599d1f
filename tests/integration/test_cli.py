"""hutch run: its options, exit codes and verdicts, and every kind of bad
input getting one clear line on stderr and exit 125."""
import json
import os
import pathlib
import select
import signal
import subprocess
import threading
import time

import pytest

from conftest import BUILD

VERDICT_KEYS = {"status", "exit_code", "signal", "wall_ms", "cpu_ms", "peak_memory_kb",
                "escape_attempts", "message"}


def test_output_and_ok_verdict(any_run):
    r = any_run(["--", "sh", "-c", "echo out; echo err >&2"])
    assert r.code == 0, r
    assert r.out == "out\n" and r.err == "err\n"
    assert set(r.verdict) == VERDICT_KEYS
    assert r.verdict["status"] == "ok" and r.verdict["exit_code"] == 0 and r.verdict["signal"] is None
    assert r.verdict["wall_ms"] > 0 and r.verdict["cpu_ms"] >= 0 and r.verdict["peak_memory_kb"] > 0


def test_exit_code_passes_through(run):
    r = run(["--", "sh", "-c", "exit 42"])
    assert r.code == 42
    assert r.verdict["status"] == "nonzero" and r.verdict["exit_code"] == 42


def test_signal_is_128_plus_n(run):
    r = run(["--", "sh", "-c", "kill -TERM $$"])
    assert r.code == 128 + 15, r
    assert r.verdict["status"] == "signaled" and r.verdict["signal"] == 15


def test_command_not_found_is_127(any_run):
    r = any_run(["--", "no-such-command-xyz"])
    assert r.code == 127, r
    assert r.verdict["status"] == "nonzero" and r.verdict["exit_code"] == 127
    assert "no-such-command-xyz" in r.verdict["message"]
    assert r.err.count("\n") == 1 and "No such file" in r.err


def test_not_executable_is_126(run):
    r = run(["--", "/etc/passwd"])
    assert r.code == 126, r
    assert "Permission denied" in r.verdict["message"]


def test_absolute_missing_path_is_127(run):
    assert run(["--", "/usr/bin/definitely-missing"]).code == 127


@pytest.mark.parametrize("args, says", [
    (["--bogus", "--", "true"], "--bogus: unknown option"),
    (["--help=1", "--", "true"], "--help=1: unknown option, or one that takes no value"),
    (["--tty=1", "--", "true"], "--tty=1: unknown option, or one that takes no value"),
    (["-z", "--", "true"], "unknown option -z"),
    ([], "missing command"),
    (["--"], "missing command"),
    (["--memory"], "needs a value"),
    (["--memory", "0", "--", "true"], "greater than 0"),
    (["--memory", "-5", "--", "true"], "not a whole"),
    (["--memory", "12abc", "--", "true"], "not a whole"),
    (["--memory", "99999999999999999999", "--", "true"], "not a whole"),
    (["--memory", "18446744073709", "--", "true"], "too large"),
    (["--memory", "4", "--", "true"], "at least 16 MiB"),
    (["--memory", "100000000", "--", "true"], "exceeds the host"),
    (["--disk", "100000000", "--", "true"], "disk limit"),
    (["--pids", "0", "--", "true"], "greater than 0"),
    (["--pids", "10000000", "--", "true"], "pids limit"),
    (["--cpus", "0", "--", "true"], "positive number of CPUs"),
    (["--cpus", "0.001", "--", "true"], "cpus must be between 0.01"),
    (["--cpus", "0.0001", "--", "true"], "not a positive number"),
    (["--cpus", "1000", "--", "true"], "cpus must be between"),
    (["--cpus", "abc", "--", "true"], "positive number"),
    (["--timeout", "-1", "--", "true"], "not a number of seconds"),
    (["--timeout", "0", "--", "true"], "greater than 0"),
    (["--timeout", "1e9", "--", "true"], "not a number of seconds"),
    (["--timeout", "99999999", "--", "true"], "longer than a week"),
    (["--cpu-time", "x", "--", "true"], "not a number of seconds"),
    (["--output-limit", "0", "--", "true"], "greater than 0"),
    (["--env", "NOEQUALS", "--", "true"], "expected K=V"),
    (["--env", "=v", "--", "true"], "expected K=V"),
    (["--cwd", "relative", "--", "true"], "absolute path"),
    (["--bind-ro", "/tmp", "--", "true"], "HOST:PATH"),
    (["--bind-ro", "/tmp:rel", "--", "true"], "HOST:PATH"),
    (["--bind-ro", "/no/such/dir:/x", "--", "true"], "does not exist"),
    (["--bind-rw", "/tmp:/proc/x", "--", "true"], "inside /proc"),
    (["--bind-rw", "/tmp:/a/../b", "--", "true"], "absolute path below /"),
    (["--stdin", "/no/such/file", "--", "true"], "--stdin /no/such/file"),
    (["--stdin", "/", "--", "true"], "--stdin /: is a directory"),
    (["--bind-ro", "/tmp:/x", "--bind-ro", "/usr:/x", "--", "true"], "already given"),
    (["--user", "Admin!", "--", "true"], "must be user, root, a user name or UID[:GID]"),
    (["--user", "65536", "--", "true"], "below 65536"),
    (["--user", "nosuch", "--", "true"], "no user 'nosuch' in the sandbox's /etc/passwd"),
    (["--template", "no-such-template", "--", "true"], "no template 'no-such-template'"),
    (["--template", "x", "--rootfs", "/", "--", "true"], "give one"),
    (["--rootfs", "/no/such/root", "--", "true"], "rootfs"),
    (["--rootfs", "/etc/passwd", "--", "true"], "not a directory"),
    (["--rootfs", "relative/dir", "--", "true"], "rootfs"),
    (["--verdict-json", "/no/such/dir/v.json", "--", "true"], "--verdict-json"),
    (["--", ""], "empty string"),
    (["--", "echo", os.fsdecode(b"caf\xe9")], "argument 1 is not valid UTF-8"),
    (["--env", os.fsdecode(b"X=\xff"), "--", "true"], "not valid UTF-8"),
    (["--output-limit", "9999999999999999", "--", "true"], "more than 1 TiB"),
])
def test_bad_input_is_one_line_and_125(any_run, args, says):
    r = any_run(args, verdict=False)
    assert r.code == 125, r
    assert says in r.err, r
    assert r.err.count("\n") == 1, r
    assert r.out == ""


def test_unreadable_bind_source(run, tmp_path):
    secret = tmp_path / "secret"
    secret.mkdir(mode=0o000)
    # Root reads everything; only a non-root caller would be refused. What
    # matters here is that an unreadable *kind* of source is refused clearly.
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    r = run(["--bind-ro", f"{fifo}:/x", "--", "true"], verdict=False)
    assert r.code == 125 and "not a file or directory" in r.err, r


@pytest.mark.parametrize("owner", [(0, 0), (1234, 0), (0, 1234)])
def test_root_owned_bind_rw_source_is_refused(run, tmp_path, owner):
    # Files the sandbox creates in a writable bind belong to its owner on
    # the host: a root-owned one would let it plant setuid-root programs.
    out = tmp_path / "out"
    out.mkdir()
    os.chown(out, *owner)
    r = run(["--bind-rw", f"{out}:/out", "--", "sh", "-c", "cp /bin/sh /out/sh && chmod 4755 /out/sh"],
            verdict=False)
    assert r.code == 125 and "belongs to root" in r.err and r.err.count("\n") == 1, r
    assert not (out / "sh").exists()
    r = run(["--bind-ro", f"{out}:/out", "--", "true"])
    assert r.code == 0, r


def test_bind_source_swapped_during_creation_is_not_root_owned(run, tmp_path):
    # The path is looked up once: the fd checked for its owner is the one
    # id-mapped and mounted, so swapping a symlink between a user's directory
    # and root's while sandboxes are made never lands a write in root's.
    mine, roots = tmp_path / "mine", tmp_path / "roots"
    mine.mkdir()
    roots.mkdir()
    os.chown(mine, 1234, 1234)
    mine.chmod(0o777)  # writable without an id map too (tmpfs before Linux 6.3)
    link = tmp_path / "out"
    stop = threading.Event()

    def swap():
        while not stop.is_set():
            for target in (mine, roots):
                tmp = tmp_path / "out.new"
                tmp.symlink_to(target)
                os.replace(tmp, link)
    t = threading.Thread(target=swap)
    t.start()
    try:
        for _ in range(60):
            run(["--bind-rw", f"{link}:/out", "--", "sh", "-c", "touch /out/planted"], verdict=False)
    finally:
        stop.set()
        t.join()
    assert not (roots / "planted").exists()
    assert (mine / "planted").exists()  # some runs did get the user's directory


def test_help_and_version():
    h = subprocess.run([BUILD / "hutch", "run", "--help"], capture_output=True, text=True)
    assert h.returncode == 0 and "--memory MB" in h.stdout
    v = subprocess.run([BUILD / "hutch", "version"], capture_output=True, text=True)
    assert v.returncode == 0 and v.stdout.startswith("hutch ")
    u = subprocess.run([BUILD / "hutch", "frobnicate"], capture_output=True, text=True)
    assert u.returncode == 125 and "unknown command" in u.stderr


def test_env_cwd_user(run):
    r = run(["--env", "GREETING=hi there", "--env", "PATH=/usr/bin:/bin", "--cwd", "/tmp", "--",
             "sh", "-c", 'echo "$GREETING|$PATH|$(pwd)|$(id -u)|$HOME"'])
    assert r.out == "hi there|/usr/bin:/bin|/tmp|1000|/home/user\n", r
    r = run(["--user", "root", "--", "sh", "-c", 'echo "$(id -u)|$HOME|$(pwd)"'])
    assert r.out == "0|/root|/root\n", r


def test_missing_cwd_is_126(run):
    r = run(["--cwd", "/does/not/exist", "--", "true"])
    assert r.code == 126, r
    assert "cannot change to directory /does/not/exist" in r.verdict["message"]


def test_stdin_from_file_and_pipe(run, tmp_path):
    f = tmp_path / "in.txt"
    data = os.urandom(3 << 20)
    f.write_bytes(data)
    r = run(["--stdin", str(f), "--", "sha256sum"])
    import hashlib
    assert r.out.split()[0] == hashlib.sha256(data).hexdigest(), r
    r = run(["-i", "--", "tr", "a-z", "A-Z"], input=b"hello\n")
    assert r.out == "HELLO\n"
    # Without --stdin the workload reads end of file at once.
    r = run(["--", "cat"], input=b"ignored")
    assert r.code == 0 and r.out == ""


def test_large_output_streams_intact(run):
    r = run(["--", "sh", "-c", "head -c 50000000 /dev/zero | tr '\\0' 'x'; echo; echo done >&2"])
    assert r.code == 0
    assert len(r.stdout) == 50_000_001 and r.stdout.count(b"x") == 50_000_000
    assert r.err == "done\n"


def test_bind_ro_and_rw(run, tmp_path):
    src = tmp_path / "data"
    src.mkdir()
    (src / "in.txt").write_text("from the host\n")
    out = tmp_path / "out"
    out.mkdir()
    os.chown(out, 1234, 1234)
    r = run(["--bind-ro", f"{src}:/data", "--bind-rw", f"{out}:/home/user/out", "--", "sh", "-c",
             "cat /data/in.txt; touch /data/x 2>&1 | sed 's/.*: //'; echo made > /home/user/out/new; "
             "stat -c '%u %U' /home/user/out"])
    assert r.code == 0, r
    lines = r.out.splitlines()
    assert lines[0] == "from the host"
    assert "Read-only file system" in lines[1]
    assert lines[2] == "1000 user"  # the bind's owner is the sandbox user inside
    made = out / "new"
    assert made.read_text() == "made\n"
    assert (made.stat().st_uid, made.stat().st_gid) == (1234, 1234)  # and the owner outside


def test_tty(run):
    import pty
    import select
    pid, fd = pty.fork()
    if pid == 0:
        os.execv(str(BUILD / "hutch"), [str(BUILD / "hutch"), "run", "-i", "-t", "--", "sh", "-c",
                                          "tty; stty size; read x; echo got:$x"])
    out = b""
    os.write(fd, b"abc\n")
    while True:
        ready, _, _ = select.select([fd], [], [], 20)
        if not ready:
            break
        try:
            chunk = os.read(fd, 4096)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    _, status = os.waitpid(pid, 0)
    text = out.decode(errors="replace")
    assert os.waitstatus_to_exitcode(status) == 0, text
    assert "/dev/pts/0" in text and "got:abc" in text, text


def test_bad_command_line_of_hutch_itself():
    for args, says in (([], "no command given"), (["frobnicate"], "unknown command 'frobnicate'")):
        r = subprocess.run([BUILD / "hutch", *args], capture_output=True, text=True)
        assert r.returncode == 125 and says in r.stderr and r.stderr.count("\n") == 1, r


def test_bind_source_its_owner_cannot_read(run, tmp_path):
    # Inside, the source's owner is the sandbox user: root may read a mode
    # 000 file on the host, the workload would not.
    for mode, kind in ((0o000, "file"), (0o600, "dir")):
        src = tmp_path / f"src-{kind}"
        src.mkdir() if kind == "dir" else src.write_text("x")
        src.chmod(mode)
        r = run(["--bind-ro", f"{src}:/src", "--", "true"], verdict=False)
        assert r.code == 125 and "not readable by its owner" in r.err and r.err.count("\n") == 1, r


def test_stale_verdict_file_is_emptied_by_bad_input(run, tmp_path):
    v = tmp_path / "v.json"
    v.write_text('{"status": "ok"}')
    r = subprocess.run([BUILD / "hutch", "run", "--verdict-json", v, "--output-limit", "x", "--", "true"],
                       capture_output=True)
    assert r.returncode == 125 and v.read_text() == ""


def test_unwritable_verdict_is_hutchs_failure():
    r = subprocess.run([BUILD / "hutch", "run", "--verdict-json", "/dev/full", "--", "true"],
                       capture_output=True, text=True)
    assert r.returncode == 125 and "--verdict-json" in r.stderr and r.stderr.count("\n") == 1, r


def test_long_arguments_up_to_the_kernels_limit(run):
    r = run(["--env", "BIG=" + "b" * 100000, "--", "sh", "-c", 'echo ${#1} ${#BIG}', "sh", "a" * 100000])
    assert r.code == 0 and r.out == "100000 100000\n", r


def test_cpus_as_a_bare_fraction(run):
    r = run(["--cpus", ".5", "--", "true"])
    assert r.code == 0, r


def test_a_limit_that_ends_the_command_exits_137(run):
    # echo has exited by itself by the time the agent acts on the limit:
    # it was cut short all the same.
    for _ in range(5):
        r = run(["--output-limit", "5", "--", "echo", "hello, world"])
        assert r.verdict["status"] == "output_limit" and r.code == 137, r
        assert r.out == "hello"


def test_pids_limit_counts_only_the_commands_processes(run):
    assert run(["--pids", "1", "--", "true"]).code == 0
    r = run(["--pids", "2", "--", "sh", "-c", "/bin/true && echo ok"])
    assert r.out == "ok\n", r


def test_closed_output_ends_the_writer_and_the_sandbox(tmp_path):
    # hutch run ... | head: yes must meet a closed pipe as it would outside
    # (SIGPIPE), hutch must not die of it, and the sandbox must go away.
    v = tmp_path / "v.json"
    p = subprocess.Popen([BUILD / "hutch", "run", "--verdict-json", v, "--", "yes"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert p.stdout.read(5) == b"y\ny\ny"
    p.stdout.close()
    assert p.wait(timeout=30) == 128 + signal.SIGPIPE, p.stderr.read()
    verdict = json.loads(v.read_text())
    assert verdict["status"] == "signaled" and verdict["signal"] == signal.SIGPIPE, verdict


def test_signals_ignored_by_hutchs_caller_are_not_the_workloads(tmp_path):
    # A shell's background job ignores SIGINT; the workload must not inherit that.
    r = subprocess.run(["sh", "-c", f"trap '' INT QUIT; {BUILD / 'hutch'} run -- grep SigIgn /proc/self/status"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0 and r.stdout.split() == ["SigIgn:", "0000000000000000"], r


def test_tty_without_stdin_leaves_interrupt_to_the_terminal():
    import pty
    pid, fd = pty.fork()
    if pid == 0:
        os.execv(str(BUILD / "hutch"), [str(BUILD / "hutch"), "run", "-t", "--", "sh", "-c",
                                          "echo ready; exec sleep 100"])
    out = b""
    deadline = time.monotonic() + 20
    while b"ready" not in out and time.monotonic() < deadline:
        if select.select([fd], [], [], 1)[0]:
            out += os.read(fd, 4096)
    assert b"ready" in out, out
    os.write(fd, b"\x03")  # ^C, read by the terminal's line discipline: SIGINT to hutch
    status = None
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if select.select([fd], [], [], 0.2)[0]:
            try:
                os.read(fd, 4096)
            except OSError:
                pass
    os.close(fd)
    if status is None or not os.WIFEXITED(status):
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        pytest.fail("hutch run -t did not stop on ^C")
    assert os.WEXITSTATUS(status) == 130


def test_runs_whatever_fds_the_caller_left_open(tmp_path):
    """The sandbox's first process moves its fds to the numbers the agent
    expects; which numbers the kernel gave them depends on what the caller
    left open (and on the cgroup version: v2 has one cgroup fd, v1 four).
    None may be overwritten on the way, the agent's binary included (it
    once was, on v2, by the seccomp listener's fd 17)."""
    bad = []
    for k in range(24):
        fds = [os.open("/dev/null", os.O_RDONLY) for _ in range(k)]
        try:
            r = subprocess.run([str(BUILD / "hutch"), "run", "--", "true"], pass_fds=fds,
                               capture_output=True, timeout=60)
        finally:
            for f in fds:
                os.close(f)
        if r.returncode != 0:
            bad.append((k, r.stderr.decode(errors="replace").strip()))
    assert not bad, bad
