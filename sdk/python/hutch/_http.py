"""HTTP to hutch serve with the standard library: JSON requests and
NDJSON streams, errors turned into the SDK's exceptions."""
import http.client
import json
import socket
import urllib.parse

from .errors import (AuthError, HutchError, InvalidArgument, NotFound, PermissionDenied,
                     RateLimited, Timeout)


def _raise_for(status, body, headers):
    try:
        err = json.loads(body)["error"]
        code, message = err["code"], err["message"]
    except (ValueError, KeyError, TypeError):
        code, message = None, body.decode(errors="replace")[:500] or f"HTTP {status}"
    if status == 403 and code == "permission_denied":
        raise PermissionDenied(message, code, status)
    if status in (401, 403):
        raise AuthError(message, code, status)
    if status == 404:
        raise NotFound(message, code, status)
    if status in (429, 503):
        retry = headers.get("Retry-After")
        raise RateLimited(message, code, status, float(retry) if retry else None)
    if status in (400, 405, 413, 422, 431):
        raise InvalidArgument(message, code, status)
    raise HutchError(message, code, status)


class Client:
    def __init__(self, url, key, timeout=60):
        u = urllib.parse.urlsplit(url)
        if u.scheme != "http" or not u.hostname:
            raise ValueError(f"hutch API URL must be http://HOST:PORT, not {url!r}")
        self.host, self.port, self.key, self.timeout = u.hostname, u.port or 80, key, timeout

    def _send(self, method, path, body, timeout, raw=None):
        """timeout: of each socket operation, in seconds; None waits forever.
        raw: bytes, or an iterable of bytes sent chunked, instead of JSON."""
        conn = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
        headers = {"Authorization": f"Bearer {self.key}"} if self.key else {}
        data, chunked = None, False
        if raw is not None:
            data = raw
            chunked = not isinstance(raw, (bytes, bytearray))
            headers["Content-Type"] = "application/octet-stream"
        elif body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        try:
            conn.request(method, path, body=data, headers=headers, encode_chunked=chunked)
            return conn, conn.getresponse()
        except socket.timeout as e:
            conn.close()
            raise Timeout(f"no answer from hutch at {self.host}:{self.port}") from e

    def call(self, method, path, body=None, timeout=None, raw=None):
        """The decoded JSON answer (None for 204)."""
        conn, r = self._send(method, path, body, timeout or self.timeout, raw)
        try:
            data = r.read()
            if r.status >= 400:
                _raise_for(r.status, data, dict(r.getheaders()))
            return json.loads(data) if data else None
        finally:
            conn.close()

    def download(self, path, timeout=None):
        """Yield the answer's body in pieces, as it comes."""
        conn, r = self._send("GET", path, None, timeout or self.timeout)
        try:
            if r.status >= 400:
                _raise_for(r.status, r.read(), dict(r.getheaders()))
            while piece := r.read(1 << 16):
                yield piece
        finally:
            conn.close()

    def stream(self, method, path, body=None, timeout=None):
        """Yield each NDJSON line of the answer, decoded; timeout as _send's."""
        conn, r = self._send(method, path, body, timeout)
        try:
            if r.status >= 400:
                _raise_for(r.status, r.read(), dict(r.getheaders()))
            for line in r:
                if line.strip():
                    yield json.loads(line)
        except socket.timeout as e:
            raise Timeout("the server stopped sending the stream") from e
        finally:
            conn.close()
