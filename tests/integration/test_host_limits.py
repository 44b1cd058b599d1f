"""Limits against the host: what a sandbox or a tenant may ask for is
bounded by what the host has (RAM, pid_max, the state filesystem), hutch's
whole cgroup subtree leaves the host a reserve, and volumes and snapshots
stop at a tenant's disk quota and the filesystem's reserve, refused whole."""
import os
import pathlib
import subprocess

import pytest

from conftest import BUILD, cgroup_roots
from serveapi import Server, error_of, output

# Serial (conftest.py): bounds taken from what the whole host has (RAM,
# pid_max, the state filesystem's free space, hutch's own cgroup subtree).
pytestmark = pytest.mark.serial


def ram():
    return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def pid_max():
    read = lambda f: int(pathlib.Path(f).read_text())
    return min(read("/proc/sys/kernel/pid_max"), read("/proc/sys/kernel/threads-max"))


def memory_ceiling():  # hostlimits.c: RAM - max(512 MiB, RAM / 8)
    return ram() - max(512 << 20, ram() // 8)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    s = Server(BUILD / "hutch-serve", tmp_path_factory.mktemp("limits") / "state",
               "--tenant-disk-mb", "64").start()
    yield s
    assert s.stop() == 0, s.log_text()


def test_hutchs_subtree_leaves_the_host_a_reserve(run):
    assert run(["--", "true"]).code == 0
    mem = pids = None
    for root in cgroup_roots():
        for name in ("memory.max", "memory.limit_in_bytes"):
            if (root / "hutch" / name).exists():
                mem = int((root / "hutch" / name).read_text())
        if (root / "hutch" / "pids.max").exists():
            pids = int((root / "hutch" / "pids.max").read_text())
    assert mem is not None and mem <= memory_ceiling(), mem
    assert pids is not None and pids <= pid_max() - max(1024, pid_max() // 8), pids


def test_a_sandbox_may_not_ask_for_more_than_the_host_has(run, server, tenant):
    too_many = min(65536, pid_max() // 2) + 1
    r = run(["--pids", str(too_many), "--", "true"])
    assert r.code == 125 and "kernel.pid_max" in r.err, r.err
    r = run(["--memory", str(memory_ceiling() // (1 << 20) + 1), "--", "true"])
    assert r.code == 125 and "exceeds the host" in r.err, r.err
    r = tenant.post("/v1/sandboxes", {"memory_mb": memory_ceiling() // (1 << 20) + 1})
    assert r.status == 400 and error_of(r) == "invalid_argument" and b"exceeds the host" in r.raw
    r = tenant.post("/v1/sandboxes", {"pids": too_many})
    # Where half of pid_max is above the API's own 65536 (pid_max is per
    # pid namespace since Linux 6.14, 4194304 in a new one), the API's
    # range is what refuses, and says so.
    why = b"pid_max" if pid_max() // 2 < 65536 else b"from 1 to 65536"
    assert r.status == 400 and error_of(r) == "invalid_argument" and why in r.raw, r.raw


def test_a_tenants_memory_quota_defaults_to_the_host(server):
    t = server.api(server.api().post("/v1/keys", {"tenant": "ramquota"}).json["key"])
    r = t.post("/v1/sandboxes", {"memory_mb": memory_ceiling() // (1 << 20)})
    # Granted or refused by the kernel's means, never by a quota above the host.
    assert r.status == 201 or error_of(r) != "quota_exceeded", r
    if r.status == 201:
        assert t.delete(f"/v1/sandboxes/{r.json['id']}").status == 204


def test_volumes_and_snapshots_stop_at_the_tenants_disk_quota(server, tenant):
    state = server.state_dir
    assert tenant.post("/v1/volumes", {"name": "a", "size_mb": 48}).status == 201
    r = tenant.post("/v1/volumes", {"name": "b", "size_mb": 32})
    assert r.status == 429 and error_of(r) == "quota_exceeded", r
    sid = tenant.create(disk_mb=64)["id"]
    lines = tenant.exec(sid, {"shell": "head -c 24M /dev/urandom > /home/user/big && echo ok"})
    assert output(lines) == b"ok\n", lines
    before = sorted(os.listdir(state / "snapshots")) if (state / "snapshots").exists() else []
    r = tenant.post(f"/v1/sandboxes/{sid}/snapshots", {})
    assert r.status == 429 and error_of(r) == "quota_exceeded", r
    after = sorted(os.listdir(state / "snapshots")) if (state / "snapshots").exists() else []
    assert after == before  # nothing half written
    assert tenant.delete("/v1/volumes/a").status == 204
    r = tenant.post(f"/v1/sandboxes/{sid}/snapshots", {})
    assert r.status in (201, 409), r  # 409: a state dir that cannot be id-mapped
    if r.status == 201:
        assert tenant.delete(f"/v1/snapshots/{r.json['id']}").status == 204


def volumes_on_disk(server):
    d = server.state_dir / "volumes"
    return sorted(os.listdir(d)) if d.exists() else []


def test_the_admin_sets_a_tenants_own_disk_quota(server):
    """max_disk_mb at POST /v1/keys overrides --tenant-disk-mb (64 here)
    for that tenant only, down or up, and a later key may change it."""
    admin = server.api()
    low = server.api(admin.post("/v1/keys", {"tenant": "disk-low", "max_disk_mb": 16})
                     .json["key"])
    other = server.api(admin.post("/v1/keys", {"tenant": "disk-other"}).json["key"])
    before = volumes_on_disk(server)
    r = low.post("/v1/volumes", {"name": "v", "size_mb": 32})
    assert r.status == 429 and error_of(r) == "quota_exceeded", r
    assert b"at most 16 MiB" in r.raw, r.raw
    assert volumes_on_disk(server) == before  # nothing half written
    assert low.post("/v1/volumes", {"name": "v", "size_mb": 16}).status == 201
    # another tenant keeps the server's default
    assert other.post("/v1/volumes", {"name": "v", "size_mb": 32}).status == 201
    r = other.post("/v1/volumes", {"name": "w", "size_mb": 48})
    assert r.status == 429 and error_of(r) == "quota_exceeded", r
    # another key of the tenant without the field keeps its quota; one with it sets it
    admin.post("/v1/keys", {"tenant": "disk-low"})
    r = low.post("/v1/volumes", {"name": "w", "size_mb": 16})
    assert r.status == 429 and error_of(r) == "quota_exceeded", r
    assert admin.post("/v1/keys", {"tenant": "disk-low", "max_disk_mb": 96}).status == 201
    assert low.post("/v1/volumes", {"name": "w", "size_mb": 64}).status == 201
    for api, names in ((low, ("v", "w")), (other, ("v",))):
        for n in names:
            assert api.delete(f"/v1/volumes/{n}").status == 204


@pytest.mark.parametrize("value", ["-1", "16.5", '"16"', "true", "1099511627777",
                                   "18446744073709551616", "1e30"])
def test_bad_disk_quotas(server, value):
    admin = server.api()
    r = admin.post("/v1/keys", f'{{"tenant": "disk-bad", "max_disk_mb": {value}}}')
    assert r.status == 400 and error_of(r) in ("invalid_argument", "invalid_json"), r
    # nothing was set: the tenant has the server's default
    t = server.api(admin.post("/v1/keys", {"tenant": "disk-bad"}).json["key"])
    assert t.post("/v1/volumes", {"name": "v", "size_mb": 48}).status == 201
    assert t.delete("/v1/volumes/v").status == 204


def test_a_tenants_disk_quota_survives_a_restart(tmp_path):
    """Kept in hutch.db, as the other quotas; a database of an older hutch,
    whose tenants table has no such column, gets the server's default."""
    import sqlite3
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    db = sqlite3.connect(state / "hutch.db")
    db.execute("CREATE TABLE tenants (name TEXT PRIMARY KEY, max_sandboxes INTEGER,"
               " max_memory_mb INTEGER)")
    db.execute("INSERT INTO tenants VALUES ('old', 5, 1000)")
    db.commit()
    db.close()
    s = Server(BUILD / "hutch-serve", state, "--tenant-disk-mb", "64").start()
    try:
        old = s.api(s.api().post("/v1/keys", {"tenant": "old"}).json["key"])
        low = s.api(s.api().post("/v1/keys", {"tenant": "low", "max_disk_mb": 16}).json["key"])
        assert old.post("/v1/volumes", {"name": "v", "size_mb": 48}).status == 201
        assert old.delete("/v1/volumes/v").status == 204
    finally:
        assert s.stop() == 0, s.log_text()
    s.start()
    try:
        r = low.post("/v1/volumes", {"name": "v", "size_mb": 32})
        assert r.status == 429 and error_of(r) == "quota_exceeded", r
        assert old.post("/v1/volumes", {"name": "v", "size_mb": 48}).status == 201
    finally:
        assert s.stop() == 0, s.log_text()


def test_the_state_filesystem_keeps_its_reserve(tmp_path):
    """On a 320 MiB filesystem the reserve is 256 MiB: a 64 MiB volume
    fits the tenant's quota (a quarter, 80 MiB) but not the reserve."""
    mnt = tmp_path / "small"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=320m,mode=0700", "tmpfs", str(mnt)],
                   check=True)
    try:
        s = Server(BUILD / "hutch-serve", mnt / "state").start()
        try:
            t = s.api(s.api().post("/v1/keys", {"tenant": "small"}).json["key"])
            r = t.post("/v1/volumes", {"name": "v", "size_mb": 64})
            assert r.status == 507 and error_of(r) == "no_space", r
            assert not list((mnt / "state" / "volumes").glob("*"))
            assert t.post("/v1/volumes", {"name": "v", "size_mb": 16}).status == 201
        finally:
            assert s.stop() == 0, s.log_text()
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=True)
