"""docs/openapi.yaml and the server agree: every route the server serves is
in the spec and every route in the spec is served; every error code the
server can send is listed there."""
import re
import subprocess

import yaml

from conftest import BUILD, ROOT

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
    for f in (ROOT / "src" / "server").glob("*.c"):
        used |= set(re.findall(r'http_error\(\w+, \d+, "([a-z_]+)"', f.read_text()))
        used |= set(re.findall(r'\\"code\\":\\"([a-z_]+)\\"', f.read_text()))
    assert used, "found no error codes in src/server"
    assert used - listed == set(), "error codes missing from docs/openapi.yaml"
