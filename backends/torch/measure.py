"""Decode throughput of the torch backend by rows per pass: what `--policy auto` reads its pass cost from. The
llama.cpp backend's measure_decode on a TorchContext: `n` forks of one prompt append one token each per pass; each
point is the fastest of `steps` passes after a warm-up round (which captures the CUDA graphs), timed around a CUDA
synchronize; the points are measured round-robin, so a burst of outside load hits them alike."""

from __future__ import annotations

import math
import time
from collections.abc import Sequence

import torch

from edgereason.backends.llamacpp.runtime import DecodeItem
from edgereason.backends.throughput import FILLER, report
from edgereason.backends.torch.model import TorchModel
from edgereason.backends.torch.runtime import TorchContext
from edgereason.protocols import Points, Progress


def measure_decode(model: TorchModel, ns: Sequence[int], steps: int = 8, progress: Progress | None = None) -> Points:
    prompt = model.tokenize(FILLER, add_bos=model.add_bos)
    ctx = TorchContext(model, n_ctx=len(prompt) + sum(ns) * (steps + 1), n_seq_max=sum(ns) + 1)
    sync = torch.cuda.synchronize if ctx.device.type == "cuda" else (lambda: None)
    try:
        root = ctx.new_seq()
        _, logits = ctx.forward([DecodeItem(root, prompt, [(len(prompt) - 1, root)])])
        token = int(logits[0].argmax())  # every row feeds the prompt's greedy next token: the pass is what is timed
        groups = {n: [ctx.fork(root) for _ in range(n)] for n in ns}
        best = {n: math.inf for n in ns}
        for round_ in range(steps + 1):  # round 0 is a warm-up
            for n, seqs in groups.items():
                sync()
                t0 = time.perf_counter()
                ctx.forward([DecodeItem(s, [token], [(0, s)]) for s in seqs])
                sync()
                if round_:
                    best[n] = min(best[n], time.perf_counter() - t0)
    finally:
        ctx.close()
    points = [(n, n / best[n]) for n in ns]
    report(progress, "generator decode", "sequences", points)
    return tuple(points)
