"""docs/openapi.yaml and the server agree: every route the server serves is
in the spec and every route in the spec is served; every error code the
server can send is listed there. docs/e2b.md and the E2B-compatible route
tables agree the same way."""
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
