"""Progress lines on stderr (stdout stays clean for JSON): a line rewritten in place until `end_line()`, which
every message after it calls first, so that an error or a summary never lands on the end of a bar."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TextIO

from edgereason.engine.events import Event, Progress

_open_line = ""  # the progress line on stderr that has no newline yet


def redraw(line: str) -> None:
    """Rewrite the open progress line (or start one) with `line`."""
    global _open_line
    print("\r" + line.ljust(len(_open_line)), end="", file=sys.stderr, flush=True)
    _open_line = line


def end_line() -> bool:
    """End the open progress line, if there is one; whether there was."""
    global _open_line
    if not _open_line:
        return False
    print(file=sys.stderr, flush=True)
    _open_line = ""
    return True


def bar(label: str, width: int = 24) -> Callable[[int, int], None]:
    """show(done, total) redraws the line when `done` changes."""
    last = [-1]

    def show(done: int, total: int) -> None:
        if done == last[0]:
            return
        last[0] = done
        filled = int(width * done / max(1, total))
        redraw(f"{label} [{'#' * filled}{'.' * (width - filled)}] {done}/{total}")

    return show


class SearchProgress:
    """An engine listener that keeps one status line of a search on a terminal's stderr, rewritten at most every
    `every_s`: tokens drawn, their rate, paths finished out of `paths`, PRM calls, seconds. `close()` clears it."""

    def __init__(self, paths: int, stream: TextIO = sys.stderr, every_s: float = 0.25) -> None:
        self.paths, self.stream, self.every_s = paths, stream, every_s
        self._shown_at = -every_s
        self._width = 0

    def __call__(self, event: Event) -> None:
        if isinstance(event, Progress) and event.elapsed_s - self._shown_at >= self.every_s:
            self._shown_at = event.elapsed_s
            rate = event.generated_tokens / event.elapsed_s if event.elapsed_s > 0 else 0.0
            self._write(
                f"searching: {event.generated_tokens} tokens ({rate:.1f} tok/s), "
                f"{min(event.completed_paths, self.paths)}/{self.paths} paths done, "
                f"{event.prm_calls} PRM calls, {event.elapsed_s:.0f} s"
            )

    def _write(self, line: str) -> None:
        print("\r" + line.ljust(self._width), end="", file=self.stream, flush=True)
        self._width = len(line)

    def close(self) -> None:
        if self._width:
            self._write("")
            print("\r", end="", file=self.stream, flush=True)
            self._width = 0


def is_terminal(stream: TextIO | None) -> bool:
    return stream is not None and stream.isatty()  # None: the stream was closed when the process started


def pull_progress(label: str, done: int, total: int) -> None:
    """Progress for a first-use model download, on stderr so JSON output stays clean: one line, rewritten in
    place until the pull ends."""
    width = 24
    filled = int(width * done / max(1, total))
    redraw(f"pulling model: [{'#' * filled}{'.' * (width - filled)}] {label}")
    if done >= total:
        end_line()
