"""Throughput points of the torch backend, with the llama.cpp backend's semantics
(backends/llamacpp/measure.py): generator decode by rows per pass (what `--policy auto` reads its
pass cost from, and memory-profile's generator curve) and PRM prefill by batch tokens
(memory-profile's PRM curve). Each pass is timed around a CUDA synchronize; decode's warm-up round
captures the CUDA graphs."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence

import torch

from edgereason.backends.context_roles import DecodeItem
from edgereason.backends.throughput import (
    FILLER,
    PREFILL_CHUNK,
    best_rates,
    decode_points,
    prefill_rows,
)
from edgereason.backends.torch.model import TorchModel
from edgereason.backends.torch.runtime import TorchContext
from edgereason.protocols import Points, Progress


def _sync(ctx: TorchContext) -> Callable[[], None]:
    """Waits for the device's queued work: a CUDA pass returns before it has run."""
    return torch.cuda.synchronize if ctx.device.type == "cuda" else (lambda: None)


def measure_decode(
    model: TorchModel, ns: Sequence[int], steps: int = 8, progress: Progress | None = None
) -> Points:
    """For each n, n forks of one prompt append one token each per pass."""
    prompt = model.tokenize(FILLER, add_bos=model.add_bos)
    ctx = TorchContext(model, n_ctx=len(prompt) + sum(ns) * (steps + 1), n_seq_max=sum(ns) + 1)
    sync = _sync(ctx)
    try:
        root = ctx.new_seq()
        _, logits = ctx.forward([DecodeItem(root, prompt, [(len(prompt) - 1, root)])])
        # every row feeds the prompt's greedy next token: the pass is what is timed
        token = int(logits[0].argmax())
        groups = {n: [ctx.fork(root) for _ in range(n)] for n in ns}
        return decode_points(
            lambda n: ctx.forward([DecodeItem(s, [token], [(0, s)]) for s in groups[n]]),
            ns,
            steps,
            progress,
            sync,
        )
    finally:
        ctx.close()


def measure_prefill(
    model: TorchModel, batch_tokens: Sequence[int], reps: int = 3, progress: Progress | None = None
) -> Points:
    """b new tokens split over sequences of PREFILL_CHUNK tokens, one forward call, the logits of
    each sequence's last token (whole rows, as llama.cpp's: the verifier reads a few columns of
    them, a negligible difference)."""
    filler = model.tokenize(FILLER, add_bos=False)
    n_seq_max = math.ceil(max(batch_tokens) / PREFILL_CHUNK)
    # the verifier's: eager
    ctx = TorchContext(model, n_ctx=max(batch_tokens), n_seq_max=n_seq_max, graphs=False)
    sync = _sync(ctx)

    def one_call(b: int) -> float:
        rows = prefill_rows(filler, b)
        seqs = [ctx.new_seq() for _ in rows]
        items = [DecodeItem(s, row, [(len(row) - 1, s)]) for s, row in zip(seqs, rows)]
        sync()
        t0 = time.perf_counter()
        ctx.forward(items)
        sync()
        seconds = time.perf_counter() - t0
        for s in seqs:
            ctx.free(s)
        return seconds

    try:
        return best_rates(one_call, batch_tokens, reps, progress)
    finally:
        ctx.close()
