"""docs/openapi.yaml and the server agree: every route the server serves is
in the spec and every route in the spec is served; every error code the
server can send is listed there; a create's volume paths and an exec's
body (its pty above all) are refused by the server exactly where the spec
says. docs/e2b.md and the E2B-compatible route tables agree the same way,
and README.md's `hutch serve` synopsis lists every flag of its --help."""
import json
import re
import subprocess

import pytest
import yaml

from conftest import BUILD, ROOT, serve_each_build
from serveapi import error_of, output, wait_for

METHODS = {"get", "put", "post", "delete", "patch", "head", "options"}


def spec():
    return yaml.safe_load((ROOT / "docs" / "openapi.yaml").read_text())


def test_routes_match_the_spec():
    served = subprocess.run([str(BUILD / "hutch-serve"), "--routes"], capture_output=True,
                            text=True, check=True, timeout=30).stdout.split("\n")
    served = {l for l in served if l}
    documented = {f"{m.upper()} {path}" for path, ops in spec()["paths"].items()
                  for m in ops if m in METHODS}
    assert served, "the server lists no routes"
    assert served - documented == set(), "served but not in docs/openapi.yaml"
    assert documented - served == set(), "in docs/openapi.yaml but not served"


def test_error_codes_are_documented():
    text = spec()["components"]["schemas"]["Error"]["properties"]["error"]["properties"]
    listed = set(re.findall(r"[a-z_]+", text["code"]["description"]))
    used = set()
    for f in (ROOT / "src" / "server").rglob("*.c"):
        text = f.read_text()
        used |= set(re.findall(r'(?:http_error|hutch_err_fail)\([&\w]+,\s*HUTCH_ERR_\w+,\s*"([a-z_]+)"', text))
        used |= set(re.findall(r'\bcode = "([a-z_]+)"', text))
        # The table's codes for errors that name none (http/errors.c).
        used |= set(re.findall(r'\{\d+, "[a-z_]+", "([a-z_]+)"', text))
        used |= set(re.findall(r'\\"code\\":\\"([a-z_]+)\\"', text))
    assert used, "found no error codes in src/server"
    assert used - listed == set(), "error codes missing from docs/openapi.yaml"


def test_e2b_tables_match_docs():
    doc = (ROOT / "docs" / "e2b.md").read_text()
    for table in ("e2b", "envd", "interpreter"):
        served = subprocess.run([str(BUILD / "hutch-serve"), f"--routes={table}"],
                                capture_output=True, text=True, check=True, timeout=30).stdout
        served = {l for l in served.split("\n") if l}
        # The section whose heading names the table's --routes.
        section = doc.split(f"--routes={table}`)", 1)[1].split("\n## ", 1)[0]
        documented = set(re.findall(r"^\| `([A-Z]+ /[^`]*)`", section, re.M))
        assert served, table
        assert served == documented, (table, served ^ documented)


@pytest.fixture(scope="module", params=["build", "asan"])
def server(request, tmp_path_factory):
    yield from serve_each_build(request, tmp_path_factory)


def body_schema(path):
    return spec()["paths"][path]["post"]["requestBody"]["content"]["application/json"]["schema"]


# Paths on both sides of each of the server's rules (src/server/volumes.c,
# mount_point): absolute, names of at most 255 bytes, no "..", the whole of
# at most 4095 bytes, not the root or the kernel's directories once "//"
# and "/./" are folded.
VOLUME_PATHS = [
    "/data", "/home/user/mnt", "//a/./b/", "/a b", "/proc.d", "/procs", "/sysfs", "/devices",
    "/home/proc", "/.x", "/...", "/a..", "/..a", "/a\n", "/..\n", "/proc\n", "/" + "x" * 255,
    "/" + "a/" * 2047,
    "/", "/.", "//", "/./", "data", "", "./a", "/..", "/a/..", "/../a", "/a/../b", "/a/..//",
    "/proc", "/proc/", "/proc/1", "/./proc", "//sys", "/sys/fs", "/dev", "/dev/shm", "/./dev/.",
    "/" + "x" * 256, "/a/" + "x" * 256 + "/b", "/" + "a/" * 2047 + "a",
]


def test_volume_paths_match_the_spec(tenant):
    """A path the spec's pattern takes gets past the server's check (to
    404 volume_not_found: the volume's name is looked up after the path is
    judged, and there is none); one it refuses gets 400."""
    schema = body_schema("/v1/sandboxes")["properties"]["volumes"]["items"]["properties"]["path"]
    pattern = re.compile(schema["pattern"])
    verdicts = {True: [], False: []}
    for path in VOLUME_PATHS:
        documented = len(path) <= schema["maxLength"] and pattern.search(path) is not None
        verdicts[documented].append(path)
        r = tenant.post("/v1/sandboxes", {"volumes": [{"name": "nonesuch", "path": path}]})
        served = {404: True, 400: False}.get(r.status)
        assert served is not None, (path[:80], r)
        assert error_of(r) == ("volume_not_found" if served else "invalid_argument"), r
        assert served or "volumes[0].path" in r.json["error"]["message"], r
        assert served == documented, (path[:80], r)
    assert verdicts[True] and verdicts[False]


def test_a_volume_path_is_mounted_folded(tenant):
    """What the pattern lets through is mounted, at the folded path."""
    r = tenant.post("/v1/volumes", {"name": "v", "size_mb": 16})
    assert r.status == 201, r
    vid = r.json["id"]
    sb = tenant.create(volumes=[{"name": "v", "path": "//home/user/./vol/"}])
    assert [v["path"] for v in sb["volumes"]] == ["/home/user/vol"]
    lines = tenant.exec(sb["id"], {"shell": "df --output=target /home/user/vol | tail -1"})
    assert output(lines) == b"/home/user/vol\n", lines
    assert tenant.delete(f"/v1/sandboxes/{sb['id']}").status == 204
    wait_for(lambda: tenant.delete(f"/v1/volumes/{vid}").status == 204, 20)


# A valid value of each property of an exec's body, with what else it needs.
EXEC_EXAMPLES = {
    "cmd": {"cmd": ["true"]},
    "shell": {"shell": "true"},
    "env": {"cmd": ["true"], "env": {"A": "b"}},
    "cwd": {"cmd": ["true"], "cwd": "/tmp"},
    "user": {"cmd": ["true"], "user": "root"},
    "stdin": {"cmd": ["true"], "stdin": "x"},
    "timeout_s": {"cmd": ["true"], "timeout_s": 30},
    "background": {"cmd": ["true"], "background": True},
    "keep_stdin": {"cmd": ["true"], "background": True, "keep_stdin": True},
    "pty": {"cmd": ["true"], "pty": {"rows": 24, "cols": 80}},
}


def exec_status(api, sid, body):
    """201 for a background start; 200 with an exit line (of status ok);
    else the error answer's status (checked to be invalid_argument)."""
    r = api.post(f"/v1/sandboxes/{sid}/exec", body)
    if r.status == 200:
        end = json.loads(r.raw.splitlines()[-1])
        assert end["type"] == "exit" and end["status"] == "ok", (body, r)
    elif r.status != 201:
        assert r.status == 400 and error_of(r) == "invalid_argument", (body, r)
    return r.status


def bounds(schema):
    """(value, documented as valid) at the edges of a numeric schema."""
    step = 1 if schema["type"] == "integer" else 0.5
    out = []
    if "minimum" in schema:
        out += [(schema["minimum"], True), (schema["minimum"] - step, False)]
    if "maximum" in schema:
        out += [(schema["maximum"], True), (schema["maximum"] + step, False)]
    if schema["type"] == "integer":
        out.append((schema.get("minimum", 0) + 1.5, False))
    return out


def test_exec_body_matches_the_spec(tenant):
    """Every property the spec lists for an exec is taken, any other is
    refused; the pty object takes exactly its listed, required fields
    within their bounds, and null."""
    schema = body_schema("/v1/sandboxes/{id}/exec")
    props = schema["properties"]
    assert set(EXEC_EXAMPLES) == set(props), "give an example of each documented property"
    sid = tenant.create()["id"]
    for name, body in EXEC_EXAMPLES.items():
        assert exec_status(tenant, sid, body) == (201 if body.get("background") else 200), name
    assert schema["additionalProperties"] is False
    assert exec_status(tenant, sid, {"cmd": ["true"], "tty": True}) == 400
    for name, prop in props.items():
        if prop.get("type") in ("integer", "number"):
            for value, ok in bounds(prop):
                assert exec_status(tenant, sid, {"cmd": ["true"], name: value}) == \
                    (200 if ok else 400), (name, value)

    pty = props["pty"]
    assert "null" in pty["type"]
    assert exec_status(tenant, sid, {"cmd": ["true"], "pty": None}) == 200
    valid = EXEC_EXAMPLES["pty"]["pty"]
    assert set(valid) == set(pty["properties"]) == set(pty["required"])
    for name in pty["required"]:
        less = {k: v for k, v in valid.items() if k != name}
        assert exec_status(tenant, sid, {"cmd": ["true"], "pty": less}) == 400, name
    assert pty["additionalProperties"] is False
    assert exec_status(tenant, sid, {"cmd": ["true"], "pty": {**valid, "xpixels": 1}}) == 400
    for name, prop in pty["properties"].items():
        for value, ok in bounds(prop):
            assert exec_status(tenant, sid, {"cmd": ["true"], "pty": {**valid, name: value}}) == \
                (200 if ok else 400), (name, value)
    # A pty's output is the terminal's: stdout only, with its line endings.
    lines = tenant.exec(sid, {"shell": "echo out; echo err >&2", "pty": valid})
    assert [l["type"] for l in lines[1:-1]] == ["stdout"] * (len(lines) - 2), lines


def test_readme_serve_synopsis_lists_every_flag():
    """README.md's `hutch serve` synopsis names every flag of
    `hutch-serve --help`, and none it lacks (--help aside)."""
    usage = subprocess.run([str(BUILD / "hutch-serve"), "--help"], capture_output=True, text=True,
                           check=True, timeout=30).stdout
    flags = set(re.findall(r"^  (--[a-z][a-z-]*)", usage, re.M))
    readme = (ROOT / "README.md").read_text()
    synopsis = readme.split("\n## hutch serve\n", 1)[1].split("```sh\n", 1)[1].split("```", 1)[0]
    listed = set(re.findall(r"(?<![\w-])--[a-z][a-z-]*", synopsis))
    assert len(flags) > 10, usage
    assert flags - listed == set(), "hutch-serve --help has flags README.md's synopsis lacks"
    assert listed - flags - {"--help"} == set(), "README.md's synopsis has flags the server lacks"


def test_what_cannot_pass_is_in_the_docs():
    """docs/e2b.md lists every test of E2B's suites that cannot pass here,
    as tests/e2b-conformance/cannot-pass (which the runner reads) does."""
    doc = (ROOT / "docs" / "e2b.md").read_text()
    section = doc.split("## What cannot pass here", 1)[1].split("\n## ", 1)[0]
    listed = set()
    for line in (ROOT / "tests" / "e2b-conformance" / "cannot-pass").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            suite, file, test, why = line.split(" | ")
            listed.add((suite, file, "(all)" if test == "*" else test, why))
    documented = set(tuple(c.strip().strip("`") for c in row.strip("|").split(" | "))
                     for row in re.findall(r"^\| (?:sdk|ci) \|.*\|$", section, re.M))
    assert listed and listed == documented, listed ^ documented
