"""Answers compared as math with a deadline that holds on any thread.

math-verify's own timeouts use SIGALRM, which only the main thread may set: in a worker thread
(where the chat grades) a power tower such as 2^{2^{2^{2^{2^{2}}}}} was compared without end, and on
the main thread each such comparison ran to its 5 s timeout and printed "Timeout during comparison"
over the progress line. Rules:
- the comparison runs in one child process (math_worker.py) that the process's threads share in
  turn; it starts on the first comparison that needs math, and a caller waits for its start apart
  from the comparison's own deadline;
- a caller waits at most `deadline_s` for an answer; past it the child is killed (a computation in C
  ignores its alarm) and the next comparison starts another;
- None where there is no answer in time (or no child could start): the caller decides what then.
"""

from __future__ import annotations

import atexit
import json
import os
import selectors
import subprocess
import sys
import threading
import time
from pathlib import Path

WORKER = Path(__file__).with_name("math_worker.py")
START_S = 60.0  # the most a child may take to import math-verify (seconds on a loaded machine)

_lock = threading.Lock()
_child: subprocess.Popen[bytes] | None = None


def math_match(a: str, b: str, deadline_s: float) -> bool | None:
    """Whether math-verify finds `a` and `b` the same mathematical object; None where it gave no
    answer within `deadline_s` seconds."""
    with _lock:
        child = _started()
        if child is None:
            return None
        answer: str | None = None
        try:
            assert child.stdin is not None
            child.stdin.write((json.dumps([a, b, deadline_s]) + "\n").encode("utf-8", "replace"))
            child.stdin.flush()
            answer = _read_line(child, deadline_s + 0.5)  # its own alarm first, then ours
        except OSError:  # the child died (killed, out of memory): the next call starts another
            pass
        except BaseException:  # Ctrl-C while it compares: its answer would be read by the next call
            _stop()
            raise
        if answer is None:
            _stop()
            return None
        return json.loads(answer).get("match")


def start() -> bool:
    """Start the child where none runs (its start is apart from any comparison's deadline); whether
    one runs."""
    with _lock:
        return _started() is not None


def _started() -> subprocess.Popen[bytes] | None:
    """The child, started where there is none (or it ended); None where it cannot start."""
    global _child
    if _child is not None and _child.poll() is None:
        return _child
    try:
        _child = subprocess.Popen(
            [sys.executable, "-P", str(WORKER)],  # -P: the worker's folder is not put on sys.path
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
    except OSError:
        _child = None
        return None
    if _read_line(_child, START_S) is None:  # {"ready": true}, once math-verify is imported
        _stop()
        return None
    return _child


def _read_line(child: subprocess.Popen[bytes], wait_s: float) -> str | None:
    """One line of the child's, or None where none comes within `wait_s` (or it ended)."""
    assert child.stdout is not None
    fd, data, end = child.stdout.fileno(), b"", time.monotonic() + wait_s
    with selectors.DefaultSelector() as selector:
        selector.register(fd, selectors.EVENT_READ)
        while not data.endswith(b"\n"):
            left = end - time.monotonic()
            if left <= 0 or not selector.select(left):
                return None
            chunk = os.read(fd, 65536)
            if not chunk:
                return None
            data += chunk
    return data.decode("utf-8", errors="replace")


@atexit.register
def _stop() -> None:
    global _child
    if _child is not None:
        _child.kill()
        _child.wait()
        for pipe in (_child.stdin, _child.stdout):
            if pipe is not None:
                pipe.close()
    _child = None
