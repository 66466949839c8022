"""A server that answers to take the client's memory or time (issue 62), on 127.0.0.1 only, and a
client run in a child process that reports its peak memory. The server is bounded: it serves at most
MAX_REQUESTS, writes no answer for longer than ANSWER_S, and shuts itself down after LIFETIME_S,
whatever the test does."""

from __future__ import annotations

import json
import struct
import subprocess
import sys
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

MiB = 1 << 20
MAX_REQUESTS = 20
ANSWER_S = 30.0  # the longest one endless or dripping answer is written
LIFETIME_S = 180.0
ROOT = Path(__file__).resolve().parents[3]


class Evil(BaseHTTPRequestHandler):
    """Answers every request with `Evil.answer(handler)`."""

    protocol_version = "HTTP/1.1"
    answer: Callable[[Evil], None] = staticmethod(lambda h: h.send_json({}))
    served = 0

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        self._answer()

    def do_POST(self) -> None:  # noqa: N802
        self.asked = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
        self._answer()

    def _answer(self) -> None:
        Evil.served += 1
        if Evil.served > MAX_REQUESTS:
            self.close_connection = True
            return
        try:
            Evil.answer(self)
        except (BrokenPipeError, ConnectionResetError):  # the client hung up: what it should do
            self.close_connection = True

    def send_json(self, body: Any, status: int = 200) -> None:
        self.send_bytes(json.dumps(body).encode(), status=status)

    def send_bytes(self, data: bytes, headers: dict[str, str] | None = None, status=200) -> None:
        self.send_response(status)
        for name, value in {"Content-Length": str(len(data)), **(headers or {})}.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def stream(self, chunks: Iterator[bytes], length: int | None = None, status=200) -> None:
        """Write `chunks` (chunked where no `length`) until they end, the client hangs up or
        ANSWER_S pass."""
        self.send_response(status)
        if length is None:
            self.send_header("Transfer-Encoding", "chunked")
        else:
            self.send_header("Content-Length", str(length))
        self.end_headers()
        end = time.monotonic() + ANSWER_S
        for chunk in chunks:
            if time.monotonic() > end:
                break
            self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk) if length is None else chunk)
            self.wfile.flush()
        self.close_connection = True

    def log_message(self, *args: object) -> None:
        pass


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Quiet for a client that hung up (what the tests expect it to do); else as ever."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


@contextmanager
def evil_server(answer: Callable[[Evil], None]) -> Iterator[str]:
    """A server that answers each request with `answer(handler)`, for the block: its URL."""
    Evil.answer, Evil.served = staticmethod(answer), 0
    httpd = _Server(("127.0.0.1", 0), Evil)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    stop = threading.Timer(LIFETIME_S, httpd.shutdown)
    stop.daemon = True
    stop.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        stop.cancel()
        httpd.shutdown()
        httpd.server_close()


def gzip_bomb(inflated_mib: int) -> bytes:
    """A valid gzip of `inflated_mib` MiB of zeros, ~1 KB a MiB: one full-flushed deflate block of
    1 MiB of zeros, repeated (each is the same, the compressor's state reset after it)."""
    zeros = bytes(MiB)
    deflate = zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS)
    block = deflate.compress(zeros) + deflate.flush(zlib.Z_FULL_FLUSH)
    crc = 0
    for _ in range(inflated_mib):
        crc = zlib.crc32(zeros, crc)
    trailer = struct.pack("<II", crc, (inflated_mib * MiB) & 0xFFFFFFFF)
    header = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"
    return header + block * inflated_mib + deflate.flush() + trailer


CHILD = """
import json, resource, sys, time
resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))  # a runaway fails, not the machine
from edgereason.backends.remote.client import CompletionClient
from edgereason.backends.remote_settings import Endpoint
from edgereason.errors import EdgeReasonError

url, call, settings = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
if call != "models":  # the model named: the completion is the one request
    settings.setdefault("model", "m")
client = CompletionClient(Endpoint(url, **settings))
peak = lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
before, t0 = peak(), time.monotonic()
try:
    if call == "models":
        said = client.model
    else:
        said = repr(client.complete([json.loads(call)])[0])[:200]
except EdgeReasonError as err:
    said = str(err)
print(json.dumps({"said": said, "seconds": time.monotonic() - t0, "grew_mb": peak() - before}))
client.close()
"""


def client_in_child(url: str, call: str, **endpoint: Any) -> dict[str, Any]:
    """`call` ("models", or a completion body as JSON) asked of the server at `url` by a client in
    a child process (this checkout's code), its address space capped at 2 GiB: what it said (the
    answer, or its error line), the seconds it took and how much its peak RSS grew, in MB."""
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, url, call, json.dumps(endpoint)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0 and not proc.stderr, proc.stderr[-3000:]
    return json.loads(proc.stdout)
