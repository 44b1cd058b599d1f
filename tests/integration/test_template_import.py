"""hutch template import and export: OCI image layouts, oci-archives and
docker-archives (made by hand here, and by skopeo from them), unpacked
into the store as overlay layers; exported back as an oci-archive that
skopeo reads; and every hostile archive refused cleanly: exit 2, one line
on stderr, no template listed, nothing left in tmp/, nothing written
outside the store."""
import gzip
import hashlib
import io
import json
import os
import pathlib
import shutil
import stat
import subprocess
import tarfile

import pytest

from conftest import build_binary, require

OCI_LAYER = "application/vnd.oci.image.layer.v1.tar"


# --- archives, built here -------------------------------------------------

def entry(name, data=None, **kw):
    """A tar member: (TarInfo, data). kw sets TarInfo fields (type, mode,
    uid, linkname, devmajor, pax_headers...)."""
    ti = tarfile.TarInfo(name)
    ti.mode = 0o644
    for k, v in kw.items():
        setattr(ti, k, v)
    if data is not None:
        ti.size = len(data)
    return ti, data


def tar_of(*entries):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as t:
        for ti, data in entries:
            t.addfile(ti, io.BytesIO(data) if data is not None else None)
    return buf.getvalue()


def compress(raw, how):
    if how == "gzip":
        return gzip.compress(raw, mtime=0)
    if how == "zstd":
        require(shutil.which("zstd"), "zstd is not installed (scripts/deps.sh --test)")
        return subprocess.run(["zstd", "-q", "-c"], input=raw, capture_output=True,
                              check=True).stdout
    return raw


def sha(b):
    return hashlib.sha256(b).hexdigest()


def put_blob(d, b, media_type):
    (d / "blobs/sha256").mkdir(parents=True, exist_ok=True)
    (d / "blobs/sha256" / sha(b)).write_bytes(b)
    return {"mediaType": media_type, "digest": "sha256:" + sha(b), "size": len(b)}


def image_config(diff_ids, config=None, arch="amd64"):
    return {"architecture": arch, "os": "linux",
            "config": config if config is not None else
            {"Env": ["PATH=/bin", "HELLO=world"], "Cmd": ["/bin/sh"], "WorkingDir": "/srv",
             "User": "1000", "Labels": {"a": "b"}, "ExposedPorts": {"8080/tcp": {}}},
            "rootfs": {"type": "layers", "diff_ids": diff_ids}}


def manifest_blob(d, layers, how="gzip", config=None, arch="amd64", config_bytes=None):
    """Write the layers and a config and manifest for them to layout d;
    the manifest's descriptor."""
    descs = [put_blob(d, compress(raw, how), OCI_LAYER + ("+" + how if how != "none" else ""))
             for raw in layers]
    cfg = config_bytes or json.dumps(
        image_config(["sha256:" + sha(raw) for raw in layers], config, arch)).encode()
    man = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
           "config": put_blob(d, cfg, "application/vnd.oci.image.config.v1+json"),
           "layers": descs}
    return put_blob(d, json.dumps(man).encode(), man["mediaType"])


def layout(d, layers, **kw):
    """An OCI image layout at d holding one image of layers (raw tars)."""
    d.mkdir(parents=True, exist_ok=True)
    desc = manifest_blob(d, layers, **kw)
    desc["annotations"] = {"org.opencontainers.image.ref.name": "latest"}
    write_index(d, [desc])
    return d


def write_index(d, manifests):
    (d / "oci-layout").write_text('{"imageLayoutVersion":"1.0.0"}')
    (d / "index.json").write_text(json.dumps({"schemaVersion": 2, "manifests": manifests}))


def tar_dir(d, out):
    with tarfile.open(out, "w") as t:
        for p in sorted(d.rglob("*")):
            t.add(p, arcname=str(p.relative_to(d)), recursive=False)
    return out


# A layer with one of everything a layer may hold, and what it may not
# keep: setuid bits, an id above 65535, xattrs other than user.*.
BASE = tar_of(
    entry("etc", type=tarfile.DIRTYPE, mode=0o755),
    entry("etc/os-release", b"ID=hutchtest\n"),
    entry("etc/old", b"old"),
    entry("/abs/file", b"absolute names land under the root"),
    entry("bin/su", b"#!", mode=0o6755),
    entry("usr/lib/os-release", type=tarfile.SYMTYPE, linkname="/etc/os-release"),
    entry("etc/hard", type=tarfile.LNKTYPE, linkname="etc/os-release"),
    entry("home/u/f", b"hi", uid=1000, gid=1000,
          pax_headers={"SCHILY.xattr.user.note": "kept",
                       "SCHILY.xattr.security.capability": "dropped",
                       "SCHILY.xattr.trusted.overlay.redirect": "/etc"}),
    entry("home/u/keep", b"k"),
    entry("big", b"x", uid=100000, gid=70000),
    entry("run/fifo", type=tarfile.FIFOTYPE),
    entry("tmp", type=tarfile.DIRTYPE, mode=0o1777),
)
# Above it: OCI's whiteouts, for a file and for a directory's contents.
UPPER = tar_of(
    entry("etc/.wh.old", b""),
    entry("home/.wh..wh..opq", b""),
    entry("home/new", b"n"),
)


# --- running hutch template ---------------------------------------------

@pytest.fixture(params=["build", "asan"])
def tpl(request, tmp_path):
    """tpl(args...) runs `hutch template --state-dir STATE args` with one
    build; .state is STATE."""
    binary = build_binary(request.param, "hutch")
    state = tmp_path / "state"

    def go(*args, timeout=120):
        p = subprocess.run([str(binary), "template", "--state-dir", str(state), *map(str, args)],
                           capture_output=True, timeout=timeout)
        assert b"Sanitizer" not in p.stderr and b"runtime error" not in p.stderr, p.stderr
        return p
    go.state = state
    return go


def layer_dir(tpl, raw):
    return tpl.state / "images/layers" / sha(raw)


def names(tpl):
    p = tpl("ls", "--json")
    assert p.returncode == 0, p.stderr
    return [t["name"] for t in json.loads(p.stdout)]


def tree(root):
    """What a layer holds, mtimes aside: {path: (type, mode, uid, gid, data or target, xattrs)}."""
    out = {}
    for p in sorted(root.rglob("*")):
        st = p.lstat()
        if stat.S_ISLNK(st.st_mode):
            what = os.readlink(p)
        elif stat.S_ISREG(st.st_mode):
            what = p.read_bytes()
        elif stat.S_ISCHR(st.st_mode):
            what = (os.major(st.st_rdev), os.minor(st.st_rdev))
        else:
            what = None
        xattrs = {} if stat.S_ISLNK(st.st_mode) or stat.S_ISFIFO(st.st_mode) else \
            {k: os.getxattr(p, k) for k in os.listxattr(p)}
        out[str(p.relative_to(root))] = (stat.S_IFMT(st.st_mode), stat.S_IMODE(st.st_mode),
                                         st.st_uid, st.st_gid, what, xattrs)
    return out


def check_base_and_upper(base, upper):
    t = tree(base)
    assert t["etc/os-release"][4] == b"ID=hutchtest\n"
    assert t["abs/file"][4].startswith(b"absolute")
    assert t["bin/su"][1] == 0o755, "setuid and setgid bits are dropped"
    assert t["usr/lib/os-release"][4] == "/etc/os-release"  # stored as a link, not followed
    assert os.stat(base / "etc/hard").st_ino == os.stat(base / "etc/os-release").st_ino
    assert t["home/u/f"][2:4] == (1000, 1000)
    assert t["home/u/f"][5] == {"user.note": b"kept"}
    assert t["big"][2:4] == (65536, 65536)
    assert t["run/fifo"][0] == stat.S_IFIFO
    assert t["tmp"][1] == 0o1777
    u = tree(upper)
    assert u["etc/old"][0] == stat.S_IFCHR and u["etc/old"][4] == (0, 0)
    assert u["home"][5] == {"trusted.overlay.opaque": b"y"}
    assert u["home/new"][4] == b"n"
    assert not any(".wh." in k for k in u)


def refused(tpl, *args):
    """Import (progress as NDJSON on stdout, so stderr holds only the
    error); expect exit 2, one line on stderr, the same error as the last
    event, no template, no work left in tmp/. The error line."""
    p = tpl("--progress", "ndjson", "import", *args, "--name", "bad")
    assert p.returncode == 2, (p.returncode, p.stderr)
    lines = p.stderr.decode().strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("hutch template import: "), lines
    last = json.loads(p.stdout.decode().splitlines()[-1])
    assert last["event"] == "error" and last["message"] in lines[0]
    assert "bad" not in names(tpl)
    tmp = tpl.state / "images/tmp"
    assert not tmp.exists() or not list(tmp.iterdir())
    return lines[0]


# --- imports ------------------------------------------------------------

@pytest.mark.parametrize("how", ["gzip", "zstd", "none"])
def test_import_layout_dir(tpl, tmp_path, how):
    lay = layout(tmp_path / "lay", [BASE, UPPER], how=how)
    p = tpl("import", lay, "--name", "t")
    assert p.returncode == 0, p.stderr
    name, tid = p.stdout.decode().split()
    assert name == "t" and len(tid) == 16
    check_base_and_upper(layer_dir(tpl, BASE), layer_dir(tpl, UPPER))
    rec = json.loads(tpl("inspect", "t").stdout)
    assert rec["layers"] == [sha(BASE), sha(UPPER)]
    assert rec["source"] == "import" and rec["ref"] == str(lay)
    c = rec["config"]
    assert c["env"] == ["PATH=/bin", "HELLO=world"] and c["cmd"] == ["/bin/sh"]
    assert c["workdir"] == "/srv" and c["user"] == "1000" and c["labels"] == {"a": "b"}
    assert c["exposed_ports"] == ["8080/tcp"]
    assert not list((tpl.state / "images/tmp").iterdir())


def test_import_progress_ndjson(tpl, tmp_path):
    lay = layout(tmp_path / "lay", [BASE, UPPER])
    p = tpl("--progress", "ndjson", "import", lay, "--name", "t")
    assert p.returncode == 0, p.stderr
    events = [json.loads(l) for l in p.stdout.decode().splitlines()]
    layers = [e for e in events if e["event"] == "layer"]
    assert [(e["index"], e["count"]) for e in layers] == [(1, 2), (2, 2)]
    assert all(e["bytes"] > 0 for e in layers)
    assert events[-1]["event"] == "done" and events[-1]["name"] == "t" and events[-1]["id"]


def test_import_archives_hand_made(tpl, tmp_path):
    """An oci-archive, and a docker-archive as `docker save` lays one out."""
    lay = layout(tmp_path / "lay", [BASE, UPPER])
    p = tpl("import", tar_dir(lay, tmp_path / "oci.tar"), "--name", "oci")
    assert p.returncode == 0, p.stderr
    d = tmp_path / "docker"
    d.mkdir()
    cfg = json.dumps(image_config(["sha256:" + sha(BASE), "sha256:" + sha(UPPER)])).encode()
    (d / (sha(cfg) + ".json")).write_bytes(cfg)
    for raw in (BASE, UPPER):
        (d / sha(raw)).mkdir()
        (d / sha(raw) / "layer.tar").write_bytes(raw)
    # Old `docker save` links a layer another image has to that one's tar.
    (d / "linked").mkdir()
    (d / "linked/layer.tar").symlink_to(f"../{sha(UPPER)}/layer.tar")
    (d / "manifest.json").write_text(json.dumps([{
        "Config": sha(cfg) + ".json", "RepoTags": ["x:latest"],
        "Layers": [sha(BASE) + "/layer.tar", "linked/layer.tar"]}]))
    p = tpl("import", tar_dir(d, tmp_path / "docker.tar"), "--name", "docker")
    assert p.returncode == 0, p.stderr
    for n in ("oci", "docker"):
        assert json.loads(tpl("inspect", n).stdout)["layers"] == [sha(BASE), sha(UPPER)]
    check_base_and_upper(layer_dir(tpl, BASE), layer_dir(tpl, UPPER))


@pytest.mark.parametrize("dest", ["oci-archive", "docker-archive", "oci"])
def test_import_what_skopeo_writes(tpl, tmp_path, dest):
    require(shutil.which("skopeo"), "skopeo is not installed (scripts/deps.sh --test)")
    lay = layout(tmp_path / "lay", [BASE, UPPER])
    out = tmp_path / ("out" if dest == "oci" else "out.tar")
    target = f"{dest}:{out}" + (":img:v1" if dest == "docker-archive" else "")
    # --tmpdir: skopeo's default, /var/tmp, is read-only in the cgroup v2 guest.
    subprocess.run(["skopeo", "--tmpdir", str(tmp_path), "copy", "-q", f"oci:{lay}:latest", target],
                   check=True, capture_output=True, timeout=120)
    p = tpl("import", out, "--name", "sk")
    assert p.returncode == 0, p.stderr
    rec = json.loads(tpl("inspect", "sk").stdout)
    assert rec["layers"] == [sha(BASE), sha(UPPER)]
    assert rec["config"]["env"] == ["PATH=/bin", "HELLO=world"]
    check_base_and_upper(layer_dir(tpl, BASE), layer_dir(tpl, UPPER))


def test_index_picks_linux_amd64(tpl, tmp_path):
    d = tmp_path / "lay"
    d.mkdir()
    arm = manifest_blob(d, [tar_of(entry("arm", b"arm"))], arch="arm64")
    arm["platform"] = {"os": "linux", "architecture": "arm64"}
    amd = manifest_blob(d, [BASE])
    amd["platform"] = {"os": "linux", "architecture": "amd64"}
    idx = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
           "manifests": [arm, amd]}
    inner = put_blob(d, json.dumps(idx).encode(), idx["mediaType"])
    write_index(d, [inner])
    p = tpl("import", d, "--name", "multi")
    assert p.returncode == 0, p.stderr
    assert json.loads(tpl("inspect", "multi").stdout)["layers"] == [sha(BASE)]


def test_export_then_skopeo_then_reimport(tpl, tmp_path):
    require(shutil.which("skopeo"), "skopeo is not installed (scripts/deps.sh --test)")
    assert tpl("import", layout(tmp_path / "lay", [BASE, UPPER]), "--name", "t").returncode == 0
    out = tmp_path / "t.tar"
    p = tpl("export", "t", out)
    assert p.returncode == 0, p.stderr
    info = json.loads(subprocess.run(["skopeo", "--tmpdir", str(tmp_path), "inspect",
                                      f"oci-archive:{out}"], check=True,
                                     capture_output=True, timeout=60).stdout)
    assert info["Architecture"] == "amd64" and info["Os"] == "linux"
    assert info["Env"] == ["PATH=/bin", "HELLO=world"] and len(info["Layers"]) == 2
    p = tpl("import", out, "--name", "again")
    assert p.returncode == 0, p.stderr
    again = json.loads(tpl("inspect", "again").stdout)
    assert again["config"] == json.loads(tpl("inspect", "t").stdout)["config"]
    store = tpl.state / "images/layers"
    for a, b in zip([sha(BASE), sha(UPPER)], again["layers"]):
        assert tree(store / a) == tree(store / b)


def test_replace_and_conflict(tpl, tmp_path):
    lay = layout(tmp_path / "lay", [BASE])
    assert tpl("import", lay, "--name", "t").returncode == 0
    p = tpl("import", lay, "--name", "t")
    assert p.returncode == 2 and b"t" in p.stderr
    assert tpl("import", lay, "--name", "t", "--replace").returncode == 0
    assert names(tpl) == ["t"]


def test_run_imported_busybox_template(tmp_path, run):
    """An image built here from the host's static busybox runs under
    hutch run --template, its config honoured; a layer the image repeats
    is stacked once, at its topmost place."""
    require(os.path.exists("/bin/busybox"), "busybox-static is not installed")
    bb = pathlib.Path("/bin/busybox").read_bytes()
    raw = tar_of(entry("bin", type=tarfile.DIRTYPE, mode=0o755),
                 entry("bin/busybox", bb, mode=0o755),
                 *[entry("bin/" + a, type=tarfile.SYMTYPE, linkname="busybox")
                   for a in ("sh", "cat", "pwd")],
                 entry("etc/os-release", b'ID=hutchbox\nNAME="busybox test"\n'))
    # The empty layer twice, as images built by some tools have it.
    empty = tar_of()
    lay = layout(tmp_path / "bb", [empty, raw, empty], config={
        "Env": ["PATH=/bin", "HELLO=world"], "WorkingDir": "/etc",
        "Cmd": ["/bin/cat", "/etc/os-release"]})
    name = f"bb-{os.getpid()}"
    p = subprocess.run([str(build_binary("build", "hutch")), "template", "--local", "import", str(lay),
                        "--name", name, "--replace"], capture_output=True, timeout=120)
    assert p.returncode == 0, p.stderr
    try:
        rec = json.loads(subprocess.run([str(build_binary("build", "hutch")), "template",
                                         "--local", "inspect", name], capture_output=True).stdout)
        assert rec["layers"] == [sha(raw), sha(empty)]
        r = run(["--template", name, "--", "/bin/sh", "-c", "cat /etc/os-release; pwd; echo $HELLO"])
        assert r.code == 0, r
        assert r.out.splitlines() == ["ID=hutchbox", 'NAME="busybox test"', "/etc", "world"]
        r = run(["--template", name])
        assert r.code == 0 and "ID=hutchbox" in r.out, r
    finally:
        subprocess.run([str(build_binary("build", "hutch")), "template", "--local", "rm", name],
                       capture_output=True, timeout=60)


# --- hostile archives ---------------------------------------------------

SYM, LNK, CHR, BLK = tarfile.SYMTYPE, tarfile.LNKTYPE, tarfile.CHRTYPE, tarfile.BLKTYPE

# name: (entries of a layer, given the directory outside the store that
# each tries to reach; words the error says)
HOSTILE_LAYERS = {
    "dotdot": (lambda out: [entry("../" * 12 + str(out)[1:] + "/pwned", b"x")], ["'..'"]),
    "dotdot_inside": (lambda out: [entry("a/../../pwned", b"x")], ["'..'"]),
    "write_through_symlink": (lambda out: [entry("evil", type=SYM, linkname=str(out)),
                                           entry("evil/pwned", b"x")], ["symlink"]),
    "write_through_relative_symlink": (
        lambda out: [entry("evil", type=SYM, linkname="../" * 12 + str(out)[1:]),
                     entry("evil/pwned", b"x")], ["symlink"]),
    "hardlink_out": (lambda out: [entry("h", type=LNK, linkname=str(out / "secret"))],
                     ["hard link"]),
    "hardlink_dotdot": (lambda out: [entry("h", type=LNK, linkname="../" * 12 + "etc/passwd")],
                        ["'..'"]),
    "hardlink_not_yet_written": (lambda out: [entry("a", type=LNK, linkname="b"),
                                              entry("b", b"x")], ["hard link"]),
    "hardlink_through_symlink": (lambda out: [entry("l", type=SYM, linkname=str(out)),
                                              entry("h", type=LNK, linkname="l/secret")],
                                 ["symlink"]),
    "char_device": (lambda out: [entry("dev/null", type=CHR, devmajor=1, devminor=3)],
                    ["device"]),
    "block_device": (lambda out: [entry("dev/sda", type=BLK, devmajor=8, devminor=0)],
                     ["device"]),
    "device_0_0": (lambda out: [entry("gone", type=CHR, devmajor=0, devminor=0)], ["device"]),
    "whiteout_root": (lambda out: [entry(".wh..", b"")], ["whiteout"]),
    "whiteout_root_absolute": (lambda out: [entry("/.wh.", b"")], ["whiteout"]),
    "whiteout_parent": (lambda out: [entry("a/.wh..", b"")], ["whiteout"]),
    "file_as_root": (lambda out: [entry(".", b"x")], ["root"]),
}


@pytest.fixture
def outside(tmp_path):
    """A directory outside the store with a secret in it: after a hostile
    import, it must hold just that, unchanged."""
    out = tmp_path / "outside"
    out.mkdir()
    (out / "secret").write_text("secret")
    yield out
    assert sorted(os.listdir(out)) == ["secret"]
    assert (out / "secret").read_text() == "secret" and (out / "secret").stat().st_nlink == 1


@pytest.mark.parametrize("case", sorted(HOSTILE_LAYERS))
def test_hostile_layer_refused(tpl, tmp_path, outside, case):
    entries, words = HOSTILE_LAYERS[case]
    lay = layout(tmp_path / "lay", [BASE, tar_of(*entries(outside))])
    line = refused(tpl, lay)
    assert all(w in line for w in words), line
    assert not list((tpl.state / "images/templates").glob("*.json"))


def zeros_layer(n):
    ti = tarfile.TarInfo("zeros")
    ti.size = n
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as t:
        t.addfile(ti, io.BytesIO(bytes(n)))
    return buf.getvalue()


def test_decompression_bomb_refused(tpl, tmp_path):
    lay = layout(tmp_path / "lay", [zeros_layer(32 << 20)])
    assert sum(f.stat().st_size for f in (lay / "blobs/sha256").iterdir()) < 200 << 10
    assert "--max-bytes" in refused(tpl, lay, "--max-bytes", 1 << 20)
    assert not list((tpl.state / "images/layers").glob("*"))


def test_cap_counts_every_layer(tpl, tmp_path):
    half = zeros_layer(600 << 10)
    lay = layout(tmp_path / "lay", [half, half + bytes(512)])
    assert "--max-bytes" in refused(tpl, lay, "--max-bytes", 1 << 20)


def test_too_many_files_refused(tpl, tmp_path):
    lay = layout(tmp_path / "lay", [tar_of(*[entry(f"f{i}", b"") for i in range(50)])])
    assert "--max-files" in refused(tpl, lay, "--max-files", 20)


def blob_of(lay, digest):
    return lay / "blobs/sha256" / digest.split(":")[1]


def manifest_of(lay):
    idx = json.loads((lay / "index.json").read_text())
    return json.loads(blob_of(lay, idx["manifests"][0]["digest"]).read_bytes())


def tamper_layer(lay):
    p = blob_of(lay, manifest_of(lay)["layers"][0]["digest"])
    raw = tar_of(entry("etc/os-release", b"ID=evilxxxxxx\n"))
    assert len(raw) == p.stat().st_size
    p.write_bytes(raw)


def grow_layer(lay):
    p = blob_of(lay, manifest_of(lay)["layers"][0]["digest"])
    p.write_bytes(p.read_bytes() + bytes(512))


def tamper_config(lay):
    p = blob_of(lay, manifest_of(lay)["config"]["digest"])
    p.write_bytes(p.read_bytes().replace(b"HELLO=world", b"HELLO=evil!"))


def rewrite_index(lay, manifest):
    desc = put_blob(lay, json.dumps(manifest).encode() if isinstance(manifest, dict)
                    else manifest, "application/vnd.oci.image.manifest.v1+json")
    write_index(lay, [desc])


def config_as(cfg):
    def go(lay):
        m = manifest_of(lay)
        m["config"] = put_blob(lay, json.dumps(cfg).encode(), m["config"]["mediaType"])
        rewrite_index(lay, m)
    return go


def no_index(lay):
    (lay / "index.json").write_text("{\"manifests\": [")


BAD_DIFF_IDS = image_config(["sha256:" + "0" * 64])
NO_ROOTFS = {"architecture": "amd64", "os": "linux", "config": {}}
ENV_NOT_LIST = image_config(["sha256:" + sha(tar_of(entry("etc/os-release", b"ID=hutchtest\n")))],
                            {"Env": "PATH=/bin"})
ARM_ONLY = image_config(["sha256:" + sha(tar_of(entry("etc/os-release", b"ID=hutchtest\n")))],
                        arch="arm64")

BAD_IMAGES = {
    "layer_digest_mismatch": (tamper_layer, ["does not match", "digest"]),
    "layer_size_mismatch": (grow_layer, ["bytes"]),
    "config_digest_mismatch": (tamper_config, ["does not match"]),
    "diff_id_mismatch": (config_as(BAD_DIFF_IDS), ["diff_id"]),
    "manifest_not_json": (lambda lay: rewrite_index(lay, b"{\"layers\": [}"), ["not a JSON"]),
    "manifest_without_config": (lambda lay: rewrite_index(lay, {"schemaVersion": 2, "layers": []}),
                                ["descriptor"]),
    "config_without_rootfs": (config_as(NO_ROOTFS), ["diff_ids"]),
    "config_env_not_a_list": (config_as(ENV_NOT_LIST), ["Env"]),
    "config_for_arm64": (config_as(ARM_ONLY), ["arm64"]),
    "index_not_json": (no_index, ["index.json"]),
}


@pytest.mark.parametrize("case", sorted(BAD_IMAGES))
def test_bad_image_refused(tpl, tmp_path, case):
    change, words = BAD_IMAGES[case]
    lay = layout(tmp_path / "lay", [tar_of(entry("etc/os-release", b"ID=hutchtest\n"))],
                 how="none")
    change(lay)
    line = refused(tpl, lay)
    assert all(w in line for w in words), line


def test_docker_manifest_malformed(tpl, tmp_path):
    d = tmp_path / "docker"
    d.mkdir()
    (d / "manifest.json").write_text('{"Config": 1}')
    assert "docker-archive manifest" in refused(tpl, tar_dir(d, tmp_path / "d.tar"))


def outer_tar(path, *entries):
    with tarfile.open(path, "w") as t:
        for ti, data in entries:
            t.addfile(ti, io.BytesIO(data) if data is not None else None)
    return path


def test_outer_archive_hostile_members(tpl, tmp_path, outside):
    cases = [
        ([entry("../" * 12 + str(outside)[1:] + "/pwned", b"x")], "'..'"),
        ([entry("index.json", type=SYM, linkname="../" * 12 + str(outside)[1:] + "/secret")],
         "out of the archive"),
        ([entry("index.json", type=SYM, linkname=str(outside / "secret"))], "no file"),
        ([entry("index.json", type=LNK, linkname=str(outside / "secret"))], "no file"),
        ([entry("blobs", type=SYM, linkname=str(outside)),
          entry("blobs/pwned", b"x")], "links to no file"),
        ([entry("dev", type=CHR, devmajor=1, devminor=3)], "neither a file"),
        ([entry("oci-layout", b"{}")], "neither an OCI image layout"),
    ]
    for i, (entries, words) in enumerate(cases):
        line = refused(tpl, outer_tar(tmp_path / f"o{i}.tar", *entries))
        assert words in line, line


def test_outer_archive_bomb(tpl, tmp_path):
    lay = layout(tmp_path / "lay", [zeros_layer(32 << 20)], how="none")
    arc = tar_dir(lay, tmp_path / "big.tar")
    gz = tmp_path / "big.tar.gz"
    gz.write_bytes(gzip.compress(arc.read_bytes(), compresslevel=1))
    assert "--max-bytes" in refused(tpl, gz, "--max-bytes", 1 << 20)
