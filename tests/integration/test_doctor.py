"""hutch doctor, and how hutch run and hutch serve say why a host refuses
them a sandbox: each refusal this machine can produce (a chroot, a seccomp
filter refusing CLONE_NEWUSER, user.max_user_namespaces at 0) is made for
real, and the message must name its cause."""
import json
import os
import shutil
import subprocess
import sys

import pytest

from conftest import BUILD, require

HUTCH = str(BUILD / "hutch")
NEEDED = ["root", "userns", "cgroups", "seccomp", "overlayfs", "devpts"]
OPTIONAL = ["idmap", "kvm", "runsc"]

# Installs a filter that refuses unshare and clone with CLONE_NEWUSER
# (EPERM) and clone3 (ENOSYS, whose flags a filter cannot read), as
# container runtimes' default profiles do, then execs its arguments.
SECCOMP_REFUSE = r"""
import ctypes, os, sys
lib = ctypes.CDLL("libseccomp.so.2", use_errno=True)
class Cmp(ctypes.Structure):
    _fields_ = [("arg", ctypes.c_uint), ("op", ctypes.c_int),
                ("mask", ctypes.c_uint64), ("value", ctypes.c_uint64)]
lib.seccomp_init.restype = ctypes.c_void_p
lib.seccomp_init.argtypes = [ctypes.c_uint32]
lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
lib.seccomp_rule_add_array.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int,
                                       ctypes.c_uint, ctypes.POINTER(Cmp)]
lib.seccomp_load.argtypes = [ctypes.c_void_p]
ALLOW, ERRNO, MASKED_EQ, CLONE_NEWUSER = 0x7fff0000, 0x00050000, 7, 0x10000000
ctx = lib.seccomp_init(ALLOW)
for name in (b"unshare", b"clone"):
    newuser = Cmp(0, MASKED_EQ, CLONE_NEWUSER, CLONE_NEWUSER)
    assert lib.seccomp_rule_add_array(ctx, ERRNO | 1, lib.seccomp_syscall_resolve_name(name),
                                      1, ctypes.byref(newuser)) == 0
assert lib.seccomp_rule_add_array(ctx, ERRNO | 38, lib.seccomp_syscall_resolve_name(b"clone3"),
                                  0, None) == 0
assert lib.seccomp_load(ctx) == 0
os.execv(sys.argv[1], sys.argv[1:])
"""


def sh(cmd, timeout=60, env=None):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)


def doctor_json(*args, env=None):
    r = sh([HUTCH, "doctor", "--json", *args], env=env)
    report = json.loads(r.stdout)
    return r, report, {c["name"]: c for c in report["checks"]}


def assert_names(text, cause):
    """Doctor and run both name the cause; run says it in one line."""
    assert any(cause in line and "cannot make a sandbox" in line and "hutch doctor" in line
               for line in text.splitlines()), text


def test_doctor_passes_here_and_prints_each_check():
    r = sh([HUTCH, "doctor"])
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    for name in NEEDED:
        assert any(l.split()[:2] == ["ok", name] for l in lines), r.stdout
    for name in OPTIONAL:
        assert any(l.split()[1:2] == [name] for l in lines if l[:1] != " "), r.stdout
    assert lines[-1] == "hutch can make sandboxes here"


def test_doctor_json_has_every_check_and_field():
    r, report, checks = doctor_json()
    assert r.returncode == 0 and report["ok"] is True
    assert list(checks) == NEEDED + OPTIONAL
    for c in report["checks"]:
        assert set(c) == {"name", "status", "optional", "detail", "remedy"}
        assert c["status"] in ("ok", "missing", "refused", "warn") and c["detail"]
        assert c["optional"] == (c["name"] in OPTIONAL)
        assert (c["remedy"] is None) == (c["status"] == "ok")
    assert "memory" in checks["cgroups"]["detail"] and "pids" in checks["cgroups"]["detail"]


def test_missing_optional_items_do_not_fail_doctor():
    env = dict(os.environ, PATH="/nonexistent")
    r, report, checks = doctor_json(env=env)
    assert checks["runsc"]["status"] == "missing" and "apt-get install runsc" in checks["runsc"]["remedy"]
    assert r.returncode == 0 and report["ok"] is True


def test_state_dir_that_does_not_exist_probes_its_parent(tmp_path):
    r, report, checks = doctor_json("--state-dir", str(tmp_path / "not" / "yet"))
    assert report["state_dir"] == str(tmp_path / "not" / "yet")
    assert str(tmp_path) in checks["idmap"]["detail"]
    assert not (tmp_path / "not").exists()


def test_bad_doctor_command_line_is_125():
    r = sh([HUTCH, "doctor", "--bogus"])
    assert r.returncode == 125 and "--bogus" in r.stderr


def in_rbind_chroot(tmp_path, command, timeout=60):
    """command in a chroot onto a bind of /, in a mount namespace of its
    own: the same files, only the root differs from the namespace's."""
    require(shutil.which("unshare") and shutil.which("chroot"), "no unshare(1) or chroot(1)")
    root = tmp_path / "root"
    root.mkdir(exist_ok=True)
    script = f'mount --rbind / "$1" && mount --make-rprivate "$1" && shift && exec chroot "$@"'
    return sh(["unshare", "-m", "sh", "-c", script, "sh", str(root), str(root), *command],
              timeout=timeout)


def test_chroot_is_named_by_doctor_and_run(tmp_path):
    r = in_rbind_chroot(tmp_path, [HUTCH, "doctor", "--json"])
    report = json.loads(r.stdout)
    userns = next(c for c in report["checks"] if c["name"] == "userns")
    assert r.returncode == 1 and report["ok"] is False
    assert userns["status"] == "refused" and "chroot" in userns["detail"], userns
    assert "pivot_root" in userns["remedy"]
    r = in_rbind_chroot(tmp_path, [HUTCH, "run", "--", "true"])
    assert r.returncode == 125
    assert_names(r.stderr, "this process is in a chroot")


def test_serve_in_a_chroot_refuses_to_start_and_says_why(tmp_path):
    state = tmp_path / "state"
    r = in_rbind_chroot(tmp_path, [HUTCH, "serve", "--listen", "127.0.0.1:0",
                                   "--state-dir", str(state)], timeout=30)
    assert r.returncode == 125, r.stderr
    assert r.stderr.startswith("hutch serve: cannot make a sandbox:"), r.stderr
    assert_names(r.stderr, "this process is in a chroot")
    assert not state.exists()


def test_bare_chroot_without_proc(tmp_path):
    """A chroot that is not a mount point and has no /proc: hutch is static,
    so it runs there alone."""
    require(shutil.which("chroot"), "no chroot(1)")
    ldd = sh(["ldd", HUTCH])
    require(ldd.returncode != 0, "this build of hutch is not static (a sanitized build?)")
    root = tmp_path / "bare"
    (root / "tmp").mkdir(parents=True)
    shutil.copy(HUTCH, root / "hutch")
    r = sh(["chroot", str(root), "/hutch", "doctor"])
    assert r.returncode == 1
    assert any(l.split()[:2] == ["refused", "userns"] and "in a chroot" in l
               for l in r.stdout.splitlines()), r.stdout
    assert "mount -t proc proc /proc" in r.stdout
    r = sh(["chroot", str(root), "/hutch", "run", "--", "true"])
    assert r.returncode == 125
    assert_names(r.stderr, "this process is in a chroot")


def test_seccomp_filter_refusing_newuser_is_named(tmp_path):
    require(os.path.exists("/usr/lib/x86_64-linux-gnu/libseccomp.so.2") or
            shutil.which("ldconfig") and "libseccomp.so.2" in sh(["ldconfig", "-p"]).stdout,
            "no libseccomp.so.2 to install the test's filter with")
    helper = tmp_path / "seccomp_refuse.py"
    helper.write_text(SECCOMP_REFUSE)
    r = sh([sys.executable, str(helper), HUTCH, "doctor", "--json"])
    report = json.loads(r.stdout)
    userns = next(c for c in report["checks"] if c["name"] == "userns")
    assert r.returncode == 1 and userns["status"] == "refused"
    assert "seccomp filter" in userns["detail"] and "Operation not permitted" in userns["detail"]
    r = sh([sys.executable, str(helper), HUTCH, "run", "--", "true"])
    assert r.returncode == 125
    assert_names(r.stderr, "a seccomp filter")


def test_max_user_namespaces_zero_is_named(tmp_path):
    """user.max_user_namespaces belongs to each user namespace, and its
    owner may set it: inside one made for the test, 0 refuses the next."""
    require(shutil.which("unshare"), "no unshare(1)")
    script = 'echo 0 > /proc/sys/user/max_user_namespaces && exec "$@"'
    probe = sh(["unshare", "-U", "-r", "sh", "-c", script, "sh", "true"])
    require(probe.returncode == 0, f"cannot set max_user_namespaces in a user namespace: {probe.stderr}")
    r = sh(["unshare", "-U", "-r", "sh", "-c", script, "sh", HUTCH, "doctor", "--json"])
    report = json.loads(r.stdout)
    userns = next(c for c in report["checks"] if c["name"] == "userns")
    assert r.returncode == 1 and userns["status"] == "refused"
    assert "user.max_user_namespaces is 0" in userns["detail"]
    r = sh(["unshare", "-U", "-r", "sh", "-c", script, "sh", HUTCH, "run", "--", "true"])
    assert r.returncode == 125
    assert_names(r.stderr, "user.max_user_namespaces is 0")


def test_run_on_a_good_host_says_nothing_of_the_host(run):
    r = run(["--", "true"])
    assert r.code == 0 and "cannot make a sandbox" not in r.err
