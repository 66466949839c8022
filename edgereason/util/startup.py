"""The start-up's phases, timed where they happen (the package's import of llama.cpp, the session's
opening, the backends) and read by `--verbose` and `solve --json` (`startup_s`).

A phase is named once in PHASES. Phases nest, and time goes to the innermost one open: a graph
captured inside the first pass counts as graphs, not as first pass, and a compile inside that
capture as compiles; so the phases add up to no more than the time they span. One process, one
thread (the set-up's): the clock is this module's, not the caller's. A phase may run several times
(two contexts' KV, every graph captured): its seconds add up."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import wraps
from pathlib import Path
from typing import ParamSpec, TypeVar

# name -> what --verbose calls it, in the order a start-up runs them
PHASES = {
    "import": "import",
    "model_files": "model files",
    "weights": "weights to the device",
    "kv": "KV allocated",
    "first_pass": "first pass",
    "graphs": "graphs captured",
    "compiles": "compiles",
}

P = ParamSpec("P")
T = TypeVar("T")

_seconds: dict[str, float] = {}
_times: dict[str, int] = {}  # how many times each phase was entered (graphs: one a capture)
_open: list[tuple[str, float]] = []  # the phases open, innermost last, each with when its clock ran
_firsts: set[str] = set()  # first_call phases already timed


def enter(name: str) -> None:
    """Start timing `name` (one of PHASES), pausing the phase it opens inside."""
    if name not in PHASES:
        raise ValueError(f"unknown start-up phase {name!r}")
    now = time.perf_counter()
    if _open:
        _charge(now)
    _open.append((name, now))
    _times[name] = _times.get(name, 0) + 1


def leave(name: str) -> None:
    """Stop timing `name`, the innermost phase open; the phase around it runs on. A leave with no
    matching enter (a hook that fired alone) changes nothing."""
    if not _open or _open[-1][0] != name:
        return
    now = time.perf_counter()
    _charge(now)
    _open.pop()
    if _open:
        _open[-1] = (_open[-1][0], now)


def _charge(now: float) -> None:
    name, since = _open[-1]
    _seconds[name] = _seconds.get(name, 0.0) + now - since


@contextmanager
def phase(name: str) -> Iterator[None]:
    """A `with` block, or a decorator of a function, timed as `name`."""
    enter(name)
    try:
        yield
    finally:
        leave(name)


def first_call(name: str) -> Callable[[Callable[P, T]], Callable[P, T]]:
    """A decorator timing the first call of any function it decorates with `name` in this process,
    and no later one (the first forward pass)."""

    def decorate(function: Callable[P, T]) -> Callable[P, T]:
        @wraps(function)
        def timed(*args: P.args, **kwargs: P.kwargs) -> T:
            if name in _firsts:
                return function(*args, **kwargs)
            _firsts.add(name)
            with phase(name):
                return function(*args, **kwargs)

        return timed

    return decorate


def seconds() -> dict[str, float]:
    """The phases that ran so far, in PHASES order, in seconds (3 decimals)."""
    return {name: round(_seconds[name], 3) for name in PHASES if name in _seconds}


def since_command() -> float:
    """Seconds since this process started: from the command, the interpreter's own start
    included. On Linux from the kernel's clocks since boot: the wall clock less the boot time, as
    psutil reckons a start, drifted by most of a second in a container."""
    try:
        # starttime, field 22 of /proc/self/stat (the 20th after the command's name): clock ticks
        ticks = int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[19])
        started = ticks / os.sysconf("SC_CLK_TCK")
        return max(0.0, time.clock_gettime(time.CLOCK_BOOTTIME) - started)
    except (OSError, AttributeError, ValueError, IndexError):  # not Linux
        # not at the top: the package imports this module before llama.cpp's library, which loads
        # before any other (edgereason/__init__.py)
        import psutil

        return max(0.0, time.time() - psutil.Process().create_time())


def summary() -> str:
    """--verbose's words for each phase that ran, with its seconds, and how many times where more
    than once (19 graphs captured in 5 s is a different fix from one capture of 5 s)."""
    phases = ", ".join(
        f"{PHASES[name]} {s:.2f}" + (f" ({_times[name]} times)" if _times.get(name, 1) > 1 else "")
        for name, s in seconds().items()
    )
    return f"start-up phases (s): {phases or 'none timed'}"
