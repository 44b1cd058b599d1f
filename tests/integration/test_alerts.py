"""deploy/prometheus: hutch's alert rules against the series hutch serve's
own /metrics writes. One server runs a sandbox with a foreground exec, a
background one, a code cell and an escape attempt (and another its
template's start command), and is scraped with the metrics
token, as deploy/prometheus/prometheus.yml scrapes it; then:
- every series a rule reads is in that scrape, with the labels the rule
  and its annotations use;
- every input series of the committed promtool tests has a name and
  labels the scrape has;
- promtool lints the scrape, checks the rules and the scrape config,
  runs the committed tests, and runs tests made from the scrape itself
  (its own series, labels and values, pushed past each threshold).
promtool is Debian's prometheus package (scripts/deps.sh --test)."""
import re
import shutil
import subprocess

import pytest
import yaml

from conftest import BUILD, ROOT, require
from serveapi import Api, Server, wait_for
from test_templates_api import busybox_layer, oci_archive

# The rules and the text format are the server's own work: nothing a
# kernel or cgroup version changes (the cgroup v2 guest leaves it out).
pytestmark = pytest.mark.userspace

DEPLOY = ROOT / "deploy" / "prometheus"
RULES = DEPLOY / "hutch-rules.yml"
TOKEN = "alerts-test-token-0123456789abcdef"
JOB = {"job": "hutch", "instance": "127.0.0.1:7420"}  # what Prometheus adds to a scrape
PROMETHEUS_OWN = {"up"}  # series of Prometheus, not of the scrape
MOUNT = ("import ctypes\nlibc = ctypes.CDLL(None)\n"
         "libc.syscall(165, b'none', b'/mnt', b'tmpfs', 0, 0)\n")


def promtool():
    found = shutil.which("promtool")
    require(found, "promtool is not installed: scripts/deps.sh --test installs Debian's "
            "prometheus")
    return found


def parse_scrape(text):
    """{name: [(labels dict, value)]} of a Prometheus text exposition."""
    series = {}
    line_re = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$')
    label_re = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:\\.|[^"\\])*)"')
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = line_re.match(line)
        assert m, f"not a sample line: {line!r}"
        labels = dict(label_re.findall(m.group(2) or ""))
        series.setdefault(m.group(1), []).append((labels, float(m.group(3))))
    return series


def rules():
    return [r for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"]]


def read_names(expr):
    """The metric names an expression reads (hutch's, and Prometheus' own)."""
    return set(re.findall(r"\bhutch_[a-z0-9_]+", expr)) | (
        PROMETHEUS_OWN & set(re.findall(r"\b([a-z_]+)\{", expr)))


def used_labels(rule):
    """The labels a rule selects on, groups by or shows in its annotations."""
    expr = rule["expr"]
    used = set(re.findall(r"\{\s*([a-z_]+)\s*!?[=~]", expr))
    for group in re.findall(r"\bby\s*\(([^)]*)\)", expr):
        used |= {l.strip() for l in group.split(",")}
    for text in rule.get("annotations", {}).values():
        used |= set(re.findall(r"\$labels\.([a-z_]+)", text))
    return used


def series_text(name, labels):
    return name + "{" + ",".join(f'{k}="{v}"' for k, v in labels.items()) + "}"


@pytest.fixture(scope="module")
def scrape(tmp_path_factory):
    """The scrape, with its sandboxes' ids and tenant: taken while one
    sandbox runs a foreground exec, a background one and a code cell, after
    an escape attempt, and another its template's start command."""
    d = tmp_path_factory.mktemp("alerts")
    token_file = d / "metrics.token"
    token_file.write_text(TOKEN + "\n")
    token_file.chmod(0o600)
    s = Server(BUILD / "hutch-serve", d / "state", "--metrics-token-file", str(token_file)).start()
    try:
        admin = s.api()
        tenant_name = "alerts-test"
        t = s.api(admin.post("/v1/keys", {"tenant": tenant_name}).json["key"])
        sid = t.create(memory_mb=128, cpus=0.5)["id"]
        assert t.exec(sid, {"cmd": ["python3", "-c", MOUNT]})[-1]["status"] == "ok"
        r = t.post(f"/v1/sandboxes/{sid}/exec", {"cmd": ["sleep", "60"], "background": True})
        assert r.status == 201, r
        conn, resp = t.exec_stream(sid, {"cmd": ["sleep", "60"]})
        assert resp.status == 200
        assert '"start"' in resp.readline().decode()  # it runs
        cell, resp = t.request_stream("POST", f"/v1/sandboxes/{sid}/code",
                                      {"code": "import time\ntime.sleep(60)"})
        assert resp.status == 200
        config = {"Env": ["PATH=/bin"], "Labels": {"hutch.start_cmd": "sleep 600"}}
        r = t.request("POST", "/v1/templates/import?name=alertsweb",
                      body=oci_archive([busybox_layer()], config),
                      headers={"Content-Type": "application/x-tar"}, timeout=120)
        assert r.status == 201, r
        web = t.create(template="alertsweb")["id"]

        scraper = Api(s.port, TOKEN)
        def sampled():
            got = parse_scrape(scraper.get("/metrics").raw.decode())
            ages = got.get("hutch_exec_oldest_running_seconds", [])
            seen = {l["sandbox"] for l, _ in got.get("hutch_sandbox_memory_bytes", [])}
            return ({sid, web} <= seen
                    and {l["kind"] for l, _ in ages if l["sandbox"] == sid}
                    == {"exec", "process", "code"}
                    and {l["kind"] for l, _ in ages if l["sandbox"] == web} == {"start"}
                    and got.get("hutch_escape_attempts_seen_total", [({}, 0)])[0][1] >= 1)
        wait_for(sampled, 15)  # the usage sampler passes every 2 s
        r = scraper.get("/metrics")
        assert r.status == 200 and r.headers["Content-Type"].startswith("text/plain")
        text = r.raw.decode()
        conn.close()
        cell.close()
    finally:
        # the server and its sandboxes go before the tests: they read the
        # scrape alone, and no_leftovers sees nothing of this module's
        assert s.stop() == 0, s.log_text()
    return {"text": text, "series": parse_scrape(text), "sid": sid, "web": web,
            "tenant": tenant_name, "token": token_file, "dir": d}


def test_each_sandbox_has_its_series(scrape):
    got, sid = scrape["series"], scrape["sid"]
    mine = {"sandbox": sid, "tenant": scrape["tenant"], "template": "host"}

    def value(name, **extra):
        found = [v for l, v in got[name] if l == {**mine, **extra}]
        assert len(found) == 1, (name, got.get(name))
        return found[0]

    assert value("hutch_sandbox_memory_limit_bytes") == 128 << 20
    assert 0 < value("hutch_sandbox_memory_bytes") < 128 << 20
    assert 0 <= value("hutch_sandbox_memory_cache_bytes") <= value("hutch_sandbox_memory_bytes")
    assert value("hutch_sandbox_cpus") == 0.5
    assert value("hutch_sandbox_cpu_seconds_total") > 0  # python3 ran
    assert value("hutch_exec_oldest_running_seconds", kind="exec") >= 0
    # the background sleep started first, the cell last
    assert (value("hutch_exec_oldest_running_seconds", kind="process")
            >= value("hutch_exec_oldest_running_seconds", kind="exec")
            >= value("hutch_exec_oldest_running_seconds", kind="code") >= 0)
    # the other sandbox's start command, apart, under its template's name
    web = {"sandbox": scrape["web"], "tenant": scrape["tenant"], "template": "alertsweb"}
    assert [l["kind"] for l, _ in got["hutch_exec_oldest_running_seconds"]
            if l["sandbox"] == scrape["web"]] == ["start"]
    assert [v for l, v in got["hutch_sandbox_memory_limit_bytes"] if l == web], got
    # the escape attempt, by sandbox and over the server's life
    assert ({"sandbox": sid, "syscall": "mount"}, 1.0) in got["hutch_escape_attempts_total"]
    assert got["hutch_escape_attempts_seen_total"] == [({}, 1.0)]


def test_the_rules_read_what_the_scrape_has(scrape):
    got = scrape["series"]
    for rule in rules():
        names = read_names(rule["expr"])
        assert names, rule["alert"]
        offered = set(JOB)
        for name in names - PROMETHEUS_OWN:
            assert name in got, f"{rule['alert']} reads {name}, which /metrics lacks"
            for labels, _ in got[name]:
                offered |= set(labels)
        missing = used_labels(rule) - offered
        assert not missing, f"{rule['alert']} uses labels {missing} its series lack"


def test_the_committed_tests_use_scraped_series(scrape):
    got = scrape["series"]
    kinds = {l["kind"] for l, _ in got["hutch_exec_oldest_running_seconds"]}
    tests = sorted((DEPLOY / "tests").glob("*.yml"))
    assert tests
    for path in tests:
        spec = yaml.safe_load(path.read_text())
        assert spec["rule_files"] == ["../hutch-rules.yml"], path
        for case in spec["tests"]:
            for s in case["input_series"]:
                m = re.match(r"^([a-z_:0-9]+)\{(.*)\}$", s["series"])
                name = m.group(1)
                labels = dict(re.findall(r'([a-z_]+)="([^"]*)"', m.group(2)))
                assert set(JOB) <= set(labels), s["series"]
                if name in PROMETHEUS_OWN:
                    continue
                assert name in got, f"{path.name}: {name} is not in /metrics"
                shapes = {frozenset(l) for l, _ in got[name]}
                assert frozenset(set(labels) - set(JOB)) in shapes, \
                    f"{path.name}: {s['series']} has other labels than /metrics' {shapes}"
                if "kind" in labels:
                    assert labels["kind"] in kinds, s["series"]


def test_promtool_checks_and_tests_the_rules(scrape):
    tool = promtool()
    run = lambda *args: subprocess.run([tool, *args], capture_output=True, text=True, cwd=DEPLOY)
    r = run("check", "rules", str(RULES))
    assert r.returncode == 0, r.stdout + r.stderr
    # the scrape itself, as Prometheus' linter reads the text format
    r = subprocess.run([tool, "check", "metrics"], input=scrape["text"], capture_output=True,
                       text=True)
    assert r.returncode == 0 and not r.stdout + r.stderr, r.stdout + r.stderr
    r = run("test", "rules", *map(str, sorted((DEPLOY / "tests").glob("*.yml"))))
    assert r.returncode == 0, r.stdout + r.stderr
    # the scrape config, with the token file this test made in place of
    # /etc/prometheus's (check config reads the files it names)
    config = yaml.safe_load((DEPLOY / "prometheus.yml").read_text())
    job = config["scrape_configs"][0]
    assert job["metrics_path"] == "/metrics" and job["authorization"]["type"] == "Bearer"
    job["authorization"]["credentials_file"] = str(scrape["token"])
    config["rule_files"] = [str(RULES)]
    copy = scrape["dir"] / "prometheus.yml"
    copy.write_text(yaml.safe_dump(config))
    r = run("check", "config", str(copy))
    assert r.returncode == 0, r.stdout + r.stderr


def test_the_rules_fire_on_the_scraped_series(scrape):
    """promtool tests made from the scrape: each rule meets the real series
    it reads (their names, labels and limits), pushed past its threshold,
    and fires with those labels. Annotations are the committed tests'
    concern: they are left out of the rules these run against."""
    tool = promtool()
    got, sid = scrape["series"], scrape["sid"]
    severity = {r["alert"]: r["labels"]["severity"] for r in rules()}
    of = lambda name: [(l, v) for l, v in got[name] if l.get("sandbox") == sid]
    inputs, expect = [], {}  # expect: {(alert, eval time): [labels]}

    def fires(alert, at, labels):
        expect.setdefault((alert, at), []).append({**labels, **JOB, "severity": severity[alert]})

    for alert, at in [("HutchDown", "30s"), ("HutchCreateSlow", "4m"),
                      ("HutchExecRunningLong", "30s"), ("HutchSandboxMemoryHigh", "45s"),
                      ("HutchSandboxCpuHigh", "4m"), ("HutchEscapeAttempt", "30s"),
                      ("HutchSandboxEscapeAttempted", "30s")]:
        expect[(alert, at)] = []  # not yet

    inputs.append(("up", dict(JOB), "1 1 0x8"))
    fires("HutchDown", "1m45s", {})

    # every create of 0.75 s: only the buckets from 1 s up count them
    for labels, _ in got["hutch_create_seconds_bucket"]:
        le = float(labels["le"])
        inputs.append(("hutch_create_seconds_bucket", {**labels, **JOB},
                       "0+10x60" if le >= 1 else "0x60"))
    fires("HutchCreateSlow", "7m", {})

    # the start command of the other sandbox runs on, unalerted
    for labels, _ in got["hutch_exec_oldest_running_seconds"]:
        inputs.append(("hutch_exec_oldest_running_seconds", {**labels, **JOB}, "0+15x4"))
        if labels["kind"] != "start":
            fires("HutchExecRunningLong", "45s", labels)

    (limit_labels, limit), = of("hutch_sandbox_memory_limit_bytes")
    (mem_labels, _), = of("hutch_sandbox_memory_bytes")
    inputs.append(("hutch_sandbox_memory_limit_bytes", {**limit_labels, **JOB}, f"{limit:.0f}x8"))
    inputs.append(("hutch_sandbox_memory_bytes", {**mem_labels, **JOB}, f"{limit * 0.95:.0f}x8"))
    fires("HutchSandboxMemoryHigh", "1m15s", mem_labels)

    (cpus_labels, cpus), = of("hutch_sandbox_cpus")
    (cpu_labels, _), = of("hutch_sandbox_cpu_seconds_total")
    inputs.append(("hutch_sandbox_cpus", {**cpus_labels, **JOB}, f"{cpus}x40"))
    inputs.append(("hutch_sandbox_cpu_seconds_total", {**cpu_labels, **JOB},
                   f"0+{15 * cpus * 0.99}x40"))
    fires("HutchSandboxCpuHigh", "7m30s", cpu_labels)

    (seen_labels, seen), = got["hutch_escape_attempts_seen_total"]
    inputs.append(("hutch_escape_attempts_seen_total", {**seen_labels, **JOB},
                   f"{seen:.0f} {seen:.0f} {seen:.0f} {seen + 1:.0f}x8"))
    fires("HutchEscapeAttempt", "1m", {})
    for labels, value in of("hutch_escape_attempts_total"):
        inputs.append(("hutch_escape_attempts_total", {**labels, **JOB}, f"_ _ _ {value:.0f}x8"))
    fires("HutchSandboxEscapeAttempted", "1m", {"sandbox": sid})

    assert {a for a, _ in expect} == set(severity), "a rule this test does not drive"

    spec = yaml.safe_load(RULES.read_text())
    for group in spec["groups"]:
        for rule in group["rules"]:
            rule.pop("annotations", None)
    d = scrape["dir"]
    (d / "rules.yml").write_text(yaml.safe_dump(spec))
    test = {
        "rule_files": ["rules.yml"],
        "evaluation_interval": "15s",
        "tests": [{
            "interval": "15s",
            "input_series": [{"series": series_text(n, l), "values": v} for n, l, v in inputs],
            "alert_rule_test": [{"eval_time": at, "alertname": alert,
                                 "exp_alerts": [{"exp_labels": l} for l in want]}
                                for (alert, at), want in expect.items()],
        }],
    }
    (d / "scraped.test.yml").write_text(yaml.safe_dump(test))
    r = subprocess.run([tool, "test", "rules", "scraped.test.yml"], capture_output=True,
                       text=True, cwd=d)
    assert r.returncode == 0, r.stdout + r.stderr
