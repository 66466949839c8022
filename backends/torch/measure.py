"""Decode throughput of the torch backend by rows per pass: what `--policy auto` reads its pass cost from. The
llama.cpp backend's measure_decode on a TorchContext: `n` forks of one prompt append one token each per pass, timed
by throughput.decode_points around a CUDA synchronize (its warm-up round captures the CUDA graphs)."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from edgereason.backends.llamacpp.runtime import DecodeItem
from edgereason.backends.throughput import FILLER, decode_points
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
        return decode_points(
            lambda n: ctx.forward([DecodeItem(s, [token], [(0, s)]) for s in groups[n]]), ns, steps, progress, sync
        )
    finally:
        ctx.close()
