"""Progress on stderr (stdout stays clean for JSON).

On a terminal, one line rewritten in place (cut to the terminal's width, so it never wraps) until
`end_line()`, which every message after it calls first, so that an error or a summary never lands on
the end of a bar. On a pipe or a file, no carriage returns: the line is written as a line of its
own, at most one every LOG_EVERY_S seconds (and where a count starts, first moves and ends), so a
log reads as a log.

Long work tells the time: elapsed, and once it can, an estimate of what is left (a bar: from the
items done; a search: from the tokens a finished path took)."""

from __future__ import annotations

import math
import shutil
import sys
import time
from collections.abc import Callable
from typing import TextIO

from edgereason.engine.events import Event, NodeAdded, NodeExtended, NodeStatus, Progress

LOG_EVERY_S = 10.0  # a pipe or a file: one line at most this often
DRAW_EVERY_S = 0.25  # a terminal: the most often a line is redrawn for its clock alone


def is_terminal(stream: TextIO | None) -> bool:
    # None: the stream was closed when the process started
    return stream is not None and stream.isatty()


def duration(seconds: float) -> str:
    """`45 s`, `2m 05s`, `1h 02m`: a clock a person reads at a glance."""
    s = max(0, int(round(seconds)))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60}m {s % 60:02d}s"
    return f"{s // 3600}h {s % 3600 // 60:02d}m"


class StatusLine:
    """One line of progress on `stream` (default: sys.stderr as it is at each call): rewritten in
    place on a terminal, a line of its own at most every `log_every_s` elsewhere (`force`: now,
    whatever the time)."""

    def __init__(
        self,
        stream: TextIO | None = None,
        log_every_s: float = LOG_EVERY_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._stream, self.log_every_s, self.clock = stream, log_every_s, clock
        self._open = ""  # what the terminal shows, with no newline yet
        self._logged_at = clock()  # a log's first line comes after log_every_s, unless forced

    @property
    def stream(self) -> TextIO | None:
        return self._stream if self._stream is not None else sys.stderr

    def show(self, line: str, force: bool = False) -> None:
        if self.stream is None:  # stderr closed at start: print(file=None) would write to stdout
            return
        if not is_terminal(self.stream):
            now = self.clock()
            if force or now - self._logged_at >= self.log_every_s:
                self._logged_at = now
                print(line, file=self.stream, flush=True)
            return
        # cut to the terminal's width: a wrapped line cannot be rewritten in place
        line = line[: max(20, shutil.get_terminal_size().columns - 1)]
        print("\r" + line.ljust(len(self._open)), end="", file=self.stream, flush=True)
        self._open = line

    def end(self) -> bool:
        """End the open line with a newline, if there is one; whether there was."""
        if not self._open or self.stream is None:
            return False
        print(file=self.stream, flush=True)
        self._open = ""
        return True

    def clear(self) -> None:
        """Blank the open line; the cursor stays at its start (what follows is written over it)."""
        if self._open and self.stream is not None:
            print("\r" + " " * len(self._open) + "\r", end="", file=self.stream, flush=True)
            self._open = ""


_line = StatusLine()  # the bars' line on stderr


def redraw(line: str, force: bool = False) -> None:
    """Show `line` as the progress line on stderr (a terminal: in place; a log: a line, at most
    every few s)."""
    _line.show(line, force)


def end_line() -> bool:
    """End the open progress line, if there is one; whether there was."""
    return _line.end()


def bar(
    label: str, width: int = 20, clock: Callable[[], float] = time.monotonic
) -> Callable[[int, int], None]:
    """show(done, total) draws `label [###...] done/total · elapsed · ~T left` when `done` changes,
    and on a terminal every DRAW_EVERY_S for the clock; in a log, the start, the first item done and
    the end always."""
    started = clock()
    last = {"done": -1, "at": -math.inf, "done_at": started}  # done_at: when `done` last grew

    def show(done: int, total: int) -> None:
        now = clock()
        changed = done != last["done"]
        if not changed and now - last["at"] < DRAW_EVERY_S:
            return
        milestone = changed and (last["done"] < 0 or last["done"] <= 0 < done or done >= total)
        if changed:
            last["done_at"] = now
        last.update(done=done, at=now)
        filled = int(width * done / max(1, total))
        elapsed = now - started
        drawn = "#" * filled + "." * (width - filled)
        line = f"{label} [{drawn}] {done}/{total} · {duration(elapsed)}"
        if 0 < done < total:  # the time an item took so far, for each one left, less the time since
            per_item = (last["done_at"] - started) / done
            left = per_item * (total - done) - (now - last["done_at"])
            line += f" · ~{duration(max(0.0, left))} left"
        redraw(line, force=milestone)  # a log: the start, the first item done and the end at once

    return show


def pull_progress(label: str, done: int, total: int) -> None:
    """Progress for a first-use model download, on stderr so JSON output stays clean: one line,
    rewritten in place until the pull ends (a log: a line every few seconds, and the end)."""
    width = 24
    filled = int(width * done / max(1, total))
    redraw(f"pulling model: [{'#' * filled}{'.' * (width - filled)}] {label}", force=done >= total)
    if done >= total:
        end_line()


class SearchProgress:
    """An engine listener that keeps one status line of a search: elapsed time, tokens drawn and
    their rate, paths finished out of `paths`, PRM calls and, once a path has finished, about how
    long is left (the paths' tokens, from the tokens the finished paths took, at the rate so far). A
    terminal gets it at most every `every_s`, in place; a log a line every LOG_EVERY_S. `close()`
    clears it from a terminal."""

    def __init__(
        self, paths: int, stream: TextIO | None = None, every_s: float = DRAW_EVERY_S
    ) -> None:
        self.paths, self.every_s = paths, every_s
        self.line = StatusLine(stream)
        self._shown_at = -math.inf
        self._parent: dict[int, int | None] = {}
        self._tokens: dict[int, int] = {}
        self._finished: list[int] = []  # the tokens of each finished path

    def __call__(self, event: Event) -> None:
        if isinstance(event, NodeAdded):
            self._parent[event.node_id] = event.parent_id
        elif isinstance(event, NodeExtended):
            self._tokens[event.node_id] = event.n_tokens
        elif isinstance(event, NodeStatus) and event.status == "complete":
            self._finished.append(self._path_tokens(event.node_id))
        elif isinstance(event, Progress) and event.elapsed_s - self._shown_at >= self.every_s:
            self._shown_at = event.elapsed_s
            self.line.show(self.describe(event))

    def _path_tokens(self, node: int | None) -> int:
        total = 0
        while node is not None:
            total += self._tokens.get(node, 0)
            node = self._parent.get(node)
        return total

    def describe(self, event: Progress) -> str:
        rate = event.generated_tokens / event.elapsed_s if event.elapsed_s > 0 else 0.0
        done = min(event.completed_paths, self.paths)
        line = (
            f"{duration(event.elapsed_s)} · {event.generated_tokens} tokens, {rate:.1f} tok/s · "
            f"{done}/{self.paths} paths · {event.prm_calls} PRM calls"
        )
        if self._finished and rate > 0 and event.completed_paths < self.paths:
            expected = self.paths * sum(self._finished) / len(self._finished)
            left = (expected - event.generated_tokens) / rate
            line += f" · ~{duration(left)} left" if left >= 1 else " · finishing"
        return line

    def close(self) -> None:
        self.line.clear()
