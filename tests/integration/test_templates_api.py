"""Templates over the native API (/v1/templates): an oci-archive uploaded
and imported (waiting for it, or following its NDJSON progress, or as a
job to poll), listed, read, used by a sandbox, removed; one tenant's
templates are no other's; a hostile archive fails cleanly (a 4xx JSON
error, nothing listed, nothing left in the store's tmp/, the server still
serving); the tenant's disk quota counts templates; jobs past the tenant's
share wait their turn. Against both builds of the server."""
import hashlib
import io
import json
import os
import pathlib
import subprocess
import tarfile
import time

import pytest

from conftest import require, serve_each_build
from serveapi import error_of, output, wait_for


@pytest.fixture(scope="module", params=["build", "asan"])
def server(request, tmp_path_factory):
    yield from serve_each_build(request, tmp_path_factory)


def tar_of(files):
    """A tar of (name, bytes or None for a dir, mode, linkname-or-None, type)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as t:
        for name, data, mode, link, kind in files:
            ti = tarfile.TarInfo(name)
            ti.mode = mode
            ti.type = kind
            if link:
                ti.linkname = link
            if data is not None:
                ti.size = len(data)
            t.addfile(ti, io.BytesIO(data) if data is not None else None)
    return buf.getvalue()


def oci_archive(layers, config=None):
    """An oci-archive (a tar of an OCI image layout) of raw layer tars."""
    blobs = {}

    def blob(b, mt):
        d = hashlib.sha256(b).hexdigest()
        blobs[d] = b
        return {"mediaType": mt, "digest": "sha256:" + d, "size": len(b)}

    descs = [blob(l, "application/vnd.oci.image.layer.v1.tar") for l in layers]
    cfg = {"architecture": "amd64", "os": "linux",
           "config": config or {"Env": ["PATH=/bin", "HELLO=world"], "WorkingDir": "/"},
           "rootfs": {"type": "layers",
                      "diff_ids": ["sha256:" + hashlib.sha256(l).hexdigest() for l in layers]}}
    man = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
           "config": blob(json.dumps(cfg).encode(), "application/vnd.oci.image.config.v1+json"),
           "layers": descs}
    mdesc = blob(json.dumps(man).encode(), man["mediaType"])
    files = [("oci-layout", b'{"imageLayoutVersion":"1.0.0"}', 0o644, None, tarfile.REGTYPE),
             ("index.json", json.dumps({"schemaVersion": 2, "manifests": [mdesc]}).encode(),
              0o644, None, tarfile.REGTYPE),
             ("blobs", None, 0o755, None, tarfile.DIRTYPE),
             ("blobs/sha256", None, 0o755, None, tarfile.DIRTYPE)]
    files += [(f"blobs/sha256/{d}", b, 0o644, None, tarfile.REGTYPE) for d, b in blobs.items()]
    return tar_of(files)


def busybox_layer():
    require(os.path.exists("/bin/busybox"), "busybox-static is not installed")
    bb = pathlib.Path("/bin/busybox").read_bytes()
    files = [("bin", None, 0o755, None, tarfile.DIRTYPE),
             ("bin/busybox", bb, 0o755, None, tarfile.REGTYPE),
             ("etc", None, 0o755, None, tarfile.DIRTYPE),
             ("etc/os-release", b"ID=hutchapi\n", 0o644, None, tarfile.REGTYPE)]
    files += [(f"bin/{a}", None, 0o777, "busybox", tarfile.SYMTYPE)
              for a in ("sh", "cat", "ls", "echo", "env", "pwd", "sleep", "test", "touch")]
    return tar_of(files)


def err(r):
    """(status, code) of an error answer."""
    return r.status, error_of(r)


def upload(api, path, body, headers=None):
    return api.request("POST", path, body=body, timeout=120,
                       headers={"Content-Type": "application/x-tar", **(headers or {})})


def tmp_left(server):
    """What is left in the store's tmp/ once the removals under way (off
    the server's loop, after the answer) are done."""
    d = server.state_dir / "images" / "tmp"
    left = lambda: sorted(p.name for p in d.iterdir()) if d.is_dir() else []
    try:
        wait_for(lambda: left() == [], 10)
    except AssertionError:
        pass
    return left()


def test_import_list_get_use_delete(server, tenant):
    arc = oci_archive([busybox_layer()])
    r = upload(tenant, "/v1/templates/import?name=apibox", arc)
    assert r.status == 201, r
    assert r.json["name"] == "apibox" and r.json["public"] is False, r.json
    assert "owner" not in r.json and r.json["size_bytes"] > 0

    names = [t["name"] for t in tenant.get("/v1/templates").json["templates"]]
    assert "apibox" in names
    got = tenant.get("/v1/templates/apibox")
    assert got.status == 200 and got.json["id"] == r.json["id"], got
    assert tenant.get(f"/v1/templates/{r.json['id']}").json["name"] == "apibox"

    sb = tenant.create(template="apibox")
    lines = tenant.exec(sb["id"], {"cmd": ["/bin/sh", "-c", "cat /etc/os-release; echo $HELLO"]})
    assert lines[-1]["status"] == "ok", lines
    assert output(lines).decode() == "ID=hutchapi\nworld\n"

    # Removed while a sandbox runs from it: the sandbox keeps its layers.
    assert tenant.delete("/v1/templates/apibox").status == 204
    assert tenant.get("/v1/templates/apibox").status == 404
    lines = tenant.exec(sb["id"], {"cmd": ["/bin/cat", "/etc/os-release"]})
    assert output(lines).decode() == "ID=hutchapi\n", lines
    assert tenant.delete(f"/v1/sandboxes/{sb['id']}").status == 204
    assert err(tenant.delete("/v1/templates/apibox")) == (404, "template_not_found")
    assert tmp_left(server) == []


def test_ndjson_progress_and_job(server, tenant):
    arc = oci_archive([busybox_layer()])
    r = upload(tenant, "/v1/templates/import?name=ndbox", arc,
               headers={"Accept": "application/x-ndjson"})
    assert r.status == 200 and r.headers["Content-Type"] == "application/x-ndjson", r
    events = [json.loads(l) for l in r.raw.splitlines()]
    assert events[0]["event"] == "job" and events[0]["name"] == "ndbox", events
    assert events[-1]["event"] == "done", events
    assert events[-1]["template"]["name"] == "ndbox"
    job = tenant.get(f"/v1/templates/jobs/{events[0]['id']}")
    assert job.status == 200 and job.json["status"] == "ready", job
    assert job.json["log"][-1]["event"] == "done"
    assert len(tenant.get(f"/v1/templates/jobs/{events[0]['id']}?log_from=1").json["log"]) == \
        len(job.json["log"]) - 1

    # Asked to answer at once: a job, polled to its end.
    r = upload(tenant, "/v1/templates/import?name=ndbox2", arc,
               headers={"Prefer": "respond-async"})
    assert r.status == 202 and r.headers["Location"] == f"/v1/templates/jobs/{r.json['id']}", r
    wait_for(lambda: tenant.get(r.headers["Location"]).json["status"] == "ready", 60)
    for n in ("ndbox", "ndbox2"):
        assert tenant.delete(f"/v1/templates/{n}").status == 204


def test_other_tenants_neither_see_nor_delete(server, tenant):
    other = server.api(server.api().post("/v1/keys", {"tenant": f"o{time.monotonic_ns()}"})
                       .json["key"])
    r = upload(tenant, "/v1/templates/import?name=mine", oci_archive([busybox_layer()]))
    assert r.status == 201, r
    assert "mine" not in [t["name"] for t in other.get("/v1/templates").json["templates"]]
    assert other.get("/v1/templates/mine").status == 404
    assert other.get(f"/v1/templates/{r.json['id']}").status == 404
    assert other.delete("/v1/templates/mine").status == 404
    assert other.post("/v1/sandboxes", {"template": "mine"}).status == 404
    assert tenant.get("/v1/templates/mine").status == 200
    # Publishing is the admin key's.
    assert err(upload(tenant, "/v1/templates/import?name=pub&public=true", b"x")) == \
        (403, "forbidden")
    assert tenant.delete("/v1/templates/mine").status == 204


def test_a_public_template_tells_no_tenant_where_the_host_keeps_it(server, tenant, tmp_path):
    """Finding 6 of issue 41: a public template's record, which every
    tenant lists, said it came from its upload's path under the state
    directory, with the server's pid. It names the upload by its sha256
    now (the client's own archive's), and its build by its Dockerfile; an
    operator's `hutch template import PATH` keeps PATH for the operator and
    shows tenants the file's name. The client's check (hostpaths.py) fails
    any answer with a host path."""
    box = tmp_path / "box.tar"
    box.write_bytes(oci_archive([busybox_layer()]))
    cli = subprocess.run([str(server.binary.parent / "hutch-template"), "--state-dir",
                          str(server.state_dir), "import", str(box), "--name", "clibox"],
                         capture_output=True, text=True, timeout=120)
    assert cli.returncode == 0, cli.stderr
    inspect = subprocess.run([str(server.binary.parent / "hutch-template"), "--state-dir",
                              str(server.state_dir), "inspect", "clibox"],
                             capture_output=True, text=True, timeout=60)
    try:
        assert json.loads(inspect.stdout)["ref"] == str(box.resolve()), inspect
        assert tenant.get("/v1/templates/clibox").json["ref"] == "box.tar"
    finally:
        assert server.api().delete("/v1/templates/clibox").status == 204

    arc = oci_archive([busybox_layer()])
    admin = server.api()
    assert upload(admin, "/v1/templates/import?name=pubref&public=true", arc).status == 201
    try:
        listed = {t["name"]: t for t in tenant.get("/v1/templates").json["templates"]}
        assert listed["pubref"]["public"] is True
        assert listed["pubref"]["ref"] == "upload@sha256:" + hashlib.sha256(arc).hexdigest()
        r = tenant.post("/v1/templates", {"name": "pubref-built",
                                          "dockerfile": "FROM pubref\nENV X=1\n"}, timeout=300)
        assert r.status == 201 and r.json["ref"] == "Dockerfile", r
        assert tenant.delete("/v1/templates/pubref-built").status == 204
    finally:
        assert admin.delete("/v1/templates/pubref").status == 204


@pytest.mark.parametrize("case", ["escape", "garbage", "bad_digest"])
def test_hostile_archives_fail_cleanly(server, tenant, case):
    if case == "escape":
        evil = tar_of([("../../etc/evil", b"x", 0o644, None, tarfile.REGTYPE)])
        arc = oci_archive([evil])
    elif case == "garbage":
        arc = os.urandom(4096)
    else:
        arc = bytearray(oci_archive([busybox_layer()]))
        # Flip a byte inside the busybox blob: its digest no longer matches.
        at = arc.find(b"\x7fELF") + 100
        arc[at] ^= 0xFF
        arc = bytes(arc)
    r = upload(tenant, "/v1/templates/import?name=evil", arc)
    assert 400 <= r.status < 500, r
    assert set(r.json) == {"error"} and set(r.json["error"]) == {"code", "message"}, r.json
    assert "evil" not in [t["name"] for t in tenant.get("/v1/templates").json["templates"]]
    assert tmp_left(server) == []
    assert not pathlib.Path("/etc/evil").exists()
    assert server.api(None).get("/healthz").status == 200


def test_bad_requests(server, tenant):
    assert err(tenant.post("/v1/templates", {"name": "x"}))[0] == 400
    assert err(tenant.post("/v1/templates", {"name": "x", "from": "a", "dockerfile": "b"}))[0] == 400
    assert err(tenant.post("/v1/templates", {"name": "BAD NAME", "from": "a"}))[0] == 400
    assert err(tenant.post("/v1/templates", {"name": "x", "dockerfile": "FROM scratch",
                                                  "context": "0" * 64})) == (404, "not_found")
    assert err(upload(tenant, "/v1/templates/import", b"x"))[0] == 400
    assert tenant.get("/v1/templates/jobs/0123456789abcdef").status == 404


def test_context_upload_is_content_addressed(server, tenant):
    ctx = tar_of([("hello.txt", b"hi\n", 0o644, None, tarfile.REGTYPE)])
    r = upload(tenant, "/v1/templates/contexts", ctx)
    assert r.status == 201, r
    assert r.json == {"id": hashlib.sha256(ctx).hexdigest(), "size": len(ctx)}


def test_quota_counts_templates(server):
    admin = server.api()
    t = server.api(admin.post("/v1/keys", {"tenant": f"q{time.monotonic_ns()}",
                                           "max_disk_mb": 1}).json["key"])
    arc = oci_archive([busybox_layer()])  # busybox: more than 1 MiB unpacked
    r = upload(t, "/v1/templates/import?name=big", arc)
    assert err(r) == (429, "quota_exceeded"), r
    assert t.get("/v1/templates").json["templates"] == []
    assert tmp_left(server) == []


def test_jobs_past_the_share_wait_and_cancel(server, tenant):
    """A job holds its slot while it runs (here pulls from a registry on
    loopback that never answers): more than the tenant's share at once
    wait their turn, queued; a cancelled job ends, its child killed, a
    queued one at once. Loopback registries are the admin key's: a
    tenant's pull from one would reach the host's own services."""
    import socket
    quiet = socket.socket()
    quiet.bind(("127.0.0.1", 0))
    quiet.listen(16)
    ref = f"127.0.0.1:{quiet.getsockname()[1]}/slow/image:1"
    for r in (ref, f"localhost/x:1", f"[::1]:5000/x:1"):
        got = tenant.post("/v1/templates", {"name": "lo", "from": r, "insecure": True})
        assert err(got) == (403, "forbidden"), (r, got)
    # Nor through a build's FROM (the pull it makes is refused too).
    got = tenant.post("/v1/templates", {"name": "lo", "dockerfile": f"FROM {ref}\n"})
    assert err(got) == (403, "forbidden"), got
    assert "loopback" in got.json["error"]["message"], got
    admin = server.api()
    try:
        rs = [admin.post("/v1/templates", {"name": f"slow{i}", "from": ref, "insecure": True},
                         headers={"Prefer": "respond-async"}) for i in range(3)]
        assert [r.status for r in rs] == [202, 202, 202], rs
        assert [r.json["status"] for r in rs] == ["building", "building", "queued"], rs
        assert admin.delete(rs[2].headers["Location"]).status == 204
        assert admin.get(rs[2].headers["Location"]).json["error"]["code"] == "cancelled"
        for r in rs[:2]:
            assert admin.get(r.headers["Location"]).json["status"] == "building"
            assert tenant.get(r.headers["Location"]).status == 404  # not the tenant's
            assert admin.delete(r.headers["Location"]).status == 204
        for r in rs[:2]:
            wait_for(lambda: admin.get(r.headers["Location"]).json["status"] == "error", 20)
            assert admin.get(r.headers["Location"]).json["error"]["code"] == "cancelled"
    finally:
        quiet.close()
    assert tmp_left(server) == []


@pytest.mark.parametrize("case", ["absolute", "dotdot", "through_symlink", "hardlink_out",
                                  "device", "bomb"])
def test_context_unpack_refuses_hostile_tars(tmp_path, case):
    """`hutch template context` (what a build's uploaded context goes
    through): every entry lands inside the directory or it fails, exit 2
    and one line on stderr; nothing is written outside."""
    from conftest import BUILD
    outside = tmp_path / "outside"
    outside.mkdir()
    R = tarfile.REGTYPE
    entries = {
        "absolute": [(str(outside / "abs"), b"x", 0o644, None, R)],
        "dotdot": [("../outside/dd", b"x", 0o644, None, R)],
        "through_symlink": [("link", None, 0o777, str(outside), tarfile.SYMTYPE),
                            ("link/through", b"x", 0o644, None, R)],
        "hardlink_out": [("hl", None, 0o644, "../outside/target", tarfile.LNKTYPE)],
        "device": [("null", None, 0o666, None, tarfile.CHRTYPE)],
        "bomb": [(f"f{i}", b"\0" * 4096, 0o644, None, R) for i in range(64)],
    }[case]
    (outside / "target").write_text("secret")
    tar = tmp_path / "ctx.tar"
    tar.write_bytes(tar_of(entries))
    dest = tmp_path / "ctx"
    dest.mkdir()
    state = tmp_path / "state"
    r = subprocess.run([str(BUILD / "hutch-template"), "--state-dir", str(state),
                        *(["--max-bytes", "65536"] if case == "bomb" else []),
                        "context", str(tar), str(dest)], capture_output=True, text=True,
                       timeout=60)
    if case == "bomb" and r.returncode != 0 and "unrecognized option" in r.stderr:
        pytest.skip("hutch-template has no --max-bytes")
    assert r.returncode == 2, r
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert sorted(p.name for p in outside.iterdir()) == ["target"]
    assert (outside / "target").read_text() == "secret"


def test_context_unpacks_a_plain_context(tmp_path):
    from conftest import BUILD
    tar = tmp_path / "ctx.tar"
    tar.write_bytes(tar_of([("app", None, 0o755, None, tarfile.DIRTYPE),
                            ("app/run.sh", b"#!/bin/sh\n", 0o4755, None, tarfile.REGTYPE),
                            ("app/l", None, 0o777, "run.sh", tarfile.SYMTYPE)]))
    dest = tmp_path / "ctx"
    dest.mkdir()
    r = subprocess.run([str(BUILD / "hutch-template"), "--state-dir", str(tmp_path / "state"),
                        "context", str(tar), str(dest)], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r
    st = (dest / "app" / "run.sh").stat()
    assert st.st_mode & 0o7777 == 0o755, oct(st.st_mode)  # no setuid bit
    assert os.readlink(dest / "app" / "l") == "run.sh"


def test_e2b_tags_of_a_build(server, tenant):
    """E2B's NAME:TAG and tags name the build asked for; bad tags are refused."""
    r = tenant.post("/v3/templates", {"name": "tagged:v1", "tags": ["stable"]})
    assert r.status == 202 and r.json["templateID"] == "tagged", r
    assert r.json["tags"] == ["v1", "stable"], r
    r = tenant.post("/v3/templates", {"name": "tagged"})
    assert r.status == 202 and r.json["tags"] == ["latest"], r
    for body in ({"name": "tagged:-x"}, {"name": "tagged", "tags": ["a b"]},
                 {"name": "tagged", "tags": "v1"}):
        r = tenant.post("/v3/templates", body)
        assert r.status == 400 and "tags are" in r.json["message"], (body, r)
    # Tags of builds that do not exist: nothing to move, nothing to take.
    r = tenant.post("/templates/tags", {"target": "tagged:v9", "tags": ["x"]})
    assert r.status == 404, r
    r = tenant.request("DELETE", "/templates/tags", body={"name": "tagged", "tags": ["x"]})
    assert r.status == 404, r
    assert tenant.post("/templates/tags", {"target": "tagged:v1"}).status == 400


def test_e2b_base_image_is_the_stores_base(server, tenant):
    """E2B's base image (fromBaseImage(): e2bdev/base) is the store's template
    base, without Docker Hub; the SDKs' default names exist without it."""
    for name in ("base", "code-interpreter-v1"):
        r = tenant.get(f"/templates/aliases/{name}")
        assert r.status == 200 and r.json == {"templateID": name, "public": True}, r
    assert upload(tenant, "/v1/templates/import?name=base",
                  oci_archive([busybox_layer()])).status == 201
    tid = tenant.post("/v3/templates", {"name": "onbase"}).json["buildID"]
    spec = {"fromImage": "e2bdev/base:latest", "force": False,
            "steps": [{"type": "RUN", "args": ["echo built > /on-base", "root"]}]}
    assert tenant.post(f"/v2/templates/onbase/builds/{tid}", spec).status == 202
    status = {}

    def ended():
        status.update(tenant.get(f"/templates/onbase/builds/{tid}/status").json)
        return status["status"] in ("ready", "error")
    wait_for(ended, 120)
    assert status["status"] == "ready", status
    sb = tenant.create(template="onbase")
    lines = tenant.exec(sb["id"], {"cmd": ["/bin/cat", "/on-base"]})
    assert output(lines).decode() == "built\n", lines
    assert tenant.delete(f"/v1/sandboxes/{sb['id']}").status == 204
    for n in ("onbase", "base"):
        assert tenant.delete(f"/v1/templates/{n}").status == 204
    assert tmp_left(server) == []


def test_e2b_upload_flow_refuses_hostile_files(server, tenant):
    """E2B's build flow by hand: the upload URL is hutch's own, good once;
    a tar whose entry leaves the context fails the build (status error,
    with the reason), writes nothing outside, and the server goes on;
    another tenant neither sees the files nor the build."""
    r = tenant.post("/v3/templates", {"name": "e2bhostile", "cpuCount": 2, "memoryMB": 1024})
    assert r.status == 202, r
    tid, bid = r.json["templateID"], r.json["buildID"]
    assert tid == "e2bhostile" and r.json["names"] == ["e2bhostile"]
    h = hashlib.sha256(b"hostile").hexdigest()
    f = tenant.get(f"/templates/{tid}/files/{h}")
    assert f.status == 201 and f.json["present"] is False, f
    url = f.json["url"]
    assert url.startswith(f"http://127.0.0.1:{server.port}/templates/uploads/"), url
    path = url.split(str(server.port), 1)[1]
    evil = tar_of([("../../../../../../tmp/hutch-e2b-escape", b"x", 0o644, None, tarfile.REGTYPE)])
    anon = server.api(None)
    assert anon.request("PUT", path, body=evil).status == 200
    assert anon.request("PUT", path, body=evil).status == 404  # good once
    assert tenant.get(f"/templates/{tid}/files/{h}").json == {"present": True}
    other = server.api(server.api().post("/v1/keys", {"tenant": f"e{time.monotonic_ns()}"})
                       .json["key"])
    assert other.get(f"/templates/{tid}/files/{h}").json["present"] is False
    assert other.get(f"/templates/{tid}/builds/{bid}/status").status == 404

    spec = {"fromTemplate": "nothing-needed", "force": False,
            "steps": [{"type": "COPY", "args": ["x", "/x", "", ""], "filesHash": h}]}
    assert tenant.post(f"/v2/templates/{tid}/builds/{bid}", spec).status == 202
    status = {}

    def ended():
        status.update(tenant.get(f"/templates/{tid}/builds/{bid}/status").json)
        return status["status"] in ("ready", "error")
    wait_for(ended, 30)
    assert status["status"] == "error", status
    assert "leaves the context" in status["reason"]["message"], status
    assert status["logEntries"][-1]["level"] == "error"
    assert not os.path.exists("/tmp/hutch-e2b-escape")
    assert tenant.get("/templates/aliases/e2bhostile").status == 404
    # A second start of the same build is refused; a build not asked for is 404.
    assert tenant.post(f"/v2/templates/{tid}/builds/{bid}", spec).status == 409
    assert tenant.post(f"/v2/templates/{tid}/builds/0000000000000000", spec).status == 404
    assert tmp_left(server) == []
    assert server.api(None).get("/healthz").status == 200


def test_dockerfile_build_with_an_uploaded_context(server, tenant):
    """A context uploaded, then a Dockerfile built over it, its progress
    followed as NDJSON; the template runs with what COPY and RUN made."""
    assert upload(tenant, "/v1/templates/import?name=buildbase",
                  oci_archive([busybox_layer()])).status == 201
    ctx = tar_of([("hello.txt", b"hello\n", 0o644, None, tarfile.REGTYPE)])
    cid = upload(tenant, "/v1/templates/contexts", ctx).json["id"]
    dockerfile = ("FROM buildbase\nCOPY hello.txt /srv/hello.txt\n"
                  "RUN cat /srv/hello.txt /srv/hello.txt > /srv/twice\nENV BUILT=yes\n")
    r = tenant.request("POST", "/v1/templates", timeout=300,
                       body={"name": "built", "dockerfile": dockerfile, "context": cid},
                       headers={"Accept": "application/x-ndjson"})
    assert r.status == 200, r
    events = [json.loads(l) for l in r.raw.splitlines()]
    assert events[-1]["event"] == "done", events
    assert any(e["event"] == "step" for e in events), events
    sb = tenant.create(template="built")
    lines = tenant.exec(sb["id"], {"cmd": ["/bin/sh", "-c", "cat /srv/twice; echo $BUILT"]})
    assert output(lines).decode() == "hello\nhello\nyes\n", lines
    assert tenant.delete(f"/v1/sandboxes/{sb['id']}").status == 204
    # A failing RUN: the job's error, a 4xx, nothing listed.
    r = tenant.post("/v1/templates", {"name": "broken", "dockerfile": "FROM buildbase\nRUN exit 3\n"},
                    timeout=300)
    assert 400 <= r.status < 500 and err(r)[1] == "step_failed", r
    assert tenant.get("/v1/templates/broken").status == 404
    # A context that is no tar: the job's error names it by its place, not
    # by where the server keeps it (the client's check reads the job too).
    junk = upload(tenant, "/v1/templates/contexts", b"no tar at all " * 64).json["id"]
    r = tenant.post("/v1/templates", {"name": "junk", "dockerfile": "FROM buildbase\n",
                                      "context": junk}, headers={"Prefer": "respond-async"})
    assert r.status == 202, r
    wait_for(lambda: tenant.get(r.headers["Location"]).json["status"] == "error", 60)
    failed = tenant.get(r.headers["Location"]).json["log"][-1]
    assert failed["message"].startswith("context tar 1: "), failed
    for n in ("built", "buildbase"):
        assert tenant.delete(f"/v1/templates/{n}").status == 204
    assert tmp_left(server) == []


def test_a_jobs_log_keeps_a_bounded_part_of_a_loud_build(server, tenant):
    """The server keeps many ended jobs: each keeps at most 2 MiB of events
    (the rest counted as dropped), and always its end."""
    assert upload(tenant, "/v1/templates/import?name=loudbase",
                  oci_archive([busybox_layer()])).status == 201
    run = ("busybox yes $(busybox head -c 4000 /dev/zero | busybox tr '\\0' a) "
           "| busybox head -n 800")
    r = tenant.request("POST", "/v1/templates", timeout=300,
                       body={"name": "loud", "dockerfile": f"FROM loudbase\nRUN {run}\n"},
                       headers={"Accept": "application/x-ndjson"})
    events = [json.loads(l) for l in r.raw.splitlines()]
    assert events[-1]["event"] == "done", events[-3:]
    assert sum(len(e["line"]) for e in events if e["event"] == "log") > 3_000_000
    job = tenant.get(f"/v1/templates/jobs/{events[0]['id']}").json
    kept = sum(len(json.dumps(e)) for e in job["log"])
    assert kept < 2_200_000 and job["log_dropped"] > 0, (kept, job["log_dropped"])
    assert job["log"][-1]["event"] == "done"
    for n in ("loud", "loudbase"):
        assert tenant.delete(f"/v1/templates/{n}").status == 204


def test_a_create_whose_client_left_waits_no_more_for_the_ready_command(server, tenant):
    """A template's ready command that never passes: a client that gives
    up leaves no sandbox behind until the ready timeout (60 s)."""
    import socket
    assert upload(tenant, "/v1/templates/import?name=neverbase",
                  oci_archive([busybox_layer()])).status == 201
    r = tenant.post("/v1/templates", {"name": "never", "dockerfile":
                                      'FROM neverbase\nLABEL hutch.ready_cmd="false"\n'})
    assert r.status == 201, r
    with pytest.raises(socket.timeout):
        tenant.request("POST", "/v1/sandboxes", body={"template": "never"}, timeout=1)
    wait_for(lambda: tenant.get("/v1/sandboxes").json["sandboxes"] == [], 5)
    for n in ("never", "neverbase"):
        assert tenant.delete(f"/v1/templates/{n}").status == 204


@pytest.mark.parametrize("build", ["build", "asan"])
def test_a_job_whose_program_cannot_run_fails_cleanly(tmp_path, build, monkeypatch):
    # hutch-serve alone in its directory: hutch-template is not beside it.
    # Freed memory is filled, so that libuv (not instrumented) stumbles on
    # a handle of a job freed too soon.
    monkeypatch.setenv("ASAN_OPTIONS", ":".join(
        filter(None, [os.environ.get("ASAN_OPTIONS"), "max_free_fill_size=4096"])))
    from conftest import build_binary
    from serveapi import Server
    alone = tmp_path / "bin" / "hutch-serve"
    alone.parent.mkdir()
    alone.write_bytes(build_binary(build, "hutch-serve").read_bytes())
    alone.chmod(0o755)
    s = Server(alone, tmp_path / "state").start()
    try:
        api = s.api()
        r = api.post("/v1/templates", {"name": "nope", "from": "example.org/a:b"})
        assert r.status == 500 and error_of(r) == "internal", r
        # The answer says what failed; the program's path is the operator's.
        assert f"run {tmp_path}/bin/hutch-template" in s.log_text()
        assert api.get("/v1/templates/nope").status == 404
        assert api.get("/healthz").status == 200
    finally:
        code = s.stop()
    assert code == 0, s.log_text()
    assert "Sanitizer" not in s.log_text(), s.log_text()


def test_a_template_removed_while_the_server_is_down_keeps_its_sandboxes_layers(tmp_path):
    """SIGTERM leaves the sandboxes running: their template's layers are
    theirs still, whatever removes the template before the next start."""
    import signal
    from conftest import BUILD
    from serveapi import Server
    s = Server(BUILD / "hutch-serve", tmp_path / "state").start()
    try:
        api = s.api()
        mark = f"kept-{time.monotonic_ns()}\n".encode()
        own = tar_of([("etc", None, 0o755, None, tarfile.DIRTYPE),
                      ("etc/kept", mark, 0o644, None, tarfile.REGTYPE)])
        assert upload(api, "/v1/templates/import?name=downbox",
                      oci_archive([busybox_layer(), own])).status == 201
        sid = api.create(template="downbox", timeout_s=120)["id"]
        assert s.stop(signal.SIGTERM) == 0
        rm = subprocess.run([str(BUILD / "hutch-template"), "--state-dir", str(s.state_dir),
                             "rm", "downbox"], capture_output=True, text=True, timeout=60)
        assert rm.returncode == 0, rm.stderr
        layer = s.state_dir / "images" / "layers" / hashlib.sha256(own).hexdigest()
        assert layer.is_dir()
        s.start()
        # Pinned again by the server that took it over: held no longer.
        assert not list((s.state_dir / "images" / "templates").glob("*.refs/sbx-*"))
        lines = s.api().exec(sid, {"cmd": ["/bin/cat", "/etc/kept"]})
        assert output(lines) == mark, lines
        assert s.api().delete(f"/v1/sandboxes/{sid}").status == 204
    finally:
        if s.proc.poll() is not None:  # stopped by SIGTERM: its sandbox ends with the next
            s.start()
        assert s.stop() == 0, s.log_text()


@pytest.mark.parametrize("build", ["build", "asan"])
def test_a_failed_jobs_error_code_outlives_the_job(tmp_path, build):
    """A job's error code is the job's own; the job is forgotten once the
    tenant has 32 newer ones, and the server's error counts still name the
    code."""
    from conftest import build_binary
    from serveapi import Server
    s = Server(build_binary(build, "hutch-serve"), tmp_path / "state").start()
    try:
        api = s.api()
        r = upload(api, "/v1/templates/import?name=garbage", os.urandom(4096))
        code = err(r)[1]
        assert 400 <= r.status < 500 and code not in ("invalid_argument", "internal"), r
        # Builds asked for are among the tenant's kept jobs: they push it out.
        for i in range(40):
            assert api.post("/v3/templates", {"name": f"g{i}"}).status == 202
        assert err(api.get("/v1/templates/nothing-here"))[0] == 404
        text = api.get("/metrics").raw.decode()
        assert f'hutch_errors_by_code_total{{code="{code}"}} 1' in text, text
    finally:
        assert s.stop() == 0, s.log_text()
    assert "Sanitizer" not in s.log_text(), s.log_text()


@pytest.mark.parametrize("build", ["build", "asan"])
def test_a_stopping_server_ends_a_build_and_its_run_sandbox(tmp_path, build):
    """A server stopped mid-build ends the build as a cancel does (SIGTERM,
    then SIGKILL after a grace): the RUN step's sandbox is torn down, and
    nothing is left on the host (the autouse check) or in tmp/."""
    from conftest import build_binary
    from serveapi import Server, wait_for
    s = Server(build_binary(build, "hutch-serve"), tmp_path / "state").start()
    try:
        api = s.api()
        assert upload(api, "/v1/templates/import?name=stopbase",
                      oci_archive([busybox_layer()])).status == 201
        r = api.post("/v1/templates", {"name": "slow", "dockerfile":
                                       "FROM stopbase\nRUN echo started; sleep 600\n"},
                     headers={"Prefer": "respond-async"})
        assert r.status == 202, r
        job = r.json["id"]
        wait_for(lambda: any(e.get("event") == "log" and e.get("line") == "started"
                             for e in api.get(f"/v1/templates/jobs/{job}").json["log"]),
                 seconds=60)
    finally:
        t0 = time.monotonic()
        code = s.stop()
    assert code == 0, s.log_text()
    assert time.monotonic() - t0 < 20, "the stop waited for the build's end"
    assert "Sanitizer" not in s.log_text(), s.log_text()
    assert list((tmp_path / "state" / "images" / "tmp").iterdir()) == []
