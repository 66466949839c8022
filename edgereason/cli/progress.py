"""Progress on stderr (stdout stays clean for JSON).

On a terminal, one line rewritten in place (cut to the terminal's width, so it never wraps) until
`end_line()`, which every message after it calls first, so that an error or a summary never lands on
the end of a bar. On a pipe or a file, no carriage returns: the line is written as a line of its
own, at most one every LOG_EVERY_S seconds (and where a count starts, first moves and ends), so a
log reads as a log.

Long work tells the time: elapsed, and once it can, an estimate of what is left (a bar: from the
items done; a search: at most its step and token budget at the rate so far, then from the tokens a
finished path took)."""

from __future__ import annotations

import math
import shutil
import sys
import time
from collections.abc import Callable
from typing import TextIO

from edgereason.cli.best_path import BestPath
from edgereason.engine.events import (
    Event,
    NodeAdded,
    NodeExtended,
    NodeStatus,
    Progress,
    StepFinished,
)

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


def terminal_width() -> int:
    """The most characters a row may take without wrapping (a wrapped row cannot be redrawn)."""
    return max(20, shutil.get_terminal_size().columns - 1)


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
        rows = [row[: terminal_width()] for row in line.split("\n")]
        if len(rows) > 1 or "\n" in self._open:  # back to the first row, clear below, draw anew
            print(self._back() + "\x1b[J" + "\n".join(rows), end="", file=self.stream, flush=True)
        else:
            print("\r" + rows[0].ljust(len(self._open)), end="", file=self.stream, flush=True)
        self._open = "\n".join(rows)

    def _back(self) -> str:
        """The escapes that take the cursor to the start of the open block's first row."""
        up = self._open.count("\n")
        return (f"\x1b[{up}A" if up else "") + "\r"

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
            if "\n" in self._open:
                print(self._back() + "\x1b[J", end="", file=self.stream, flush=True)
            else:
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
    """An engine listener that keeps one status line of a search: elapsed time, steps done out of
    `max_steps`, tokens drawn and their rate, paths finished out of `paths`, PRM calls, and how long
    is left. Before a path finishes, that is at most the budget's time at the rate so far (every
    path to `max_steps` steps or `max_path_tokens` tokens); once one has, about the paths' tokens,
    from what the finished paths took. A terminal gets it at most every `every_s`, in place, with
    the best path so far below it; a log a line every LOG_EVERY_S. `close()` clears it from a
    terminal."""

    def __init__(
        self,
        paths: int,
        stream: TextIO | None = None,
        every_s: float = DRAW_EVERY_S,
        max_steps: int | None = None,
        max_path_tokens: int | None = None,
    ) -> None:
        self.paths, self.every_s = paths, every_s
        self.max_steps, self.max_path_tokens = max_steps, max_path_tokens
        self.line = StatusLine(stream)
        self.best = BestPath()
        self._shown_at = -math.inf
        self._parent: dict[int, int | None] = {}
        self._depth: dict[int, int] = {}
        self._tokens: dict[int, int] = {}
        self._finished: list[int] = []  # the tokens of each finished path
        self._steps_done = 0  # the deepest step any path has finished

    def __call__(self, event: Event) -> None:
        self.best(event)
        if isinstance(event, NodeAdded):
            self._parent[event.node_id] = event.parent_id
            self._depth[event.node_id] = event.depth
        elif isinstance(event, NodeExtended):
            self._tokens[event.node_id] = event.n_tokens
        elif isinstance(event, StepFinished):
            self._steps_done = max(self._steps_done, self._depth.get(event.node_id, 0))
        elif isinstance(event, NodeStatus) and event.status == "complete":
            self._finished.append(self._path_tokens(event.node_id))
        elif isinstance(event, Progress) and event.elapsed_s - self._shown_at >= self.every_s:
            self._shown_at = event.elapsed_s
            best = self.best.line(terminal_width()) if is_terminal(self.line.stream) else ""
            self.line.show(self.describe(event) + (f"\n{best}" if best else ""))

    def _path_tokens(self, node: int | None) -> int:
        total = 0
        while node is not None:
            total += self._tokens.get(node, 0)
            node = self._parent.get(node)
        return total

    def describe(self, event: Progress) -> str:
        """`1m 05s, ≤ ~6m 40s left · 3/20 steps · 0/4 paths · 1240 tokens, 19.1 tok/s · 12 PRM
        calls`: the time first, so that a narrow terminal cuts the counts, not the estimate."""
        rate = event.generated_tokens / event.elapsed_s if event.elapsed_s > 0 else 0.0
        done = min(event.completed_paths, self.paths)
        steps = f" · {self._steps_done}/{self.max_steps} steps" if self.max_steps else ""
        return (
            f"{duration(event.elapsed_s)}{self._left(event, rate)}{steps} · {done}/{self.paths} "
            f"paths · {event.generated_tokens} tokens, {rate:.1f} tok/s · {event.prm_calls} PRM "
            "calls"
        )

    def _left(self, event: Progress, rate: float) -> str:
        if rate <= 0 or event.completed_paths >= self.paths:
            return ""
        if self._finished:
            expected = self.paths * sum(self._finished) / len(self._finished)
            left = (expected - event.generated_tokens) / rate
            return f", ~{duration(left)} left" if left >= 1 else ", finishing"
        bound = self._budget_left(event, rate)
        return f", ≤ ~{duration(bound)} left" if bound is not None else ""

    def _budget_left(self, event: Progress, rate: float) -> float | None:
        """The most time left at the rate so far, before any path has finished: every path to the
        token budget, or the steps left at the time a step has taken."""
        bounds = []
        if self.max_path_tokens:
            bounds.append((self.paths * self.max_path_tokens - event.generated_tokens) / rate)
        if self.max_steps and self._steps_done:
            steps_left = self.max_steps - self._steps_done
            bounds.append(event.elapsed_s * steps_left / self._steps_done)
        return max(0.0, min(bounds)) if bounds else None

    def close(self) -> None:
        self.line.clear()
