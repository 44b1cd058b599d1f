"""hutch template build: a Dockerfile built daemonless, each RUN step in a
sandbox. The base is made from nothing (FROM scratch + COPY of a static
busybox from the context), so these tests need no image and no network.
Each checks the record, the files, the cache, the progress stream, and
that hostile steps and contexts fail cleanly: one line on stderr, the
right exit code, no template listed, tmp/ empty, no sandbox left (the
autouse leftovers check)."""
import json
import os
import pathlib
import shutil
import subprocess
import tarfile
import time

import pytest

from conftest import BUILD, build_binary, require

BUSYBOX = pathlib.Path("/bin/busybox")


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """A state directory of the module's own (its cache shared by the tests)."""
    return tmp_path_factory.mktemp("tplstate")


def template(store, *args, binary=None, timeout=120):
    cmd = [str(binary or BUILD / "hutch-template"), "--state-dir", str(store), *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


def ndjson(store, *args, **kw):
    p = template(store, "--progress", "ndjson", *args, **kw)
    events = [json.loads(line) for line in p.stdout.splitlines()]
    assert all(isinstance(e, dict) and isinstance(e.get("event"), str) for e in events)
    return p, events


def context(tmp_path, dockerfile, files=None):
    require(BUSYBOX.exists() and b"/ld-linux" not in BUSYBOX.read_bytes()[:4096],
            "a static /bin/busybox (Debian's busybox-static) is needed")
    ctx = tmp_path / f"ctx{time.monotonic_ns()}"
    ctx.mkdir()
    shutil.copy(BUSYBOX, ctx / "busybox")
    (ctx / "Dockerfile").write_text(dockerfile)
    for name, text in (files or {}).items():
        (ctx / name).parent.mkdir(parents=True, exist_ok=True)
        (ctx / name).write_text(text)
    return ctx


BASE = """FROM scratch AS base
COPY busybox /bin/busybox
RUN ["/bin/busybox", "--install", "-s", "/bin"]
"""

FULL = BASE + """ENV GREETING=hi NAME="the world"
WORKDIR /app
COPY --chown=1000:1000 data/ ./data/
COPY ["data/keep.txt", "/plain/"]
COPY --chmod=4700 data/keep.txt /private/keep.txt
RUN echo "$GREETING $NAME" > out.txt && touch /app/made-by-run
LABEL org.example.kind=test "two words"=yes
EXPOSE 8080 53/udp 7000-7002

FROM base
ARG V=1
RUN echo "v=$V" > /v.txt
COPY --from=base /app/out.txt /copied.txt
ADD bundle.tar /unpacked/
USER 1000
ENTRYPOINT ["/bin/sh", "-c"]
CMD ["echo hello"]
"""


def full_context(tmp_path):
    ctx = context(tmp_path, FULL, {"data/keep.txt": "kept\n", "data/skip.log": "ignored\n",
                                   "data/deep/x.log": "ignored too\n",
                                   "data/tmp/junk": "ignored\n", "data/tmp/wanted": "back\n",
                                   ".dockerignore": "# logs stay out\n**/*.log\ndata/tmp\n"
                                                    "!data/tmp/wanted\n"})
    inner = tmp_path / "inner.txt"
    inner.write_text("from the archive\n")
    with tarfile.open(ctx / "bundle.tar", "w") as t:
        t.add(inner, arcname="dir/inner.txt")
    return ctx


def record(store, name):
    p = template(store, "inspect", name)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def merged_file(store, rec, path):
    """path as the template shows it: the topmost layer holding it."""
    for hex in reversed(rec["layers"]):
        f = pathlib.Path(store) / "images" / "layers" / hex / path.lstrip("/")
        if os.path.lexists(f):
            return f
    return None


def tmp_empty(store):
    return not any((pathlib.Path(store) / "images" / "tmp").iterdir())


@pytest.mark.parametrize("which", ["build", "asan"])
def test_build_full(store, tmp_path, which):
    binary = build_binary(which, "hutch-template")
    ctx = full_context(tmp_path)
    name = f"full-{which}"
    p, events = ndjson(store, "build", "--build-arg", "V=5", "-t", name, str(ctx), binary=binary)
    assert p.returncode == 0, p.stderr
    assert "Sanitizer" not in p.stderr and "runtime error" not in p.stderr
    steps = [e for e in events if e["event"] == "step"]
    assert [e["step"] for e in steps] == list(range(1, len(steps) + 1))
    assert all(e["steps"] == len(steps) for e in steps)
    assert steps[3]["instruction"].startswith("ENV GREETING=hi")  # (COPY --chmod: setuid dropped)
    done = [e for e in events if e["event"] == "step_done"]
    assert len(done) == len(steps)
    assert all(isinstance(e["cached"], bool) and e["bytes"] >= 0 and e["seconds"] >= 0
               for e in done)
    assert events[-1]["event"] == "done" and events[-1]["name"] == name

    rec = record(store, name)
    cfg = rec["config"]
    assert rec["source"] == "build"
    assert cfg["env"] == ["GREETING=hi", "NAME=the world"]
    assert cfg["workdir"] == "/app" and cfg["user"] == "1000"
    assert cfg["entrypoint"] == ["/bin/sh", "-c"] and cfg["cmd"] == ["echo hello"]
    assert cfg["labels"] == {"org.example.kind": "test", "two words": "yes"}
    assert cfg["exposed_ports"] == ["8080/tcp", "53/udp", "7000-7002/tcp"]

    keep = merged_file(store, rec, "/app/data/keep.txt")
    assert keep.read_text() == "kept\n"
    assert (keep.stat().st_uid, keep.stat().st_gid) == (1000, 1000)
    assert merged_file(store, rec, "/plain/keep.txt").stat().st_uid == 0
    assert merged_file(store, rec, "/private/keep.txt").stat().st_mode & 0o7777 == 0o700
    assert merged_file(store, rec, "/app/data/skip.log") is None
    assert merged_file(store, rec, "/app/data/deep/x.log") is None
    assert merged_file(store, rec, "/app/data/tmp/junk") is None
    assert merged_file(store, rec, "/app/data/tmp/wanted").read_text() == "back\n"
    assert merged_file(store, rec, "/app/made-by-run") is not None
    assert merged_file(store, rec, "/v.txt").read_text() == "v=5\n"
    assert merged_file(store, rec, "/copied.txt").read_text() == "hi the world\n"
    assert merged_file(store, rec, "/unpacked/dir/inner.txt").read_text() == "from the archive\n"
    assert tmp_empty(store)


def test_cache_and_no_cache(store, tmp_path):
    ctx = context(tmp_path,
                  BASE + "RUN echo one > /one\nCOPY data.txt /copy\nRUN echo two > /two\n",
                  {"data.txt": "first\n"})
    p, first = ndjson(store, "build", "-t", "cached", str(ctx))
    assert p.returncode == 0, p.stderr
    t0 = time.monotonic()
    p, again = ndjson(store, "build", "-t", "cached", str(ctx))
    took = time.monotonic() - t0
    assert p.returncode == 0, p.stderr
    layered = [e for e in again if e["event"] == "step_done" and e["layer"]]
    assert len(layered) == 5 and all(e["cached"] for e in layered), layered
    assert [e["layer"] for e in layered] == \
        [e["layer"] for e in first if e["event"] == "step_done" and e["layer"]]
    assert took < 2, f"a cached rebuild took {took:.2f} s"

    p, fresh = ndjson(store, "build", "--no-cache", "-t", "cached", str(ctx))
    assert p.returncode == 0, p.stderr
    runs = [e for e in fresh if e["event"] == "step_done" and e["step"] in (3, 4, 6)]
    assert not any(e["cached"] for e in runs), runs

    # A changed file in the context changes its COPY and every step after.
    (ctx / "data.txt").write_text("second\n")
    p, changed = ndjson(store, "build", "-t", "cached", str(ctx))
    assert p.returncode == 0, p.stderr
    by_step = {e["step"]: e for e in changed if e["event"] == "step_done"}
    assert by_step[4]["cached"] and not by_step[6]["cached"]


def test_copy_from_a_template(store, tmp_path):
    """COPY --from names a template of the store as well as a stage."""
    donor = context(tmp_path, BASE + "RUN echo gift > /gift\n")
    p = template(store, "build", "-t", "donor", str(donor))
    assert p.returncode == 0, p.stderr
    p = template(store, "build", "-t", "receiver",
                 str(context(tmp_path, "FROM scratch\nCOPY --from=donor /gift /bin/busybox /x/\n")))
    assert p.returncode == 0, p.stderr
    rec = record(store, "receiver")
    assert merged_file(store, rec, "/x/gift").read_text() == "gift\n"
    assert merged_file(store, rec, "/x/busybox").stat().st_size == BUSYBOX.stat().st_size


def test_run_as_user(store, tmp_path):
    """RUN runs as the sandbox's root, or as USER once a Dockerfile names one."""
    ctx = context(tmp_path, BASE + "RUN id -u > /tmp/root\nUSER 1000:1000\nRUN id -u > /tmp/user\n"
                               "USER nobody-here\nRUN true\n")
    p = template(store, "build", "-t", "users", str(ctx))
    assert p.returncode == 3 and "no user 'nobody-here'" in p.stderr, p.stderr
    ctx = context(tmp_path, BASE + "RUN id -u > /tmp/root\nUSER 1000:1000\nRUN id -u > /tmp/user\n")
    p = template(store, "build", "-t", "users", str(ctx))
    assert p.returncode == 0, p.stderr
    rec = record(store, "users")
    assert merged_file(store, rec, "/tmp/root").read_text() == "0\n"
    user = merged_file(store, rec, "/tmp/user")
    assert user.read_text() == "1000\n" and user.stat().st_uid == 1000


def test_run_as_root_has_a_package_managers_capabilities(store, tmp_path):
    """A RUN step's root may chown, read and write past modes, and change
    ids, as a package manager does (Docker's RUN can): capabilities of the
    step's own user namespace, Docker's default set less NET_RAW, MKNOD,
    AUDIT_WRITE, SETFCAP and SETPCAP. Nothing of the host's: no mount, no
    CAP_SYS_ADMIN; a user that root becomes has none; and a sandbox that
    is not a build's has none (tests/integration/test_posture.py)."""
    steps = ("RUN mkdir /owned && chown 1234:2345 /owned && stat -c %u:%g /owned > /tmp/chown\n"
             "RUN grep CapEff /proc/self/status > /tmp/caps\n"
             "RUN mkdir /m && (mount -t tmpfs none /m 2>/dev/null && echo mounted || echo refused)"
             " > /tmp/mount\n"
             "RUN mkdir /secret && chmod 000 /secret && echo x > /secret/f && cat /secret/f > /tmp/dac\n")
    ctx = context(tmp_path, BASE + steps)
    p = template(store, "build", "-t", "caps", str(ctx))
    assert p.returncode == 0, p.stderr
    rec = record(store, "caps")
    assert merged_file(store, rec, "/tmp/chown").read_text() == "1234:2345\n"
    eff = int(merged_file(store, rec, "/tmp/caps").read_text().split()[1], 16)
    want = sum(1 << c for c in (0, 1, 3, 4, 5, 6, 7, 10))
    assert eff == want, hex(eff)
    assert merged_file(store, rec, "/tmp/mount").read_text() == "refused\n"
    assert merged_file(store, rec, "/tmp/dac").read_text() == "x\n"
    owned = merged_file(store, rec, "/owned")
    assert owned.stat().st_uid == 1234 and owned.stat().st_gid == 2345


def test_a_user_of_a_run_step_has_no_capabilities(store, tmp_path):
    ctx = context(tmp_path, BASE + "USER 1000:1000\nRUN grep CapEff /proc/self/status > /tmp/caps\n"
                               "RUN grep CapBnd /proc/self/status > /tmp/bnd\n")
    p = template(store, "build", "-t", "usercaps", str(ctx))
    assert p.returncode == 0, p.stderr
    rec = record(store, "usercaps")
    assert int(merged_file(store, rec, "/tmp/caps").read_text().split()[1], 16) == 0


def test_here_documents(store, tmp_path):
    ctx = context(tmp_path, BASE + "RUN <<EOF\necho one > /one\necho two > /two\nEOF\n"
                               "RUN cat <<'END' > /three\n$NOT_EXPANDED\nEND\n")
    p = template(store, "build", "-t", "heredoc", str(ctx))
    assert p.returncode == 0, p.stderr
    rec = record(store, "heredoc")
    assert merged_file(store, rec, "/one").read_text() == "one\n"
    assert merged_file(store, rec, "/two").read_text() == "two\n"
    assert merged_file(store, rec, "/three").read_text() == "$NOT_EXPANDED\n"


def tar_with(path, *members):
    """A tar of (TarInfo fields, data) members."""
    import io
    with tarfile.open(path, "w") as t:
        for fields, data in members:
            info = tarfile.TarInfo(fields.pop("name"))
            for k, v in fields.items():
                setattr(info, k, v)
            info.size = len(data) if data is not None else 0
            t.addfile(info, io.BytesIO(data) if data is not None else None)


def test_add_hostile_archives(store, tmp_path):
    """ADD unpacks a local tar as safely as an image layer: no setuid bit,
    no device, owners as --chown says, and nothing out of the destination
    (no "..", no absolute name, nothing through a link)."""
    ctx = context(tmp_path, "FROM scratch\nADD --chown=1000:1001 good.tar /in/\n")
    tar_with(ctx / "good.tar", ({"name": "suid", "mode": 0o4755}, b"x"),
             ({"name": "null", "type": tarfile.CHRTYPE, "devmajor": 1, "devminor": 3}, None),
             ({"name": "dir/file"}, b"y"),
             ({"name": "dir/again", "type": tarfile.LNKTYPE, "linkname": "dir/file"}, None))
    p = template(store, "build", "-t", "add-ok", str(ctx))
    assert p.returncode == 0, p.stderr
    rec = record(store, "add-ok")
    suid = merged_file(store, rec, "/in/suid")
    assert suid.stat().st_mode & 0o7777 == 0o755 and suid.stat().st_uid == 1000
    assert suid.stat().st_gid == 1001
    assert merged_file(store, rec, "/in/null") is None
    assert merged_file(store, rec, "/in/dir/file").read_bytes() == b"y"
    again = merged_file(store, rec, "/in/dir/again")
    assert again.read_bytes() == b"y"
    assert again.stat().st_ino == merged_file(store, rec, "/in/dir/file").stat().st_ino
    for members in [[({"name": "../escape"}, b"x")],
                    [({"name": "/abs/escape"}, b"x")],
                    [({"name": "link", "type": tarfile.SYMTYPE, "linkname": "/tmp"}, None),
                     ({"name": "link/escape"}, b"x")],
                    [({"name": "hard", "type": tarfile.LNKTYPE, "linkname": "../../x"}, None)],
                    [({"name": "hard", "type": tarfile.LNKTYPE, "linkname": "/etc/passwd"}, None)],
                    [({"name": "link", "type": tarfile.SYMTYPE, "linkname": "/etc"}, None),
                     ({"name": "hard", "type": tarfile.LNKTYPE, "linkname": "link/passwd"}, None)]]:
        ctx = context(tmp_path, "FROM scratch\nADD bad.tar /in/\n")
        tar_with(ctx / "bad.tar", *members)
        p = template(store, "build", "-t", "add-bad", str(ctx))
        assert p.returncode == 2, (members, p.stderr)
        assert "ADD" in p.stderr.strip().splitlines()[-1]
        assert template(store, "inspect", "add-bad").returncode == 2
        assert tmp_empty(store)
    assert not os.path.exists("/tmp/escape")


def test_dockerfile_from_stdin(store, tmp_path):
    ctx = context(tmp_path, "FROM scratch\nCOPY nothing-here /x\n")
    p = subprocess.run([str(BUILD / "hutch-template"), "--state-dir", str(store), "build",
                        "-f", "-", "-t", "stdin", str(ctx)], input="FROM scratch\nCOPY busybox /bb\n",
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert merged_file(store, record(store, "stdin"), "/bb").exists()


def test_steps_that_change_nothing(store, tmp_path):
    """Steps that change nothing make the same (empty) layer: it is stacked
    once, at its topmost place, since overlayfs refuses a lower twice."""
    ctx = context(tmp_path, BASE + "RUN true\nRUN true\nRUN true\nWORKDIR /\n")
    p = template(store, "build", "--no-cache", "-t", "same", str(ctx))
    assert p.returncode == 0, p.stderr
    layers = record(store, "same")["layers"]
    assert len(layers) == len(set(layers)) == 3


def test_run_output_is_logged(store, tmp_path):
    ctx = context(tmp_path, BASE + "RUN echo to-out && echo to-err >&2\n")
    p, events = ndjson(store, "build", "--no-cache", "-t", "logs", str(ctx))
    assert p.returncode == 0, p.stderr
    logs = {(e["stream"], e["line"]) for e in events if e["event"] == "log"}
    assert ("stdout", "to-out") in logs and ("stderr", "to-err") in logs
    plain = template(store, "build", "--no-cache", "-t", "logs", str(ctx))
    assert plain.returncode == 0
    assert plain.stdout == f"logs {record(store, 'logs')['id']}\n"  # NAME ID, as import's
    assert "Step 4/4 : RUN echo to-out" in plain.stderr and "  to-err" in plain.stderr


HOSTILE = {
    "fork-bomb": 'RUN b() { b | b; }; b\n',
    "disk-fill": "RUN dd if=/dev/zero of=/big bs=1M count=64\n",
    "forever": "RUN sleep 600\n",
    "memory": "RUN dd if=/dev/zero bs=64M count=1 | tail -c 1 >/dev/null\n",
    "sparse-terabyte": "RUN truncate -s 1099511627776 /big\n",
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_run_step(store, tmp_path, case):
    ctx = context(tmp_path, BASE + HOSTILE[case])
    t0 = time.monotonic()
    p, events = ndjson(store, "build", "--timeout", "3", "--disk", "16", "--memory", "48",
                       "-t", f"hostile-{case}", str(ctx), timeout=60)
    assert p.returncode == 3, (p.returncode, p.stderr)
    assert time.monotonic() - t0 < 30
    assert p.stderr.count("\n") == 1, p.stderr  # one line, the progress went to stdout
    last = p.stderr.strip()
    assert last.startswith("hutch template build: step 4/4 (line 4, RUN): "), last
    assert events[-1]["event"] == "error" and events[-1]["code"] == "step_failed"
    if case == "forever":
        assert "longer than 3 s" in last
    if case == "sparse-terabyte":
        assert "pass the cap" in last
    assert template(store, "inspect", f"hostile-{case}").returncode == 2
    assert tmp_empty(store)


def test_context_symlink_escaping(store, tmp_path):
    for dockerfile, link in [("FROM scratch\nCOPY . /x/\n", "/etc/passwd"),
                             ("FROM scratch\nCOPY sub /x/\n", "../../../../etc"),
                             ("FROM scratch\nCOPY leak /x\n", "/etc/passwd")]:
        ctx = context(tmp_path, dockerfile)
        (ctx / "sub").mkdir()
        os.symlink(link, ctx / ("leak" if "leak" in dockerfile else "sub/leak"))
        p = template(store, "build", "-t", "escape", str(ctx))
        assert p.returncode == 2, p.stderr
        assert "leads out" in p.stderr.strip().splitlines()[-1]
    outside = context(tmp_path, "FROM scratch\nCOPY ../x /x\n")
    p = template(store, "build", "-t", "escape", str(outside))
    assert p.returncode == 2 and "outside the build context" in p.stderr
    # A link that stays inside is copied as a link.
    ctx = context(tmp_path, "FROM scratch\nCOPY . /x/\n")
    os.symlink("busybox", ctx / "inside")
    p = template(store, "build", "-t", "escape", str(ctx))
    assert p.returncode == 0, p.stderr
    assert os.readlink(merged_file(store, record(store, "escape"), "/x/inside")) == "busybox"
    # A glob's match that is a link to nothing is copied as the link (E2B's
    # builds copy folder/* over such a folder); one leading out still fails.
    ctx = context(tmp_path, "FROM scratch\nCOPY dir/* /y/\n")
    (ctx / "dir").mkdir()
    (ctx / "dir" / "file").write_text("data")
    os.symlink("file", ctx / "dir" / "good")
    os.symlink("nothing-here", ctx / "dir" / "dangling")
    p = template(store, "build", "-t", "globbed", str(ctx))
    assert p.returncode == 0, p.stderr
    rec = record(store, "globbed")
    assert os.readlink(merged_file(store, rec, "/y/dangling")) == "nothing-here"
    good = merged_file(store, rec, "/y/good")
    assert not os.path.islink(good) and open(good).read() == "data"  # a named link is followed
    os.symlink("/etc/passwd", ctx / "dir" / "out")
    p = template(store, "build", "-t", "globbed2", str(ctx))
    assert p.returncode == 2 and "leads out" in p.stderr, p.stderr
    assert tmp_empty(store)


@pytest.mark.parametrize("dockerfile,code,message", [
    ("FROM scratch\nFROBNICATE x\n", 2, "line 2: unknown instruction 'FROBNICATE'"),
    ("RUN true\n", 2, "line 1: RUN before the first FROM"),
    ("FROM scratch\nCOPY --mode=1 a b\n", 2, "line 2: COPY does not take --mode"),
    ("FROM no-such-template\n", 2, "FROM no-such-template: no template"),
    ("FROM scratch\nCOPY missing /x\n", 2, "missing: no such file"),
    ("FROM scratch\nEXPOSE 70000\n", 2, "EXPOSE 70000: expected PORT"),
    ("FROM scratch\nEXPOSE 9-8/tcp\n", 2, "EXPOSE 9-8/tcp: expected PORT"),
    ("FROM scratch\nADD https://example.com/x /x\n", 2, "URLs are not supported"),
    ("FROM scratch\nCOPY --from=nope busybox /x\n", 2, "COPY --from: FROM nope: no template"),
    ("FROM scratch\nRUN true\n", 3, "step 2/2 (line 2, RUN)"),
])
def test_bad_dockerfiles(store, tmp_path, dockerfile, code, message):
    p = template(store, "build", "-t", "bad", str(context(tmp_path, dockerfile)))
    assert p.returncode == code, p.stderr
    assert message in p.stderr.strip().splitlines()[-1], p.stderr
    assert template(store, "inspect", "bad").returncode == 2
    assert tmp_empty(store)


def test_run_from_built_template(tmp_path, run):
    """hutch run --template starts from the built template (the session's
    state directory, which hutch run uses too)."""
    ctx = full_context(tmp_path)
    p = subprocess.run([str(BUILD / "hutch-template"), "build", "-t", "runnable", str(ctx)],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    r = run(["--template", "runnable", "--", "sh", "-c", "pwd; id -u; cat /copied.txt /v.txt"])
    assert r.code == 0, r
    assert r.out == "/app\n1000\nhi the world\nv=1\n"


@pytest.fixture
def web(tmp_path):
    """An HTTP server on the host's loopback, serving one file."""
    import http.server
    import threading
    root = tmp_path / "www"
    root.mkdir()
    (root / "file").write_text("payload\n")
    handler = lambda *a: http.server.SimpleHTTPRequestHandler(*a, directory=str(root))
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield srv.server_address[1]
    srv.shutdown()


@pytest.mark.parametrize("which", ["build", "asan"])
def test_allow_out(store, tmp_path, web, which):
    """RUN steps have no network; --allow-out opens the way through the
    build's proxy to what it lists, and the deny floor still holds the
    host's loopback unless --egress-permit lifts it."""
    binary = build_binary(which, "hutch-template")
    ctx = context(tmp_path, BASE + f"RUN wget -O /got http://127.0.0.1:{web}/file\n")
    p = template(store, "build", "--no-cache", "-t", "net", str(ctx), binary=binary)
    assert p.returncode == 3 and "Connection refused" in p.stderr, p.stderr
    p = template(store, "build", "--no-cache", "--allow-out", "example.org", "-t", "net", str(ctx),
                 binary=binary)
    assert p.returncode == 3 and "403 Forbidden" in p.stderr, p.stderr
    p = template(store, "build", "--no-cache", "--allow-out", f"127.0.0.1:{web}", "-t", "net",
                 str(ctx), binary=binary)
    assert p.returncode == 3 and "403 Forbidden" in p.stderr, p.stderr
    p = template(store, "build", "--no-cache", "--allow-out", f"127.0.0.1:{web}",
                 "--egress-permit", f"127.0.0.1:{web}", "-t", "net", str(ctx), binary=binary)
    assert p.returncode == 0 and "Sanitizer" not in p.stderr, p.stderr
    assert merged_file(store, record(store, "net"), "/got").read_text() == "payload\n"
    p = template(store, "build", "--allow-out", "not a host", "-t", "net", str(ctx), binary=binary)
    assert p.returncode == 2 and "--allow-out" in p.stderr


def test_interrupted_build(store, tmp_path):
    """SIGTERM (a server ending a build) or ^C in a RUN step: the step
    fails, the sandbox goes, nothing is left."""
    ctx = context(tmp_path, BASE + "RUN echo started; sleep 600\n")
    proc = subprocess.Popen([str(BUILD / "hutch-template"), "--state-dir", str(store),
                             "--progress", "ndjson", "build", "-t", "interrupted", str(ctx)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    for line in proc.stdout:
        if json.loads(line).get("line") == "started":
            break
    proc.terminate()
    out, err = proc.communicate(timeout=30)
    assert proc.returncode != 0 and "interrupted by signal 15" in err, err
    assert template(store, "inspect", "interrupted").returncode == 2
    assert tmp_empty(store)


def test_from_an_image_reference(store, tmp_path):
    """FROM an image of a registry (Debian's docker-registry on loopback,
    the image pushed by skopeo) pulls it into a template named after it,
    which the next build reuses; COPY --from names one too."""
    from registryfake import DockerRegistry, busybox_image, write_layout
    for tool in ("docker-registry", "skopeo"):
        require(shutil.which(tool), f"{tool} is not installed (scripts/deps.sh --test)")
    reg = DockerRegistry(tmp_path)
    try:
        write_layout(tmp_path / "busy", [busybox_image()], "1.0")
        reg.push(tmp_path / "busy", "1.0", "tools/busy:1.0")
        ref = f"{reg.host}/tools/busy:1.0"
        ctx = context(tmp_path, f"FROM {ref}\nRUN cat /etc/note > /copy\n"
                                f"COPY --from={ref} /etc/note /again\n")
        p, events = ndjson(store, "build", "-t", "from-registry", str(ctx))
        assert p.returncode == 2 and "--insecure" in p.stderr, p.stderr
        p, events = ndjson(store, "build", "--insecure", "-t", "from-registry", str(ctx))
        assert p.returncode == 0, p.stderr
        assert any(e["event"] == "done" and e.get("step") == 1 for e in events)  # the pull's
        rec = record(store, "from-registry")
        assert merged_file(store, rec, "/copy").read_text() == "pulled\n"
        assert merged_file(store, rec, "/again").read_text() == "pulled\n"
        assert "NOTE=registry" in rec["config"]["env"]
        pulled = f"127.0.0.1-{reg.port}/tools/busy-1.0"
        assert record(store, pulled)["source"] == "pull"
    finally:
        reg.stop()
    # Reused without the registry.
    p = template(store, "build", "-t", "from-registry", str(ctx))
    assert p.returncode == 0, p.stderr
