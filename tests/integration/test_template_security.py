"""Red-team cases for templates: what one tenant's template, image or
Dockerfile could do to another tenant or to the host. Each case tries the
attack and checks that it fails cleanly (or is harmless)."""
import os
import pathlib
import time

import pytest

from conftest import BUILD
from serveapi import Server, wait_for
from test_template_build import BASE, context, template
from test_templates_api import busybox_layer, oci_archive, tar_of, upload


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    return tmp_path_factory.mktemp("secstate")


def owned(store, owner, *args):
    return template(store, "--owner", owner, *args)


def test_public_build_never_stacks_on_a_tenants_template(store, tmp_path):
    """A build whose result is public (the CLI's, or the admin key's with
    public) must not take FROM or COPY --from a tenant's private template:
    the public result would publish the tenant's files, or a tenant could
    plant the base a public template is built on."""
    secret = context(tmp_path, BASE + "RUN echo alice-secret > /secret\n")
    p = owned(store, "alice", "build", "-t", "alices", str(secret))
    assert p.returncode == 0, p.stderr
    for df in ("FROM alices\n", "FROM scratch\nCOPY --from=alices /secret /x\n"):
        p = template(store, "build", "-t", "published", str(context(tmp_path, df)))
        assert p.returncode == 2, p.stderr
        assert "no template" in p.stderr.strip().splitlines()[-1]
    p = template(store, "ls")
    assert "published" not in p.stdout
    # Another tenant cannot either; alice herself can.
    p = owned(store, "bob", "build", "-t", "bobs", str(context(tmp_path, "FROM alices\n")))
    assert p.returncode == 2, p.stderr
    p = owned(store, "alice", "build", "-t", "alices2", str(context(tmp_path, "FROM alices\n")))
    assert p.returncode == 0, p.stderr


@pytest.mark.parametrize("make", ["mkfifo /etc/passwd", "ln -s /dev/zero /etc/passwd"])
def test_a_hostile_etc_passwd_does_not_hang_the_agent(store, tmp_path, make):
    """A RUN step's root makes /etc/passwd a fifo (the agent's open would
    block, and with it the step's timeout) or a link to an endless file;
    a later USER's lookup must fail at once, not hang the build."""
    df = BASE + f"RUN rm -f /etc/passwd && {make}\nUSER daemon\nRUN echo hi\n"
    p = template(store, "build", "--timeout", "20", "-t", "hostile-passwd",
                 str(context(tmp_path, df)), timeout=60)
    assert p.returncode == 3, p.stderr
    assert "no user 'daemon'" in p.stderr.strip().splitlines()[-1]


def children_named(pid, name):
    """Processes whose parent is pid and whose name is name."""
    out = []
    for d in pathlib.Path("/proc").iterdir():
        try:
            stat = (d / "stat").read_text()
        except OSError:
            continue
        comm, rest = stat[stat.index("(") + 1:stat.rindex(")")], stat[stat.rindex(")") + 2:]
        if comm == name[:15] and int(rest.split()[1]) == pid:
            out.append(d)
    return out


def test_a_tenants_job_never_gets_the_operators_registry_credentials(tmp_path_factory):
    """hutch serve started with HUTCH_REGISTRY_AUTH (the operator's
    credential for pulls of private images) must not hand it to a tenant's
    job: the tenant names the registry, which would be sent the credential
    on its first 401."""
    os.environ["HUTCH_REGISTRY_AUTH"] = "operator:s3cret"
    try:
        server = Server(BUILD / "hutch-serve", tmp_path_factory.mktemp("serve") / "state").start()
    finally:
        del os.environ["HUTCH_REGISTRY_AUTH"]
    try:
        admin = server.api()
        t = server.api(admin.post("/v1/keys", {"tenant": "creds"}).json["key"])
        r = upload(t, "/v1/templates/import?name=box", oci_archive([busybox_layer()]))
        assert r.status == 201, r
        r = t.post("/v1/templates", {"name": "slow", "dockerfile": "FROM box\nRUN sleep 1\n"},
                   headers={"Prefer": "respond-async"})
        assert r.status == 202, r
        wait_for(lambda: children_named(server.proc.pid, "hutch-template"), 10)
        for d in children_named(server.proc.pid, "hutch-template"):
            env = (d / "environ").read_bytes().split(b"\0")
            assert not any(v.startswith(b"HUTCH_REGISTRY_AUTH=") for v in env)
        wait_for(lambda: t.get(r.headers["Location"]).json["status"] != "building", 60)
        assert t.get(r.headers["Location"]).json["status"] == "ready"
    finally:
        assert server.stop() == 0, server.log_text()


def test_removed_templates_layers_go_after_an_upload(tmp_path_factory):
    """A server that has taken one upload (a build context) must still
    collect the layers of the templates removed after it: otherwise a
    tenant fills the host's disk by importing and removing templates, each
    within its quota, their layers never removed."""
    server = Server(BUILD / "hutch-serve", tmp_path_factory.mktemp("serve") / "state").start()
    try:
        t = server.api(server.api().post("/v1/keys", {"tenant": "gc"}).json["key"])
        r = upload(t, "/v1/templates/contexts", oci_archive([b"\0" * 1024]))
        assert r.status == 201, r
        layers = server.state_dir / "images" / "layers"
        before = set(p.name for p in layers.iterdir()) if layers.exists() else set()
        r = upload(t, "/v1/templates/import?name=gone", oci_archive([busybox_layer()]))
        assert r.status == 201, r
        assert set(p.name for p in layers.iterdir()) != before
        assert t.delete("/v1/templates/gone").status == 204
        wait_for(lambda: set(p.name for p in layers.iterdir()) == before, 10)
    finally:
        assert server.stop() == 0, server.log_text()


def test_uploads_count_against_the_tenants_quota(tmp_path_factory):
    """Uploaded contexts (and E2B's COPY files) stay on disk as a cache: a
    tenant uploading new content again and again must meet its quota, not
    fill the disk for everyone; its least recently used uploads make room
    for a new one once they are not fresh."""
    server = Server(BUILD / "hutch-serve", tmp_path_factory.mktemp("serve") / "state").start()
    try:
        t = server.api(server.api().post("/v1/keys", {"tenant": "up", "max_disk_mb": 2})
                       .json["key"])
        first = upload(t, "/v1/templates/contexts", os.urandom(1500 << 10))
        assert first.status == 201, first
        r = upload(t, "/v1/templates/contexts", os.urandom(1500 << 10))
        assert (r.status, r.json["error"]["code"]) == (429, "quota_exceeded"), r
        files = list((server.state_dir / "template-files").rglob("*.tar"))
        assert len(files) == 1
        old = time.time() - 3600
        os.utime(files[0], (old, old))
        r = upload(t, "/v1/templates/contexts", os.urandom(1500 << 10))
        assert r.status == 201, r
        assert len(list((server.state_dir / "template-files").rglob("*.tar"))) == 1
        # The one removed is no longer offered as a context.
        got = t.post("/v1/templates", {"name": "x", "dockerfile": "FROM scratch\n",
                                       "context": first.json["id"]})
        assert got.status == 404, got
    finally:
        assert server.stop() == 0, server.log_text()


def many_dirs(tag, n):
    """A layer of n empty directories: no data, but n inodes and n blocks."""
    import tarfile
    return tar_of([(f"{tag}{i}", None, 0o755, None, tarfile.DIRTYPE) for i in range(n)])


def test_entries_count_against_the_quota(tmp_path_factory):
    """A layer of empty directories (or empty files) has no bytes of data,
    yet each costs the disk an inode and a directory a block: counted as
    nothing, a tenant could import template after template of them and
    take the disk's space or its inodes from everyone."""
    server = Server(BUILD / "hutch-serve", tmp_path_factory.mktemp("serve") / "state").start()
    try:
        t = server.api(server.api().post("/v1/keys", {"tenant": "inodes", "max_disk_mb": 8})
                       .json["key"])
        vfs = os.statvfs(server.state_dir)
        entry = max(4096, vfs.f_blocks * vfs.f_frsize // vfs.f_files if vfs.f_files else 0)
        # 40 % of the quota each: a lone job may take half what is left
        n = int(0.4 * (8 << 20) / entry)
        got = []
        for i in range(4):
            r = upload(t, f"/v1/templates/import?name=d{i}",
                       oci_archive([many_dirs(f"d{i}-", n)]))
            got.append(r.status)
        assert got[0] == 201 and any(s in (413, 429) for s in got[1:]), got
        names = [x["name"] for x in t.get("/v1/templates").json["templates"]]
        assert len(names) == got.count(201) < 4, names
    finally:
        assert server.stop() == 0, server.log_text()


def test_a_tenants_jobs_never_push_out_anothers(tmp_path_factory):
    """Job records are kept for polling, up to a number: one tenant making
    jobs in a loop (E2B's POST /v3/templates makes one at no cost) must not
    push out another's, or the other's build would be lost between its
    steps, or its finished status before the SDK polls it."""
    server = Server(BUILD / "hutch-serve", tmp_path_factory.mktemp("serve") / "state").start()
    try:
        admin = server.api()
        alice = server.api(admin.post("/v1/keys", {"tenant": "alice"}).json["key"])
        mallory = server.api(admin.post("/v1/keys", {"tenant": "mallory"}).json["key"])
        r = alice.post("/v3/templates", {"name": "mine"})
        assert r.status == 202, r
        bid = r.json["buildID"]
        for i in range(300):
            assert mallory.post("/v3/templates", {"name": f"flood{i}"}).status == 202
        assert alice.get(f"/templates/mine/builds/{bid}/status").status == 200
    finally:
        assert server.stop() == 0, server.log_text()


def test_a_tenants_job_has_a_deadline(tmp_path_factory):
    """Each step of a build is bounded, but a Dockerfile may hold many: a
    tenant's job as a whole stops at --template-timeout, its child killed
    (and its sandbox with it), the job failed, nothing listed."""
    server = Server(BUILD / "hutch-serve", tmp_path_factory.mktemp("serve") / "state",
                    "--template-timeout", "3").start()
    try:
        t = server.api(server.api().post("/v1/keys", {"tenant": "slow"}).json["key"])
        r = upload(t, "/v1/templates/import?name=box", oci_archive([busybox_layer()]))
        assert r.status == 201, r
        df = "FROM box\n" + "RUN sleep 30\n" * 3
        r = t.post("/v1/templates", {"name": "forever", "dockerfile": df},
                   headers={"Prefer": "respond-async"})
        assert r.status == 202, r
        start = time.monotonic()
        wait_for(lambda: t.get(r.headers["Location"]).json["status"] != "building", 30)
        job = t.get(r.headers["Location"]).json
        assert job["status"] == "error" and job["error"]["code"] == "timeout", job
        assert time.monotonic() - start < 20
        wait_for(lambda: not children_named(server.proc.pid, "hutch-template"), 10)
        assert "forever" not in [x["name"] for x in t.get("/v1/templates").json["templates"]]
    finally:
        assert server.stop() == 0, server.log_text()


@pytest.mark.parametrize("make", ["touch /.wh.etc", "mkdir -p /d && touch /d/.wh..wh..opq"])
def test_a_file_named_like_a_whiteout_is_refused(store, tmp_path, make):
    """A file a RUN step names .wh.X would give the layer the same tar (its
    name) as a whiteout of X: the store would take the one for the other.
    The step fails instead."""
    df = BASE + f"RUN {make}\n"
    p = template(store, "build", "-t", "whiteout-name", str(context(tmp_path, df)))
    assert p.returncode == 3, p.stderr
    assert ".wh." in p.stderr.strip().splitlines()[-1]
    assert "whiteout-name" not in template(store, "ls").stdout


@pytest.mark.userspace
def test_uploaded_files_are_bounded_in_number(tmp_path_factory):
    """Each quota check lists the tenant's uploads, on the server's loop:
    their number is bounded (1024), the least recently used going first
    once they are not fresh."""
    server = Server(BUILD / "hutch-serve", tmp_path_factory.mktemp("serve") / "state").start()
    try:
        t = server.api(server.api().post("/v1/keys", {"tenant": "many"}).json["key"])
        for i in range(1024):
            r = upload(t, "/v1/templates/contexts", b"%d" % i)
            assert r.status == 201, (i, r)
        r = upload(t, "/v1/templates/contexts", b"one more")
        assert (r.status, r.json["error"]["code"]) == (429, "quota_exceeded"), r
        old = time.time() - 3600
        for f in list((server.state_dir / "template-files").rglob("*.tar"))[:3]:
            os.utime(f, (old, old))
        assert upload(t, "/v1/templates/contexts", b"one more").status == 201
        assert len(list((server.state_dir / "template-files").rglob("*.tar"))) == 1024
    finally:
        assert server.stop() == 0, server.log_text()
