"""hutch template pull: from Debian's docker-registry started on 127.0.0.1
(images pushed into it by skopeo from layouts the test builds), from a
fake registry that demands a bearer token, and from hostile ones (5xx, a
digest that does not match, a manifest that is no JSON, a trickle, a
blob larger than announced, a token that would add a header, a redirect
to a closed port). Every failure: exit 2, one line on stderr, no template
listed, nothing left in the store's tmp/. Only 127.0.0.1 is ever
reached; the guard against other addresses is tested in
tests/unit/test_registry.c (and below with a name that is not loopback
resolving to loopback)."""
import json
import os
import shutil
import subprocess
import time

import pytest

from conftest import build_binary, require
from registryfake import DockerRegistry, Fake, busybox_image, free_port, write_layout


@pytest.fixture(params=["build", "asan"])
def tpl(request, tmp_path):
    """tpl(*args, env={}) runs `hutch template` on a store of the test's own."""
    binary = build_binary(request.param, "hutch")
    state = tmp_path / "state"

    def run(*args, env=None, timeout=60):
        e = dict(os.environ)
        e.pop("HUTCH_REGISTRY_AUTH", None)
        e.update(env or {})
        p = subprocess.run([str(binary), "template", "--state-dir", str(state), *args],
                           capture_output=True,
                           timeout=timeout, env=e)
        err = p.stderr.decode(errors="replace")
        assert "Sanitizer" not in err and "runtime error" not in err, err
        return p

    run.state = state
    return run


def listed(tpl):
    p = tpl("ls", "--json")
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    return [t["name"] for t in (out["templates"] if isinstance(out, dict) else out)]


def inspect(tpl, name):
    p = tpl("inspect", name)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def failed_cleanly(tpl, p, *words):
    err = p.stderr.decode(errors="replace")
    assert p.returncode == 2, err
    assert len(err.strip().splitlines()) == 1, err
    for w in words:
        assert w in err, err
    assert listed(tpl) == []
    tmp = tpl.state / "images" / "tmp"
    assert not tmp.exists() or not list(tmp.iterdir())


@pytest.fixture(scope="module")
def registry(tmp_path_factory):
    """docker-registry with tools/busy:1.0 (one image), tools/docker:1.0
    (the same as a Docker v2 manifest) and tools/multi:1.0 (an index of
    arm64 and amd64 images, amd64 second)."""
    for tool in ("docker-registry", "skopeo"):
        require(shutil.which(tool), f"{tool} is not installed (scripts/deps.sh --test)")
    tmp = tmp_path_factory.mktemp("registry")
    reg = DockerRegistry(tmp)
    reg.busy = busybox_image()
    write_layout(tmp / "busy", [reg.busy], "1.0")
    reg.push(tmp / "busy", "1.0", "tools/busy:1.0")
    reg.push(tmp / "busy", "1.0", "tools/docker:1.0", docker_format=True)
    reg.amd64 = busybox_image(b"amd64\n")
    write_layout(tmp / "multi", [busybox_image(b"arm64\n", "arm64"), reg.amd64], "1.0")
    reg.push(tmp / "multi", "1.0", "tools/multi:1.0", all_images=True)
    yield reg
    reg.stop()


def test_pull_from_docker_registry(tpl, registry):
    ref = f"{registry.host}/tools/busy:1.0"
    p = tpl("--progress", "ndjson", "pull", "--insecure", ref)
    assert p.returncode == 0, p.stderr
    events = [json.loads(l) for l in p.stdout.decode().splitlines()]
    layers = [e for e in events if e["event"] == "pull_layer"]
    assert {e["index"] for e in layers} == {1, 2} and all(e["count"] == 2 for e in layers)
    assert all(e["done"] == e["total"] for e in layers if "message" in e)
    done = events[-1]
    assert done["event"] == "done" and done["name"] == "busy" and len(done["id"]) == 16
    assert listed(tpl) == ["busy"]
    rec = inspect(tpl, "busy")
    assert rec["source"] == "pull" and rec["ref"] == ref
    assert rec["layers"] == [d[7:] for d in registry.busy.diff_ids]
    assert "NOTE=registry" in rec["config"]["env"] and rec["config"]["cmd"] == ["/bin/sh"]


def test_run_pulled_template(registry, run):
    """What a registry served runs under hutch run --template, its config
    honoured (the session's store: hutch run's own)."""
    hutch = str(build_binary("build", "hutch"))
    name = f"busy-{os.getpid()}"
    p = subprocess.run([hutch, "template", "--local", "pull", "--insecure", "--replace", "--name", name,
                        f"{registry.host}/tools/busy:1.0"], capture_output=True, timeout=120)
    assert p.returncode == 0, p.stderr
    try:
        r = run(["--template", name, "--", "/bin/sh", "-c", "cat /etc/note; echo $NOTE"])
        assert r.code == 0 and r.out.splitlines() == ["pulled", "registry"], r
    finally:
        subprocess.run([hutch, "template", "--local", "rm", name], capture_output=True, timeout=60)


def test_pull_picks_linux_amd64_and_by_digest(tpl, registry):
    p = tpl("pull", "--insecure", "--name", "multi", f"{registry.host}/tools/multi:1.0")
    assert p.returncode == 0, p.stderr
    assert inspect(tpl, "multi")["layers"] == [d[7:] for d in registry.amd64.diff_ids]
    p = tpl("pull", "--insecure", "--name", "pinned",
            f"{registry.host}/tools/busy@{registry.busy.digest}")
    assert p.returncode == 0, p.stderr
    assert inspect(tpl, "pinned")["layers"] == [d[7:] for d in registry.busy.diff_ids]


def test_name_taken_and_replace(tpl, registry):
    """A taken name fails before any connection (the port here is closed);
    --replace replaces the template."""
    assert tpl("pull", "--insecure", f"{registry.host}/tools/busy:1.0").returncode == 0
    first = inspect(tpl, "busy")["id"]
    p = tpl("-q", "pull", "--insecure", f"127.0.0.1:{free_port()}/tools/busy:1.0")
    assert p.returncode == 2 and b"exists" in p.stderr and len(p.stderr.splitlines()) == 1
    p = tpl("pull", "--insecure", "--replace", f"{registry.host}/tools/busy:1.0")
    assert p.returncode == 0, p.stderr
    assert listed(tpl) == ["busy"] and inspect(tpl, "busy")["id"] != first


def test_pull_docker_manifest(tpl, registry):
    p = tpl("pull", "--insecure", f"{registry.host}/tools/docker:1.0")
    assert p.returncode == 0, p.stderr
    assert inspect(tpl, "docker")["layers"] == [d[7:] for d in registry.busy.diff_ids]


def test_pull_what_is_not_there(tpl, registry):
    failed_cleanly(tpl, tpl("-q", "pull", "--insecure", f"{registry.host}/tools/none:1.0"),
                   "has no manifest")
    failed_cleanly(tpl, tpl("-q", "pull", "--insecure", f"{registry.host}/tools/busy:2.0"),
                   "has no manifest")


def test_size_cap(tpl, registry):
    """--max-bytes bounds what a pull downloads (the busybox layer is ~1 MB)."""
    failed_cleanly(tpl, tpl("-q", "pull", "--insecure", "--max-bytes", "100000",
                            f"{registry.host}/tools/busy:1.0"), "more than a pull may take")


def test_plain_http_needs_insecure(tpl, registry):
    failed_cleanly(tpl, tpl("-q", "pull", f"{registry.host}/tools/busy:1.0"), "--insecure")


def test_insecure_only_on_loopback(tpl):
    """Refused before any connection (registry.invalid never resolves)
    and before any progress line."""
    failed_cleanly(tpl, tpl("pull", "--insecure", "registry.invalid/x:1"),
                   "only for a registry on loopback")


def test_not_loopback_by_name_may_not_reach_loopback(tpl, registry):
    """127.1 is not taken as a loopback name, so the pull is held to a
    public registry's rules; it resolves to 127.0.0.1, which the guard
    refuses before connecting."""
    failed_cleanly(tpl, tpl("-q", "pull", f"127.1:{registry.port}/tools/busy:1.0"),
                   "refused to connect to 127.0.0.1")


def test_bad_references(tpl):
    failed_cleanly(tpl, tpl("-q", "pull", "--insecure", "127.0.0.1:5000/UPPER:1"), "no image reference")
    failed_cleanly(tpl, tpl("-q", "pull", "--insecure", "127.0.0.1:5000/a/../b"), "no image reference")
    failed_cleanly(tpl, tpl("-q", "pull", "--insecure", "--name", "host", "127.0.0.1:5000/a"),
                   "no template name")


@pytest.fixture
def fake():
    made = []

    def start(mode="ok", **kw):
        f = Fake(busybox_image(), mode, **kw)
        made.append(f)
        return f

    yield start
    for f in made:
        f.stop()


def test_ipv6_loopback_and_localhost(tpl, fake):
    try:
        f = fake("ok", v6=True)
    except OSError as e:
        require(False, f"no IPv6 loopback: {e}")
    port = f.host.rsplit(":", 1)[1]
    p = tpl("pull", "--insecure", "--name", "six", f"{f.host}/app:v1")
    assert p.returncode == 0, p.stderr
    p = tpl("pull", "--insecure", "--name", "local", f"localhost:{port}/app:v1")
    assert p.returncode == 0, p.stderr
    assert listed(tpl) == ["local", "six"]


def test_bearer_token(tpl, fake):
    f = fake("token")
    p = tpl("pull", "--insecure", f"{f.host}/app:v1", env={"HUTCH_REGISTRY_AUTH": Fake.CREDS})
    assert p.returncode == 0, p.stderr
    assert listed(tpl) == ["app"]
    tokens = [h for path, h in f.requests if path.startswith("/token")]
    assert tokens and all("scope=repository%3Aapp%3Apull" in path
                          for path, _ in f.requests if path.startswith("/token"))
    blobs = [h for path, h in f.requests if "/blobs/" in path]
    assert len(blobs) == 3 and all(h.get("Authorization") == f"Bearer {Fake.TOKEN}" for h in blobs)


def test_bearer_token_refused(tpl, fake):
    f = fake("token")
    failed_cleanly(tpl, tpl("-q", "pull", "--insecure", f"{f.host}/app:v1"), "not authorized")
    failed_cleanly(tpl, tpl("-q", "pull", "--insecure", "--user", "alice:wrong", f"{f.host}/app:v1"),
                   "bad creds")


def test_basic_auth(tpl, fake):
    f = fake("basic")
    failed_cleanly(tpl, tpl("-q", "pull", "--insecure", f"{f.host}/app:v1"), "HUTCH_REGISTRY_AUTH")
    p = tpl("pull", "--insecure", "--user", Fake.CREDS, f"{f.host}/app:v1")
    assert p.returncode == 0, p.stderr
    assert listed(tpl) == ["app"]


@pytest.mark.parametrize("mode,words", [
    ("loop", ["more than 5 redirects"]),
    ("5xx", ["HTTP 503", "down for maintenance"]),
    ("digest", ["digest"]),
    ("malformed", ["manifest"]),
    ("bad_token", ["no usable token"]),
    ("huge", ["more than"]),
])
def test_hostile_registry(tpl, fake, mode, words):
    f = fake(mode)
    failed_cleanly(tpl, tpl("-q", "pull", "--insecure", f"{f.host}/app:v1",
                            env={"HUTCH_REGISTRY_AUTH": Fake.CREDS}), *words)


def test_trickling_registry_times_out(tpl, fake):
    f = fake("trickle")
    start = time.monotonic()
    p = tpl("-q", "pull", "--insecure", f"{f.host}/app:v1",
            env={"HUTCH_REGISTRY_LOW_SPEED_SECONDS": "2"})
    assert time.monotonic() - start < 20
    failed_cleanly(tpl, p, "timed out")


def test_redirects_within_loopback(tpl, fake):
    """Blobs redirected to another loopback port are fetched from there; a
    redirect to a port nobody listens on fails cleanly."""
    store = fake("ok")
    f = fake("redirect", redirect_to=f"http://{store.host}")
    p = tpl("pull", "--insecure", f"{f.host}/app:v1")
    assert p.returncode == 0, p.stderr
    assert len([r for r in store.requests if "/blobs/" in r[0]]) == 3
    tpl("rm", "app")
    f = fake("redirect", redirect_to=f"http://127.0.0.1:{free_port()}")
    failed_cleanly(tpl, tpl("-q", "pull", "--insecure", f"{f.host}/app:v1"), "registry 127.0.0.1")
