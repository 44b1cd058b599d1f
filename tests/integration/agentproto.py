"""A client of hutch's agent protocol (docs/protocol.md) for tests.

It drives a sandbox through tests/helpers/bridge, which relays the agent's
connection over stdin/stdout. Frames are read by a thread and sorted per
stream; windows are granted back as data is consumed unless a test turns
that off to exercise flow control.
"""
import json
import queue
import struct
import subprocess
import threading

HEADER = struct.Struct(">IBBHI")
HELLO, OPEN, STDIN, STDOUT, STDERR, CONTROL, EVENT, ERROR, WINDOW, CLOSE = range(1, 11)
EOF_FLAG, END_FLAG = 1, 2
WINDOW_INITIAL = 256 << 10


class Frame:
    def __init__(self, type_, flags, stream, payload):
        self.type, self.flags, self.stream, self.payload = type_, flags, stream, payload

    def json(self):
        return json.loads(self.payload)

    def __repr__(self):
        return f"Frame(type={self.type}, flags={self.flags}, stream={self.stream}, len={len(self.payload)})"


class Agent:
    def __init__(self, bridge, *args, auto_window=True):
        self.proc = subprocess.Popen([*bridge, *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE)
        self.auto_window = auto_window
        self.queues = {}
        self.lock = threading.Lock()
        self.send_lock = threading.Lock()
        self.windows = {}
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        self.hello = self.next_frame(0, timeout=30).json()

    def _queue(self, stream):
        with self.lock:
            return self.queues.setdefault(stream, queue.Queue())

    def _read(self):
        out = self.proc.stdout
        while True:
            head = out.read(HEADER.size)
            if len(head) < HEADER.size:
                break
            length, type_, flags, _, stream = HEADER.unpack(head)
            payload = out.read(length) if length else b""
            if type_ == WINDOW:
                with self.lock:
                    self.windows[stream] = self.windows.get(stream, WINDOW_INITIAL) + struct.unpack(">I", payload)[0]
                continue
            if type_ in (STDOUT, STDERR) and self.auto_window:
                self.window(stream, len(payload))
            self._queue(stream).put(Frame(type_, flags, stream, payload))
        with self.lock:
            for q in self.queues.values():
                q.put(None)
            self.closed = True

    def send(self, type_, stream, payload=b"", flags=0):
        if isinstance(payload, (dict, list)):
            payload = json.dumps(payload).encode()
        with self.send_lock:
            self.proc.stdin.write(HEADER.pack(len(payload), type_, flags, 0, stream) + payload)
            self.proc.stdin.flush()

    def window(self, stream, n):
        self.send(WINDOW, stream, struct.pack(">I", n))

    def next_frame(self, stream, timeout=30):
        f = self._queue(stream).get(timeout=timeout)
        if f is None:
            raise EOFError("agent connection closed")
        return f

    def collect(self, stream, timeout=60):
        """All frames of a stream up to its END frame."""
        frames = []
        while True:
            f = self.next_frame(stream, timeout)
            frames.append(f)
            if f.flags & END_FLAG:
                return frames

    def send_stdin(self, stream, data, eof=True, chunk=64 << 10):
        """Send data within the agent's window for this stream."""
        import time
        sent = 0
        while sent < len(data):
            with self.lock:
                avail = self.windows.get(stream, WINDOW_INITIAL) - sent
            if avail <= 0:
                time.sleep(0.001)
                continue
            n = min(chunk, avail, len(data) - sent)
            self.send(STDIN, stream, data[sent:sent + n])
            sent += n
        if eof:
            self.send(STDIN, stream, b"", EOF_FLAG)

    def exec(self, stream, argv, stdin=None, timeout=60, **kw):
        req = {"op": "exec", "argv": argv, "stdin": stdin is not None, **kw}
        self.send(OPEN, stream, req)
        if stdin is not None:
            self.send_stdin(stream, stdin)
        return Result(self.collect(stream, timeout))

    def file_op(self, stream, op, timeout=60, data=None, **kw):
        self.send(OPEN, stream, {"op": op, **kw})
        if data is not None:
            self.send_stdin(stream, data)
        return Result(self.collect(stream, timeout))

    def close(self):
        try:
            self.proc.stdin.close()
        except BrokenPipeError:
            pass
        self.proc.wait(timeout=30)
        return self.proc.returncode


class Result:
    def __init__(self, frames):
        self.frames = frames
        self.stdout = b"".join(f.payload for f in frames if f.type == STDOUT)
        self.stderr = b"".join(f.payload for f in frames if f.type == STDERR)
        last = frames[-1]
        self.error = last.json() if last.type == ERROR else None
        self.event = last.json() if last.type == EVENT else None
        self.started = next((f.json() for f in frames if f.type == EVENT and f.json().get("event") == "started"), None)
