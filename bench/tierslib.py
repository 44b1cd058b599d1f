"""What bench/tiers is made of: the commands of each variant (a bare runsc
bundle of the host's /usr), the phases of a create read from the kernel's
sched tracepoints, idle sandboxes by `hutch run` and through hutch serve."""
import itertools
import json
import os
import platform
import random
import select
import subprocess
import time

import scalelib as sl

# The flags hutch gives runsc (src/lib/gvisor.c), so that a bare `runsc run`
# differs from the gvisor tier only by what hutch does around it.
RUNSC_FLAGS = ["--platform=ptrace", "--network=host", "--ignore-cgroups", "--file-access=shared"]


# The environment hutch gives a workload (LANG=C.UTF-8 makes coreutils and
# python3 read the locale's files, a dozen opens through runsc's gofer).
HUTCH_ENV = ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
             "HOME=/", "LANG=C.UTF-8", "TERM=dumb"]


def pair(xs):
    """p50/p95 in ms."""
    return "/".join(f"{sl.pct(xs, p) * 1000:.1f}" for p in (50, 95)) + " ms" if xs else "-"


def bundle(tmp, runsc, argv, n):
    """An OCI bundle running argv: `runsc spec`'s config, the host's /usr
    read-only in an empty writable root (as bench/scale's runc peer), the
    same root hutch's host template shows."""
    root = tmp / "rootfs"
    if not root.exists():
        for d in ("usr", "proc", "dev", "tmp", "etc", "sys"):
            (root / d).mkdir(parents=True)
        for name in ("bin", "lib", "lib64", "sbin"):
            (root / name).symlink_to(f"usr/{name}")
    b = tmp / f"bundle-{n}"
    b.mkdir()
    subprocess.run([runsc, "spec", "--bundle", str(b), "--", *argv], check=True)
    cfg = json.loads((b / "config.json").read_text())
    cfg["process"]["terminal"] = False
    cfg["process"]["env"] = HUTCH_ENV
    cfg["root"] = {"path": str(root), "readonly": False}
    cfg["mounts"].append({"destination": "/usr", "type": "bind", "source": "/usr",
                          "options": ["rbind", "ro"]})
    (b / "config.json").write_text(json.dumps(cfg))
    return b


def commands(build, runsc, tmp):
    """variant -> (workload argv -> the argv that runs it)."""
    hutch = str(build / "hutch")
    state = str(tmp / "runsc-state")
    bundles, ids = {}, itertools.count()
    os.environ["HUTCH_STATE_DIR"] = str(tmp / "run-state")  # hutch run's own

    def runsc_run(w):
        if tuple(w) not in bundles:
            bundles[tuple(w)] = bundle(tmp, runsc, w, len(bundles))
        return [runsc, f"--root={state}", *RUNSC_FLAGS, "run",
                f"--bundle={bundles[tuple(w)]}", f"hutch-tiers-{os.getpid()}-{next(ids)}"]

    # runsc do's network is a veth into the host's by default: none here
    # (the bench touches no network but loopback).
    return {"ns": lambda w: [hutch, "run", "--", *w],
            "gvisor": lambda w: [hutch, "run", "--isolation", "gvisor", "--", *w],
            "runsc run": runsc_run,
            "runsc do": lambda w: ["/usr/bin/env", "-i", *HUTCH_ENV, runsc, f"--root={state}",
                                   "--platform=ptrace", "--network=none", "do", *w]}


def leftovers(runsc, tmp):
    """Containers a killed run left in the bench's runsc state, deleted."""
    state = tmp / "runsc-state"
    if not state.exists():
        return
    r = subprocess.run([runsc, f"--root={state}", "list", "-q"], capture_output=True, text=True)
    for cid in r.stdout.split():
        subprocess.run([runsc, f"--root={state}", "delete", "-force", cid],
                       capture_output=True)


# ---------------------------------------------------------------- profile


def events(script):
    """perf script -F pid,time,event,trace lines -> (time, tgid, event, fields)."""
    out = []
    for line in script.splitlines():
        try:
            head, ev, trace = line.split(": ", 2)
            pid, t = head.split()
        except ValueError:
            continue
        f = dict(kv.split("=", 1) for kv in trace.split() if "=" in kv)
        out.append((float(t), int(pid), ev.rsplit(":", 1)[-1], f))
    return out


def phases(script, variant):
    """The phases of one run of `variant` (gvisor: hutch run; runsc run),
    from its processes' exec, fork and exit events, in seconds."""
    evs = events(script)
    name = "/hutch" if variant == "gvisor" else "/runsc"
    t0, root = next((t, p) for t, p, e, f in evs
                    if e == "sched_process_exec" and f["filename"].endswith(name))
    tree, execs, exits = {root}, [], {}
    for t, p, e, f in evs:
        if t < t0:
            continue
        if e == "sched_process_fork" and p in tree:
            tree.add(int(f["child_pid"]))
        elif e == "sched_process_exec" and p in tree:
            execs.append((t, p, f["filename"]))
        elif e == "sched_process_exit" and p in tree and f.get("group_dead") == "true":
            exits[p] = t
    out = {}
    if variant == "gvisor":
        # the runsc hutch runs: execveat of its fd (/dev/fd/N)
        t_runsc, runsc = next((t, p) for t, p, fn in execs if fn.startswith("/dev/fd/"))
        probe = [(t, p) for t, p, fn in execs if fn.endswith("/runsc") and t < t_runsc]
        if probe:
            out["hutch: runsc --version probe"] = exits[probe[0][1]] - probe[0][0]
        out["hutch: shell before runsc (less the probe)"] = \
            t_runsc - t0 - out.get("hutch: runsc --version probe", 0)
    else:
        t_runsc, runsc = t0, root
    selfs = [t for t, p, fn in execs if fn == "/proc/self/exe" and t > t_runsc]
    out["runsc: start to its first child's exec (Go, spec, mounts)"] = selfs[0] - t_runsc
    out["runsc: gofer and sandbox exec'd and re-exec'd"] = selfs[-1] - selfs[0]
    out["runsc: sentry boot, workload, shutdown"] = exits[runsc] - selfs[-1]
    if variant == "gvisor":
        out["hutch: after runsc exits (teardown)"] = exits[root] - exits[runsc]
    out["total"] = exits[root] - t0
    return out


# ---------------------------------------------------------------- idle


def pss_kib(pids):
    total = 0
    for p in pids:
        try:
            for line in open(f"/proc/{p}/smaps_rollup"):
                if line.startswith("Pss:"):
                    total += int(line.split()[1])
        except OSError:
            pass
    return total


def by_process(pids):
    """PSS in KiB summed per process name (runsc's are all `exe` once they
    re-exec: told apart by their first arguments)."""
    out = {}
    for p in pids:
        try:
            argv = open(f"/proc/{p}/cmdline").read().split("\0")
        except OSError:
            continue
        name = os.path.basename(argv[0]) or "ptrace stubs"  # the sentry's, no argv
        if "runsc" in name or name == "exe":
            verb = next((x for x in argv[1:] if x in ("run", "gofer", "boot")), "")
            name = f"runsc {verb}".strip()
        out[name] = out.get(name, 0) + pss_kib([p])
    return out


def mem_delta(m0, m1, n):
    return {"mem_avail_kib": (m0["MemAvailable"] - m1["MemAvailable"]) / n,
            "slab_kib": (m1["SUnreclaim"] - m0["SUnreclaim"]) / n,
            "pagetables_kib": (m1["PageTables"] - m0["PageTables"]) / n,
            "shmem_kib": (m1["Shmem"] - m0["Shmem"]) / n}


def idle_hutch_run(build, tier, n):
    """n sandboxes of the tier, each `hutch run` of a shell that says `up`
    and sleeps; memory per sandbox once all are up; then each ended by
    SIGTERM (hutch run forwards it to the workload) and waited for."""
    argv = [str(build / "hutch"), "run", "--memory", "256", "--timeout", "900"]
    if tier != "ns":
        argv += ["--isolation", tier]
    argv += ["--", "/usr/bin/sh", "-c", "echo up; exec sleep 900"]
    sl.drop_caches()
    m0 = sl.meminfo()
    procs = []
    try:
        for _ in range(n):
            procs.append(subprocess.Popen(argv, stdin=subprocess.DEVNULL,
                                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL))
        for p in procs:
            if not select.select([p.stdout], [], [], 60)[0] or p.stdout.readline() != b"up\n":
                raise sl.Failed(f"an idle {tier} sandbox did not start")
        time.sleep(1)
        sl.drop_caches()
        m1 = sl.meminfo()
        pids = [sl.tree(p.pid) for p in procs]
        out = mem_delta(m0, m1, n)
        out["pss_kib"] = pss_kib(x for t in pids for x in t) / n
        out["procs"] = sum(len(t) for t in pids) / n
        out["n"] = n
        out["by_process_kib"] = by_process(x for t in pids for x in t)
        return out
    finally:
        end(procs)


def end(procs):
    """SIGTERM to each `hutch run` (it forwards it to the workload), waited for."""
    for p in procs:
        if p.poll() is None:
            p.send_signal(15)
    for p in procs:
        try:
            p.wait(timeout=60)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


# ---------------------------------------------------------------- server


# The yardstick of an exec's round trip: a bare posix_spawn + wait of
# `true` inside the same sandbox (in the gvisor tier, what the sentry takes
# to make a process and exec a program, agent or not), median in seconds.
SPAWN = """import os, statistics, time
xs = []
for _ in range(60):
    t = time.perf_counter()
    os.waitpid(os.posix_spawn("/usr/bin/true", ["true"], os.environ), 0)
    xs.append(time.perf_counter() - t)
print(statistics.median(xs[10:]))"""


def exec_out(c, sid, cmd):
    """stdout of an exec through the API."""
    r = c.request("POST", f"/v1/sandboxes/{sid}/exec", {"cmd": cmd})
    out = ""
    for line in r:
        m = json.loads(line)
        if m.get("type") == "stdout":
            out += m.get("data", "")
    return out


def tier_of(c, sid):
    """The tier a sandbox really runs in: gVisor's kernel says 4.4.0, the
    host's says what platform.release() does."""
    rel = exec_out(c, sid, ["uname", "-r"]).strip()
    return "ns" if rel == platform.release() else ("gvisor" if rel else "?")


def server_tiers(srv):
    """The tiers this server makes when a create names them."""
    c = srv.client()
    out = {"ns": True}
    try:
        sid = c.create({"isolation": "gvisor"})
    except sl.Refused as e:
        out["why"] = f"{e}"
        return out
    got = tier_of(c, sid)
    c.delete(sid)
    c.close()
    if got == "gvisor":
        out["gvisor"] = True
    else:
        out["why"] = f"a create with isolation gvisor ran in {got}"
    return out


def server_tier(srv, tier, a, named):
    """a.idle idle sandboxes of the tier (named: the create says which):
    memory per sandbox, then the exec round trip of `true` into a random
    one; all deleted."""
    c = srv.client()
    sl.drop_caches()
    m0, rss0, pss0 = sl.meminfo(), srv.rss_kib(), pss_kib(srv.tree())
    body = {"memory_mb": 256, **({"isolation": tier} if named else {})}
    ids = []
    try:
        for _ in range(a.idle):
            ids.append(c.create(body))
        if tier_of(c, ids[0]) != tier:
            raise sl.Failed(f"a create with isolation {tier} ran in another tier")
        time.sleep(1)
        sl.drop_caches()
        out = mem_delta(m0, sl.meminfo(), a.idle)
        out["server_rss_kib"] = srv.rss_kib() - rss0
        out["pss_kib"] = (pss_kib(srv.tree()) - pss0) / a.idle
        for _ in range(5):
            c.exec(random.choice(ids))  # warm-up
        rtt = []
        for _ in range(a.rtt_rounds):
            t = time.perf_counter()
            c.exec(random.choice(ids))
            rtt.append(time.perf_counter() - t)
        out["rtt"] = rtt
        out["spawn"] = float(exec_out(c, random.choice(ids), ["/usr/bin/python3", "-c", SPAWN]))
        return out
    finally:
        for sid in ids:
            c.delete(sid)
        c.close()


def pool_acquire(build, state, a):
    """Create from a warm pool + exec `true`, per tier: a server defaulting
    to each tier with a pool of the host template, the creates interleaved."""
    helptext = subprocess.run([str(build / "hutch-serve"), "--help"], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True).stdout
    if "--isolation" not in helptext:
        return {"why": "this hutch-serve has no --isolation (a default tier for its pools)"}
    srvs = {t: sl.Server(build, state / t, "--isolation", t, "--pool", f"host={a.pool}",
                         sandboxes=a.pool * 4) for t in ("ns", "gvisor")}
    out = {k: [] for t in srvs for k in (t, f"{t} create")}
    try:
        clients = {t: s.client() for t, s in srvs.items()}
        for t, c in clients.items():
            sid = c.create()
            if tier_of(c, sid) != t:
                return {"why": f"a server with --isolation {t} made a sandbox of another tier"}
            c.delete(sid)
        for _ in range(a.rtt_rounds // 4):
            for t, s in srvs.items():  # refilled, untimed
                end = time.monotonic() + 30
                while s.metric('hutch_pool_ready{pool="host"}') < a.pool and \
                        time.monotonic() < end:
                    time.sleep(0.005)
            order = list(srvs)
            random.shuffle(order)
            for t in order:
                c = clients[t]
                t0 = time.perf_counter()
                sid = c.create()
                t1 = time.perf_counter()
                c.exec(sid)
                out[t].append(time.perf_counter() - t0)
                out[f"{t} create"].append(t1 - t0)
                c.delete(sid)
        for t, s in srvs.items():
            taken = s.metric('hutch_pool_taken_total{pool="host"}')
            if taken < len(out[t]):
                return {"why": f"the {t} pool served {taken:.0f} of {len(out[t])} creates"}
        return out
    finally:
        for s in srvs.values():
            s.stop()
