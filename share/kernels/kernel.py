"""hutch's code-interpreter kernel: one process per code context, started
by the server inside the sandbox with the sandbox's own python3
(docs/kernels.md has the protocol).

    python3 kernel.py python|javascript|bash
    python3 kernel.py fork TOKEN        (the exec of a forked Python context)

Requests come one JSON object a line on stdin, events go one JSON object a
line to the kernel's original stdout. The code's own output, Python's and
any child process's, is caught where it is written (fds 1 and 2 are pipes
this process reads) and sent as "stdout" / "stderr" events while the cell
runs; a sync mark written into each pipe after the cell makes sure all of
it is out before the cell's results and its "end_of_execution".

Python runs here, in the main thread. JavaScript runs in a node child
(js_kernel.mjs) and bash in a bash child; this process relays for them.
SIGINT (the server's interrupt) stops the running cell: the whole process
group gets it, so the cell's child processes do too."""
import ast
import base64
import builtins
import codecs
import importlib.abc
import io
import json
import linecache
import math
import mimetypes
import os
import shlex
import select
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
SYNC = b"\x00\x1bhutch-kernel-sync\x00"


class Channel:
    """The events out, whole lines from any thread."""

    def __init__(self, fd):
        self.fd = fd
        self.lock = threading.Lock()
        self.cell = None  # id of the cell running, output belongs to it

    def send(self, obj):
        data = (json.dumps(obj, default=repr, ensure_ascii=False) + "\n").encode("utf-8", "replace")
        with self.lock:
            view = memoryview(data)
            while view:
                view = view[os.write(self.fd, view):]

    def event(self, kind, **fields):
        self.send({"id": self.cell, "type": kind, **fields})


class Capture:
    """One of fds 1 and 2: a pipe whose reader thread forwards it."""

    def __init__(self, ch, fd, kind):
        self.ch, self.kind = ch, kind
        r, w = os.pipe()
        os.dup2(w, fd)
        self.w = os.dup(w)  # for the sync mark, also when fd is a child's
        os.close(w)
        self.r = r
        self.synced = threading.Event()
        self.decoder = codecs.getincrementaldecoder("utf-8")("replace")
        threading.Thread(target=self.pump, daemon=True).start()

    def forward(self, data, final=False):
        text = self.decoder.decode(data, final)
        if text:
            self.ch.event(self.kind, text=text)

    def pump(self):
        pending = b""
        while True:
            try:
                chunk = os.read(self.r, 65536)
            except InterruptedError:
                continue
            if not chunk:
                return
            pending += chunk
            while (i := pending.find(SYNC)) >= 0:
                self.forward(pending[:i], final=True)
                pending = pending[i + len(SYNC):]
                self.synced.set()
            keep = next((k for k in range(min(len(SYNC) - 1, len(pending)), 0, -1)
                         if SYNC.startswith(pending[-k:])), 0)
            self.forward(pending[:len(pending) - keep])
            pending = pending[len(pending) - keep:]

    def sync(self):
        for f in (sys.stdout, sys.stderr):
            try:
                f.flush()
            except (OSError, ValueError):
                pass
        self.synced.clear()
        os.write(self.w, SYNC)
        self.synced.wait(5)


# ---- rich results --------------------------------------------------------

FORMATS = [("html", "_repr_html_"), ("markdown", "_repr_markdown_"), ("svg", "_repr_svg_"),
           ("png", "_repr_png_"), ("jpeg", "_repr_jpeg_"), ("pdf", "_repr_pdf_"),
           ("latex", "_repr_latex_"), ("json", "_repr_json_"),
           ("javascript", "_repr_javascript_")]
MIME = {"text/plain": "text", "text/html": "html", "text/markdown": "markdown",
        "image/svg+xml": "svg", "image/png": "png", "image/jpeg": "jpeg",
        "application/pdf": "pdf", "text/latex": "latex", "application/json": "json",
        "application/javascript": "javascript"}
BINARY = {"png", "jpeg", "pdf"}


def plain(text):
    """A result's text as E2B's interpreter gives it: a string's repr
    without its quotes."""
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    return text


def jsonable(obj):
    """obj as JSON can carry it: numpy's values as Python's, times as ISO
    text, NaN and infinities as null, anything else as its str()."""
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    if type(obj).__module__ == "numpy" and hasattr(obj, "tolist"):
        return jsonable(obj.tolist())
    if hasattr(obj, "isoformat"):
        return obj.isoformat()
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, (str, int, type(None))):
        return obj
    return str(obj)


def figure_formats(fig):
    """A matplotlib figure: its PNG and, as E2B's, its data as a chart."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", bbox_inches="tight")
    out = {"text": repr(fig), "png": base64.b64encode(buf.getvalue()).decode()}
    try:
        import hutch_charts
        chart = hutch_charts.chart(fig)
    except Exception:  # a figure the extraction does not understand is still shown
        chart = None
    if chart:
        out["chart"] = jsonable(chart)
    return out


def formats(obj):
    """The formats an object shows itself in, as E2B's results carry them:
    IPython's, and E2B's own `data` (a DataFrame's columns), `json` (a list
    or dict) and `chart` (a matplotlib figure's data)."""
    out = {}
    try:
        out["text"] = plain(repr(obj))
    except Exception as e:  # a broken __repr__ still leaves the others
        out["text"] = f"<repr failed: {type(e).__name__}: {e}>"
    if isinstance(obj, type):
        return out
    if isinstance(obj, (list, dict)):
        try:
            out["json"] = json.loads(json.dumps(obj, allow_nan=False))
        except (TypeError, ValueError):
            pass
    pandas = sys.modules.get("pandas")
    if pandas is not None and isinstance(obj, pandas.DataFrame):
        try:
            out["data"] = jsonable(obj.to_dict(orient="list"))
        except Exception:
            pass
    bundle = getattr(obj, "_repr_mimebundle_", None)
    if callable(bundle):
        try:
            data = bundle()
            data = data[0] if isinstance(data, tuple) else data
            for mime, value in (data or {}).items():
                if mime in MIME:
                    out[MIME[mime]] = value
        except Exception:
            pass
    for key, name in FORMATS:
        method = getattr(obj, name, None)
        if key in out or not callable(method):
            continue
        try:
            value = method()
        except Exception:
            continue
        value = value[0] if isinstance(value, tuple) else value
        if value is not None:
            out[key] = value
    if type(obj).__name__ == "Figure" and type(obj).__module__.startswith("matplotlib"):
        out.update(figure_formats(obj))
    for key in BINARY & out.keys():
        if isinstance(out[key], (bytes, bytearray)):
            out[key] = base64.b64encode(out[key]).decode()
    return out


# ---- artifacts: the files a cell made or changed ---------------------------

# Where a cell's files are looked for (and what in them is not its work);
# how many entries a look may visit, and how many files it reports.
NOT_ARTIFACTS = {".cache", ".config", ".local", ".npm", ".ipython", ".git", "__pycache__",
                 "node_modules"}
PRIVATE = "hutch-bash-"  # a bash kernel's cells (Child), in /tmp
KERNEL_FS = ("/proc", "/sys", "/dev")  # a cwd of "/": not files anyone made
SCAN_MAX = 20000
ARTIFACTS_MAX = 100
CLOCK_REALTIME_COARSE = getattr(time, "CLOCK_REALTIME_COARSE", 5)


def since():
    """Now, by the clock the kernel stamps files with (a coarse one: a
    finer now could be later than the stamp of a file written after it)."""
    return time.clock_gettime_ns(CLOCK_REALTIME_COARSE)


def artifacts(t0, skip, reported):
    """Regular files under the cwd, the home directory and /tmp whose
    inode changed at or after t0 (written, made, moved in): path, size
    and a MIME type guessed from the name. Symlinks are not followed.
    reported: (device, inode) -> ctime of the files reported before, which
    are not again unless changed since (one the cell before wrote within
    t0's clock tick has a ctime of t0)."""
    home = os.path.expanduser("~")  # "/" for a UID without a name: none
    # Each root on its own (never looked in from another), the likeliest
    # small first: a cwd of "/" would take the whole budget.
    every = list(dict.fromkeys(["/tmp", home if home != "/" else "/tmp", os.getcwd()]))
    roots, found, budget, dirs = list(every), {}, SCAN_MAX, []
    while (dirs or roots) and budget > 0:
        path = dirs.pop() if dirs else roots.pop(0)
        try:
            # A read-only mount holds nothing a cell changed: the host
            # template's /usr, most of what a cwd of "/" holds.
            if os.statvfs(path).f_flag & os.ST_RDONLY:
                continue
            entries = os.scandir(path)
        except OSError:
            continue
        with entries:
            for e in entries:
                budget -= 1
                if budget <= 0:
                    break
                try:
                    if e.is_dir(follow_symlinks=False):
                        if e.name not in NOT_ARTIFACTS and not e.name.startswith(PRIVATE) and \
                                e.path not in skip and e.path not in KERNEL_FS and \
                                e.path not in every:
                            dirs.append(e.path)
                        continue
                    st = e.stat(follow_symlinks=False)
                except OSError:
                    continue
                key = (st.st_dev, st.st_ino)
                if e.is_file(follow_symlinks=False) and st.st_ctime_ns >= t0 and \
                        reported.get(key) != st.st_ctime_ns:
                    reported[key] = st.st_ctime_ns
                    found.setdefault(key, {
                        "path": e.path, "size": st.st_size,
                        "mime_type": mimetypes.guess_type(e.name)[0] or "application/octet-stream"})
    if len(reported) > 10 * ARTIFACTS_MAX:  # only the last cell's matter
        for key in set(reported) - set(found):
            del reported[key]
    return sorted(found.values(), key=lambda f: f["path"])[:ARTIFACTS_MAX]


# ---- Python ---------------------------------------------------------------

class AfterImport(importlib.abc.MetaPathFinder):
    """Runs hooks[name](module) once module name is imported: what E2B's
    interpreter sets up in PIL at its start, here only if a cell imports it."""

    def __init__(self, hooks):
        self.hooks = hooks

    def find_spec(self, name, path, target=None):
        hook = self.hooks.pop(name, None)
        if hook is None:
            return None
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            spec = find(name, path, target) if finder is not self and find else None
            if spec is not None and spec.loader is not None:
                run = spec.loader.exec_module
                spec.loader.exec_module = lambda module: (run(module), hook(module))
                return spec
        return None


class Viewer:
    """PIL's Image.show(): the image as a result, as in IPython."""

    def __init__(self, display):
        self.display = display

    def show(self, image, **options):
        self.display(image)
        return 1


def pil_hooks(display):
    def image(module):
        save = module.Image.save

        def save_shown(self, fp, format=None, **params):  # E2B shows a saved image
            if isinstance(fp, str):
                display(self)
            return save(self, fp, format, **params)
        module.Image.save = save_shown
    return {"PIL.Image": image,
            "PIL.ImageShow": lambda module: module.register(Viewer(display), 0)}


class Python:
    language = "python"

    def __init__(self, ch, captures):
        self.ch, self.captures = ch, captures
        self.ns = {"__name__": "__main__", "__builtins__": builtins}
        self.running = False
        self.count = 0
        builtins.display = self.display
        # Figures render off screen; plt.show() and the end of a cell send
        # them as PNG results (hutch_mpl.py is the backend).
        os.environ.setdefault("MPLBACKEND", "module://hutch_mpl")
        # Debian's matplotlib reads /etc/matplotlibrc, which the sandbox's
        # /etc does not have: the same file from its data directory.
        rc = "/usr/share/matplotlib/mpl-data/matplotlibrc"
        if not os.path.exists("/etc/matplotlibrc") and os.path.exists(rc):
            os.environ.setdefault("MATPLOTLIBRC", rc)
        sys.path.insert(0, HERE)
        builtins.__hutch_show_figures__ = self.show_figures
        import hutch_ipy
        self.ipy = builtins.__hutch_ipy__ = hutch_ipy
        sys.meta_path.insert(0, AfterImport(pil_hooks(self.display)))
        signal.signal(signal.SIGINT, self.on_sigint)

    def on_sigint(self, signum, frame):
        if self.running:
            raise KeyboardInterrupt

    def display(self, *objs, **kwargs):
        for obj in objs:
            self.ch.event("result", is_main_result=False, **formats(obj))

    def show_figures(self):
        plt = sys.modules.get("matplotlib.pyplot")
        if not plt:
            return
        for num in plt.get_fignums():
            self.ch.event("result", is_main_result=False, **figure_formats(plt.figure(num)))
        plt.close("all")

    def error(self, e):
        """The cell's exception, its traceback without the kernel's frames."""
        tb = traceback.TracebackException(type(e), e, e.__traceback__)
        tb.stack = traceback.StackSummary.from_list(
            [f for f in tb.stack if os.path.dirname(os.path.abspath(f.filename)) != HERE])
        self.ch.event("error", name=type(e).__name__, value=str(e), traceback="".join(tb.format()))

    def parse(self, code, name):
        """The cell as Python, IPython's `!` and `%` lines made calls
        (hutch_ipy) when it is not Python as written."""
        code = self.ipy.dedent(code)
        try:
            return ast.parse(code, name, "exec")
        except SyntaxError as e:
            try:
                return ast.parse(self.ipy.rewrite(code), name, "exec")
            except SyntaxError:
                raise e from None

    def run(self, code):
        self.count += 1
        name = f"<cell-{self.count}>"
        linecache.cache[name] = (len(code), None, code.splitlines(True), name)
        try:
            tree = self.parse(code, name)
        except SyntaxError as e:  # the parser's own frames are not the cell's
            self.error(e.with_traceback(None))
            return
        last = None
        if tree.body and isinstance(tree.body[-1], ast.Expr):
            last = ast.Expression(tree.body.pop().value)
        flags = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
        value = None
        self.running = True
        try:
            for part, mode in ((tree, "exec"), (last, "eval")):
                if part is None:
                    continue
                compiled = compile(part, name, mode, flags=flags)
                result = eval(compiled, self.ns)
                if compiled.co_flags & 0x80:  # CO_COROUTINE: the cell awaits
                    import asyncio
                    result = asyncio.get_event_loop_policy().get_event_loop().run_until_complete(
                        result)
                if mode == "eval":
                    value = result
        except BaseException as e:  # the cell's own exception, KeyboardInterrupt and SystemExit too
            self.running = False
            self.error(e)
            return
        finally:
            self.running = False
            for c in self.captures:
                c.sync()
        self.show_figures()
        if value is not None:
            self.ns["_"] = value
            self.ch.event("result", is_main_result=True, **formats(value))


    def fork(self, token):
        """Fork into the context whose exec waits at token (receive()):
        the copy keeps every variable and goes on with that context's
        stdin and stdout, in a session of its own. Returns the copy's new
        request stream in the copy, None here."""
        # No reader thread may be halfway through a line in the copy, which
        # has none of the threads, and a fork of a fork leaves the copy to
        # the sandbox's PID 1 to reap.
        with self.ch.lock:
            pid = os.fork()
            if pid == 0 and os.fork():
                os._exit(0)
        if pid:
            os.waitpid(pid, 0)
            return None
        try:
            os.setsid()
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.connect("\0hutch-fork-" + token)
            _, fds, _, _ = socket.recv_fds(sock, 1, 4)
            sock.close()
            requests_fd, out_fd, err_fd, life = fds
            os.dup2(out_fd, self.ch.fd)
            for fd in (out_fd, err_fd):
                os.close(fd)
            for c in self.captures:  # the parent's pipes: this copy's own instead
                os.close(c.r)
                os.close(c.w)
            self.captures[:] = [Capture(self.ch, 1, "stdout"), Capture(self.ch, 2, "stderr")]
            # The new context's exec holds the other end: when it ends, so does this copy.
            threading.Thread(target=lambda: (os.read(life, 1), os._exit(0)), daemon=True).start()
            return os.fdopen(requests_fd, "r", encoding="utf-8", errors="replace")
        except Exception as e:
            print(f"kernel.py: fork: {e}", file=sys.__stderr__)
            os._exit(1)


def receive(token):
    """The exec of a forked context: it hands its stdin and stdout (the
    server's protocol) and stderr to the kernel that forks into it, then
    stands in for that copy, which is not its child: interrupts go on to
    it, and each ends when the other does."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind("\0hutch-fork-" + token)  # the sandbox's own network namespace
    listener.listen(1)
    listener.settimeout(30)
    os.write(1, b'{"type": "fork_listening"}\n')
    try:
        conn, _ = listener.accept()
    except socket.timeout:
        print("kernel.py: no kernel forked into this context within 30 s", file=sys.stderr)
        return 1
    pid, uid, _ = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))
    if uid != os.getuid():
        print("kernel.py: a process of another user connected", file=sys.stderr)
        return 1
    life_r, life_w = os.pipe()
    socket.send_fds(conn, [b"k"], [0, 1, 2, life_r])
    for fd in (life_r, conn.detach(), listener.detach()):
        os.close(fd)
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    pidfd = os.pidfd_open(pid)

    def relay(signum, frame):
        try:
            os.killpg(pid, signum)  # the copy leads its own process group
        except OSError:
            pass
        if signum != signal.SIGINT:
            os._exit(0)
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, relay)
    select.select([pidfd], [], [])
    return 0


# ---- JavaScript and bash, in a child process ---------------------------

class Child:
    """A language run by a child process, told each cell on its stdin (bash)
    or fd 3 (node), answering when it is done on fd 3 (bash) or fd 4."""

    def __init__(self, ch, captures, language):
        self.ch, self.captures, self.language = ch, captures, language
        self.count = 0
        cmd_r, cmd_w = os.pipe()
        ev_r, ev_w = os.pipe()
        if language == "javascript":
            argv, fds = ["node", os.path.join(HERE, "js_kernel.mjs")], {3: cmd_r, 4: ev_w}
        else:
            argv, fds = ["bash", "--noprofile", "--norc"], {0: cmd_r, 3: ev_w}
            self.dir = tempfile.mkdtemp(prefix=PRIVATE)
        def setup():
            if language == "javascript":  # interrupts reach node from us only: on_sigint
                os.setpgid(0, 0)
            for fd, src in fds.items():
                os.dup2(src, fd)
            if 0 not in fds:
                devnull = os.open(os.devnull, os.O_RDONLY)
                os.dup2(devnull, 0)
        self.proc = subprocess.Popen(argv, preexec_fn=setup, close_fds=False)
        self.private = {self.dir} if language == "bash" else set()
        for fd in (cmd_r, ev_w):
            os.close(fd)
        self.cmd = os.fdopen(cmd_w, "w", buffering=1, encoding="utf-8")
        self.events = os.fdopen(ev_r, "r", encoding="utf-8", errors="replace")
        if language == "bash":
            # A SIGINT returns from the cell (and only it) with status 130.
            self.cmd.write('trap "return 130 2>/dev/null" INT\n')
        self.running = False
        signal.signal(signal.SIGINT, self.on_sigint)

    def on_sigint(self, signum, frame):
        """bash is in our process group and has had the SIGINT already.
        node is not: a SIGINT kills it unless it is inside a synchronous
        evaluation, where node's watchdog turns it into the cell's error.
        So node first hears an interrupt line, which ends a cell waiting
        on a promise; a cell still running 100 ms later is stuck in
        synchronous code, and gets the signal."""
        if self.language != "javascript" or not self.running:
            return
        try:
            self.cmd.write('{"interrupt":true}\n')
            self.cmd.flush()
        except (OSError, ValueError):
            return
        count = self.count
        def escalate():
            if self.running and self.count == count:
                try:
                    os.kill(self.proc.pid, signal.SIGINT)
                except OSError:
                    pass
        threading.Timer(0.1, escalate).start()

    def run(self, code, env):
        self.count += 1
        if self.language == "javascript":
            self.cmd.write(json.dumps({"code": code, "env": env}) + "\n")
        else:
            path = os.path.join(self.dir, "cell")
            with open(path, "w", encoding="utf-8") as f:
                f.write(code + "\n")
            # The cell's env holds for the cell only: each name's old
            # declaration (if any) comes back after it.
            names = [k for k in env if k.isidentifier() and k.isascii()]
            pre = "".join(f"__hutch_saved_{k}=$(declare -p {k} 2>/dev/null); "
                          f"export {k}={shlex.quote(env[k])}\n" for k in names)
            post = "".join(f"unset {k}; eval \"$__hutch_saved_{k}\"; unset __hutch_saved_{k}\n"
                           for k in names)
            self.cmd.write(f"{pre}. {path} </dev/null; __hutch_status=$?\n{post}"
                           f"printf '%s\\n' \"$__hutch_status\" >&3\n")
        self.running = True
        try:
            self.cmd.flush()
        except OSError:
            pass
        line = self.events.readline()
        self.running = False
        for c in self.captures:
            c.sync()
        if not line:
            self.ch.event("error", name="KernelDied",
                          value=f"the {self.language} process ended (status {self.proc.wait()})",
                          traceback="")
            sys.exit(1)
        if self.language == "bash":
            status = int(line.strip() or 0)
            if status == 130:
                self.ch.event("error", name="KeyboardInterrupt", value="interrupted",
                              traceback="")
            elif status:
                self.ch.event("error", name="ExitCode", value=f"exit status {status}",
                              traceback=f"the cell's last command exited with status {status}")
            return
        for ev in json.loads(line):
            if ev.get("type") == "result" and isinstance(ev.get("text"), str):
                ev["text"] = plain(ev["text"])
            self.ch.event(ev.pop("type"), **ev)


def main():
    language = sys.argv[1] if len(sys.argv) > 1 else "python"
    if language == "fork" and len(sys.argv) == 3:
        return receive(sys.argv[2])
    if language not in ("python", "javascript", "bash"):
        print(f"kernel.py: unknown language {language!r}", file=sys.stderr)
        return 2
    # The protocol keeps the original stdin and stdout; the code gets
    # /dev/null for input and pipes for output.
    requests = os.fdopen(os.dup(0), "r", encoding="utf-8", errors="replace")
    ch = Channel(os.dup(1))
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    captures = [Capture(ch, 1, "stdout"), Capture(ch, 2, "stderr")]
    # Line by line, as a terminal would; the rest at the cell's end.
    sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), encoding="utf-8",
                                  errors="backslashreplace", line_buffering=True)
    sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), encoding="utf-8",
                                  errors="backslashreplace", line_buffering=True)
    sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False))
    runner = Python(ch, captures) if language == "python" else Child(ch, captures, language)
    reported = {}
    ch.send({"type": "ready", "language": language, "pid": os.getpid()})
    while line := requests.readline():
        try:
            req = json.loads(line)
        except ValueError:
            continue
        ch.cell = req.get("id")
        if "fork" in req:
            copy = runner.fork(str(req["fork"])) if language == "python" else None
            if copy:  # this is the copy, of another context now
                requests.close()
                requests, ch.cell = copy, None
                ch.send({"type": "ready", "language": language, "pid": os.getpid()})
                continue
            ch.event("end_of_execution")
            ch.cell = None
            continue
        env = {str(k): str(v) for k, v in (req.get("env") or {}).items()}
        t0 = since()
        if language == "python":
            saved = {k: os.environ.get(k) for k in env}
            os.environ.update(env)
            try:
                runner.run(str(req.get("code", "")))
            finally:
                for k, v in saved.items():
                    if v is None:
                        os.environ.pop(k, None)
                    else:
                        os.environ[k] = v
        else:
            runner.run(str(req.get("code", "")), env)
        files = artifacts(t0, getattr(runner, "private", ()), reported)
        if files:
            ch.event("artifacts", files=files)
        ch.event("number_of_executions", execution_count=runner.count)
        ch.event("end_of_execution")
        ch.cell = None
    return 0


if __name__ == "__main__":
    sys.exit(main())
