"""sbx.files: a sandbox's files, read and written as its user would."""
import urllib.parse

from .errors import NotFound


def _iter_file(f, size=1 << 16):
    while piece := f.read(size):
        yield piece.encode() if isinstance(piece, str) else piece


class Files:
    def __init__(self, sandbox):
        self._sbx = sandbox

    def _url(self, suffix, path, user=None, **query):
        q = {"path": path, **{k: v for k, v in query.items() if v is not None}}
        if user:
            q["user"] = user
        return f"/v1/sandboxes/{self._sbx.id}/files{suffix}?{urllib.parse.urlencode(q)}"

    def write(self, path, data, *, user=None):
        """Write data (str, bytes, or a file object, streamed) to path; parent
        directories are made. Returns {"path", "size"}."""
        if isinstance(data, str):
            data = data.encode()
        elif not isinstance(data, (bytes, bytearray)):
            data = _iter_file(data)
        return self._sbx._client.call("PUT", self._url("", path, user), raw=data, timeout=None)

    def read(self, path, *, format="text", user=None):
        """The content: str (format="text"), bytes ("bytes"), or an iterator
        of bytes pieces ("stream") for large files."""
        pieces = self._sbx._client.download(self._url("", path, user))
        if format == "stream":
            return pieces
        data = b"".join(pieces)
        return data if format == "bytes" else data.decode()

    def list(self, path, *, depth=1, user=None):
        """Entries (dicts: name, path, type, size, mode, uid, gid, mtime)."""
        return self._sbx._client.call("GET", self._url("/list", path, user, depth=depth))["entries"]

    def get_info(self, path, *, user=None):
        return self._sbx._client.call("GET", self._url("/stat", path, user))

    def exists(self, path, *, user=None):
        try:
            self.get_info(path, user=user)
            return True
        except NotFound:
            return False

    def remove(self, path, *, recursive=False, user=None):
        self._sbx._client.call("DELETE", self._url("", path, user,
                                                   recursive="true" if recursive else None))

    def make_dir(self, path, *, parents=True, user=None):
        """True when it was made, False when it was there already."""
        body = {"path": path, "parents": parents, **({"user": user} if user else {})}
        return self._sbx._client.call("POST", f"/v1/sandboxes/{self._sbx.id}/files/mkdir",
                                      body)["created"]

    def watch(self, path, *, recursive=False, user=None):
        """An iterator of the changes under the directory path, as dicts:
        {"type": "create", "write", "remove", "rename" (the old name) or
        "overflow", "path", "dir"}. The watch is in place when this returns;
        it lasts until the iterator is closed (or the sandbox ends)."""
        lines = self._sbx._client.stream("GET", self._url(
            "/watch", path, user, recursive="true" if recursive else None), None, None)
        first = next(lines)  # sends the request; the server answers once it watches
        if first.get("type") != "ready":
            lines.close()
            raise ValueError(f"unexpected first watch event {first!r}")
        return lines

    def rename(self, path, to, *, user=None):
        body = {"path": path, "to": to, **({"user": user} if user else {})}
        self._sbx._client.call("POST", f"/v1/sandboxes/{self._sbx.id}/files/move", body)
