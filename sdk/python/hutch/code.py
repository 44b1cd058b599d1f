"""The code interpreter: run_code() and code contexts (E2B's shapes)."""

FORMATS = ("text", "html", "markdown", "svg", "png", "jpeg", "pdf", "latex", "json",
           "javascript")


class Result:
    """One result of a cell: a trailing expression's value (is_main_result),
    or something shown with display() or a chart. Each format is an
    attribute, None when absent; png, jpeg and pdf are base64 text."""

    def __init__(self, line):
        self.is_main_result = bool(line.get("is_main_result"))
        for f in FORMATS:
            setattr(self, f, line.get(f))

    def formats(self):
        return [f for f in FORMATS if getattr(self, f) is not None]

    def __repr__(self):
        return f"Result({self.text!r}, formats={self.formats()})"


class ExecutionError:
    """The exception a cell raised: its type's name, message and traceback."""

    def __init__(self, name, value, traceback):
        self.name, self.value, self.traceback = name, value, traceback

    def __repr__(self):
        return f"ExecutionError({self.name}: {self.value})"


class Artifact:
    """A file a cell or a command made or changed (under its cwd, the home
    directory or /tmp): its path, size in bytes and MIME type (guessed from
    its name). read() downloads it as it is now."""

    def __init__(self, sbx, info):
        self._sbx = sbx
        self.path, self.size, self.mime_type = info["path"], info["size"], info["mime_type"]

    def read(self, *, format="bytes"):
        return self._sbx.files.read(self.path, format=format)

    def __repr__(self):
        return f"Artifact({self.path!r}, size={self.size}, mime_type={self.mime_type!r})"


class Logs:
    def __init__(self):
        self.stdout, self.stderr = [], []

    def __repr__(self):
        return f"Logs(stdout={self.stdout!r}, stderr={self.stderr!r})"


class Execution:
    """What a cell gave: results, logs, an error (or None), its number, and
    the files it made or changed (artifacts)."""

    def __init__(self):
        self.results, self.logs, self.error, self.execution_count = [], Logs(), None, None
        self.artifacts = []

    @property
    def text(self):
        """The main result's text, None without one."""
        return next((r.text for r in self.results if r.is_main_result), None)

    def __repr__(self):
        return (f"Execution(results={self.results!r}, logs={self.logs!r}, "
                f"error={self.error!r})")


class Context:
    """A code context: a kernel of its own, its state kept between cells."""

    def __init__(self, info):
        self.id, self.language, self.cwd = info["id"], info["language"], info.get("cwd")

    def __repr__(self):
        return f"Context(id={self.id!r}, language={self.language!r})"


def run(sbx, code, language, context, on_stdout, on_stderr, on_result, on_error, envs,
        timeout):
    body = {"code": code}
    if context is not None:
        body["context_id"] = context.id if isinstance(context, Context) else context
    elif language:
        body["language"] = language
    if envs:
        body["env"] = dict(envs)
    if timeout:
        body["timeout_s"] = timeout
    ex = Execution()
    wait = timeout + 30 if timeout else None
    for line in sbx._client.stream("POST", f"/v1/sandboxes/{sbx.id}/code", body, wait):
        kind = line.get("type")
        if kind in ("stdout", "stderr"):
            getattr(ex.logs, kind).append(line["text"])
            cb = on_stdout if kind == "stdout" else on_stderr
            if cb:
                cb(line["text"])
        elif kind == "result":
            r = Result(line)
            ex.results.append(r)
            if on_result:
                on_result(r)
        elif kind == "error":
            ex.error = ExecutionError(line.get("name"), line.get("value"), line.get("traceback"))
            if on_error:
                on_error(ex.error)
        elif kind == "artifacts":
            ex.artifacts += [Artifact(sbx, f) for f in line.get("files", [])]
        elif kind == "number_of_executions":
            ex.execution_count = line.get("execution_count")
    return ex
