"""Images and registries for test_template_pull: an OCI image layout built
by hand (a static busybox and a file), Debian's docker-registry started on
127.0.0.1, and a fake registry (http.server) that can demand a bearer
token or misbehave. Everything listens on 127.0.0.1 only."""
import base64
import gzip
import hashlib
import io
import json
import pathlib
import socket
import subprocess
import tarfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

OCI_INDEX = "application/vnd.oci.image.index.v1+json"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_LAYER_GZIP = "application/vnd.oci.image.layer.v1.tar+gzip"
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"


def sha256(data):
    return "sha256:" + hashlib.sha256(data).hexdigest()


def tar_of(entries):
    """An uncompressed tar of entries: (path, bytes) files, (path, "->target") symlinks."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as t:
        for path, what in entries:
            info = tarfile.TarInfo(path)
            info.mtime = 1700000000
            if isinstance(what, str):
                info.type, info.linkname = tarfile.SYMTYPE, what[2:]
                t.addfile(info)
            else:
                info.mode = 0o755
                info.size = len(what)
                t.addfile(info, io.BytesIO(what))
    return buf.getvalue()


class Image:
    """An image's blobs: config, gzip layers, manifest; digest -> bytes."""

    def __init__(self, layers, env, cmd, arch="amd64"):
        self.blobs = {}
        self.diff_ids = [sha256(t) for t in layers]
        descs = []
        for t in layers:
            gz = gzip.compress(t, mtime=0)
            self.blobs[sha256(gz)] = gz
            descs.append({"mediaType": OCI_LAYER_GZIP, "digest": sha256(gz), "size": len(gz)})
        config = json.dumps({
            "architecture": arch, "os": "linux",
            "config": {"Env": env, "Cmd": cmd, "WorkingDir": "/"},
            "rootfs": {"type": "layers", "diff_ids": self.diff_ids}}).encode()
        self.blobs[sha256(config)] = config
        self.manifest = json.dumps({
            "schemaVersion": 2, "mediaType": OCI_MANIFEST,
            "config": {"mediaType": OCI_CONFIG, "digest": sha256(config), "size": len(config)},
            "layers": descs}).encode()
        self.digest = sha256(self.manifest)
        self.blobs[self.digest] = self.manifest
        self.arch = arch

    def descriptor(self):
        return {"mediaType": OCI_MANIFEST, "digest": self.digest, "size": len(self.manifest),
                "platform": {"architecture": self.arch, "os": "linux"}}


def busybox_image(note=b"pulled\n", arch="amd64"):
    base = tar_of([("bin/busybox", pathlib.Path("/bin/busybox").read_bytes()),
                   ("bin/sh", "->busybox"), ("bin/echo", "->busybox")])
    top = tar_of([("etc/note", note)])
    return Image([base, top], ["PATH=/bin", "NOTE=registry"], ["/bin/sh"], arch)


def write_layout(path, images, tag):
    """An OCI image layout of images: one manifest, or an index of them."""
    blobs = path / "blobs" / "sha256"
    blobs.mkdir(parents=True)
    for img in images:
        for d, data in img.blobs.items():
            (blobs / d[7:]).write_bytes(data)
    if len(images) == 1:
        top = images[0].descriptor()
    else:
        index = json.dumps({"schemaVersion": 2, "mediaType": OCI_INDEX,
                            "manifests": [i.descriptor() for i in images]}).encode()
        (blobs / sha256(index)[7:]).write_bytes(index)
        top = {"mediaType": OCI_INDEX, "digest": sha256(index), "size": len(index)}
    top["annotations"] = {"org.opencontainers.image.ref.name": tag}
    (path / "index.json").write_text(json.dumps({"schemaVersion": 2, "manifests": [top]}))
    (path / "oci-layout").write_text('{"imageLayoutVersion":"1.0.0"}')


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class DockerRegistry:
    """Debian's docker-registry on 127.0.0.1, storage in a tmp dir, no auth."""

    def __init__(self, tmp):
        self.port = free_port()
        self.host = f"127.0.0.1:{self.port}"
        cfg = tmp / "registry.yml"
        cfg.write_text(f"version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n"
                       f"    rootdirectory: {tmp / 'storage'}\nhttp:\n  addr: {self.host}\n")
        self.log = open(tmp / "registry.log", "wb")
        self.proc = subprocess.Popen(["docker-registry", "serve", str(cfg)],
                                     stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 15
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    self.stop()
                    raise RuntimeError("docker-registry did not start")
                time.sleep(0.05)

    def push(self, layout, tag, name_tag, all_images=False, docker_format=False):
        cmd = ["skopeo", "copy", "--quiet", "--dest-tls-verify=false"]
        if all_images:
            cmd.append("--all")
        if docker_format:
            cmd += ["--format", "v2s2"]
        subprocess.run(cmd + [f"oci:{layout}:{tag}", f"docker://{self.host}/{name_tag}"],
                       check=True, capture_output=True, timeout=60)

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=10)
        self.log.close()


class Fake:
    """A registry of one image (name "app", tag "v1") that behaves as
    `mode` says: "ok", "token" (bearer auth, credentials checked), "5xx",
    "digest" (a layer's bytes changed), "trickle" (a byte at a time),
    "malformed" (the manifest is no JSON), "redirect" (blobs elsewhere),
    "bad_token" (a token with a line break), "huge" (a blob larger than
    announced), "basic" (Basic auth), "loop" (redirects to itself)."""

    TOKEN = "t0k3n"
    CREDS = "alice:s3cret"

    def __init__(self, image, mode="ok", redirect_to=None, v6=False):
        self.image, self.mode, self.redirect_to = image, mode, redirect_to
        self.requests = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                fake.requests.append((self.path, dict(self.headers)))
                try:
                    fake.answer(self)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        class Server(ThreadingHTTPServer):
            address_family = socket.AF_INET6 if v6 else socket.AF_INET
            daemon_threads = True

        self.server = Server(("::1" if v6 else "127.0.0.1", 0), Handler)
        port = self.server.server_address[1]
        self.host = f"[::1]:{port}" if v6 else f"127.0.0.1:{port}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def stop(self):
        self.server.shutdown()
        self.server.server_close()

    def send(self, h, status, body=b"", ctype="application/json", headers=()):
        h.send_response(status)
        h.send_header("Content-Type", ctype)
        h.send_header("Content-Length", str(len(body)))
        for k, v in headers:
            h.send_header(k, v)
        h.end_headers()
        h.wfile.write(body)

    def answer(self, h):
        path = h.path
        if path.startswith("/token"):
            if h.headers.get("Authorization") != \
                    "Basic " + base64.b64encode(self.CREDS.encode()).decode():
                return self.send(h, 401, b'{"errors":[{"code":"UNAUTHORIZED","message":"bad creds"}]}')
            tok = self.TOKEN + "\r\nX-Evil: 1" if self.mode == "bad_token" else self.TOKEN
            return self.send(h, 200, json.dumps({"token": tok}).encode())
        basic = "Basic " + base64.b64encode(self.CREDS.encode()).decode()
        if self.mode == "basic" and h.headers.get("Authorization") != basic:
            return self.send(h, 401, b"{}", headers=[("WWW-Authenticate", 'Basic realm="fake"')])
        if self.mode == "loop":
            return self.send(h, 307, headers=[("Location", h.path)])
        if self.mode in ("token", "bad_token") and \
                h.headers.get("Authorization") != f"Bearer {self.TOKEN}":
            realm = f"http://{self.host}/token"
            return self.send(h, 401, b'{"errors":[{"code":"UNAUTHORIZED"}]}', headers=[(
                "WWW-Authenticate",
                f'Bearer realm="{realm}",service="fake",scope="repository:app:pull"')])
        if self.mode == "5xx":
            return self.send(h, 503, b'{"errors":[{"code":"UNAVAILABLE","message":"down for maintenance"}]}')
        if path in ("/v2/app/manifests/v1", f"/v2/app/manifests/{self.image.digest}"):
            body = b'{"schemaVersion": 2, "layers": [' if self.mode == "malformed" \
                else self.image.manifest
            return self.send(h, 200, body, OCI_MANIFEST)
        if path.startswith("/v2/app/blobs/"):
            return self.blob(h, path.rsplit("/", 1)[1])
        self.send(h, 404, b'{"errors":[{"code":"NAME_UNKNOWN","message":"no such thing"}]}')

    def blob(self, h, digest):
        data = self.image.blobs.get(digest)
        if data is None:
            return self.send(h, 404, b'{"errors":[{"code":"BLOB_UNKNOWN"}]}')
        is_layer = data is not self.image.manifest and not data.startswith(b"{")
        if self.mode == "redirect" and self.redirect_to:
            return self.send(h, 307, headers=[("Location", f"{self.redirect_to}/v2/app/blobs/{digest}")])
        if self.mode == "digest" and is_layer:
            data = data[:-1] + bytes([data[-1] ^ 1])
        if self.mode == "huge" and is_layer:
            data = data + b"\0" * 4096
        if self.mode == "trickle" and is_layer:
            h.send_response(200)
            h.send_header("Content-Length", str(len(data)))
            h.end_headers()
            deadline = time.monotonic() + 30
            for i in range(len(data)):
                if time.monotonic() > deadline:
                    break
                h.wfile.write(data[i:i + 1])
                h.wfile.flush()
                time.sleep(0.5)
            return
        self.send(h, 200, data, "application/octet-stream")
