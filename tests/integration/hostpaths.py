"""No host paths in answers: the check every answer the tests' client
(serveapi.Api) receives goes through.

An answer of hutch serve says what a tenant's things are and what went
wrong, never where the host keeps them: a path under the state directory
tells a tenant the operator's layout, a pid in it which process to aim at,
and a public template's record is read by every tenant.

The rule. The strings of an answer are its JSON keys and values (of a
JSON or NDJSON body, each message of a Connect stream, the text of a
plain-text error). A path in a string is a run of characters that starts
with "/" where no other path character stands before it (so "/a" in
"x/a" or "sha256:…" is not one) and ends at white space, a quote, a
bracket, ",", ";", ":" or "=". Such a path is the host's when:

- it is, or lies under, a directory only the host has: the server's state
  directory (and the pytest directories it sits in), the repository and
  the build the server runs from, /run/hutch (the staging of mounts),
  /sys/fs/cgroup (the host's cgroups; a sandbox sees its own cgroup
  namespace at that path, but no test lists it through the API),
  /var/lib/hutch (the default state directory);
- it holds the server's pid as a whole number ("/tmp/4321-ab/upload",
  "/x/y.4321.tmp"): no sandbox's path has it but by chance, and a host
  that has run a test suite gives pids of several digits;
- it is /proc/N where N is the server or one of its live descendants on
  the host: a sandbox has its own pid namespace, where /proc/1 is its agent
  and its pids are small, so /proc/1 or /proc/37 in an answer is the
  sandbox's own (a pid the host no longer has is not caught).

Everything else is the sandbox's side and legitimate: /home/user, /tmp/x,
/code, /proc/1/environ in an error about a sandbox's file.

What the check does not see: the standard output and error of a process
(exec, /code and E2B's process streams carry a workload's own bytes,
whatever they say), answers read through request_stream, exec_stream or a
WebSocket, and the tests that speak HTTP through http.client or a socket
of their own.
"""
import getpass
import json
import os
import pathlib
import re
import struct
import tempfile

# A path: a "/" no path character precedes, up to a separator.
PATH = re.compile(r"(?<![\w.~/+-])/[^\s'\"`,;:=()<>\[\]{}]*")
FIXED = ("/run/hutch", "/sys/fs/cgroup", "/var/lib/hutch")
REPO = pathlib.Path(__file__).resolve().parents[2]


class HostPathInAnswer(AssertionError):
    """An answer carried a host path: the test that received it fails."""


def host_dirs(state_dir, binary):
    """The directories only the host has, for a server with this state
    directory running this binary (see the module's rule)."""
    state = pathlib.Path(state_dir).resolve()
    dirs = {str(state), str(state.parent), str(REPO), str(pathlib.Path(binary).resolve().parent),
            str(pathlib.Path(tempfile.gettempdir(), f"pytest-of-{getpass.getuser()}")), *FIXED}
    return sorted(dirs, key=len, reverse=True)


def parent_of(pid):
    try:
        stat = pathlib.Path(f"/proc/{pid}/stat").read_text()
        return int(stat.rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return 0


def descends_from(pid, ancestor):
    """Whether host process pid is ancestor or runs under it."""
    for _ in range(64):
        if pid == ancestor:
            return True
        if pid <= 1:
            return False
        pid = parent_of(pid)
    return False


def why_host(path, dirs, pid):
    """What makes path the host's (a sentence), or None."""
    for d in dirs:
        if path == d or path.startswith(d + "/"):
            return f"lies under the host's {d}"
    if pid and str(pid) in re.findall(r"\d+", path):
        return f"holds the server's pid {pid}"
    m = re.match(r"/proc/(\d+)(/|$)", path)
    if m and pid and descends_from(int(m.group(1)), pid):
        return f"is the /proc of the server's process {m.group(1)}"
    return None


def strings(value, where="$"):
    """(where, string) of every key and string value in a JSON value."""
    if isinstance(value, str):
        yield where, value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield f"{where} (key)", k
            yield from strings(v, f"{where}.{k}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from strings(v, f"{where}[{i}]")


def workload_output(value):
    """Whether a parsed message is a process's output: the workload's
    bytes, not the server's words (hutch's exec and /code lines; E2B's
    process events carry theirs in base64, which holds no path)."""
    return isinstance(value, dict) and value.get("type") in ("stdout", "stderr")


def documents(content_type, raw):
    """(where, parsed value) of each JSON document a body holds."""
    ctype = (content_type or "").split(";")[0].strip().lower()
    if ctype == "application/connect+json":
        off, n = 0, 0
        while off + 5 <= len(raw):
            size = struct.unpack(">I", raw[off + 1:off + 5])[0]
            yield from parsed(raw[off + 5:off + 5 + size], f"message {n}")
            off, n = off + 5 + size, n + 1
    elif ctype == "application/x-ndjson":
        for i, line in enumerate(raw.splitlines()):
            yield from parsed(line, f"line {i}")
    elif ctype == "application/json" or ctype.endswith("+json"):
        yield from parsed(raw, "body")
    elif ctype.startswith("text/"):
        yield "body", raw.decode(errors="replace")


def parsed(raw, where):
    try:
        value = json.loads(raw)
    except ValueError:
        return  # a body that is no JSON says nothing the check can read
    if not workload_output(value):
        yield where, value


def check(what, status, content_type, raw, dirs, pid):
    """Raise HostPathInAnswer when the answer (what: "GET /v1/x") to a
    request carries a host path. Plain text is read for errors only: a
    text answer of 2xx is a file or a workload's, the sandbox's own."""
    __tracebackhide__ = True
    if (content_type or "").startswith("text/") and status < 400:
        return
    for part, doc in documents(content_type, raw):
        for where, s in strings(doc, part):
            for path in PATH.findall(s):
                reason = why_host(path.rstrip("."), dirs, pid)
                if reason:
                    raise HostPathInAnswer(
                        f"{what} answered {status} with a host path at {where}: {path!r} "
                        f"{reason}, in {s[:300]!r}")
