"""Throughput curves measured on the real model: generator decode vs concurrent sequences, PRM prefill vs
batch tokens. Each point is the fastest of several timed forward passes after a warm-up: other work on a shared
CPU only ever slows a pass down, so the fastest pass is the best estimate of the model's own speed. A small KV
context is used: speed depends mostly on the batch. Cells that other sequences hold cost every pass something too
(the attention mask and scan cover them: 1.12-1.28x for 32 rows beside 22,528 cells on an H200, kv_span.py),
which the curves leave out.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from edgereason.backends.llamacpp.device_sampling import Candidates
from edgereason.backends.llamacpp.model import LlamaModel
from edgereason.backends.llamacpp.runtime import DecodeItem, KVContext

Progress = Callable[[str], None]

FILLER = ("Janet's ducks lay 16 eggs per day. She eats three for breakfast every morning and bakes muffins for "
          "her friends every day with four. She sells the remainder at the farmers' market daily for $2 per "
          "fresh duck egg. Step 1: 16 - 3 - 4 = 9 eggs are left. Step 2: 9 * 2 = 18 dollars a day.\n\n")
PREFILL_CHUNK = 64  # tokens per sequence in a prefill batch: about one reasoning step, as the PRM sees it


@dataclass(frozen=True)
class Curve:
    """(x, tokens per second) points, x ascending: x = concurrent sequences or batch tokens."""

    points: tuple[tuple[int, float], ...]

    def at(self, x: float) -> float:
        """Linear interpolation; clamped to the end points outside the measured range."""
        xs, ys = zip(*self.points)
        return float(np.interp(x, xs, ys))

    def saturation(self, fraction: float = 0.9) -> int:
        """The smallest x whose throughput reaches `fraction` of the best measured."""
        best = max(y for _, y in self.points)
        return next(x for x, y in self.points if y >= fraction * best)

    def as_list(self) -> list[list[float]]:
        return [[x, round(y, 2)] for x, y in self.points]


def _tokens(model: LlamaModel, n: int) -> list[int]:
    base = model.tokenize(FILLER, add_bos=False)
    return (base * math.ceil(n / len(base)))[:n]


def _report(progress: Progress | None, label: str, unit: str, points: list[tuple[int, float]]) -> None:
    if progress:
        for x, tps in points:
            progress(f"{label}: {x:>6} {unit}  {tps:8.1f} tok/s")


def measure_decode(model: LlamaModel, ns: Sequence[int], steps: int = 8, n_threads: int | None = None,
                   progress: Progress | None = None, top_k: int = 0) -> Curve:
    """For each n, n sequences forked from one short prompt decode one token each per forward pass (greedy).
    top_k: the device-side cut the engine's generator uses (0: whole rows to the host), which changes what a row
    costs.

    The points are measured round-robin, one pass each per round, so a burst of outside load hits them alike."""
    prompt = model.tokenize(FILLER, add_bos=model.add_bos)
    ctx = KVContext(model, n_ctx=len(prompt) + sum(ns) * (steps + 1), n_seq_max=sum(ns) + 1, n_threads=n_threads,
                    top_k=top_k)
    next_tok: dict[int, int] = {}

    def on_logits(seq: object, row: np.ndarray | Candidates) -> None:
        best = row.ids[np.argmax(row.logits)] if isinstance(row, Candidates) else np.argmax(row)
        next_tok[seq] = int(best)  # type: ignore[index]

    try:
        root = ctx.new_seq()
        ctx.decode([DecodeItem(root, prompt, [(len(prompt) - 1, root)])], on_logits)
        groups = {n: [ctx.fork(root) for _ in range(n)] for n in ns}
        for s in [s for g in groups.values() for s in g]:
            next_tok[s] = next_tok[root]
        best = {n: math.inf for n in ns}
        if progress:
            progress(f"generator decode: {', '.join(map(str, ns))} concurrent sequences, {steps} passes each")
        for round_ in range(steps + 1):  # round 0 is a warm-up
            for n, seqs in groups.items():
                t0 = time.perf_counter()
                ctx.decode([DecodeItem(s, [next_tok[s]], [(0, s)]) for s in seqs], on_logits)
                if round_:
                    best[n] = min(best[n], time.perf_counter() - t0)
    finally:
        ctx.close()
    points = [(n, n / best[n]) for n in ns]
    _report(progress, "generator decode", "sequences", points)
    return Curve(tuple(points))


def measure_prefill(model: LlamaModel, batch_tokens: Sequence[int], reps: int = 3, n_threads: int | None = None,
                    progress: Progress | None = None) -> Curve:
    """b new tokens split over sequences of PREFILL_CHUNK tokens, one decode call, logits at each sequence end."""
    tokens = _tokens(model, max(batch_tokens))
    max_seqs = math.ceil(max(batch_tokens) / PREFILL_CHUNK)
    ctx = KVContext(model, n_ctx=max(batch_tokens), n_seq_max=max_seqs, n_threads=n_threads)

    def one_call(b: int) -> float:
        seqs = [ctx.new_seq() for _ in range(math.ceil(b / PREFILL_CHUNK))]
        items = []
        for i, s in enumerate(seqs):
            chunk = tokens[i * PREFILL_CHUNK:min(b, (i + 1) * PREFILL_CHUNK)]
            items.append(DecodeItem(s, chunk, [(len(chunk) - 1, s)]))
        t0 = time.perf_counter()
        ctx.decode(items, lambda tag, logits: None)
        dt = time.perf_counter() - t0
        for s in seqs:
            ctx.free(s)
        return dt

    try:
        return prefill_curve(one_call, batch_tokens, reps, progress)
    finally:
        ctx.close()


def prefill_rows(tokens: Sequence[int], b: int) -> list[list[int]]:
    """b tokens of `tokens` (repeated as needed) as rows of PREFILL_CHUNK tokens, the last one shorter."""
    tokens = list(tokens) * math.ceil(b / len(tokens))
    return [tokens[i:min(b, i + PREFILL_CHUNK)] for i in range(0, b, PREFILL_CHUNK)]


def prefill_curve(one_call: Callable[[int], float], batch_tokens: Sequence[int], reps: int = 3,
                  progress: Progress | None = None) -> Curve:
    """The PRM prefill curve of any backend: one_call(b) runs b new tokens in PREFILL_CHUNK-token sequences, in one
    forward pass from fresh caches with a readout at each sequence end, and returns its seconds. Round-robin over
    the batch sizes, like measure_decode, after a warm-up call."""
    best = {b: math.inf for b in batch_tokens}
    if progress:
        progress(f"PRM prefill: {', '.join(map(str, batch_tokens))} batch tokens, {reps} calls each")
    one_call(min(batch_tokens))  # warm-up
    for _ in range(reps):
        for b in batch_tokens:
            best[b] = min(best[b], one_call(b))
    points = [(b, b / best[b]) for b in batch_tokens]
    _report(progress, "PRM prefill", "batch tokens", points)
    return Curve(tuple(points))
