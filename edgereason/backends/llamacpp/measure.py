"""Throughput points (x, tokens per second) measured on the real model: generator decode vs
concurrent sequences, PRM prefill vs batch tokens. Each point is the fastest of several timed
forward passes after a warm-up: other work on a shared CPU only ever slows a pass down, so the
fastest pass is the best estimate of the model's own speed. A small KV context is used: speed
depends mostly on the batch. Cells that other sequences hold cost every pass something too (the
attention mask and scan cover them: docs/results.md, "Where a GPU pass's time goes"), which the
curves leave out.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence

import numpy as np

from edgereason.backends.context_roles import DecodeItem
from edgereason.backends.llamacpp.device_sampling import Candidates
from edgereason.backends.llamacpp.model import LlamaModel
from edgereason.backends.llamacpp.runtime import KVContext
from edgereason.backends.throughput import FILLER, PREFILL_CHUNK, best_rates, decode_points
from edgereason.protocols import Points, Progress


def _tokens(model: LlamaModel, n: int) -> list[int]:
    base = model.tokenize(FILLER, add_bos=False)
    return (base * math.ceil(n / len(base)))[:n]


def measure_decode(
    model: LlamaModel,
    ns: Sequence[int],
    steps: int = 8,
    n_threads: int | None = None,
    progress: Progress | None = None,
    top_k: int = 0,
) -> Points:
    """For each n, n sequences forked from one short prompt decode one token each per forward pass
    (greedy). top_k: the device-side cut the engine's generator uses (0: whole rows to the host),
    which changes what a row costs."""
    prompt = model.tokenize(FILLER, add_bos=model.add_bos)
    ctx = KVContext(
        model,
        n_ctx=len(prompt) + sum(ns) * (steps + 1),
        n_seq_max=sum(ns) + 1,
        n_threads=n_threads,
        top_k=top_k,
    )
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
        return decode_points(
            lambda n: ctx.decode(
                [DecodeItem(s, [next_tok[s]], [(0, s)]) for s in groups[n]], on_logits
            ),
            ns,
            steps,
            progress,
        )
    finally:
        ctx.close()


def measure_prefill(
    model: LlamaModel,
    batch_tokens: Sequence[int],
    reps: int = 3,
    n_threads: int | None = None,
    progress: Progress | None = None,
) -> Points:
    """b new tokens split over sequences of PREFILL_CHUNK tokens, one decode call, logits at each
    sequence end."""
    tokens = _tokens(model, max(batch_tokens))
    max_seqs = math.ceil(max(batch_tokens) / PREFILL_CHUNK)
    ctx = KVContext(model, n_ctx=max(batch_tokens), n_seq_max=max_seqs, n_threads=n_threads)

    def one_call(b: int) -> float:
        seqs = [ctx.new_seq() for _ in range(math.ceil(b / PREFILL_CHUNK))]
        items = []
        for i, s in enumerate(seqs):
            chunk = tokens[i * PREFILL_CHUNK : min(b, (i + 1) * PREFILL_CHUNK)]
            items.append(DecodeItem(s, chunk, [(len(chunk) - 1, s)]))
        t0 = time.perf_counter()
        ctx.decode(items, lambda tag, logits: None)
        dt = time.perf_counter() - t0
        for s in seqs:
            ctx.free(s)
        return dt

    try:
        return best_rates(one_call, batch_tokens, reps, progress)
    finally:
        ctx.close()
