"""What IPython adds to Python that code written for E2B's interpreter (an
IPython kernel) uses, for hutch's Python kernel (kernel.py):

- a cell indented as a whole runs as if it were not (IPython's leading
  indentation), with its line numbers unchanged;
- `!cmd` lines run cmd with /bin/sh (`x = !cmd`: its output's lines), with
  `{expr}` and `$name` taken from the cell's variables, `$$` a `$`;
- the line magics `%cd`, `%pwd`, `%env`, `%pip`, `%matplotlib` (a no-op:
  figures are always shown) and the cell magics `%%bash`, `%%sh` and
  `%%writefile`; any other is a UsageError, as in IPython.

The cell's lines are rewritten only when it is not Python as it stands: a
`!` or `%` line never is. Each rewritten line calls this module, which
kernel.py makes the builtin `__hutch_ipy__`."""
import os
import re
import shlex
import subprocess
import sys

SHELL = "/bin/sh"
ASSIGN = re.compile(r"^([ \t]*)([\w.]+(?:[ \t]*,[ \t]*[\w.]+)*)[ \t]*=[ \t]*([!%])(.*)$")
ESCAPE = re.compile(r"^([ \t]*)([!%])(.*)$")
EXPAND = re.compile(r"\$\$|\$([A-Za-z_][\w.]*)|\{([^{}]+)\}")


class UsageError(Exception):
    pass


def dedent(code):
    """IPython's leading indentation: the first non-blank line's indentation
    off every line that starts with it."""
    first = next((line for line in code.splitlines() if line.strip()), "")
    indent = first[:len(first) - len(first.lstrip())]
    if not indent:
        return code
    return "".join(line[len(indent):] if line.startswith(indent) else line
                   for line in code.splitlines(True))


def rewrite(code):
    """The cell with its `!` and `%` lines as calls; a `%%` cell as one."""
    lines = code.splitlines()
    first = next((i for i, line in enumerate(lines) if line.strip()), None)
    if first is not None and lines[first].startswith("%%"):
        name, _, args = lines[first][2:].partition(" ")
        body = "\n".join(lines[first + 1:]) + "\n"
        return "\n" * first + f"__hutch_ipy__.cell_magic({name!r}, {args!r}, {body!r})"
    out = []
    for line in lines:
        m = ASSIGN.match(line)
        if m and m.group(4).strip():
            indent, target, kind, rest = m.groups()
            call = "getoutput" if kind == "!" else "line_magic"
            out.append(f"{indent}{target} = {call_of(call, rest)}")
            continue
        m = ESCAPE.match(line)
        if m and m.group(3).strip() and not m.group(3).startswith("="):
            indent, kind, rest = m.groups()
            out.append(indent + call_of("system" if kind == "!" else "line_magic", rest))
            continue
        out.append(line)
    return "\n".join(out)


def call_of(fn, rest):
    if fn == "line_magic":
        name, _, args = rest.strip().partition(" ")
        return f"__hutch_ipy__.line_magic({name!r}, {args.strip()!r})"
    return f"__hutch_ipy__.{fn}({rest.strip()!r})"


def expand(cmd, frame):
    """IPython's variable expansion of a shell line, in the caller's names;
    what does not evaluate stays as written."""
    names = {**frame.f_globals, **frame.f_locals}

    def one(m):
        if m.group(0) == "$$":
            return "$"
        expr = m.group(1) or m.group(2)
        try:
            return str(eval(expr, names))  # the cell's own code, as IPython runs it
        except Exception:
            return m.group(0)
    return EXPAND.sub(one, cmd)


def system(cmd):
    frame = sys._getframe(1)
    status = subprocess.call(expand(cmd, frame), shell=True, executable=SHELL,
                             stdin=subprocess.DEVNULL)
    frame.f_globals["_exit_code"] = status


def getoutput(cmd):
    out = subprocess.run(expand(cmd, sys._getframe(1)), shell=True, executable=SHELL,
                         stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT)
    return out.stdout.decode("utf-8", "replace").splitlines()


def magic_cd(args):
    path = os.path.expanduser(args.strip().strip("'\"") or "~")
    os.chdir(path)
    print(os.getcwd())


def magic_env(args):
    args = args.strip()
    if not args:
        return dict(os.environ)
    m = re.match(r"^([^=\s]+)(?:\s*=\s*|\s+)(.*)$", args)
    if not m:
        return os.environ.get(args)
    os.environ[m.group(1)] = m.group(2)
    print(f"env: {m.group(1)}={m.group(2)}")
    return None


def magic_pip(args):
    subprocess.call([sys.executable, "-m", "pip", *shlex.split(args)], stdin=subprocess.DEVNULL)
    print("Note: you may need to restart the kernel to use updated packages.")


LINE_MAGICS = {
    "cd": magic_cd,
    "pwd": lambda args: os.getcwd(),
    "env": magic_env,
    "pip": magic_pip,
    "matplotlib": lambda args: None,
}


def line_magic(name, args):
    fn = LINE_MAGICS.get(name)
    if fn is None:
        raise UsageError(f"Line magic function `%{name}` not found.")
    return fn(args)


def cell_magic(name, args, body):
    if name in ("bash", "sh"):
        subprocess.call(["/bin/bash" if name == "bash" else SHELL, "-c", body],
                        stdin=subprocess.DEVNULL)
    elif name == "writefile":
        words = shlex.split(args)
        append = "-a" in words or "--append" in words
        path = next((w for w in words if not w.startswith("-")), None)
        if path is None:
            raise UsageError("%%writefile needs a file name")
        path = os.path.expanduser(path)
        print(("Appending to " if append else "Overwriting " if os.path.exists(path)
               else "Writing ") + path)
        with open(path, "a" if append else "w", encoding="utf-8") as f:
            f.write(body)
    else:
        raise UsageError(f"Cell magic `%%{name}` not found.")
