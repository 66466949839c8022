"""stdout as a pipe whose reader may quit (`edgereason ... | head -c 5`): the command stops with the
shell's 141 and claims nothing it did not do, whatever Python's buffering.

Why it needs care: with PYTHONUNBUFFERED (or -u) sys.stdout is a TextIOWrapper straight on the file,
and it takes a write that the kernel cut short (the reader quit in the middle of it) for a whole
one: the rest is dropped without an error, and `data convert big.jsonl | head -c 5` said "converted
200000 records" and exited 0 after one 64 KB write. A BufferedWriter in between writes the rest, and
so meets the closed pipe: BrokenPipeError. With Python's default buffering, what a command printed
last is still in the buffer when it returns: main flushes it (`flush`) where BrokenPipeError is
caught, not left to the interpreter's exit, which prints "Exception ignored" and exits 120."""

from __future__ import annotations

import contextlib
import io
import os
import signal
import sys
from collections.abc import Iterator

EXIT_READER_QUIT = 128 + signal.SIGPIPE  # 141, as a tool killed by SIGPIPE reports


@contextlib.contextmanager
def whole_writes() -> Iterator[None]:
    """For the block, sys.stdout writes each text whole, or raises BrokenPipeError; a new line or a
    flush sends what it holds, as a line-buffered stdout does."""
    unbuffered = sys.stdout
    # stdout buffered already, closed (`>&-`), or a test's capture
    if not isinstance(getattr(unbuffered, "buffer", None), io.FileIO):
        yield
        return
    # closefd=False: closing this writer leaves the process's stdout open
    raw = io.FileIO(unbuffered.fileno(), "wb", closefd=False)
    sys.stdout = io.TextIOWrapper(
        io.BufferedWriter(raw),
        encoding=unbuffered.encoding,
        errors=unbuffered.errors,
        line_buffering=True,
    )
    try:
        yield
    finally:
        buffered, sys.stdout = sys.stdout, unbuffered
        with contextlib.suppress(OSError, ValueError):  # what a failed run left unwritten
            buffered.close()


def flush() -> None:
    """Send what stdout holds, so that a reader that quit raises BrokenPipeError here."""
    if sys.stdout is not None:
        sys.stdout.flush()


def reader_quit() -> int:
    """Exit code 141, with stdout pointed at /dev/null so that no later flush (the interpreter's at
    exit) meets the closed pipe again; nobody is left to tell, as for other tools."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    with contextlib.suppress(AttributeError, ValueError, io.UnsupportedOperation):
        os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return EXIT_READER_QUIT
