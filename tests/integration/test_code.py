"""The code interpreter: code contexts and their kernels (share/kernels),
through hutch serve's /contexts and /code routes."""
import base64
import json
import time

import pytest

from conftest import serve_each_build


@pytest.fixture(scope="module", params=["build", "asan"])
def server(request, tmp_path_factory):
    yield from serve_each_build(request, tmp_path_factory)


@pytest.fixture(scope="module")
def api(server):
    return server.api()


@pytest.fixture
def sid(api):
    sb = api.create()
    yield sb["id"]
    api.delete(f"/v1/sandboxes/{sb['id']}")


def of(lines, kind):
    return [l for l in lines if l["type"] == kind]


def text(lines, kind="stdout"):
    return "".join(l["text"] for l in of(lines, kind))


def main_result(lines):
    found = [l for l in of(lines, "result") if l["is_main_result"]]
    assert len(found) == 1, lines
    return found[0]


def test_python_state_persists_and_the_trailing_expression_is_the_result(api, sid):
    lines = api.code(sid, {"code": "x = 41\nprint('hi')\nx + 1"})
    assert text(lines) == "hi\n"
    assert main_result(lines)["text"] == "42"
    assert of(lines, "number_of_executions") == [{"type": "number_of_executions",
                                                  "execution_count": 1}]
    lines = api.code(sid, {"code": "x"})
    assert main_result(lines)["text"] == "41"
    assert of(lines, "number_of_executions")[0]["execution_count"] == 2
    # Output of child processes is caught too, in order with Python's.
    lines = api.code(sid, {"code": "import os\nprint('a', flush=True)\nos.system('echo b; echo c >&2')\nNone"})
    assert text(lines) == "a\nb\n" and text(lines, "stderr") == "c\n"
    assert not of(lines, "result")


def test_rich_results(api, sid):
    lines = api.code(sid, {"code": "class A:\n    def _repr_html_(self): return '<b>A</b>'\n"
                                   "    def _repr_markdown_(self): return '**A**'\n"
                                   "display(A())\n{'k': 1}"})
    shown = [l for l in of(lines, "result") if not l["is_main_result"]]
    assert len(shown) == 1 and shown[0]["html"] == "<b>A</b>" and shown[0]["markdown"] == "**A**"
    assert main_result(lines)["text"] == "{'k': 1}"


def test_matplotlib_chart_arrives_as_png(api, sid):
    lines = api.code(sid, {"code": "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [3, 1, 2])\n"
                                   "plt.title('t')\nplt.show()"})
    pngs = [l["png"] for l in of(lines, "result") if "png" in l]
    assert len(pngs) == 1, lines
    data = base64.b64decode(pngs[0])
    assert data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) > 1000
    # Without show(): the figure still comes back at the cell's end.
    lines = api.code(sid, {"code": "plt.figure(); plt.bar([1, 2], [2, 3]); None"})
    assert len([l for l in of(lines, "result") if "png" in l]) == 1, lines


def test_dataframe_as_html(api, sid):
    lines = api.code(sid, {"code": "import pandas as pd\npd.DataFrame({'a': [1, 2], 'b': ['x', 'y']})"})
    r = main_result(lines)
    assert "<table" in r["html"] and "<td>x</td>" in r["html"]
    assert "a" in r["text"] and "b" in r["text"]


def test_exception_with_traceback(api, sid):
    lines = api.code(sid, {"code": "def f():\n    raise ValueError('bad')\nf()"})
    (err,) = of(lines, "error")
    assert err["name"] == "ValueError" and err["value"] == "bad"
    assert "line 2, in f" in err["traceback"] and "kernel.py" not in err["traceback"]
    (err,) = of(api.code(sid, {"code": "x = ("}), "error")
    assert err["name"] == "SyntaxError" and "ast.py" not in err["traceback"]


def test_ipython_shell_lines_magics_and_indentation(api, sid):
    lines = api.code(sid, {"code": "    n = 2\n    !echo {n + 1} $n $$0\n    out = !echo a; echo b >&2\n"
                                   "    if n:\n        %cd /tmp\n    out"})
    assert of(lines, "error") == [], lines
    assert text(lines) == "3 2 /bin/sh\n/tmp\n"
    assert main_result(lines)["text"] == "['a', 'b']"
    assert main_result(api.code(sid, {"code": "%pwd"}))["text"] == "/tmp"
    (err,) = of(api.code(sid, {"code": "%nosuch 1"}), "error")
    assert err["name"] == "UsageError" and "%nosuch" in err["value"]
    # A string's text is without its quotes, as E2B's interpreter shows it.
    assert main_result(api.code(sid, {"code": "'it' + \"'s\""}))["text"] == "it's"


def test_matplotlib_figure_data_as_e2b_chart(api, sid):
    lines = api.code(sid, {"code": "import matplotlib.pyplot as plt\n"
                                   "plt.bar(['a', 'b'], [3, 5], label='n')\nplt.xlabel('name [u]')\n"
                                   "plt.title('t')\nplt.show()"})
    (shown,) = of(lines, "result")
    assert shown["png"] and shown["chart"] == {
        "type": "bar", "title": "t", "x_label": "name [u]", "y_label": None, "x_unit": "u",
        "y_unit": None, "elements": [{"label": "a", "group": "n", "value": 3},
                                     {"label": "b", "group": "n", "value": 5}]}
    lines = api.code(sid, {"code": "plt.figure(); plt.show()"})
    assert "chart" not in of(lines, "result")[0], "an empty figure has no chart"


def test_cell_reports_the_files_it_made(api, sid):
    lines = api.code(sid, {"code": "open('made.txt', 'w').write('hello')\nimport os\n"
                                   "os.makedirs('/tmp/d', exist_ok=True)\n"
                                   "open('/tmp/d/x.json', 'w').write('{}')"})
    (art,) = of(lines, "artifacts")
    assert art["files"] == [
        {"path": "/home/user/made.txt", "size": 5, "mime_type": "text/plain"},
        {"path": "/tmp/d/x.json", "size": 2, "mime_type": "application/json"}], lines
    assert [l["type"] for l in lines][-3:] == ["artifacts", "number_of_executions",
                                               "end_of_execution"]
    lines = api.code(sid, {"code": "echo hi > /tmp/sh.txt; ln -s /etc/passwd /tmp/link",
                           "language": "bash"})
    assert of(lines, "artifacts")[0]["files"] == [
        {"path": "/tmp/sh.txt", "size": 3, "mime_type": "text/plain"}], "no symlink followed"
    assert not of(api.code(sid, {"code": "1", "language": "bash"}), "artifacts")
    time.sleep(0.05)  # another context: past the file clock's tick (docs/kernels.md)
    assert not of(api.code(sid, {"code": "1"}), "artifacts")
    # from "/": the kernel's own file systems are not looked in, nor a
    # read-only mount (the host template's /usr), but the rest of "/" is
    lines = api.code(sid, {"code": "import os\nos.chdir('/')\nopen('/tmp/r.txt', 'w').write('r')"})
    assert [f["path"] for f in of(lines, "artifacts")[0]["files"]] == ["/tmp/r.txt"], lines
    lines = api.code(sid, {"code": "open('/var/tmp/v.txt', 'w').write('v')"})
    assert [f["path"] for f in of(lines, "artifacts")[0]["files"]] == ["/var/tmp/v.txt"], lines


def test_timeout_interrupts_the_cell_and_keeps_the_context(api, sid):
    api.code(sid, {"code": "kept = 'yes'"})
    t = time.monotonic()
    lines = api.code(sid, {"code": "import time\nprint('started', flush=True)\ntime.sleep(60)",
                           "timeout_s": 0.5})
    assert time.monotonic() - t < 20
    assert text(lines) == "started\n"
    (err,) = of(lines, "error")
    assert err["name"] == "TimeoutError" and "keeps its state" in err["value"]
    assert main_result(api.code(sid, {"code": "kept"}))["text"] == "yes"


def test_interrupt_route_stops_the_running_cell(api, sid):
    r = api.post(f"/v1/sandboxes/{sid}/contexts", {"language": "python"})
    assert r.status == 201, r
    cid = r.json["id"]
    # Interrupt once the cell runs (a kernel may take seconds to start on a
    # slow machine; with no cell running, an interrupt does nothing).
    conn, resp = api.request_stream("POST", f"/v1/sandboxes/{sid}/code", {
        "code": "import time\nprint('running', flush=True)\ntime.sleep(60)", "context_id": cid})
    assert resp.status == 200
    lines = []
    for raw in resp:
        lines.append(json.loads(raw))
        if lines[-1] == {"type": "stdout", "text": "running\n"}:
            assert api.post(f"/v1/sandboxes/{sid}/contexts/{cid}/interrupt").status == 204
    conn.close()
    assert lines[-1] == {"type": "end_of_execution"}, lines
    assert of(lines, "error")[0]["name"] == "KeyboardInterrupt"
    assert main_result(api.code(sid, {"code": "1 + 1", "context_id": cid}))["text"] == "2"


def pids_of(api, sid, pattern):
    # pgrep's status 1 is "none"; any other failure (127: no procps) must
    # not read as "none", or the check that uses this cannot fail
    lines = api.exec(sid, {"shell": f"pgrep -f '{pattern}'; [ $? -le 1 ]"})
    assert lines[-1]["type"] == "exit" and lines[-1]["exit_code"] == 0, lines
    return sorted(int(x) for x in "".join(l.get("data", "") for l in lines
                                          if l["type"] == "stdout").split())


def test_a_python_context_forks(api, sid):
    cid = api.post(f"/v1/sandboxes/{sid}/contexts", {"env": {"WHO": "parent"}}).json["id"]
    lines = api.code(sid, {"code": "import os, threading\nx = [41]\npid = os.getpid()\n"
                                   "def bump(): x.append(1); return len(x)", "context_id": cid})
    assert not of(lines, "error"), lines
    r = api.post(f"/v1/sandboxes/{sid}/contexts/{cid}/fork")
    assert r.status == 201 and r.json["forked_from"] == cid, r
    fid = r.json["id"]
    # the copy has the parent's variables and functions, in a process of its own
    lines = api.code(sid, {"code": "print(os.environ['WHO'])\nbump(), x[0], os.getpid() != pid",
                           "context_id": fid})
    assert text(lines) == "parent\n" and main_result(lines)["text"] == "(2, 41, True)", lines
    # and they diverge
    assert main_result(api.code(sid, {"code": "len(x)", "context_id": cid}))["text"] == "1"
    assert main_result(api.code(sid, {"code": "bump()", "context_id": fid}))["text"] == "3"
    listed = {c["id"]: c for c in api.get(f"/v1/sandboxes/{sid}/contexts").json["contexts"]}
    assert listed[fid]["state"] == "ready" and listed[fid]["forked_from"] == cid
    # its own interrupt stops its own cell, not the parent's
    conn, resp = api.request_stream("POST", f"/v1/sandboxes/{sid}/code", {
        "code": "import time\nprint('running', flush=True)\ntime.sleep(60)", "context_id": fid})
    out = []
    for raw in resp:
        out.append(json.loads(raw))
        if out[-1] == {"type": "stdout", "text": "running\n"}:
            assert api.post(f"/v1/sandboxes/{sid}/contexts/{fid}/interrupt").status == 204
    conn.close()
    assert of(out, "error")[0]["name"] == "KeyboardInterrupt", out
    assert main_result(api.code(sid, {"code": "len(x)", "context_id": fid}))["text"] == "3"
    # a fork of the fork, then the copy deleted: its process goes with it
    ffid = api.post(f"/v1/sandboxes/{sid}/contexts/{fid}/fork").json["id"]
    assert main_result(api.code(sid, {"code": "len(x)", "context_id": ffid}))["text"] == "3"
    copy_pid = int(main_result(api.code(sid, {"code": "os.getpid()", "context_id": fid}))["text"])
    assert api.delete(f"/v1/sandboxes/{sid}/contexts/{fid}").status == 204
    deadline = time.monotonic() + 10
    while copy_pid in pids_of(api, sid, "kernel.py"):
        assert time.monotonic() < deadline, "the deleted copy's kernel runs on"
        time.sleep(0.1)
    assert main_result(api.code(sid, {"code": "len(x)", "context_id": ffid}))["text"] == "3"
    # restarting a copy gives a kernel of its own, with nothing in it
    r = api.post(f"/v1/sandboxes/{sid}/contexts/{ffid}/restart")
    assert r.status == 200 and "forked_from" not in r.json
    lines = api.code(sid, {"code": "x", "context_id": ffid})
    assert of(lines, "error")[0]["name"] == "NameError"


def test_fork_refusals(api, sid):
    js = api.post(f"/v1/sandboxes/{sid}/contexts", {"language": "javascript"}).json["id"]
    r = api.post(f"/v1/sandboxes/{sid}/contexts/{js}/fork")
    assert r.status == 400 and r.json["error"]["code"] == "not_supported"
    assert api.post(f"/v1/sandboxes/{sid}/contexts/nope/fork").status == 404
    assert api.post("/v1/sandboxes/0123456789abcdef/contexts/x/fork").status == 404
    # a copy lives in its parent's exec: it ends with it (docs/kernels.md)
    cid = api.post(f"/v1/sandboxes/{sid}/contexts", {}).json["id"]
    fid = api.post(f"/v1/sandboxes/{sid}/contexts/{cid}/fork").json["id"]
    assert api.delete(f"/v1/sandboxes/{sid}/contexts/{cid}").status == 204
    deadline = time.monotonic() + 10
    while {c["id"]: c["state"] for c in api.get(f"/v1/sandboxes/{sid}/contexts").json[
            "contexts"]}[fid] != "dead":
        assert time.monotonic() < deadline, "the copy outlived its parent"
        time.sleep(0.05)
    r = api.post(f"/v1/sandboxes/{sid}/code", {"code": "1", "context_id": fid})
    assert r.status == 409 and r.json["error"]["code"] == "context_dead", r


def test_javascript_context(api, sid):
    r = api.post(f"/v1/sandboxes/{sid}/contexts", {"language": "javascript"})
    assert r.status == 201 and r.json["language"] == "javascript", r
    cid = r.json["id"]
    lines = api.code(sid, {"code": "const x = 41; console.log('hi'); x + 1", "context_id": cid})
    assert text(lines) == "hi\n" and main_result(lines)["text"] == "42"
    lines = api.code(sid, {"code": "await new Promise(r => setTimeout(r, 10)); x * 2",
                           "context_id": cid})
    assert main_result(lines)["text"] == "82"
    (err,) = of(api.code(sid, {"code": "throw new TypeError('boom')", "context_id": cid}), "error")
    assert err["name"] == "TypeError" and err["value"] == "boom"
    lines = api.code(sid, {"code": "while (true) {}", "context_id": cid, "timeout_s": 0.5})
    assert of(lines, "error")[0]["name"] == "TimeoutError"
    assert main_result(api.code(sid, {"code": "x", "context_id": cid}))["text"] == "41"
    # The default context of a language, by name.
    assert main_result(api.code(sid, {"code": "typeof x", "language": "js"}))["text"] == "undefined"


def test_bash_context_keeps_cwd_and_variables(api, sid):
    r = api.post(f"/v1/sandboxes/{sid}/contexts", {"language": "bash", "cwd": "/tmp"})
    cid = r.json["id"]
    api.code(sid, {"code": "V=kept; mkdir -p d && cd d", "context_id": cid})
    lines = api.code(sid, {"code": "echo $V $(pwd) $E", "context_id": cid, "env": {"E": "cell"}})
    assert text(lines) == "kept /tmp/d cell\n"
    assert text(api.code(sid, {"code": "echo \"[$E]\"", "context_id": cid})) == "[]\n"
    (err,) = of(api.code(sid, {"code": "false", "context_id": cid}), "error")
    assert err["value"] == "exit status 1"


def test_two_contexts_are_isolated(api, sid):
    a = api.post(f"/v1/sandboxes/{sid}/contexts", {}).json["id"]
    b = api.post(f"/v1/sandboxes/{sid}/contexts", {}).json["id"]
    api.code(sid, {"code": "v = 'a'", "context_id": a})
    (err,) = of(api.code(sid, {"code": "v", "context_id": b}), "error")
    assert err["name"] == "NameError"
    listed = {c["id"]: c for c in api.get(f"/v1/sandboxes/{sid}/contexts").json["contexts"]}
    assert listed[a]["state"] == "ready" and listed[a]["language"] == "python"
    assert api.delete(f"/v1/sandboxes/{sid}/contexts/{a}").status == 204
    assert api.post(f"/v1/sandboxes/{sid}/code", {"code": "1", "context_id": a}).status == 404


def test_a_crashed_kernel_is_reported_and_restartable(api, sid):
    cid = api.post(f"/v1/sandboxes/{sid}/contexts", {}).json["id"]
    api.code(sid, {"code": "v = 1", "context_id": cid})
    (err,) = of(api.code(sid, {"code": "import os\nos._exit(3)", "context_id": cid}), "error")
    assert err["name"] == "KernelDied" and "exit status 3" in err["value"]
    r = api.post(f"/v1/sandboxes/{sid}/code", {"code": "1", "context_id": cid})
    assert r.status == 409 and r.json["error"]["code"] == "context_dead", r
    r = api.post(f"/v1/sandboxes/{sid}/contexts/{cid}/restart")
    assert r.status == 200 and r.json["id"] == cid, r
    (err,) = of(api.code(sid, {"code": "v", "context_id": cid}), "error")
    assert err["name"] == "NameError"  # a new kernel: state starts over
    # The default context is made again after it dies.
    api.code(sid, {"code": "import os\nos._exit(1)"})
    assert main_result(api.code(sid, {"code": "2 * 3"}))["text"] == "6"


@pytest.mark.parametrize("body, code", [
    ('{"code": 5}', "invalid_argument"),
    ('{}', "invalid_argument"),
    ('{"code": "1", "language": "cobol"}', "invalid_argument"),
    ('{"code": "1", "language": "python", "context_id": "x"}', "invalid_argument"),
    ('{"code": "1", "timeout_s": -1}', "invalid_argument"),
    ('{"code": "1", "env": {"A=B": "c"}}', "invalid_argument"),
    ('{"code": "1", "bogus": 1}', "invalid_argument"),
    ('not json', "invalid_json"),
])
def test_bad_code_requests(api, sid, body, code):
    r = api.request("POST", f"/v1/sandboxes/{sid}/code", body)
    assert r.status == 400 and r.json["error"]["code"] == code, r
    assert main_result(api.code(sid, {"code": "'still serving'"}))["text"] == "still serving"


def test_context_routes_refuse_what_they_do_not_know(api, sid):
    assert api.post(f"/v1/sandboxes/{sid}/contexts", {"language": "cobol"}).status == 400
    assert api.post(f"/v1/sandboxes/{sid}/contexts/nope/restart").status == 404
    assert api.post(f"/v1/sandboxes/{sid}/contexts/nope/interrupt").status == 404
    assert api.delete(f"/v1/sandboxes/{sid}/contexts/nope").status == 404
    assert api.post("/v1/sandboxes/nope/code", {"code": "1"}).status == 404
    for _ in range(16 - len(api.get(f"/v1/sandboxes/{sid}/contexts").json["contexts"])):
        assert api.post(f"/v1/sandboxes/{sid}/contexts", {}).status == 201
    r = api.post(f"/v1/sandboxes/{sid}/contexts", {})
    assert r.status == 429 and r.json["error"]["code"] == "quota_exceeded", r
    assert "at most 16 code contexts" in r.json["error"]["message"], r
