"""What bench/scale is made of: a hutch serve and its clients, the peers
started as many at once, the machine's counters, the table and the idle
ladder. bench/serve, bench/lifecycle and bench/network lend theirs."""
import http.client
import importlib.machinery
import importlib.util
import itertools
import json
import multiprocessing
import os
import pathlib
import platform
import random
import resource
import select
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time

REPO = pathlib.Path(__file__).resolve().parents[1]


def bench_module(name):
    """Another bench of this directory as a module (they have no .py)."""
    path = str(REPO / "bench" / name)
    loader = importlib.machinery.SourceFileLoader(f"bench_{name}", path)
    spec = importlib.util.spec_from_loader(loader.name, loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


serve = bench_module("serve")
lifecycle = bench_module("lifecycle")
network = bench_module("network")
pct, spawn_wait, spawn_quiet, BWRAP = serve.pct, serve.spawn_wait, serve.spawn_quiet, serve.BWRAP
MiB = 1 << 20
# Answers that end a ladder rather than wait: the server says it is full.
FULL = {"quota_exceeded", "at_capacity"}


def die(msg, status=1):
    print(f"scale bench: {msg}", file=sys.stderr)
    sys.exit(status)


class Failed(Exception):
    pass


class Refused(Failed):
    def __init__(self, status, code, msg):
        super().__init__(f"{status} {code}: {msg}")
        self.status, self.code = status, code


# ---------------------------------------------------------------- server


class Server(serve.Server):
    """bench/serve's server (its call() for the main thread), with the
    limits a crowd needs; Client() for every other thread."""

    def __init__(self, build, state, *args, sandboxes=2000):
        n = str(sandboxes)
        super().__init__(build, state, "--max-sandboxes", n, "--tenant-sandboxes", n,
                         "--max-connections", str(max(1024, 2 * sandboxes)), *args)
        self.pid = self.proc.pid

    def client(self, deadline=None, retries=None):
        return Client(self.port, self.key, deadline, retries)

    def tree(self):
        return tree(self.pid)

    def cpu(self):
        """CPU seconds of the server and its descendants: each thread's run
        time (/proc/PID/task/TID/schedstat, in ns), and what each process
        reaped (cutime and cstime, in clock ticks: a sandbox ended inside a
        measure counts there, whole)."""
        ns, ticks = 0, 0
        for pid in self.tree():
            try:
                for task in os.listdir(f"/proc/{pid}/task"):
                    ns += int(open(f"/proc/{pid}/task/{task}/schedstat").read().split()[0])
                f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
                ticks += int(f[13]) + int(f[14])
            except (OSError, IndexError, ValueError):
                pass
        return ns / 1e9 + ticks / os.sysconf("SC_CLK_TCK")

    def hwm_kib(self):
        return int(next(l for l in open(f"/proc/{self.pid}/status")
                        if l.startswith("VmHWM:")).split()[1])

    def stop(self):
        try:
            self.proc.send_signal(signal.SIGINT)  # SIGINT: its sandboxes end with it
            self.proc.wait(timeout=600)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


def tree(root):
    """root's pid and its descendants', each thread's children read."""
    out, todo = [], [str(root)]
    while todo:
        pid = todo.pop()
        out.append(pid)
        try:
            for task in os.listdir(f"/proc/{pid}/task"):
                todo += open(f"/proc/{pid}/task/{task}/children").read().split()
        except OSError:  # gone in between
            pass
    return out


class Client:
    """One kept-alive connection, for one thread. A 429 or 503 with
    Retry-After is waited for and retried (counted in .refused), until the
    deadline or `retries` of them; a FULL answer is not retried when
    retries is set (a ladder stops there)."""

    def __init__(self, port, key, deadline=None, retries=None):
        self.port, self.key = port, key
        self.deadline, self.retries = deadline, retries
        self.conn, self.refused = None, 0
        self.headers = {"Authorization": f"Bearer {key}"}

    def connect(self):
        self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=300)
        self.conn.connect()
        self.conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def close(self):
        if self.conn:
            self.conn.close()
        self.conn = None

    def _send(self, method, path, body):
        for attempt in (0, 1):
            if self.conn is None:
                self.connect()
            try:
                if body is not None and not isinstance(body, (str, bytes)):
                    body = json.dumps(body)
                self.conn.request(method, path, body=body, headers=self.headers)
                return self.conn.getresponse()
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError):
                self.close()  # the server closed a kept-alive connection: once more
                if attempt:
                    raise

    def request(self, method, path, body=None):
        """The response, its body still unread when it succeeded."""
        tries = 0
        while True:
            r = self._send(method, path, body)
            if r.status < 300:
                return r
            data = r.read()
            try:
                err = json.loads(data)["error"]
                code, msg = err.get("code"), err.get("message")
            except (ValueError, KeyError, TypeError):
                code, msg = None, data[:200]
            wait = r.getheader("Retry-After")
            if r.getheader("Connection", "").lower() == "close":
                self.close()
            if r.status in (429, 503) and wait is not None:
                tries += 1
                self.refused += 1
                stop = (self.retries is not None and (code in FULL or tries > self.retries)) \
                    or (self.deadline and time.monotonic() + float(wait) > self.deadline)
                if not stop:
                    time.sleep(float(wait))
                    continue
            raise Refused(r.status, code, msg)

    def call(self, method, path, body=None):
        r = self.request(method, path, body)
        data = r.read()
        return json.loads(data) if data and r.getheader("Content-Type", "").startswith(
            "application/json") else data

    def create(self, body=None):
        return self.call("POST", "/v1/sandboxes", body or {})["id"]

    def delete(self, sid):
        self.call("DELETE", f"/v1/sandboxes/{sid}")

    def exec(self, sid, cmd=("true",)):
        """perf_counter at the exec's first line and at its end."""
        r = self.request("POST", f"/v1/sandboxes/{sid}/exec", {"cmd": list(cmd)})
        first = end = None
        for line in r:
            if first is None:
                first = time.perf_counter()
            if b'"exit"' in line:
                end = time.perf_counter()
                status = json.loads(line).get("status")
        r.read()
        if end is None or status != "ok":
            raise Failed(f"exec {list(cmd)} in {sid} did not end ok")
        return first, end


# ---------------------------------------------------------------- machine


def busy_seconds():
    """The machine's busy CPU so far, kernel threads included (as
    bench/startup --cpu-runs)."""
    with open("/proc/stat") as f:
        t = [int(x) for x in f.readline().split()[1:]]
    return (sum(t) - t[3] - t[4]) / os.sysconf("SC_CLK_TCK")


def meminfo():
    out = {}
    for line in open("/proc/meminfo"):
        k, v = line.split(":")
        out[k] = int(v.split()[0])  # KiB
    return out


def drop_caches():
    os.sync()
    pathlib.Path("/proc/sys/vm/drop_caches").write_text("3")
    time.sleep(0.3)


def first_line(argv):
    try:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=10)
        return (r.stdout or r.stderr).strip().splitlines()[0]
    except (OSError, IndexError, subprocess.TimeoutExpired):
        return "?"


def context(build, a):
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo")
                if l.startswith("model name")), "?")
    m = meminfo()
    v2 = pathlib.Path("/sys/fs/cgroup/cgroup.controllers").exists()
    return {"kernel": platform.release(), "cpus": os.cpu_count(), "cpu_model": cpu,
            "mem_total_mib": m["MemTotal"] >> 10, "mem_available_mib": m["MemAvailable"] >> 10,
            "loadavg": open("/proc/loadavg").read().split()[:3],
            "cgroup": "v2" if v2 else "v1",
            "pid_max": int(open("/proc/sys/kernel/pid_max").read()),
            "nofile": resource.getrlimit(resource.RLIMIT_NOFILE)[0],
            "commit": first_line(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"]),
            "hutch": first_line([str(build / "hutch"), "version"]),
            "bwrap": first_line(["bwrap", "--version"]),
            "runc": first_line(["runc", "--version"]) if shutil.which("runc") else None,
            "python": platform.python_version(), "options": vars(a)}


def med(xs):
    return statistics.median(xs) if xs else float("nan")


# ---------------------------------------------------------------- table


class Table:
    """figure | hutch | goal | yardstick | ratio | verdict, in the order
    added; verdict PASS/MISS when a goal decides, else info."""

    def __init__(self):
        self.rows = []

    def add(self, section, figure, value, goal="", yard="", ratio="", ok=None):
        v = "info" if ok is None else ("PASS" if ok else "MISS")
        self.rows.append({"section": section, "figure": figure, "hutch": value, "goal": goal,
                          "yardstick": yard, "ratio": ratio, "verdict": v})

    def note(self, section, text):
        self.rows.append({"section": section, "figure": text, "hutch": "", "goal": "",
                          "yardstick": "", "ratio": "", "verdict": "note"})

    def print(self):
        cols = ["figure", "hutch", "goal", "yardstick", "ratio", "verdict"]
        w = {c: max([len(c)] + [len(r[c]) for r in self.rows if r["verdict"] != "note"])
             for c in cols}
        line = " | ".join(c.ljust(w[c]) for c in cols)
        print("\n" + line)
        print("-" * len(line))
        section = None
        for r in self.rows:
            if r["section"] != section:
                section = r["section"]
                print(f"[{section}]")
            if r["verdict"] == "note":
                print(f"  {r['figure']}")
                continue
            print(" | ".join(r[c].ljust(w[c]) for c in cols))


def f_ms(x, d=1):
    return f"{x * 1000:.{d}f} ms"


def trio(xs, d=1):
    return "/".join(f"{pct(xs, p) * 1000:.{d}f}" for p in (50, 95, 99)) + " ms" if xs else "-"


# ---------------------------------------------------------------- bursts


def burst_worker(port, key, n, limit, go, q):
    """n clients in threads of this process, each one cycle once `go` is set."""
    clients = [Client(port, key) for _ in range(n)]
    for c in clients:
        c.connect()
    start = threading.Event()
    out = [None] * n

    def cycle(i):
        c = clients[i]
        start.wait()
        t0 = time.perf_counter()
        try:
            sid = c.create()
            t1 = time.perf_counter()
            first, end = c.exec(sid)
            c.delete(sid)
            out[i] = {"t0": t0, "create": t1 - t0, "first": first - t0, "output": end - t0,
                      "end": time.perf_counter(), "refused": c.refused}
        except Exception as e:  # reported by the parent
            out[i] = {"error": str(e), "refused": c.refused}
        c.close()

    threads = [threading.Thread(target=cycle, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    q.put(("ready", None))
    go.wait()
    for c in clients:
        c.deadline = time.monotonic() + limit
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    start.set()
    for t in threads:
        t.join()
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    q.put(("done", (out, r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime)))


def burst(srv, n, procs, limit=120):
    """n clients at once from `procs` processes, each retrying a 429/503 for
    up to `limit` seconds from the start; their samples."""
    ctx = multiprocessing.get_context("fork")
    go, q = ctx.Event(), ctx.Queue()
    procs = max(1, min(procs, n))
    share = [n // procs + (i < n % procs) for i in range(procs)]
    ps = [ctx.Process(target=burst_worker, args=(srv.port, srv.key, k, limit, go, q))
          for k in share]
    for p in ps:
        p.start()
    for _ in ps:
        if q.get(timeout=120)[0] != "ready":
            raise Failed("a burst client did not start")
    c0, b0, t0 = srv.cpu(), busy_seconds(), time.perf_counter()
    go.set()
    out, client_cpu = [], 0.0
    for _ in ps:
        _, (samples, cpu) = q.get(timeout=limit + 120)
        out += samples
        client_cpu += cpu
    wall = time.perf_counter() - t0
    busy, server_cpu = busy_seconds() - b0, srv.cpu() - c0
    for p in ps:
        p.join()
    errors = [s["error"] for s in out if "error" in s]
    ok = [s for s in out if "error" not in s]
    return {"clients": n, "procs": procs, "samples": ok, "errors": errors,
            "refused": sum(s["refused"] for s in out),
            "wall": (max(s["end"] for s in ok) - min(s["t0"] for s in ok)) if ok else wall,
            "client_cpu": client_cpu, "server_cpu": server_cpu, "machine_busy": busy}


def runc_peer(tmp):
    """`runc run` of /usr/bin/true, a bundle as close to bwrap's as runc goes:
    the host's /usr read-only in an empty root, its own pid, net, ipc, uts
    and mount namespaces and cgroup (runc spec's defaults). A function
    giving each run's argv (a container id each), or None without runc."""
    runc = shutil.which("runc")
    if not runc:
        return None
    b = tmp / "runc"
    root = b / "rootfs"
    for d in ("usr", "proc", "dev", "tmp", "etc"):
        (root / d).mkdir(parents=True)
    for name in ("bin", "lib", "lib64", "sbin"):
        (root / name).symlink_to(f"usr/{name}")
    subprocess.run([runc, "spec", "--bundle", str(b)], check=True)
    cfg = json.loads((b / "config.json").read_text())
    cfg["process"].update(terminal=False, args=["/usr/bin/true"])
    cfg["root"] = {"path": "rootfs", "readonly": True}
    cfg["mounts"].append({"destination": "/usr", "type": "bind", "source": "/usr",
                          "options": ["rbind", "ro"]})
    (b / "config.json").write_text(json.dumps(cfg))
    n = itertools.count()
    return lambda: [runc, "--root", str(tmp / "runc-state"), "run", "--bundle", str(b),
                    f"hutch-scale-{os.getpid()}-{next(n)}"]


def peers(env):
    """The yardsticks: name -> a function giving argv (made once a run)."""
    if "peers" in env:
        return env["peers"]
    build, tmp = env["build"], env["tmp"]
    bw = [shutil.which("bwrap"), *BWRAP, "/usr/bin/true"]
    run = [str(build / "hutch"), "run", "--", "/usr/bin/true"]
    out = {"bwrap": lambda: bw, "hutch run": lambda: run}
    runc = runc_peer(tmp)
    if runc:
        out["runc"] = runc
    env["peers"] = out
    return out


def peer_burst(make, n):
    """n peers started at once; each one's start -> exit, and the wall."""
    devnull = os.open(os.devnull, os.O_RDWR)
    fa = [(os.POSIX_SPAWN_DUP2, devnull, fd) for fd in (0, 1, 2)]
    running, times, failed = {}, [], 0
    t0 = time.perf_counter()
    for _ in range(n):
        t = time.perf_counter()
        argv = make()
        pid = os.posix_spawn(argv[0], argv, os.environ, file_actions=fa)
        running[os.pidfd_open(pid)] = (pid, t)
    while running:
        ready, _, _ = select.select(list(running), [], [], 120)
        if not ready:
            for fd, (pid, _) in running.items():
                os.kill(pid, signal.SIGKILL)
        for fd in ready:
            pid, t = running.pop(fd)
            _, st = os.waitpid(pid, 0)
            times.append(time.perf_counter() - t)
            failed += st != 0
            os.close(fd)
    os.close(devnull)
    if failed:
        raise Failed(f"{failed} of {n} {os.path.basename(argv[0])} runs failed")
    return {"samples": times, "wall": time.perf_counter() - t0}


def create_cpu(srv, n, log):
    """CPU one create costs: busy time of the machine over n serial creates,
    less what the machine did in a second before and after (others' work),
    never below the CPU of the server and its descendants."""
    def others():  # busy CPU per second of the machine while this bench waits
        b = busy_seconds()
        time.sleep(1)
        return busy_seconds() - b
    c = srv.client()
    c.delete(c.create())  # warm-up
    end = time.monotonic() + 10
    while len(srv.tree()) > 1 and time.monotonic() < end:
        time.sleep(0.05)  # no sandbox of before ends inside the measure
    before = others()
    b0, p0, t0 = busy_seconds(), srv.cpu(), time.perf_counter()
    ids = [c.create() for _ in range(n)]
    wall = time.perf_counter() - t0
    machine, process = busy_seconds() - b0, srv.cpu() - p0
    for sid in ids:
        c.delete(sid)
    c.close()
    background = (before + others()) / 2
    out = {"creates": n, "wall": wall, "machine_busy": machine, "server_cpu": process,
           "background_per_s": background,
           "machine_per_create": max(machine - background * wall, process) / n,
           "server_per_create": process / n}
    log(f"  one create's CPU: machine {out['machine_per_create'] * 1000:.2f} ms "
        f"(busy {machine:.2f} s over {n} creates in {wall:.2f} s, background {background:.2f}/s), "
        f"server and descendants {out['server_per_create'] * 1000:.2f} ms")
    return out


class Ladder:
    """Idle sandboxes of one server, made serially (timed) or from a few
    clients (untimed), until a step, a refusal, a guard or the deadline."""

    def __init__(self, a, srv, deadline):
        self.a, self.srv, self.deadline = a, srv, deadline
        self.body = {"memory_mb": 64, "timeout_s": 604800}
        self.c = srv.client(retries=3)
        self.ids, self.times = [], []  # times[i]: the i-th create, serial; None: in parallel
        self.recent = []  # latencies of the latest creates
        self.stop, self.short, self.refused = None, False, False
        self.lock = threading.Lock()
        self.fds0 = self.fds()
        self.fd_limit = int(next(l for l in open(f"/proc/{srv.pid}/limits")
                                 if l.startswith("Max open files")).split()[3])

    def fds(self):
        return len(os.listdir(f"/proc/{self.srv.pid}/fd"))

    def reserve(self):
        """Seconds to keep for 100 creates in a row, the execs, the deletes."""
        per = statistics.median(self.recent[-50:]) if self.recent else 0.05
        return 100 * per * 1.5 + len(self.ids) / 100 + 15

    def guard(self):
        """Stop before the host or the server runs out of what a sandbox holds:
        memory, process ids, the server's file descriptors."""
        m = meminfo()
        free_pids = int(open("/proc/sys/kernel/pid_max").read()) - len(os.listdir("/proc"))
        per_fd = (self.fds() - self.fds0) / max(1, len(self.ids))
        if m["MemAvailable"] < self.a.min_free_mib * 1024:
            self.stop = f"MemAvailable below {self.a.min_free_mib} MiB"
        elif free_pids < 4000:
            self.stop = "fewer than 4000 process ids left (pid_max)"
        elif self.fd_limit - self.fds() < 150 * per_fd + 100:
            self.stop = (f"the server's fd limit ({self.fd_limit}; it holds {per_fd:.1f} fds "
                         f"a sandbox)")

    def fail(self, e):
        with self.lock:
            if not self.stop:
                self.stop, self.refused = str(e), True

    def fill(self, target):
        """Creates up to target - 100 from a few clients, untimed."""
        pending = [0]

        def worker():
            cl = self.srv.client(retries=3)
            while True:
                with self.lock:
                    if self.stop or self.short or len(self.ids) + pending[0] >= target - 100:
                        break
                    if time.monotonic() > self.deadline - self.reserve():
                        self.short = True
                        break
                    pending[0] += 1
                t = time.perf_counter()
                try:
                    sid = cl.create(self.body)
                except Failed as e:
                    self.fail(e)
                    with self.lock:
                        pending[0] -= 1
                    break
                with self.lock:
                    self.recent.append(time.perf_counter() - t)
                    self.ids.append(sid)
                    self.times.append(None)
                    pending[0] -= 1
                    if len(self.ids) % 50 == 0:
                        self.guard()
            cl.close()

        ts = [threading.Thread(target=worker) for _ in range(self.a.fill_clients)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()

    def serial(self, target):
        while len(self.ids) < target and not self.stop and time.monotonic() < self.deadline:
            t = time.perf_counter()
            try:
                self.ids.append(self.c.create(self.body))
            except Failed as e:
                self.fail(e)
                break
            self.times.append(time.perf_counter() - t)
            self.recent.append(self.times[-1])
            if len(self.ids) % 50 == 0:
                self.guard()

    def drop(self, k):
        for sid in self.ids[-k:]:
            self.c.delete(sid)
        del self.ids[-k:], self.times[-k:]

    def climb(self, n):
        """Up to n, the last 100 one at a time; where it got."""
        if len(self.ids) < 100:
            self.serial(min(n, 100))
        if not self.stop and len(self.ids) < n - 100:
            self.fill(n)
        if self.short and not self.stop:
            self.serial(len(self.ids) + 100)  # the last 100, then no further
            self.stop = self.stop or "the section's budget ran out"
        elif not self.stop:
            self.serial(n)
        if self.stop and len(self.ids) >= 100 and (self.times[-1] is None or self.refused):
            # stopped while filling, or refused: the last 100 made again one
            # at a time, 50 below a refusal (an exec needs room too)
            self.drop(150 if self.refused else 100)
            reason, self.stop = self.stop, None
            self.serial(len(self.ids) + 100)
            self.stop = self.stop or reason
        return len(self.ids)

    def execs(self, k):
        rtt, errors = [], []
        for _ in range(k):
            sid = random.choice(self.ids)
            t = time.perf_counter()
            try:
                self.c.exec(sid)
                rtt.append(time.perf_counter() - t)
            except Failed as e:
                errors.append(str(e))
        return rtt, errors

    def delete_all(self):
        """Every sandbox deleted from a few clients; deletes per second."""
        t0 = time.perf_counter()
        k = self.a.fill_clients
        errors = []

        def deleter(part):
            cl = self.srv.client(retries=10)
            for sid in part:
                try:
                    cl.delete(sid)
                except Failed as e:
                    errors.append(str(e))
            cl.close()
        ts = [threading.Thread(target=deleter, args=(self.ids[i::k],)) for i in range(k)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        n = len(self.ids)
        self.ids.clear()
        if errors:
            raise Failed(f"{len(errors)} deletes failed, first: {errors[0]}")
        return n, n / (time.perf_counter() - t0)


def loops(k, seconds, one):
    """k threads each calling one() until the time is up; calls per second."""
    count = [0] * k
    errors = []
    end = time.monotonic() + seconds

    def run(i):
        try:
            while time.monotonic() < end:
                one(i)
                count[i] += 1
        except BaseException as e:  # bench/serve's spawn_quiet exits on a failure
            errors.append(str(e) or type(e).__name__)

    t0 = time.perf_counter()
    ts = [threading.Thread(target=run, args=(i,)) for i in range(k)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    if errors:
        raise Failed(f"churn: {errors[0]}")
    return sum(count) / (time.perf_counter() - t0)
