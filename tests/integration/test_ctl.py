"""hutch's operator verbs (hutch-ctl, docs/cli.md) against one live
server: every verb, --json compared with the API's answer for the same
object, and the exit codes (the command's own for exec; 120 no server,
121 not authorised, 122 not found, 125 hutch failed)."""
import json
import os
import re
import signal
import subprocess
import time

import pytest

from conftest import BUILD, ROOT, require
from serveapi import Server, free_port, wait_for

EXIT_FAILED, EXIT_UNREACHABLE, EXIT_DENIED, EXIT_NOT_FOUND = 125, 120, 121, 122
# Text a sandbox or a tenant may write: commands to a terminal (a title,
# a clear screen, CSI as a C1 character), and DEL.
HOSTILE = "x\x1b]0;pwned\x07\x1b[2J\u009b2J\x7f"
SHOWN = "x\\x1b]0;pwned\\x07\\x1b[2J\\u009b2J\\x7f"  # ... as hutch prints it in text


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    s = Server(BUILD / "hutch-serve", tmp_path_factory.mktemp("ctl") / "state").start()
    yield s
    assert s.stop() == 0, s.log_text()


def hutch(server, *args, key=None, input=None, env=None, timeout=120):
    """hutch ARGS with the server's URL and key (default: the admin's)."""
    e = {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/root"),
         "HUTCH_URL": f"http://127.0.0.1:{server.port}",
         "HUTCH_API_KEY": key if key is not None else server.admin_key}
    e.update(env or {})
    return subprocess.run([str(BUILD / "hutch"), *map(str, args)], capture_output=True,
                          text=True, input=input, env=e, timeout=timeout)


def ok(r):
    assert r.returncode == 0, (r.returncode, r.stdout, r.stderr)
    return r.stdout


def one_line_error(r, code, says):
    assert r.returncode == code, (r.returncode, r.stdout, r.stderr)
    assert says in r.stderr and r.stderr.count("\n") == 1, r.stderr


def test_help_options_and_bad_command_lines(server):
    verbs = ok(hutch(server, "help", "--complete")).split()
    listing = ok(hutch(server, "help"))
    for v in verbs:
        assert f"  {v} " in listing, (v, listing)
    for v in ("ps", "create", "exec", "kill", "fork", "volume", "key", "template", "logs"):
        assert v in verbs
        h = ok(hutch(server, v, "--help"))
        assert h.startswith(f"usage: hutch {v} ") and "--url URL" in h, h
        assert ok(hutch(server, "help", v)) == h
        for opt in ok(hutch(server, "help", "--complete", v)).split():
            assert not opt.startswith("--") or opt in h, (v, opt)
    one_line_error(hutch(server, "ps", "--bogus"), EXIT_FAILED, "unknown option --bogus")
    one_line_error(hutch(server, "exec"), EXIT_FAILED, "too few arguments")
    one_line_error(hutch(server, "create", "--memory"), EXIT_FAILED, "wants an argument")
    one_line_error(hutch(server, "frobnicate"), EXIT_FAILED, "unknown command 'frobnicate'")
    one_line_error(hutch(server, "create", "-e", "novalue"), EXIT_FAILED, "KEY=VALUE")


def test_unreachable_denied_and_version(server, tmp_path):
    port = free_port()
    r = hutch(server, "ps", env={"HUTCH_URL": f"http://127.0.0.1:{port}"})
    one_line_error(r, EXIT_UNREACHABLE, f"no server at http://127.0.0.1:{port} (connection refused)")
    one_line_error(hutch(server, "ps", key="hk_" + "0" * 40), EXIT_DENIED, "unauthorized")
    r = hutch(server, "ps", key="", env={"HUTCH_STATE_DIR": str(tmp_path)})
    one_line_error(r, EXIT_DENIED, "no API key")
    # The admin key of a local server is read when readable.
    r = hutch(server, "ps", "-q", key="", env={"HUTCH_STATE_DIR": str(server.state_dir)})
    assert r.returncode == 0, r
    v = ok(hutch(server, "version")).splitlines()
    said = server.api(None).get("/healthz").json["version"]
    assert v[0].startswith("hutch ") and v[1].endswith(f": hutch {said}"), v


def test_admin_key_file_goes_to_loopback_only(server):
    """The admin.key file is sent to a loopback server and to no other:
    for any other URL hutch refuses before it connects. Should it ever
    try, the proxy set here (a closed loopback port) is where it would
    go, and the test fails: no other address is contacted (192.0.2.0/24
    is TEST-NET-1, .invalid is never a name)."""
    proxy = f"http://127.0.0.1:{free_port()}"
    env = {"HUTCH_STATE_DIR": str(server.state_dir), "http_proxy": proxy, "HTTPS_PROXY": proxy,
           "ALL_PROXY": proxy}
    local = f"http://127.0.0.1:{server.port}"
    for url in ("http://192.0.2.1:9", "https://192.0.2.1:9/", "http://127.0.0.1@192.0.2.1:9",
                "http://127.0.0.1.example.invalid:9", "http://[2001:db8::1]:9"):
        said = (f"no API key for {url.rstrip('/')} (set HUTCH_API_KEY or --key; the local admin "
                "key goes to a loopback server only)")
        one_line_error(hutch(server, "ps", key="", env={**env, "HUTCH_URL": url}), EXIT_DENIED,
                       said)
        one_line_error(hutch(server, "ps", "--url", url, key="", env={**env, "HUTCH_URL": local}),
                       EXIT_DENIED, said)
    # hutch mcp shares the client, and its refusal (78: its configuration's exit).
    r = subprocess.run([str(BUILD / "hutch"), "mcp", "--url", "http://192.0.2.1:9"],
                       capture_output=True, text=True, timeout=60, input="",
                       env={"PATH": os.environ["PATH"], **env})
    assert r.returncode == 78 and "loopback server only" in r.stderr, r

    # Loopback, by address or by name, still gets it, straight and not
    # through the proxy the environment names.
    for host in ("127.0.0.1", "localhost"):
        r = hutch(server, "ps", "-q", key="", env={**env, "HUTCH_URL": f"http://{host}:{server.port}"})
        assert r.returncode == 0, r


def terminal_safe(text):
    """No control character but hutch's own newlines: nothing a terminal acts on."""
    return not re.search("[\x00-\x09\x0b-\x1f\x7f-\x9f]", text)


def test_others_text_reaches_the_terminal_escaped(server, tenant):
    sid = tenant.create(metadata={"note": HOSTILE})["id"]
    ok(hutch(server, "exec", sid, "true", HOSTILE, key=tenant.key))
    for args in (["ps", "--json"], ["inspect", sid], ["events", "--sandbox", sid],
                 ["events", "--json", "--sandbox", sid], ["logs", sid]):
        out = ok(hutch(server, *args, key=tenant.key))
        assert terminal_safe(out) and "\\u009b2J" in out, (args, out)
    # JSON escaped so is the same JSON.
    assert json.loads(ok(hutch(server, "inspect", sid, key=tenant.key))) == \
        tenant.get(f"/v1/sandboxes/{sid}").json
    assert json.loads(ok(hutch(server, "events", "--json", "--sandbox", sid, key=tenant.key))
                      .splitlines()[0])["data"]["metadata"] == {"note": HOSTILE}

    # A server's error naming what it was given (a table's cells:
    # tests/unit/test_ctl_out.c; the names tables show are checked).
    r = hutch(server, "exec", sid, HOSTILE, key=tenant.key)
    assert r.returncode == 127 and terminal_safe(r.stderr[:-1]) and SHOWN in r.stderr, r


def test_create_ps_inspect_json_are_the_apis(server, tenant):
    sb = json.loads(ok(hutch(server, "create", "-m", "256", "--cpus", "0.5", "-e", "A=b",
                             "-l", "team=x", "--timeout", "120", "--json", key=tenant.key)))
    assert sb == tenant.get(f"/v1/sandboxes/{sb['id']}").json
    assert (sb["memory_mb"], sb["cpus"], sb["metadata"]) == (256, 0.5, {"team": "x"})
    other = ok(hutch(server, "create", "--pids", "64", "-l", "team=y", key=tenant.key)).strip()
    assert tenant.get(f"/v1/sandboxes/{other}").json["pids"] == 64

    listed = json.loads(ok(hutch(server, "ps", "--json", key=tenant.key)))
    assert listed == tenant.get("/v1/sandboxes").json["sandboxes"]
    assert ok(hutch(server, "ps", "-q", "--filter", "metadata.team=x", key=tenant.key)).split() \
        == [sb["id"]]
    assert ok(hutch(server, "ps", "-q", "--filter", "template=nope", key=tenant.key)) == ""
    assert ok(hutch(server, "ps", "-q", "--filter", "tier=ns", key=tenant.key)).split() \
        == [s["id"] for s in listed]
    table = ok(hutch(server, "ps", key=tenant.key)).splitlines()
    assert table[0].split()[:4] == ["ID", "STATE", "TEMPLATE", "TIER"] and len(table) == 3
    assert "\033[" not in "".join(table)  # no colour off a terminal

    assert json.loads(ok(hutch(server, "inspect", sb["id"], key=tenant.key))) == \
        tenant.get(f"/v1/sandboxes/{sb['id']}").json
    # Another tenant's sandbox is not there for it.
    one_line_error(hutch(server, "inspect", sb["id"]), EXIT_NOT_FOUND, "not_found")
    r = hutch(server, "create", "--on-timeout", "never", key=tenant.key)
    one_line_error(r, EXIT_FAILED, "invalid_argument")


def test_exec_streams_and_exits_as_the_command(server, tenant):
    sid = tenant.create()["id"]
    r = hutch(server, "exec", sid, "sh", "-c", "echo out; echo err >&2; exit 3", key=tenant.key)
    assert (r.returncode, r.stdout, r.stderr) == (3, "out\n", "err\n")
    r = hutch(server, "exec", "-e", "A=c", "-w", "/tmp", "-u", "root", sid, "sh", "-c",
              'echo "$A $(pwd) $(id -u)"', key=tenant.key)
    assert ok(r) == "c /tmp 0\n"
    assert ok(hutch(server, "exec", "-i", sid, "tr", "a-z", "A-Z", input="piped in\n",
                    key=tenant.key)) == "PIPED IN\n"
    assert hutch(server, "exec", sid, "sh", "-c", "kill -TERM $$", key=tenant.key).returncode \
        == 128 + signal.SIGTERM
    r = hutch(server, "exec", sid, "no-such-command", key=tenant.key)
    assert r.returncode == 127 and "no-such-command" in r.stderr, r
    r = hutch(server, "exec", "--timeout", "1", sid, "sleep", "30", key=tenant.key)
    assert r.returncode == 128 + signal.SIGKILL and "timeout" in r.stderr, r
    one_line_error(hutch(server, "exec", "sbx_nope", "true", key=tenant.key), EXIT_NOT_FOUND,
                   "not_found")
    one_line_error(hutch(server, "exec", sid, "true"), EXIT_NOT_FOUND, "not_found")
    r = hutch(server, "exec", sid, "head", "-c", "300000", "/dev/zero", key=tenant.key)
    assert r.returncode == 0 and r.stdout == "\0" * 300000

    # Output comes as the command makes it: the first line is read while
    # the command still runs; hutch going away (Ctrl-C) ends the command.
    env = {"PATH": os.environ["PATH"], "HUTCH_URL": f"http://127.0.0.1:{server.port}",
           "HUTCH_API_KEY": tenant.key}
    p = subprocess.Popen([str(BUILD / "hutch"), "exec", sid, "sh", "-c",
                          "echo first; exec sleep 300"], stdout=subprocess.PIPE, env=env)
    assert p.stdout.readline() == b"first\n"
    p.send_signal(signal.SIGINT)
    assert p.wait(timeout=30) != 0

    def sleep_gone():
        r = hutch(server, "exec", sid, "sh", "-c", "pgrep -x sleep || echo none", key=tenant.key)
        return r.stdout == "none\n"
    wait_for(sleep_gone, 20)


def test_lifecycle_verbs(server, tenant):
    sid = tenant.create()["id"]
    assert ok(hutch(server, "pause", sid, key=tenant.key)) == f"{sid}\n"
    assert tenant.get(f"/v1/sandboxes/{sid}").json["state"] == "paused"
    assert ok(hutch(server, "ps", "-q", key=tenant.key)) == ""
    assert ok(hutch(server, "ps", "-a", "-q", key=tenant.key)) == f"{sid}\n"
    assert ok(hutch(server, "ps", "-q", "--filter", "state=paused", key=tenant.key)) == f"{sid}\n"
    assert ok(hutch(server, "resume", sid, key=tenant.key)) == f"{sid}\n"
    assert tenant.get(f"/v1/sandboxes/{sid}").json["state"] == "running"

    ok(hutch(server, "exec", sid, "sh", "-c", "echo kept > /tmp/mark", key=tenant.key))
    snap = ok(hutch(server, "snapshot", sid, key=tenant.key)).strip()
    assert tenant.get(f"/v1/snapshots/{snap}").status == 200
    named = json.loads(ok(hutch(server, "snapshot", "--name", "n1", "--json", sid, key=tenant.key)))
    # The create's answer says more (took_ms, tenant) than the snapshot's GET.
    got = tenant.get(f"/v1/snapshots/{named['id']}").json
    assert {k: named[k] for k in got} == got and named["name"] == "n1"
    forks = ok(hutch(server, "fork", "-n", "2", sid, key=tenant.key)).split()
    assert len(forks) == 2 and sid not in forks
    listed = {s["id"] for s in tenant.get("/v1/sandboxes").json["sandboxes"]}
    assert set(forks) <= listed
    assert ok(hutch(server, "exec", forks[0], "cat", "/tmp/mark", key=tenant.key)) == "kept\n"

    # The port's URL reaches a service in the sandbox.
    r = tenant.post(f"/v1/sandboxes/{sid}/exec", {"cmd": ["python3", "-m", "http.server", "8123",
                                                         "--directory", "/tmp"],
                                                  "background": True})
    assert r.status == 201, r
    url = ok(hutch(server, "port", sid, "8123", key=tenant.key)).strip()
    assert url.startswith(f"http://127.0.0.1:{server.port}/")
    path = url[len(f"http://127.0.0.1:{server.port}"):]
    wait_for(lambda: tenant.get(path + "mark").status == 200, 30)
    assert tenant.get(path + "mark").raw == b"kept\n"
    host = ok(hutch(server, "port", "--host", sid, "8123", key=tenant.key)).strip()
    domain = tenant.get(f"/v1/sandboxes/{sid}").json["domain"]
    assert host == f"http://8123-{sid}.{domain}:{server.port}/"
    one_line_error(hutch(server, "port", sid, "0", key=tenant.key), EXIT_FAILED, "PORT")

    r = hutch(server, "kill", *forks, "sbx_nope", key=tenant.key)
    assert r.returncode == EXIT_NOT_FOUND and r.stdout.split() == forks, r
    listed = {s["id"] for s in tenant.get("/v1/sandboxes").json["sandboxes"]}
    assert not set(forks) & listed
    # IDs that would be other paths reach the server as one segment each.
    for hostile in ("..", ".", f"{sid}/pause", f"{sid}?x=1", "%2e%2e"):
        one_line_error(hutch(server, "kill", hostile, key=tenant.key), EXIT_NOT_FOUND, "not_found")
    assert tenant.get(f"/v1/sandboxes/{sid}").json["state"] == "running"


def test_volumes(server, tenant):
    vid = ok(hutch(server, "volume", "create", "--size", "32", "data", key=tenant.key)).strip()
    listed = json.loads(ok(hutch(server, "volume", "ls", "--json", key=tenant.key)))
    assert listed == tenant.get("/v1/volumes").json["volumes"] and listed[0]["id"] == vid
    assert json.loads(ok(hutch(server, "volume", "inspect", "data", key=tenant.key))) == listed[0]
    sid = ok(hutch(server, "create", "-v", "data:/mnt/data", key=tenant.key)).strip()
    assert tenant.get(f"/v1/sandboxes/{sid}").json["volumes"][0]["path"] == "/mnt/data"
    ok(hutch(server, "kill", sid, key=tenant.key))
    assert ok(hutch(server, "volume", "rm", "data", key=tenant.key)) == "data\n"
    one_line_error(hutch(server, "volume", "rm", "data", key=tenant.key), EXIT_NOT_FOUND,
                   "not_found")
    one_line_error(hutch(server, "volume", "frob", key=tenant.key), EXIT_FAILED, "usage")


def test_keys_and_tenants_for_the_admin(server, tenant):
    name = f"k{time.monotonic_ns()}"
    made = json.loads(ok(hutch(server, "key", "create", "--tenant", name, "--max-sandboxes", "3",
                               "--json")))
    secret = ok(hutch(server, "key", "create", "--tenant", name)).strip()
    assert secret.startswith("hk_") and server.api(secret).get("/v1/sandboxes").status == 200
    keys = json.loads(ok(hutch(server, "key", "ls", "--json")))
    assert keys == server.api().get("/v1/keys").json["keys"]
    mine = [k for k in keys if k["tenant"] == name]
    assert len(mine) == 2 and mine[0]["id"] == made["id"] and mine[0]["max_sandboxes"] == 3
    listing = json.dumps(keys)
    assert made["key"] not in listing and secret not in listing and '"hash"' not in listing
    assert any(k["admin"] for k in keys)

    tenants = json.loads(ok(hutch(server, "tenant", "ls", "--json")))
    t = next(t for t in tenants if t["tenant"] == name)
    assert (t["keys"], t["max_sandboxes"], t["running"]) == (2, 3, 0)
    usage = json.loads(ok(hutch(server, "tenant", "usage", name)))
    assert usage == server.api().get(f"/v1/usage?tenant={name}").json
    table = ok(hutch(server, "tenant", "ls")).splitlines()
    assert any(l.split()[:2] == [name, "2"] for l in table), table

    # A tenant's key is no admin's.
    one_line_error(hutch(server, "key", "ls", key=tenant.key), EXIT_DENIED, "forbidden")
    assert server.api(tenant.key).get("/v1/keys").status == 403
    assert ok(hutch(server, "key", "rm", made["id"])) == f"{made['id']}\n"
    assert server.api(made["key"]).get("/v1/sandboxes").status == 401
    one_line_error(hutch(server, "key", "rm", made["id"]), EXIT_NOT_FOUND, "not_found")


def test_templates_over_the_api(server, tenant, tmp_path):
    import test_templates_api as tpl
    archive = tmp_path / "bb.tar"
    archive.write_bytes(tpl.oci_archive([tpl.busybox_layer()]))
    r = hutch(server, "template", "import", "--name", "bb", archive, key=tenant.key)
    assert ok(r) == "bb\n"
    ctx = tmp_path / "ctx"
    ctx.mkdir()
    (ctx / "hello.txt").write_text("hello\n")
    (ctx / "Dockerfile").write_text("FROM bb\nCOPY hello.txt /srv/hello.txt\n"
                                    "RUN cat /srv/hello.txt\n")
    r = hutch(server, "template", "build", "--name", "built", ctx, key=tenant.key)
    assert ok(r) == "built\n" and "Step 3/3 : RUN cat /srv/hello.txt" in r.stderr, r
    assert "  hello" in r.stderr.splitlines(), r.stderr
    listed = json.loads(ok(hutch(server, "template", "ls", "--json", key=tenant.key)))
    assert listed == tenant.get("/v1/templates").json["templates"]
    assert {"bb", "built"} <= {t["name"] for t in listed}
    sid = ok(hutch(server, "create", "built", key=tenant.key)).strip()
    assert ok(hutch(server, "exec", sid, "cat", "/srv/hello.txt", key=tenant.key)) == "hello\n"
    ok(hutch(server, "kill", sid, key=tenant.key))

    (ctx / "Dockerfile").write_text("FROM bb\nRUN exit 3\n")
    r = hutch(server, "template", "build", "--name", "broken", ctx, key=tenant.key)
    assert r.returncode == EXIT_FAILED and r.stderr.splitlines()[-1].startswith(
        "hutch template: step_failed: "), r
    assert ok(hutch(server, "template", "rm", "built", "bb", key=tenant.key)).split() == \
        ["built", "bb"]
    one_line_error(hutch(server, "template", "rm", "bb", key=tenant.key), EXIT_NOT_FOUND, "bb")


def test_events_and_logs(server, tenant):
    require(tenant.get("/v1/events").status != 404, "this server has no GET /v1/events yet")
    sid = tenant.create()["id"]
    ok(hutch(server, "exec", sid, "true", key=tenant.key))
    events = [json.loads(l) for l in
              ok(hutch(server, "events", "--json", "--sandbox", sid, key=tenant.key)).splitlines()]
    api = [json.loads(l) for l in
           tenant.get(f"/v1/events?sandbox={sid}").raw.decode().splitlines() if l.strip()]
    assert events == [e for e in api if e["type"] != "heartbeat"]
    assert [e["type"] for e in events][:2] == ["sandbox.created", "sandbox.started"]
    logs = ok(hutch(server, "logs", sid, key=tenant.key)).splitlines()
    assert len(logs) == len(events) and "exec.ended" in logs[-1], logs
    typed = ok(hutch(server, "events", "--filter", "type=exec.*", "--sandbox", sid,
                     key=tenant.key)).splitlines()
    assert [l.split()[1] for l in typed] == ["exec.started", "exec.ended"], typed

    # -f: a kill made after it started is seen, then hutch is ended.
    env = {"PATH": os.environ["PATH"], "HUTCH_URL": f"http://127.0.0.1:{server.port}",
           "HUTCH_API_KEY": tenant.key}
    p = subprocess.Popen([str(BUILD / "hutch"), "logs", "-f", "--since", str(events[-1]["seq"]),
                          sid], stdout=subprocess.PIPE, env=env, text=True)
    ok(hutch(server, "kill", sid, key=tenant.key))
    assert "sandbox.killed" in p.stdout.readline()
    p.send_signal(signal.SIGINT)
    p.wait(timeout=30)


def test_completion(server, tenant):
    sid = tenant.create()["id"]
    script = ROOT / "share" / "completion" / "hutch"
    probe = (f"source {script}; t() {{ COMP_WORDS=(\"$@\"); COMP_CWORD=$((${{#COMP_WORDS[@]}}-1));"
             " COMPREPLY=(); _hutch; echo \"${COMPREPLY[*]}\"; };"
             f" t {BUILD}/hutch vo; t {BUILD}/hutch volume ''; t {BUILD}/hutch ps --js;"
             f" t {BUILD}/hutch kill ''")
    env = {"PATH": os.environ["PATH"], "HUTCH_URL": f"http://127.0.0.1:{server.port}",
           "HUTCH_API_KEY": tenant.key}
    out = subprocess.run(["bash", "-c", probe], capture_output=True, text=True, env=env,
                         timeout=60).stdout.splitlines()
    assert out == ["volume", "create ls rm inspect", "--json", sid], out
