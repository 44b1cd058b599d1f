"""Sandbox: create, connect, list, run commands, set the timeout, kill."""
import base64
import os
import urllib.parse

from . import code as _code
from ._http import Client
from .errors import CommandExitError, NotFound, Timeout
from .files import Files

DEFAULT_URL = "http://127.0.0.1:7420"


def _client(api_url, api_key, request_timeout):
    url = api_url or os.environ.get("HUTCH_API_URL") or DEFAULT_URL
    key = api_key or os.environ.get("HUTCH_API_KEY")
    return Client(url, key, request_timeout)


class CommandResult:
    """How a command ended: its output and hutch's verdict."""

    def __init__(self, stdout, stderr, verdict, pid, sbx=None):
        self.stdout, self.stderr, self.pid = stdout, stderr, pid
        self.verdict = verdict
        # the files it made or changed (a foreground command's), each with read()
        self.artifacts = [_code.Artifact(sbx, a) for a in verdict.get("artifacts", [])]
        self.status = verdict.get("status")
        self.exit_code = verdict.get("exit_code")
        self.signal = verdict.get("signal")
        self.wall_ms = verdict.get("wall_ms")
        self.cpu_ms = verdict.get("cpu_ms")
        self.peak_memory_kb = verdict.get("peak_memory_kb")
        # refused syscalls of its processes (docs/security.md); None: not counted
        self.escape_attempts = verdict.get("escape_attempts")
        self.message = verdict.get("message", "")

    @property
    def ok(self):
        return self.status == "ok"

    def __repr__(self):
        return (f"CommandResult(status={self.status!r}, exit_code={self.exit_code}, "
                f"stdout={self.stdout[-200:]!r}, stderr={self.stderr[-200:]!r})")


def _piece(line):
    if "data" in line:
        return line["data"].encode()
    return base64.b64decode(line.get("data_b64", ""))


def _collect(lines, on_stdout, on_stderr):
    """Output and verdict from an exec's NDJSON lines; pid from its start line."""
    out, err, verdict, pid = [], [], {}, None
    for line in lines:
        kind = line.get("type")
        if kind == "start":
            pid = line.get("pid")
        elif kind in ("stdout", "stderr"):
            text = _piece(line).decode(errors="replace")
            (out if kind == "stdout" else err).append(text)
            cb = on_stdout if kind == "stdout" else on_stderr
            if cb:
                cb(text)
        elif kind == "exit":
            verdict = line
    return "".join(out), "".join(err), verdict, pid


def _result(out, err, verdict, pid, check, sbx=None):
    result = CommandResult(out, err, verdict, pid, sbx)
    if result.status == "timeout":
        raise Timeout(f"command timed out: {result.message}", code="timeout")
    if check and not result.ok:
        raise CommandExitError(result)
    return result


class CommandHandle:
    """A background process: it runs on whether or not anyone reads it."""

    def __init__(self, sandbox, pid):
        self._sbx, self.pid = sandbox, pid

    def _path(self, suffix=""):
        return f"/v1/sandboxes/{self._sbx.id}/processes/{self.pid}{suffix}"

    def wait(self, *, on_stdout=None, on_stderr=None, check=False):
        """Its output from the start (the last MiB of it), as it comes, and
        its verdict once it ends."""
        lines = self._sbx._client.stream("GET", self._path("/output"), None, None)
        out, err, verdict, _ = _collect(lines, on_stdout, on_stderr)
        return _result(out, err, verdict, self.pid, check)

    def send_stdin(self, data, *, eof=False):
        """Write to its stdin (it must have been started with keep_stdin=True)."""
        self._sbx._client.call("POST", self._path("/stdin"), {"data": data, "eof": eof})

    def signal(self, signum):
        self._sbx._client.call("POST", self._path("/signal"), {"signal": int(signum)})

    def kill(self):
        """SIGKILL it and everything it started."""
        self._sbx._client.call("DELETE", self._path())

    def __repr__(self):
        return f"CommandHandle(pid={self.pid})"


class Commands:
    def __init__(self, sandbox):
        self._sbx = sandbox

    def list(self):
        """Background processes, running and ended (dicts: pid, cmd, running, exit)."""
        return self._sbx._client.call("GET", f"/v1/sandboxes/{self._sbx.id}/processes")[
            "processes"]

    def connect(self, pid):
        """A handle on a background process started earlier (by anyone)."""
        return CommandHandle(self._sbx, pid)

    def run(self, cmd, *, on_stdout=None, on_stderr=None, envs=None, cwd=None, user=None,
            stdin=None, timeout=None, check=False, background=False, keep_stdin=False):
        """Run cmd (a shell string, or an argv list) and wait for it.

        on_stdout/on_stderr get each piece of output as text as it comes.
        timeout (seconds) ends the command with status "timeout" (raises
        Timeout). check=True raises CommandExitError unless it succeeded.
        background=True returns a CommandHandle at once instead; with
        keep_stdin=True its stdin stays open for handle.send_stdin().
        """
        body = {"cmd": list(cmd)} if isinstance(cmd, (list, tuple)) else {"shell": cmd}
        if envs:
            body["env"] = dict(envs)
        if cwd:
            body["cwd"] = cwd
        if user:
            body["user"] = user
        if stdin is not None:
            body["stdin"] = stdin
        if timeout:
            body["timeout_s"] = timeout
        path = f"/v1/sandboxes/{self._sbx.id}/exec"
        if background:
            body["background"] = True
            if keep_stdin:
                body["keep_stdin"] = True
            return CommandHandle(self._sbx, self._sbx._client.call("POST", path, body)["pid"])
        # The stream may be silent as long as the command is: no socket
        # timeout unless the command has one.
        wait = timeout + 30 if timeout else None
        lines = self._sbx._client.stream("POST", path, body, wait)
        return _result(*_collect(lines, on_stdout, on_stderr), check, self._sbx)


class Sandbox:
    """A sandbox on a hutch server. Use Sandbox.create() or Sandbox.connect()."""

    def __init__(self, info, client):
        self._client = client
        self._info = info
        self.commands = Commands(self)
        self.files = Files(self)

    @property
    def id(self):
        return self._info["id"]

    @property
    def info(self):
        return dict(self._info)

    @classmethod
    def create(cls, template="host", *, timeout=None, memory_mb=None, cpus=None, pids=None,
               disk_mb=None, envs=None, metadata=None, on_timeout=None, auto_resume=None,
               volumes=None, network=None, secrets=None, api_url=None, api_key=None,
               request_timeout=60):
        """A new sandbox; timeout is its life in seconds (default 300).

        on_timeout="pause" pauses it at its timeout instead of killing it;
        auto_resume=False makes requests to it while paused fail (409)
        instead of resuming it. volumes: {path: name} or a list of
        {"name", "path", "read_only"} (see create_volume).

        network: {"mode": "none" | "allowlist", "allow": ["pypi.org",
        "*.github.com", "10.0.0.5:8080", ...], "public_ports": [8000]};
        by default the sandbox reaches nothing. secrets: [{"host",
        "header", "value", "https_ports"?, "http_ports"?}]: the egress
        proxy adds the header to HTTPS requests to that host on
        https_ports (default [443]), to a server that proves the name,
        and to plain-HTTP ones only on the http_ports given; the value
        never enters the sandbox (docs/network.md)."""
        body = {"template": template}
        for k, v in (("timeout_s", timeout), ("memory_mb", memory_mb), ("cpus", cpus),
                     ("pids", pids), ("disk_mb", disk_mb), ("env", envs),
                     ("metadata", metadata), ("on_timeout", on_timeout),
                     ("auto_resume", auto_resume), ("network", network),
                     ("secrets", secrets)):
            if v is not None:
                body[k] = v
        if isinstance(volumes, dict):
            volumes = [{"name": n, "path": p} for p, n in volumes.items()]
        if volumes is not None:
            body["volumes"] = list(volumes)
        client = _client(api_url, api_key, request_timeout)
        return cls(client.call("POST", "/v1/sandboxes", body), client)

    @classmethod
    def connect(cls, sandbox_id, *, api_url=None, api_key=None, request_timeout=60):
        """A sandbox made earlier (by this program or another)."""
        client = _client(api_url, api_key, request_timeout)
        sid = urllib.parse.quote(sandbox_id, safe="")
        return cls(client.call("GET", f"/v1/sandboxes/{sid}"), client)

    @staticmethod
    def list(*, metadata=None, api_url=None, api_key=None, request_timeout=60):
        """The caller's sandboxes (as dicts), running and paused, filtered
        by metadata."""
        client = _client(api_url, api_key, request_timeout)
        query = urllib.parse.urlencode({f"metadata.{k}": v for k, v in (metadata or {}).items()})
        return client.call("GET", "/v1/sandboxes" + (f"?{query}" if query else ""))["sandboxes"]

    def run_code(self, code, *, language=None, context=None, on_stdout=None, on_stderr=None,
                 on_result=None, on_error=None, envs=None, timeout=None):
        """Run a cell of code (Python unless language or context says
        otherwise) in a persistent kernel: state is kept from cell to cell.
        Returns an Execution; .text is the trailing expression's value.
        A cell past timeout seconds is interrupted (its error is a
        TimeoutError) and the context keeps its state."""
        return _code.run(self, code, language, context, on_stdout, on_stderr, on_result,
                         on_error, envs, timeout)

    def create_code_context(self, *, language="python", cwd=None, envs=None):
        """A new code context (python, javascript or bash), its own kernel."""
        body = {"language": language}
        if cwd:
            body["cwd"] = cwd
        if envs:
            body["env"] = dict(envs)
        return _code.Context(self._client.call("POST", f"/v1/sandboxes/{self.id}/contexts", body))

    def list_code_contexts(self):
        return [_code.Context(c) for c in
                self._client.call("GET", f"/v1/sandboxes/{self.id}/contexts")["contexts"]]

    def fork_code_context(self, context):
        """A new Python context that is a copy of context: its variables
        and all, from then on its own."""
        cid = context.id if isinstance(context, _code.Context) else context
        return _code.Context(
            self._client.call("POST", f"/v1/sandboxes/{self.id}/contexts/{cid}/fork"))

    def restart_code_context(self, context):
        cid = context.id if isinstance(context, _code.Context) else context
        return _code.Context(
            self._client.call("POST", f"/v1/sandboxes/{self.id}/contexts/{cid}/restart"))

    def remove_code_context(self, context):
        cid = context.id if isinstance(context, _code.Context) else context
        self._client.call("DELETE", f"/v1/sandboxes/{self.id}/contexts/{cid}")

    def refresh(self):
        self._info = self._client.call("GET", f"/v1/sandboxes/{self.id}")
        return self.info

    def set_timeout(self, timeout):
        """Live timeout more seconds from now."""
        self._info = self._client.call("POST", f"/v1/sandboxes/{self.id}/timeout",
                                       {"timeout_s": timeout})

    def set_network(self, *, mode=None, allow=None, public_ports=None, secrets=None):
        """Change the network policy of the running sandbox: what is given
        replaces what was. Connections the new policy forbids are cut."""
        body = {k: v for k, v in (("mode", mode), ("allow", allow),
                                  ("public_ports", public_ports), ("secrets", secrets))
                if v is not None}
        self._info = self._client.call("PATCH", f"/v1/sandboxes/{self.id}/network", body)
        return self.info["network"]

    def get_host(self, port):
        """Where a client reaches the sandbox's port: {port}-{id}.{domain}
        with the server's port (E2B's getHost). A private port wants the
        API key or the traffic token (X-Hutch-Traffic-Token) with each
        request."""
        host = f"{int(port)}-{self.id}.{self._info['domain']}"
        return host if self._client.port == 80 else f"{host}:{self._client.port}"

    @property
    def traffic_token(self):
        return self._info["traffic_token"]

    def pause(self):
        """Freeze every process of the sandbox, keeping its memory and
        files; its timeout stops until resume()."""
        self._info = self._client.call("POST", f"/v1/sandboxes/{self.id}/pause")
        return self.info

    def resume(self, *, timeout=None):
        """Go on where pause() stopped; timeout (seconds from now) or what
        was left of the old one."""
        body = {"timeout_s": timeout} if timeout is not None else {}
        self._info = self._client.call("POST", f"/v1/sandboxes/{self.id}/resume", body)
        return self.info

    def get_metrics(self, *, start=None, end=None):
        """{"current": {...}, "samples": [...]}: CPU %, memory, disk and
        processes over the last minutes (start/end: seconds since the
        epoch)."""
        query = urllib.parse.urlencode({k: int(v) for k, v in (("start", start), ("end", end))
                                        if v is not None})
        return self._client.call("GET", f"/v1/sandboxes/{self.id}/metrics" +
                                 (f"?{query}" if query else ""))

    def snapshot(self, *, name=None):
        """Capture the sandbox's files as a snapshot (it runs on). Its id
        is a template: Sandbox.create(template=snapshot["id"])."""
        body = {"name": name} if name else {}
        return self._client.call("POST", f"/v1/sandboxes/{self.id}/snapshots", body)

    def fork(self, n, *, timeout=None):
        """n new sandboxes holding this one's files (not its processes),
        with its limits, env and metadata; each then goes its own way."""
        body = {"count": n}
        if timeout is not None:
            body["timeout_s"] = timeout
        made = self._client.call("POST", f"/v1/sandboxes/{self.id}/fork", body)
        return [Sandbox(info, self._client) for info in made["sandboxes"]]

    @staticmethod
    def list_snapshots(*, api_url=None, api_key=None, request_timeout=60):
        client = _client(api_url, api_key, request_timeout)
        return client.call("GET", "/v1/snapshots")["snapshots"]

    @staticmethod
    def delete_snapshot(snapshot_id, *, api_url=None, api_key=None, request_timeout=60):
        """Refused (409) while sandboxes or other snapshots stack it."""
        client = _client(api_url, api_key, request_timeout)
        client.call("DELETE", f"/v1/snapshots/{urllib.parse.quote(snapshot_id, safe='')}")

    @staticmethod
    def create_volume(name, size_mb, *, api_url=None, api_key=None, request_timeout=60):
        """A volume: storage of size_mb that outlives sandboxes; mount it
        with Sandbox.create(volumes={"/data": name})."""
        client = _client(api_url, api_key, request_timeout)
        return client.call("POST", "/v1/volumes", {"name": name, "size_mb": size_mb})

    @staticmethod
    def list_volumes(*, api_url=None, api_key=None, request_timeout=60):
        client = _client(api_url, api_key, request_timeout)
        return client.call("GET", "/v1/volumes")["volumes"]

    @staticmethod
    def delete_volume(volume, *, api_url=None, api_key=None, request_timeout=60):
        """volume: its name or id. Refused (409) while a sandbox mounts it."""
        client = _client(api_url, api_key, request_timeout)
        client.call("DELETE", f"/v1/volumes/{urllib.parse.quote(volume, safe='')}")

    @staticmethod
    def usage(*, tenant=None, api_url=None, api_key=None, request_timeout=60):
        """What the caller's tenant used: CPU-seconds, memory GB-seconds and
        sandbox-seconds while running (paused time is not counted)."""
        client = _client(api_url, api_key, request_timeout)
        query = f"?tenant={urllib.parse.quote(tenant)}" if tenant else ""
        return client.call("GET", "/v1/usage" + query)

    def kill(self):
        """Destroy the sandbox and everything in it."""
        self._client.call("DELETE", f"/v1/sandboxes/{self.id}")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        try:
            self.kill()
        except NotFound:
            pass  # already gone (its timeout, or killed inside the block)

    def __repr__(self):
        return f"Sandbox(id={self.id!r})"
