"""The CLI's interactive verbs against a live server: `hutch shell` and
`hutch exec -it` through a real terminal the test opens (a pty whose slave
end hutch has as its controlling terminal), `hutch cp` both ways with a
tree, `-` and the hostile cases (links pointing out, on both sides; a tar
entry leading out), and `hutch top`."""
import fcntl
import io
import json
import os
import pathlib
import re
import select
import signal
import struct
import subprocess
import tarfile
import termios
import time

import pytest

from conftest import BUILD
from serveapi import Server, WebSocket, wait_for

HUTCH = BUILD / "hutch"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    s = Server(BUILD / "hutch-serve", tmp_path_factory.mktemp("ctlterm") / "state").start()
    yield s
    assert s.stop() == 0, s.log_text()


@pytest.fixture(scope="module")
def api(server):
    return server.api(server.api().post("/v1/keys", {"tenant": "term"}).json["key"])


@pytest.fixture(scope="module")
def env(server, api):
    e = {k: v for k, v in os.environ.items() if not k.startswith("HUTCH_")}
    e.update(HUTCH_URL=f"http://127.0.0.1:{server.port}", HUTCH_API_KEY=api.key,
             TERM="xterm", NO_COLOR="1")
    return e


@pytest.fixture
def sandbox(api):
    sb = api.create(timeout_s=300)
    yield sb["id"]
    api.delete(f"/v1/sandboxes/{sb['id']}")


def hutch(env, *args, input=None, check=True):
    p = subprocess.run([str(HUTCH), *map(str, args)], env=env, input=input,
                       capture_output=True, timeout=120)
    if check:
        assert p.returncode == 0, (args, p.returncode, p.stderr)
    return p


# ---- a real terminal ----

def set_size(fd, rows, cols):
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))


class Term:
    """hutch on a pty of its own: the test holds the master and keeps the
    slave open too, to read its settings before and after."""

    def __init__(self, env, *args, rows=24, cols=80):
        self.master, self.slave = os.openpty()
        set_size(self.master, rows, cols)
        self.before = termios.tcgetattr(self.slave)
        self.proc = subprocess.Popen(
            [str(HUTCH), *args], env=env, stdin=self.slave, stdout=self.slave,
            stderr=self.slave, start_new_session=True,
            preexec_fn=lambda: fcntl.ioctl(0, termios.TIOCSCTTY, 0))
        self.out = b""

    def expect(self, text, seconds=30):
        """Read until text came (bytes); fail with what came if it did not."""
        want = text.encode() if isinstance(text, str) else text
        deadline = time.monotonic() + seconds
        while want not in self.out:
            left = deadline - time.monotonic()
            r, _, _ = select.select([self.master], [], [], max(left, 0))
            if not r:
                raise AssertionError(f"{want!r} did not come; came: {self.out[-2000:]!r}")
            try:
                self.out += os.read(self.master, 65536)
            except OSError:  # the slave's last holder went: nothing more comes
                raise AssertionError(f"{want!r} did not come; came: {self.out[-2000:]!r}")
        at = self.out.index(want) + len(want)
        seen, self.out = self.out[:at], self.out[at:]
        return seen

    def type(self, data):
        os.write(self.master, data.encode() if isinstance(data, str) else data)

    def run(self, line, marker):
        """Type line, read until marker (which the line's echo does not hold)."""
        self.type(line + "\r")
        return self.expect(marker)

    def size_comes(self, size):
        """Whether stty inside says size (RxC), asked up to ten times: the
        resize and the typed line travel apart."""
        for _ in range(10):
            if size.encode() in self.run("stty size | tr ' ' x; echo sz-$((2+2))", "sz-4"):
                return True
        return False

    def raw(self):
        return not termios.tcgetattr(self.slave)[3] & termios.ICANON

    def wait(self):
        code = self.proc.wait(timeout=60)
        return code

    def restored(self):
        return termios.tcgetattr(self.slave) == self.before

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        os.close(self.master)
        os.close(self.slave)


def running(api, sid, name):
    """Whether a process of that name runs in the sandbox (seen by an exec)."""
    lines = api.exec(sid, {"shell": f"grep -lx {name} /proc/[0-9]*/comm"})
    return lines[-1]["status"] == "ok"


@pytest.fixture
def term():
    made = []
    yield lambda *a, **kw: made.append(Term(*a, **kw)) or made[-1]
    for t in made:
        t.close()


def test_shell_types_interrupts_resizes_and_ends(env, api, sandbox, term):
    t = term(env, "shell", sandbox)
    t.run("echo hi-$((40+2))", "hi-42")
    assert t.raw()  # our keys are the remote terminal's
    assert b"24x80" in t.run("stty size | tr ' ' x; echo s-$((1+2))", "s-3")

    # Resizing the terminal resizes the remote one (SIGWINCH to hutch).
    set_size(t.master, 40, 100)
    assert t.size_comes("40x100")

    # A terminal that tells no size (0x0) is left as it was; one past what
    # the server takes (65535) is sent at its bound; the session lives.
    set_size(t.master, 0, 0)
    assert b"40x100" in t.run("stty size | tr ' ' x; echo z-$((3+3))", "z-6")
    set_size(t.master, 65535, 65535)
    assert t.size_comes("9999x9999")
    set_size(t.master, 30, 90)

    # Ctrl-C interrupts the command in the sandbox, once it runs there (its
    # process seen from outside), and the shell lives on.
    t.type("sleep 100\r")
    wait_for(lambda: running(api, sandbox, "sleep"), 30)
    t.type(b"\x03")
    assert b"rc-130" in t.run("echo rc-$?; echo alive-$((5+5))", "alive-10")

    # Ctrl-D ends the shell; hutch's status is the shell's.
    t.run("PS1='[p''s]'", "[ps]")
    t.run("(exit 3)", "[ps]")
    t.type(b"\x04")
    assert t.wait() == 3
    assert t.restored()


def test_exec_it_is_a_terminal_session(env, sandbox, term):
    t = term(env, "exec", "-it", sandbox, "sh", "-c",
             "test -t 0 && echo tty-yes; read x; echo got-$x; exit 5")
    t.expect("tty-yes")
    t.type("abc\r")
    t.expect("got-abc")
    assert t.wait() == 5
    assert t.restored()


def test_exec_t_alone_is_a_terminal_for_output(env, sandbox, term):
    t = term(env, "exec", "-t", sandbox, "sh", "-c", "test -t 1 && echo out-is-tty; exit 2")
    seen = t.expect("out-is-tty\r\n")  # the remote terminal's CR LF, not one more CR here
    assert b"\r\r\n" not in seen, seen
    assert t.wait() == 2
    assert t.restored()


def test_terminal_restored_when_the_sandbox_is_killed(env, api, term):
    sid = api.create(timeout_s=300)["id"]
    t = term(env, "shell", sid)
    t.run("echo up-$((1+8))", "up-9")
    assert t.raw()
    assert api.delete(f"/v1/sandboxes/{sid}").status == 204
    code = t.wait()
    assert code == 125, code  # hutch's own (sandbox_error), not the shell's
    assert t.restored()


def test_terminal_restored_on_sigterm_and_sighup(env, sandbox, term):
    for sig in (signal.SIGTERM, signal.SIGHUP):
        t = term(env, "shell", sandbox)
        t.run("echo up-$((2+8))", "up-10")
        t.proc.send_signal(sig)
        assert t.wait() == 128 + sig
        assert t.restored()


def test_exec_t_without_a_terminal_is_refused(env, sandbox):
    p = hutch(env, "exec", "-it", sandbox, "true", input=b"", check=False)
    assert p.returncode == 125 and b"terminal" in p.stderr, p


def test_server_refuses_sizes_out_of_bounds(server, api, sandbox):
    """What hutch-ctl never sends (it clamps), a client of its own may:
    each out-of-bounds resize is refused and the session lives on."""
    r = api.post(f"/v1/sandboxes/{sandbox}/exec", {
        "cmd": ["sh"], "background": True, "keep_stdin": True, "pty": {"rows": 24, "cols": 80}})
    assert r.status == 201, r
    ws = WebSocket(server.port, f"/v1/sandboxes/{sandbox}/exec/{r.json['pid']}/ws", api.key)
    assert ws.status == 101 and ws.accepted, ws.head
    msgs = ws.messages()
    for rows, cols in ((0, 0), (65535, 65535), (1 << 40, 5), (-1, 80), ("24", 80)):
        ws.send_json({"type": "resize", "rows": rows, "cols": cols})
        m = next(m for m in msgs if m["type"] != "stdout")
        assert (m["type"], m["code"]) == ("error", "invalid_argument"), (rows, cols, m)
    ws.send(b"stty size | tr ' ' x; exit\n", opcode=2)
    seen = ""
    for m in msgs:
        seen += m.get("data", "")
        if m["type"] == "exit":
            break
    assert "24x80" in seen and m["status"] == "ok", (seen, m)
    ws.close()
    assert server.api(None).get("/healthz").status == 200


# ---- cp ----

def make_tree(root):
    (root / "sub" / "deeper").mkdir(parents=True)
    (root / "a.txt").write_text("alpha\n")
    (root / "sub" / "b.bin").write_bytes(os.urandom(300_000))
    (root / "sub" / "deeper" / "c").write_text("")
    return {p.relative_to(root).as_posix(): p.read_bytes()
            for p in root.rglob("*") if p.is_file()}


def tree_of(root):
    return {p.relative_to(root).as_posix(): p.read_bytes()
            for p in root.rglob("*") if p.is_file() and not p.is_symlink()}


def sh(api, sid, script):
    lines = api.exec(sid, {"shell": script})
    assert lines[-1]["status"] == "ok", lines
    return "".join(l.get("data", "") for l in lines if l.get("type") == "stdout")


def test_cp_a_tree_both_ways(env, api, sandbox, tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    want = make_tree(src)
    secret = tmp_path / "secret"
    secret.write_text("host only\n")
    os.symlink(secret, src / "link")  # a link out of what was named

    p = hutch(env, "cp", src, f"{sandbox}:/home/user/in")
    assert b"link" in p.stderr  # skipped, and said
    listing = sh(api, sandbox, "cd /home/user/in && find . | sort")
    assert "./link" not in listing and "./sub/deeper/c" in listing
    assert sh(api, sandbox, "cat /home/user/in/a.txt") == "alpha\n"

    out = tmp_path / "out"
    out.mkdir()
    hutch(env, "cp", f"{sandbox}:/home/user/in", out)  # into out: out/in
    assert tree_of(out / "in") == want
    hutch(env, "cp", f"{sandbox}:/home/user/in/a.txt", tmp_path / "one.txt")
    assert (tmp_path / "one.txt").read_text() == "alpha\n"

    # A link named as SRC is copied only with -L.
    p = hutch(env, "cp", src / "link", f"{sandbox}:/home/user/x", check=False)
    assert p.returncode == 125 and b"-L" in p.stderr
    hutch(env, "cp", "-L", src / "link", f"{sandbox}:/home/user/x")
    assert sh(api, sandbox, "cat /home/user/x") == "host only\n"

    # Unknown sandbox paths and sandboxes are errors of their own.
    p = hutch(env, "cp", f"{sandbox}:/nope", out, check=False)
    assert p.returncode == 122, p
    p = hutch(env, "cp", "a", "b", check=False)
    assert p.returncode == 125 and b"ID:PATH" in p.stderr


def test_cp_links_in_the_sandbox_do_not_lead_out(env, api, sandbox, tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("untouched\n")
    sh(api, sandbox, "mkdir -p /home/user/t && echo in > /home/user/t/a.txt && "
                     f"ln -s {victim} /home/user/t/evil && ln -s / /home/user/t/root && "
                     "ln -s /etc/passwd /home/user/passwd")

    out = tmp_path / "out"
    out.mkdir()
    p = hutch(env, "cp", f"{sandbox}:/home/user/t", out)
    assert sorted(os.listdir(out / "t")) == ["a.txt"], p.stderr
    assert b"evil" in p.stderr and b"root" in p.stderr

    # A link already on the host where a file goes is not written through.
    os.symlink(victim, out / "t" / "a.txt.tmp")
    os.replace(out / "t" / "a.txt.tmp", out / "t" / "a.txt")
    p = hutch(env, "cp", f"{sandbox}:/home/user/t", out, check=False)
    assert p.returncode == 125 and b"link" in p.stderr, p
    assert victim.read_text() == "untouched\n"

    # The link named itself: refused without -L; with -L its end is read
    # inside the sandbox (the sandbox's /etc/passwd, not the host's).
    p = hutch(env, "cp", f"{sandbox}:/home/user/passwd", tmp_path / "pw", check=False)
    assert p.returncode == 125 and not (tmp_path / "pw").exists()
    hutch(env, "cp", "-L", f"{sandbox}:/home/user/passwd", tmp_path / "pw")
    assert (tmp_path / "pw").read_text() == sh(api, sandbox, "cat /etc/passwd")


def test_cp_names_reach_the_terminal_escaped(env, api, sandbox, tmp_path, term):
    """File names are the sandbox's to choose: one that is a title and a
    clear screen to a terminal (and a C1 CSI) is shown escaped, in the
    warnings and in the bar."""
    sh(api, sandbox, "mkdir -p /tmp/d && n=$(printf '\\033]0;pwned\\007\\033[2J') && "
                     "echo hi > /tmp/d/f$n && ln -s /nowhere \"/tmp/d/l$n$(printf '\\302\\233')2J\"")
    hostile = b"\x1b]0;pwned\x07\x1b[2J"
    shown = b"\\x1b]0;pwned\\x07\\x1b[2J"

    out = tmp_path / "out"
    out.mkdir()
    p = hutch(env, "cp", f"{sandbox}:/tmp/d", out)
    assert (out / "d" / f"f{hostile.decode()}").read_text() == "hi\n"  # the name kept on disk
    assert b"\x1b" not in p.stderr and b"\xc2\x9b" not in p.stderr, p.stderr
    assert b"/tmp/d/l" + shown + b"\\u009b2J is a link" in p.stderr, p.stderr

    # On a terminal, with the bar: only the bar's own \r\033[K is a command.
    t = term(env, "cp", f"{sandbox}:/tmp/d", tmp_path / "again")
    assert t.wait() == 0
    while select.select([t.master], [], [], 0)[0]:
        t.out += os.read(t.master, 65536)
    said = t.out.replace(b"\r\x1b[K", b"")
    assert b"\x1b" not in said and b"\x07" not in said and b"\xc2\x9b" not in said, t.out
    assert re.search(re.escape(b"/tmp/d/f" + shown) + rb" +\[[.#]{20}\]", said), t.out


def test_cp_L_copies_each_directory_once(env, api, sandbox, tmp_path):
    """-L through links that loop (a -> ., b -> .: 2^64 walks before) or
    lead to one directory twice: each directory is copied once, the rest
    skipped with a warning, on both sides."""
    sh(api, sandbox, "mkdir -p /tmp/loop/s && echo f > /tmp/loop/f && echo g > /tmp/loop/s/g && "
                     "cd /tmp/loop && ln -s . a && ln -s . b && ln -s s t1 && ln -s /tmp/loop/s t2")
    out = tmp_path / "out"
    out.mkdir()
    p = hutch(env, "cp", "-L", f"{sandbox}:/tmp/loop", out)
    files = sorted(x.relative_to(out).as_posix() for x in out.rglob("*") if x.is_file())
    assert len(files) == 2 and files[0] == "loop/f" and files[1] in \
        ("loop/s/g", "loop/t1/g", "loop/t2/g"), (files, p.stderr)
    assert p.stderr.count(b"a directory copied already") == 4, p.stderr
    for name in (b"loop/a:", b"loop/b:"):
        assert name in p.stderr, p.stderr
    p = hutch(env, "cp", "-L", f"{sandbox}:/tmp/loop", "-")
    with tarfile.open(fileobj=io.BytesIO(p.stdout)) as tar:
        assert len([m for m in tar if m.isfile()]) == 2

    src = tmp_path / "src"
    (src / "s").mkdir(parents=True)
    (src / "f").write_text("f\n")
    (src / "s" / "g").write_text("g\n")
    # up is src by another path: known by its inode, not its name.
    for name, to in (("a", "."), ("b", "."), ("t", "s"), ("up", "../src")):
        os.symlink(to, src / name)
    p = hutch(env, "cp", "-L", src, f"{sandbox}:/home/user/loopin")
    listing = sh(api, sandbox, "cd /home/user/loopin && find . -type f | sort").split()
    assert len(listing) == 2 and listing[0] == "./f" and listing[1] in ("./s/g", "./t/g"), \
        (listing, p.stderr)
    assert p.stderr.count(b"a directory copied already") == 4, p.stderr


def test_cp_dash_is_a_tar(env, api, sandbox, tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    want = make_tree(src)
    hutch(env, "cp", src, f"{sandbox}:/home/user/d")

    p = hutch(env, "cp", f"{sandbox}:/home/user/d", "-")
    with tarfile.open(fileobj=io.BytesIO(p.stdout)) as tar:
        got = {m.name: tar.extractfile(m).read() for m in tar if m.isfile()}
        dirs = {m.name for m in tar if m.isdir()}
    assert got == {f"d/{k}": v for k, v in want.items()}
    assert {"d", "d/sub", "d/sub/deeper"} <= dirs

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, data in (("x/one", b"1\n"), ("./x/two", b"2\n")):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    hutch(env, "cp", "-", f"{sandbox}:/home/user/fromtar", input=buf.getvalue())
    assert sh(api, sandbox, "cat /home/user/fromtar/x/one /home/user/fromtar/x/two") == "1\n2\n"

    for evil in ("../escaped", "/home/user/abs", "x/../../escaped"):
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            info = tarfile.TarInfo(evil)
            info.size = 3
            tar.addfile(info, io.BytesIO(b"no\n"))
        p = hutch(env, "cp", "-", f"{sandbox}:/home/user/evil/in", input=buf.getvalue(),
                  check=False)
        assert p.returncode == 125 and b"leads out" in p.stderr, (evil, p)
    assert sh(api, sandbox, "ls /home/user/evil /home/user; ls /home/user/abs 2>&1 || true") \
        .count("escaped") == 0


# ---- top ----

def test_top_once_json_matches_the_api(env, api, sandbox):
    p = hutch(env, "top", "--once", "--json")
    rows = json.loads(p.stdout)
    mine = [r for r in rows if r["id"] == sandbox]
    assert len(mine) == 1
    direct = api.get(f"/v1/sandboxes/{sandbox}/metrics").json
    assert mine[0]["state"] == direct["state"]
    assert set(mine[0]["current"]) == set(direct["current"])
    assert mine[0]["current"]["memory_limit_bytes"] == direct["current"]["memory_limit_bytes"]

    p = hutch(env, "top", sandbox)  # not a terminal: one table
    lines = p.stdout.decode().splitlines()
    assert lines[0].split()[:2] == ["SANDBOX", "STATE"] and sandbox in lines[1]
    p = hutch(env, "top", "--once", "sbx_nope", check=False)
    assert p.returncode == 122, p
