"""Volumes over HTTP: storage that outlives sandboxes and the server, shared
by sandboxes that mount it at once, with a size that is the sandbox's
ENOSPC and not the host's, and nothing left attached once no sandbox
mounts it. Against both builds of the server."""
import pathlib
import signal
import time

import pytest

from conftest import BUILD, leftovers, serve_each_build
from serveapi import Server, error_of, output, wait_for


@pytest.fixture(scope="module", params=["build", "asan"])
def server(request, tmp_path_factory):
    yield from serve_each_build(request, tmp_path_factory)


def run(api, sid, script, ok=True):
    lines = api.exec(sid, {"shell": script})
    if ok:
        assert lines[-1]["status"] == "ok", lines
    return output(lines).decode() + output(lines, "stderr").decode(), lines[-1]


def volume(api, name, size_mb=32):
    r = api.post("/v1/volumes", {"name": name, "size_mb": size_mb})
    assert r.status == 201, r
    return r.json


def attached(image):
    """Loop devices whose backing file is image."""
    out = []
    for b in pathlib.Path("/sys/block").glob("loop*/loop/backing_file"):
        try:
            if b.read_text().strip().startswith(str(image)):
                out.append(b.parent.parent.name)
        except OSError:
            pass
    return out


def test_a_volume_outlives_its_sandbox(server, tenant):
    v = volume(tenant, "data")
    assert v["id"].startswith("vol_") and v["name"] == "data" and v["size_mb"] == 32
    assert [x["id"] for x in tenant.get("/v1/volumes").json["volumes"]] == [v["id"]]
    assert tenant.get("/v1/volumes/data").json["id"] == v["id"]  # by name too
    a = tenant.create(volumes=[{"name": "data", "path": "/data"}])
    assert a["volumes"] == [{"id": v["id"], "path": "/data", "read_only": False}]
    out, _ = run(tenant, a["id"], "echo kept > /data/f && mkdir /data/d && stat -c '%U %a' /data "
                                  "/data/f && df -m /data | tail -1 | awk '{print $2}'")
    user_line, f_line, size = out.splitlines()
    assert user_line == "user 755" and f_line.startswith("user ") and 20 < int(size) <= 32
    # in use: not deleted
    r = tenant.delete(f"/v1/volumes/{v['id']}")
    assert r.status == 409 and error_of(r) == "volume_in_use"
    assert tenant.delete(f"/v1/sandboxes/{a['id']}").status == 204
    b = tenant.create(volumes=[{"name": v["id"], "path": "/home/user/mnt"}])
    assert run(tenant, b["id"], "cat /home/user/mnt/f; ls /home/user/mnt")[0] == \
        "kept\nd\nf\nlost+found\n"
    assert tenant.delete(f"/v1/sandboxes/{b['id']}").status == 204
    image = server.state_dir / "volumes" / f"{v['id']}.img"
    assert image.stat().st_blocks * 512 >= 32 << 20  # allocated in full, no holes
    wait_for(lambda: not attached(image), 20)  # the loop device goes with its last mount
    assert tenant.delete(f"/v1/volumes/{v['id']}").status == 204
    assert not image.exists() and tenant.get(f"/v1/volumes/{v['id']}").status == 404


def test_sandboxes_share_a_volume_at_once(tenant):
    volume(tenant, "shared")
    rw = tenant.create(volumes=[{"name": "shared", "path": "/shared"}])["id"]
    ro = tenant.create(volumes=[{"name": "shared", "path": "/shared", "read_only": True}])["id"]
    run(tenant, rw, "echo one > /shared/x")
    assert run(tenant, ro, "cat /shared/x")[0] == "one\n"
    out, end = run(tenant, ro, "echo two > /shared/x", ok=False)
    assert end["exit_code"] != 0 and "Read-only file system" in out
    run(tenant, rw, "echo three > /shared/x")
    assert run(tenant, ro, "cat /shared/x")[0] == "three\n"


def test_a_volume_is_in_use_while_a_sandbox_using_it_is_made(tenant):
    """Sandboxes are made off the server's loop: a DELETE of a volume that
    lands while a create mounting it is under way must see it in use. Five
    races, however each falls: a sandbox that was made never mounts a
    volume that is gone (its image unlinked, its bytes out of every
    quota)."""
    import concurrent.futures
    pool = concurrent.futures.ThreadPoolExecutor(2)
    for i in range(5):
        vid = volume(tenant, f"race{i}", 16)["id"]
        made = pool.submit(tenant.post, "/v1/sandboxes",
                           {"volumes": [{"name": f"race{i}", "path": "/v"}]})
        gone = tenant.delete(f"/v1/volumes/{vid}")
        assert gone.status in (204, 409), gone
        r = made.result()
        assert r.status in (201, 404), r
        if r.status == 201:
            assert gone.status == 409, "deleted while a sandbox was being made with it"
            assert tenant.get(f"/v1/volumes/{vid}").status == 200
            assert tenant.delete(f"/v1/sandboxes/{r.json['id']}").status == 204
        assert tenant.delete(f"/v1/volumes/{vid}").status in (204, 404)


def test_the_size_is_the_volumes_enospc(tenant):
    volume(tenant, "small", 16)
    sid = tenant.create(volumes=[{"name": "small", "path": "/v"}])["id"]
    out, end = run(tenant, sid, "head -c 64000000 /dev/zero > /v/big", ok=False)
    assert end["exit_code"] != 0 and "No space left on device" in out
    # the sandbox's own disk and the server go on
    assert run(tenant, sid, "rm /v/big && echo ok > /tmp/t && cat /tmp/t")[0] == "ok\n"


@pytest.mark.parametrize("body", [
    {"name": "x"}, {"size_mb": 32}, {"name": "", "size_mb": 32}, {"name": "a/b", "size_mb": 32},
    {"name": ".hidden", "size_mb": 32}, {"name": "vol_0123", "size_mb": 32},
    {"name": "x", "size_mb": 1},
    {"name": "x", "size_mb": 1 << 30}, {"name": "x", "size_mb": "32"}, {"name": "x" * 64,
                                                                         "size_mb": 32},
    {"name": "x", "size_mb": 32, "other": 1}])
def test_bad_volumes(tenant, body):
    r = tenant.post("/v1/volumes", body)
    assert r.status == 400 and error_of(r) == "invalid_argument", r
    assert tenant.get("/v1/volumes").json["volumes"] == []


def test_bad_mounts_and_other_tenants(server, tenant):
    volume(tenant, "mine")
    r = tenant.post("/v1/volumes", {"name": "mine", "size_mb": 16})
    assert r.status == 409 and error_of(r) == "exists"
    for mounts, status, code in (
            ([{"name": "nope", "path": "/x"}], 404, "volume_not_found"),
            ([{"name": "mine", "path": "relative"}], 400, "invalid_argument"),
            ([{"name": "mine", "path": "/proc/x"}], 400, "invalid_argument"),
            ([{"name": "mine", "path": "/a/../b"}], 400, "invalid_argument"),
            ([{"name": "mine"}], 400, "invalid_argument"),
            ([{"name": "mine", "path": "/x", "read_only": "no"}], 400, "invalid_argument"),
            ({"name": "mine"}, 400, "invalid_argument"),
            ([{"name": "mine", "path": f"/m{i}"} for i in range(17)], 400, "invalid_argument")):
        r = tenant.post("/v1/sandboxes", {"volumes": mounts})
        assert r.status == status and error_of(r) == code, (mounts, r)
    assert tenant.get("/v1/sandboxes").json["sandboxes"] == []
    # another tenant's volume is not there
    other = server.api()
    assert other.get("/v1/volumes/mine").status == 404
    r = other.post("/v1/sandboxes", {"volumes": [{"name": "mine", "path": "/x"}]})
    assert r.status == 404 and error_of(r) == "volume_not_found"
    assert other.delete("/v1/volumes/mine").status == 404


def test_volumes_survive_a_restart(tmp_path):
    before = set(leftovers())
    s = Server(BUILD / "hutch-serve", tmp_path / "state").start()
    api = s.api()
    v = volume(api, "durable")
    sid = api.create(volumes=[{"name": "durable", "path": "/d"}])["id"]
    run(api, sid, "echo before > /d/f")
    assert s.stop(signal.SIGKILL) == -signal.SIGKILL
    s.start()
    try:
        # the running sandbox was taken over with its mount, which still counts
        assert api.get(f"/v1/sandboxes/{sid}").json["volumes"][0]["id"] == v["id"]
        assert api.delete(f"/v1/volumes/{v['id']}").status == 409
        # a new sandbox shares the filesystem the old one has mounted
        other = api.create(volumes=[{"name": "durable", "path": "/d"}])["id"]
        run(api, other, "echo after >> /d/f")
        assert run(api, sid, "cat /d/f")[0] == "before\nafter\n"
        image = s.state_dir / "volumes" / f"{v['id']}.img"
        assert len(attached(image)) == 1
    finally:
        assert s.stop() == 0
    wait_for(lambda: not attached(image), 20)
    wait_for(lambda: not set(leftovers()) - before, 30)
    s.start()
    try:
        sid = api.create(volumes=[{"name": "durable", "path": "/d"}])["id"]
        assert run(api, sid, "cat /d/f")[0] == "before\nafter\n"
    finally:
        assert s.stop() == 0


def test_an_internal_error_names_no_host_path(tmp_path):
    """An internal failure says what failed, not where the host keeps it
    (issue 41, no host paths): with STATE/volumes not a directory, making a
    volume fails 500 and its message says "(the state directory)" where
    the image's path was; the whole path is on the server's stderr for the
    operator. The client's check (hostpaths.py) fails an answer with it."""
    s = Server(BUILD / "hutch-serve", tmp_path / "state").start()
    try:
        vols = s.state_dir / "volumes"
        if vols.is_dir():
            vols.rmdir()
        vols.write_text("")
        r = s.api().post("/v1/volumes", {"name": "v", "size_mb": 16})
        assert r.status == 500 and error_of(r) == "internal", r
        assert r.json["error"]["message"].startswith("volume image (the state directory): "), r
        assert f"{vols}/vol_" in s.log_text()
        assert s.api().get("/healthz").status == 200
    finally:
        assert s.stop() == 0
