"""The CUDA-graph decode pass (graphs.py) without CUDA: its recorded body, replayed eagerly on the CPU, over the
padded rows and cell tables of its buckets, gives the eager pass's logits. The capture itself needs a GPU
(benchmarks/torch_pass.py measures it there)."""

from __future__ import annotations

import numpy as np
import torch

from edgereason.backends.llamacpp.runtime import DecodeItem
from edgereason.backends.torch.graphs import ROW_BUCKETS, DecodeGraphs, bucket
from edgereason.backends.torch.kv import table_width
from edgereason.backends.torch.runtime import TorchContext


class _Replay:
    def __init__(self, body) -> None:
        self.replay = body


class EagerGraphs(DecodeGraphs):
    """Records nothing: `replay` runs the body the graph would have recorded."""

    captured: list[tuple[int, int]]

    def _capture(self, rows: int, width: int):
        self.captured = getattr(self, "captured", []) + [(rows, width)]
        graph = self.graphs[(rows, width)] = _Replay(self._body(rows, width))
        return graph


def test_buckets():
    assert [bucket(n, ROW_BUCKETS) for n in (1, 3, 8, 9, 128)] == [1, 4, 8, 16, 128]
    assert [table_width(n) for n in (1, 256, 257, 600)] == [256, 256, 512, 1024]


def _decode_rows(ctx: TorchContext, seqs: list[int], tokens: list[int]) -> np.ndarray:
    _, logits = ctx.forward([DecodeItem(s, [t], [(0, i)]) for i, (s, t) in enumerate(zip(seqs, tokens))])
    return logits.numpy()


def test_a_padded_bucketed_pass_gives_the_eager_logits(torch_smollm2):
    ctx = TorchContext(torch_smollm2, 1024)
    prompt = torch_smollm2.tokenize("Janet has 16 eggs and eats 3. How many are left? Let us count.", add_bos=True)
    root = ctx.new_seq()
    ctx.forward([DecodeItem(root, prompt, [])])
    short = ctx.fork(root)
    ctx.truncate(short, 5)
    seqs = [ctx.fork(root), short, ctx.fork(root)]
    ctx.forward([DecodeItem(seqs[2], [28, 1848], [])])  # three tables of three lengths
    lengths = [ctx.seq_len(s) for s in seqs]
    eager = _decode_rows(ctx, seqs, [216, 2068, 536])
    for s, n in zip(seqs, lengths):
        ctx.truncate(s, n)
    used = ctx.used_tokens
    ctx.graphs = EagerGraphs(ctx)
    replayed = _decode_rows(ctx, seqs, [216, 2068, 536])
    assert ctx.graphs.captured == [(4, 256)]  # three rows padded to four, tables to 256 cells
    np.testing.assert_allclose(replayed, eager, atol=5e-3)  # other shapes round otherwise (f16 KV); a bug: 1+
    assert ctx.used_tokens == used + 3  # the padding row wrote only the pad cell, which is not counted
    ctx.check_integrity()
    again = _decode_rows(ctx, seqs, [30, 30, 30])  # the same bucket: replayed, not captured again
    assert ctx.graphs.captured == [(4, 256)] and again.shape == (3, torch_smollm2.n_vocab)


def test_a_prefill_or_a_column_readout_runs_eagerly(torch_smollm2):
    ctx = TorchContext(torch_smollm2, 256)
    graphs = EagerGraphs(ctx)
    assert graphs.fits({0: [0], 1: [1]}, None)
    assert not graphs.fits({0: [0, 1]}, None)
    assert not graphs.fits({0: [0]}, torch.tensor([1, 2]))
    assert not graphs.fits({i: [i] for i in range(ROW_BUCKETS[-1] + 1)}, None)
