"""Prefill passes as CUDA graphs (prefill_graphs.py) without CUDA: the recorded body, replayed
eagerly on the CPU, over the padded layout of its buckets, gives the eager pass's logits and layer
outputs and takes the same cells; a capture that fails runs the pass eagerly after one line. The
capture itself needs a GPU."""

from __future__ import annotations

import numpy as np
import pytest
from test_torch_pass_layout import laid_out

from edgereason.backends.context_roles import DecodeItem
from edgereason.backends.prm_format import prm_format
from edgereason.backends.torch import prefill_graphs
from edgereason.backends.torch.prefill_graphs import MAX_ROWS, PrefillGraphs
from edgereason.backends.torch.runtime import TorchContext
from edgereason.backends.torch.verifier import TorchVerifier
from edgereason.protocols import ScoreRequest

# each test twice: the bodies as recorded, and compiled (conftest.fusion)
pytestmark = pytest.mark.usefixtures("fusion")


class _Replay:
    def __init__(self, body) -> None:
        self.replay = body


class EagerPrefillGraphs(PrefillGraphs):
    """A context's prefill graphs that record nothing: `replay` runs the body the graph would have
    recorded. Every shape is captured at its first pass (capture_at 1), unless told otherwise."""

    def __init__(self, ctx: TorchContext, capture_at: int = 1) -> None:
        super().__init__(ctx.model, ctx.cache, ctx.layers)
        self.captured: list[tuple[int, int, int]] = []
        self.capture_at = capture_at

    def _capture(self, n_seq: int, longest: int, width: int):
        self.captured.append((n_seq, longest, width))
        graph = self.graphs[(n_seq, longest, width)] = _Replay(self._body(n_seq, longest, width))
        return graph


PROMPT = "Janet has 16 eggs and eats 3. How many are left? Let us count them one by one."


def _verifier_like_pass(ctx: TorchContext, model) -> np.ndarray:
    """Three paths forked from a prompt, each appending a step of its own length, rows read at
    several tokens."""
    prompt = model.tokenize(PROMPT, add_bos=True)
    root = ctx.new_seq()
    ctx.forward([DecodeItem(root, prompt, [])])
    seqs = [ctx.fork(root) for _ in range(3)]
    steps = [[28, 1848, 216, 2068, 536], list(range(300, 317)), [451, 30]]
    items = [
        DecodeItem(seqs[0], steps[0], [(4, "a")]),
        DecodeItem(seqs[1], steps[1], [(3, "b3"), (16, "b")]),
        DecodeItem(seqs[2], steps[2], [(1, "c")]),
    ]
    tags, rows = ctx.forward(items, ctx.columns)
    assert tags == ["a", "b3", "b", "c"]
    ctx.check_integrity()
    return rows.float().cpu().numpy()


@pytest.mark.parametrize("readout", ["rows", "columns and layers"])
def test_a_replayed_prefill_gives_the_eager_pass(torch_smollm2, readout):
    kwargs = {} if readout == "rows" else {"columns": [5, 77, 9001], "layers": (3, 17)}
    eager = TorchContext(torch_smollm2, 1024, **kwargs)
    want = _verifier_like_pass(eager, torch_smollm2)
    replayed = TorchContext(torch_smollm2, 1024, **kwargs)
    replayed.prefill_graphs = graphs = EagerPrefillGraphs(replayed)
    got = _verifier_like_pass(replayed, torch_smollm2)
    # the prompt (one sequence of 18 tokens) and the steps (3 sequences, up to 17 tokens): two
    # buckets
    assert graphs.captured == [(1, 32, 256), (4, 32, 256)]
    assert (
        got.shape == want.shape == (4, torch_smollm2.n_vocab if readout == "rows" else 3 + 2 * 576)
    )
    np.testing.assert_allclose(got, want, atol=1e-3)  # other shapes round otherwise; a bug: 0.1+
    # padding wrote only the pad cell, which is not counted
    assert replayed.used_tokens == eager.used_tokens


def test_a_shape_is_captured_the_second_time_it_comes(torch_smollm2):
    ctx = TorchContext(torch_smollm2, 2048)
    ctx.prefill_graphs = graphs = EagerPrefillGraphs(ctx, capture_at=2)
    _verifier_like_pass(ctx, torch_smollm2)
    assert graphs.captured == [] and set(graphs.seen) == {(1, 32, 256), (4, 32, 256)}
    # the same shapes again (the tables still under 256 cells)
    _verifier_like_pass(ctx, torch_smollm2)
    assert graphs.captured == [(1, 32, 256), (4, 32, 256)]


def test_what_runs_as_a_prefill_graph(torch_smollm2):
    graphs = EagerPrefillGraphs(TorchContext(torch_smollm2, 256))
    assert graphs.fits(laid_out({0: [0, 1], 1: [2]}))
    # decode rows alone: the decode graphs' business
    assert not graphs.fits(laid_out({0: [0], 1: [1]}))
    assert not graphs.fits(laid_out({0: list(range(MAX_ROWS + 1))}))
    assert not graphs.fits(laid_out({i: [2 * i, 2 * i + 1] for i in range(129)}))


def test_a_capture_that_fails_runs_eagerly_after_one_line(torch_smollm2, monkeypatch, capsys):
    def refuse(*_args):
        raise RuntimeError("operation not permitted when stream is capturing")

    monkeypatch.setattr(prefill_graphs, "capture", refuse)
    want = _verifier_like_pass(TorchContext(torch_smollm2, 1024), torch_smollm2)
    ctx = TorchContext(torch_smollm2, 1024)
    ctx.prefill_graphs = PrefillGraphs(ctx.model, ctx.cache, ctx.layers)
    ctx.prefill_graphs.capture_at = 1
    got = _verifier_like_pass(ctx, torch_smollm2)
    np.testing.assert_allclose(got, want, atol=1e-5)  # the eager pass itself
    err = capsys.readouterr().err.strip().splitlines()
    assert (
        len(err) == 1 and "prefills run without CUDA graphs" in err[0] and ctx.prefill_graphs.broken
    )


def test_a_verifier_scores_alike_from_prefill_graphs(torch_smollm2):
    q = (
        "Natalia sold 48 clips in April and half as many in May. How many clips did she sell in "
        "all?"
    )
    steps = [
        "In May she sold 48 / 2 = 24 clips.",
        "Altogether 48 + 24 = 72 clips.",
        "The answer is 72.",
    ]
    requests = [
        ScoreRequest("a", q, steps, [0, 1, 2], "root", 0),
        ScoreRequest("b", q, steps[:1], [0], "root", 0),
    ]
    want = [
        r.scores for r in TorchVerifier(torch_smollm2, prm_format("judge"), 2048).score(requests)
    ]
    v = TorchVerifier(torch_smollm2, prm_format("judge"), 2048)
    v.ctx.prefill_graphs = graphs = EagerPrefillGraphs(v.ctx)
    got = [r.scores for r in v.score(requests)]
    assert graphs.captured and [len(s) for s in got] == [3, 1]
    np.testing.assert_allclose(sum(got, []), sum(want, []), atol=1e-3)
    v.check_integrity()
