"""The CUDA-graph decode pass (decode_graphs.py) without CUDA: its recorded body, replayed eagerly
on the CPU, over the padded rows and cell tables of its buckets, gives the eager pass's logits. The
capture itself needs a GPU (benchmarks/torch_pass.py measures it there)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from test_torch_pass_layout import laid_out

from edgereason.backends.context_roles import DecodeItem
from edgereason.backends.torch.cuda_graphs import ROW_BUCKETS, bucket
from edgereason.backends.torch.decode_graphs import DecodeGraphs
from edgereason.backends.torch.device_draws import draw_rows
from edgereason.backends.torch.generator import TorchGenerator
from edgereason.backends.torch.kv import table_width
from edgereason.backends.torch.runtime import TorchContext
from edgereason.config import SamplingParams
from edgereason.protocols import BatchEntry

# each test twice: the bodies as recorded, and compiled (conftest.fusion)
pytestmark = pytest.mark.usefixtures("fusion")


class _Replay:
    def __init__(self, body) -> None:
        self.replay = body


class EagerGraphs(DecodeGraphs):
    """A context's decode graphs that record nothing: `replay` runs the body the graph would have
    recorded."""

    captured: list[tuple[int, int, bool]]

    def __init__(self, ctx: TorchContext) -> None:
        super().__init__(ctx.model, ctx.cache)

    def _capture(self, rows: int, width: int, nucleus: bool):
        self.captured = getattr(self, "captured", []) + [(rows, width, nucleus)]
        graph = self.graphs[(rows, width, nucleus)] = _Replay(self._body(rows, width, nucleus))
        return graph


def test_buckets():
    assert [bucket(n, ROW_BUCKETS) for n in (1, 3, 8, 9, 128)] == [1, 4, 8, 16, 128]
    assert [table_width(n) for n in (1, 256, 257, 600)] == [256, 256, 512, 1024]


def _decode_rows(ctx: TorchContext, seqs: list[int], tokens: list[int]) -> np.ndarray:
    _, logits = ctx.forward(
        [DecodeItem(s, [t], [(0, i)]) for i, (s, t) in enumerate(zip(seqs, tokens))]
    )
    return logits.cpu().numpy()


def decode_setup(ctx: TorchContext, model) -> list[int]:
    """Three sequences forked from one prompt, their tables of three lengths."""
    prompt = model.tokenize(
        "Janet has 16 eggs and eats 3. How many are left? Let us count.", add_bos=True
    )
    root = ctx.new_seq()
    ctx.forward([DecodeItem(root, prompt, [])])
    short = ctx.fork(root)
    ctx.truncate(short, 5)
    seqs = [ctx.fork(root), short, ctx.fork(root)]
    ctx.forward([DecodeItem(seqs[2], [28, 1848], [])])
    return seqs


def test_a_padded_bucketed_pass_gives_the_eager_logits(torch_smollm2):
    ctx = TorchContext(torch_smollm2, 1024)
    seqs = decode_setup(ctx, torch_smollm2)
    lengths = [ctx.seq_len(s) for s in seqs]
    eager = _decode_rows(ctx, seqs, [216, 2068, 536])
    for s, n in zip(seqs, lengths):
        ctx.truncate(s, n)
    used = ctx.used_tokens
    ctx.decode_graphs = EagerGraphs(ctx)
    replayed = _decode_rows(ctx, seqs, [216, 2068, 536])
    # three rows padded to four, tables to 256 cells
    assert ctx.decode_graphs.captured == [(4, 256, False)]
    # other shapes round otherwise; a bug: 1+
    np.testing.assert_allclose(replayed, eager, atol=1e-3)
    # the padding row wrote only the pad cell, which is not counted
    assert ctx.used_tokens == used + 3
    ctx.check_integrity()
    again = _decode_rows(ctx, seqs, [30, 30, 30])  # the same bucket: replayed, not captured again
    assert ctx.decode_graphs.captured == [(4, 256, False)] and again.shape == (
        3,
        torch_smollm2.n_vocab,
    )


def test_a_prefill_or_a_column_readout_runs_eagerly(torch_smollm2):
    ctx = TorchContext(torch_smollm2, 256)
    graphs = EagerGraphs(ctx)
    assert graphs.fits(laid_out({0: [0], 1: [1]}), None)
    assert not graphs.fits(laid_out({0: [0, 1]}), None)
    assert not graphs.fits(laid_out({0: [0]}), torch.tensor([1, 2]))
    assert not graphs.fits(laid_out({i: [i] for i in range(ROW_BUCKETS[-1] + 1)}), None)


def test_the_draws_recorded_in_the_graph_are_the_device_samplers_on_its_logits(torch_smollm2):
    """A decode pass replayed from the graph draws each row's first token inside it, more draws
    eagerly from the same streams: exactly what draw_rows gives on the logits the graph left,
    whatever each row's settings."""
    gen = TorchGenerator(torch_smollm2, 1024)
    gen.ctx.decode_graphs = graphs = EagerGraphs(gen.ctx)
    prompt = torch_smollm2.tokenize(
        "Janet has 16 eggs and eats 3. How many are left?", add_bos=True
    )
    root = gen.new_seq()
    gen.step([BatchEntry(root, prompt)], [0], SamplingParams())  # a prefill: eager, draws nothing
    seqs = [gen.fork(root) for _ in range(5)]
    params = [
        SamplingParams(temperature=2.0, seed=1),  # hot: a wrong stream shows
        SamplingParams(temperature=0.0, seed=2),
        SamplingParams(temperature=2.0, top_p=0.95, seed=3),
        SamplingParams(temperature=0.7, seed=2**63 + 5),
        SamplingParams(temperature=0.8, seed=9),
    ]
    samples = [1, 1, 1, 3, 0]  # the fourth branches (three draws), the last only appends its token
    last = [prompt[-1]] * 5
    for _ in range(3):
        out = gen.step([BatchEntry(s, [t]) for s, t in zip(seqs, last)], samples, params)
        wanted = [i for i, n in enumerate(samples) if n]
        rows = graphs.logits[torch.tensor(wanted)]
        assert out[:4] == draw_rows(rows, [samples[i] for i in wanted], [params[i] for i in wanted])
        assert out[4] == [] and len(out[3]) == 3
        last = [o[0] if o else 30 for o in out]
    # five rows padded to eight; top_p < 1 in one row: nucleus
    assert graphs.captured == [(8, 256, True)]
    gen.ctx.check_integrity()  # the tables the graph wrote are the accounting's
    out = gen.step([BatchEntry(s, [t]) for s, t in zip(seqs[:2], last)], [1, 1], params[:2])
    assert graphs.captured[-1] == (2, 256, False) and out == draw_rows(
        graphs.logits[:2], [1, 1], params[:2]
    )
