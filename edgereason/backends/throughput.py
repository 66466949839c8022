"""Timing helpers every backend's profiler probes share: the filler text measured, the prefill rows
a PRM call is made of, and the best-of-several timing loop (the fastest pass is the model's own
speed: other work on a shared machine only ever slows a pass down)."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence

from edgereason.protocols import Points, Progress

FILLER = (
    "Janet's ducks lay 16 eggs per day. She eats three for breakfast every morning and bakes "
    "muffins for her friends every day with four. She sells the remainder at the farmers' market "
    "daily for $2 per fresh duck egg. Step 1: 16 - 3 - 4 = 9 eggs are left. Step 2: 9 * 2 = 18 "
    "dollars a day.\n\n"
)
# tokens per sequence in a prefill batch: about one reasoning step, as the PRM sees it
PREFILL_CHUNK = 64


def report(
    progress: Progress | None, label: str, unit: str, points: list[tuple[int, float]]
) -> None:
    if progress:
        for x, tps in points:
            progress(f"{label}: {x:>6} {unit}  {tps:8.1f} tok/s")


def decode_points(
    one_pass: Callable[[int], None],
    ns: Sequence[int],
    steps: int,
    progress: Progress | None,
    sync: Callable[[], None] = lambda: None,
) -> Points:
    """The decode points of any backend: one_pass(n) runs one forward pass of the n sequences forked
    for n. Each point is the fastest of `steps` passes after a warm-up round, measured round-robin
    (one pass each per round) so a burst of outside load hits them alike; `sync` waits for the
    device before and after each timed pass."""
    best = {n: math.inf for n in ns}
    if progress:
        progress(
            f"generator decode: {', '.join(map(str, ns))} concurrent sequences, {steps} passes each"
        )
    for round_ in range(steps + 1):  # round 0 is a warm-up
        for n in ns:
            sync()
            t0 = time.perf_counter()
            one_pass(n)
            sync()
            if round_:
                best[n] = min(best[n], time.perf_counter() - t0)
    points = [(n, n / best[n]) for n in ns]
    report(progress, "generator decode", "sequences", points)
    return tuple(points)


def prefill_rows(tokens: Sequence[int], b: int) -> list[list[int]]:
    """b tokens of `tokens` (repeated as needed) as rows of PREFILL_CHUNK tokens, the last one
    shorter."""
    tokens = list(tokens) * math.ceil(b / len(tokens))
    return [tokens[i : min(b, i + PREFILL_CHUNK)] for i in range(0, b, PREFILL_CHUNK)]


def best_rates(
    one_call: Callable[[int], float],
    batch_tokens: Sequence[int],
    reps: int = 3,
    progress: Progress | None = None,
) -> Points:
    """The PRM prefill points of any backend: one_call(b) runs b new tokens in PREFILL_CHUNK-token
    sequences, in one forward pass from fresh caches with a readout at each sequence end, and
    returns its seconds. Round-robin over the batch sizes, like measure_decode, after a warm-up
    call."""
    best = {b: math.inf for b in batch_tokens}
    if progress:
        progress(
            f"PRM prefill: {', '.join(map(str, batch_tokens))} batch tokens, {reps} calls each"
        )
    one_call(min(batch_tokens))  # warm-up
    for _ in range(reps):
        for b in batch_tokens:
            best[b] = min(best[b], one_call(b))
    points = [(b, b / best[b]) for b in batch_tokens]
    report(progress, "PRM prefill", "batch tokens", points)
    return tuple(points)
