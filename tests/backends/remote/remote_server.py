"""llama-cpp-python's own OpenAI-compatible server (`server` extra) serving a GGUF on 127.0.0.1, on
a free port, for the remote backend's tests, and a base for the tests' fake servers. Loopback
only."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx

SERVER_START_S = 120


class JSONHandler(BaseHTTPRequestHandler):
    """A fake server's request handler: `answer` writes a JSON reply; no access log on stderr."""

    def answer(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


@contextmanager
def serving(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    """A fake server of `handler` on 127.0.0.1, on a free port, for the block: its URL."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def not_serving(url: str, proc: subprocess.Popen, start_s: float) -> str | None:
    """Waits until the server at `url` answers /v1/models: None once it does, else why not (it
    exited, or did not start within start_s)."""
    deadline = time.monotonic() + start_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return "exited"
        try:
            if httpx.get(f"{url}/v1/models", timeout=2, trust_env=False).status_code == 200:
                return None
        except httpx.TransportError:
            time.sleep(0.3)
    return f"did not start within {start_s}s"


class LocalServer:
    def __init__(
        self, model: Path, n_ctx: int = 4096, n_threads: int = 2, extra: Sequence[str] = ()
    ) -> None:
        """extra: more of the server's flags (--model_alias NAME, --logits_all false)."""
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        # a pipe would fill up with the server's log and stall it
        self.log = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "edgereason.backends.remote.llamacpp_server",
                "--model",
                str(model),
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--n_ctx",
                str(n_ctx),
                "--n_threads",
                str(n_threads),
                *extra,
            ],
            stdout=subprocess.DEVNULL,
            stderr=self.log,
        )
        if why := not_serving(self.url, self.proc, SERVER_START_S):
            self.log.seek(0)
            log = self.log.read()[-2000:]
            self.stop()
            raise RuntimeError(f"the llama-cpp-python server {why}: {log!r}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=30)
        self.log.close()
