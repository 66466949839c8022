"""A time bound that tells a linear pass from a quadratic one within a test: the time a pass takes
over an input and over one twice its size. A linear pass takes about twice as long, a quadratic one
four times; LINEAR_RATIO lies between. A time is the CPU time of the thread that runs the pass (on
a shared machine the wall clock also counts the other processes that run meanwhile: a pass longer
than a time slice seemed four times slower at twice the size), the fastest of a few runs with the
garbage collector off, and a ratio over the bound is measured again before it fails the test."""

from __future__ import annotations

import gc
import time
from collections.abc import Callable

LINEAR_RATIO = 2.5
RUNS = 5
ATTEMPTS = 3


def seconds(run: Callable[[str], object], text: str) -> float:
    """The CPU time of the fastest of RUNS runs of run(text)."""
    best = float("inf")
    gc.disable()
    try:
        for _ in range(RUNS):
            t0 = time.thread_time()
            run(text)
            best = min(best, time.thread_time() - t0)
    finally:
        gc.enable()
    return best


def assert_linear(run: Callable[[str], object], make: Callable[[int], str], size: int) -> None:
    """run(make(2 * size)) takes at most LINEAR_RATIO times as long as run(make(size))."""
    small, large = make(size), make(2 * size)
    for _ in range(ATTEMPTS):
        took_small, took_large = seconds(run, small), seconds(run, large)
        if took_large <= LINEAR_RATIO * took_small:
            return
    raise AssertionError(
        f"{len(small)} -> {len(large)} characters took {took_small * 1e3:.1f} -> "
        f"{took_large * 1e3:.1f} ms ({took_large / took_small:.1f}x)"
    )


def repeated(unit: str) -> Callable[[int], str]:
    """A maker of `unit` repeated to about n characters."""
    return lambda n: unit * max(1, n // max(1, len(unit)))
