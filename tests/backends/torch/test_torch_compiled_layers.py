"""Fused passes (compiled_layers.py): the decoder's layer compiled by inductor. On the CPU inductor
compiles it as it does for CUDA (C++ kernels in place of Triton's), so the compiled path's numerics,
its compiles, its kernel count and its fallbacks are checked here; where CUDA is present, the CUDA
graphs that record the compiled kernels too."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from test_torch_decode_graphs import EagerGraphs, _decode_rows, decode_setup
from test_torch_prefill_graphs import EagerPrefillGraphs, _verifier_like_pass

from benchmarks.torch_step_ops import compiled_counts, uncompiled_counts
from edgereason.backends.context_roles import DecodeItem
from edgereason.backends.torch import compiled_layers
from edgereason.backends.torch.runtime import TorchContext
from edgereason.errors import ConfigError
from edgereason.util import startup

CUDA = torch.cuda.is_available()


def test_compiled_passes_give_the_uncompiled_logits(torch_smollm2, float32_kv, monkeypatch):
    """Decode graph bodies, prefill graph bodies and eager passes, each compiled against the same
    uncompiled."""
    monkeypatch.setenv(compiled_layers.SWITCH, "0")
    plain = TorchContext(torch_smollm2, 1024)
    want_decode = _decode_rows(plain, decode_setup(plain, torch_smollm2), [216, 2068, 536])
    want_prefill = _verifier_like_pass(TorchContext(torch_smollm2, 1024), torch_smollm2)
    monkeypatch.setenv(compiled_layers.SWITCH, "1")
    for graphs in (True, False):  # the graphs' bodies (padded layout), then the eager pass (groups)
        ctx = TorchContext(torch_smollm2, 1024)
        if graphs:
            ctx.decode_graphs, ctx.prefill_graphs = EagerGraphs(ctx), EagerPrefillGraphs(ctx)
        got_decode = _decode_rows(ctx, decode_setup(ctx, torch_smollm2), [216, 2068, 536])
        np.testing.assert_allclose(got_decode, want_decode, atol=2e-4)  # a bug: 0.1+
        ctx.check_integrity()
        ctx = TorchContext(torch_smollm2, 1024)
        if graphs:
            ctx.prefill_graphs = EagerPrefillGraphs(ctx)
        np.testing.assert_allclose(_verifier_like_pass(ctx, torch_smollm2), want_prefill, atol=2e-4)


def test_three_compiles_serve_every_bucket(torch_smollm2, monkeypatch):
    """The rows, query slots and table widths are dynamic: once a pass of each kind has run (a
    prefill, one row, several rows of one token; dynamo keeps a copy for a size of 1 where the
    layer's views depend on it), passes of other rows, widths and prefill lengths compile nothing
    more. The compiles are timed as the start-up's compiles phase (util/startup.py), and passes
    that compile nothing add nothing to it."""
    from torch._dynamo.utils import counters

    monkeypatch.setenv(compiled_layers.SWITCH, "1")
    ctx = TorchContext(torch_smollm2, 2048)
    ctx.decode_graphs, ctx.prefill_graphs = EagerGraphs(ctx), EagerPrefillGraphs(ctx)
    seqs = decode_setup(ctx, torch_smollm2)  # prefills
    _decode_rows(ctx, seqs[:1], [216])
    _decode_rows(ctx, seqs, [216, 2068, 536])
    compiles = counters["stats"]["unique_graphs"]
    compiling_s = startup.seconds().get("compiles", 0.0)
    assert compiling_s > 0
    # a longer prefill; its table grows past 256
    ctx.forward([DecodeItem(seqs[0], list(range(300, 600)), [])])
    _decode_rows(ctx, seqs, [30, 31, 32])  # width 512
    _decode_rows(ctx, [ctx.fork(seqs[1]) for _ in range(9)], [40] * 9)  # 16 rows
    _decode_rows(ctx, seqs[1:2], [41])
    assert counters["stats"]["unique_graphs"] == compiles
    assert startup.seconds()["compiles"] == compiling_s
    assert set(ctx.decode_graphs.graphs) >= {
        (1, 256, False),
        (4, 256, False),
        (4, 512, False),
        (16, 256, False),
    }


def _mixed_pass(ctx: TorchContext, seqs: list[int], n_prefills: int, n_rows: int, n: int) -> None:
    """A pass that appends n, n + 1... tokens to `n_prefills` sequences and one to `n_rows`."""
    prefills = [ctx.fork(seqs[0]) for _ in range(n_prefills)]
    items = [DecodeItem(s, list(range(300, 300 + n + k)), [(0, k)]) for k, s in enumerate(prefills)]
    rows = [ctx.fork(seqs[1]) for _ in range(n_rows)]
    items += [DecodeItem(s, [50 + k], [(0, n_prefills + k)]) for k, s in enumerate(rows)]
    ctx.forward(items)


@pytest.mark.slow  # seven compiles of the layer
def test_no_pass_compiles_again_after_one_of_each_kind(torch_smollm2, monkeypatch):
    """TORCH_LOGS=recompiles names what splits the compiles: a prefill; one row or several (dynamo
    specializes a size of 1: the rotation's copy, the reshape of one query slot or one sequence);
    a pass of both (two attention groups, on the eager pass), with one sequence or several in each
    group; the graphs' bodies, whose attention has no token tensors, are a family of their own.
    After one pass of each kind, passes of other row counts, batch sizes, prompt lengths and table
    widths compile nothing: no guard ties a compiled copy to a size other than 1."""
    from torch._dynamo.utils import counters

    monkeypatch.setenv(compiled_layers.SWITCH, "1")
    for graphs in (False, True):
        ctx = TorchContext(torch_smollm2, 2048)
        if graphs:
            ctx.decode_graphs, ctx.prefill_graphs = EagerGraphs(ctx), EagerPrefillGraphs(ctx)
        seqs = decode_setup(ctx, torch_smollm2)  # prefills
        _decode_rows(ctx, seqs[:1], [216])
        _decode_rows(ctx, seqs, [216, 2068, 536])
        for n_prefills, n_rows in ((1, 1), (1, 2), (2, 1), (2, 2)):
            _mixed_pass(ctx, seqs, n_prefills, n_rows, 3)
        warm = counters["stats"]["unique_graphs"]
        for n in (2, 5, 8, 13):  # rows (batch sizes), each bucket's
            _decode_rows(ctx, [ctx.fork(seqs[n % 3]) for _ in range(n)], [40 + n] * n)
        _decode_rows(ctx, seqs[1:2], [41])
        for n_prefills, n_rows, n in ((1, 3, 7), (3, 1, 2), (3, 5, 20)):
            _mixed_pass(ctx, seqs, n_prefills, n_rows, n)
        ctx.forward([DecodeItem(seqs[0], list(range(600, 900)), [])])  # a table past 256 cells
        _decode_rows(ctx, seqs, [30, 31, 32])  # width 512
        _decode_rows(ctx, seqs[:1], [33])
        assert compiled_layers.enabled()
        assert counters["stats"]["unique_graphs"] == warm, "a pass compiled after the warm-up"


@pytest.mark.slow  # two compiles of the layer, a step profiled
def test_a_compiled_decode_step_launches_at_most_12_kernels_a_layer(monkeypatch):
    """The kernels of a compiled decode step of SmolLM2 (8 rows, draws included): the compiled
    layer's launches (inductor's code) per layer, and the whole step's over the layers (what runs
    outside the layers, the embedding, rope tables, mask, final norm, logits and sampler, counted as
    operations)."""
    monkeypatch.setenv(compiled_layers.SWITCH, "1")
    uncompiled = uncompiled_counts("smollm2-135m", 8)
    counts = compiled_counts("smollm2-135m", 8, outside_layers=uncompiled["outside_layers"])
    assert counts["per_layer"] <= 12 and counts["in_step_per_layer"] <= 12, counts
    assert counts["per_layer"] < uncompiled["per_layer"] / 1.5, (counts, uncompiled["per_layer"])
    # the count read inductor's code, not an empty list
    assert "extern_kernels.mm" in counts["layer_kernels"]


def test_a_failed_compile_runs_the_pass_uncompiled_after_one_line(
    torch_smollm2, monkeypatch, capsys
):
    from torch._dynamo.exc import TorchDynamoException

    calls = []

    def broken(*args):
        calls.append(1)
        raise TorchDynamoException("Cannot find a working triton installation")

    monkeypatch.setenv(compiled_layers.SWITCH, "1")
    monkeypatch.setattr(compiled_layers, "_off", [])
    monkeypatch.setattr(compiled_layers, "_compiled_block", lambda: broken)
    monkeypatch.setattr(torch._dynamo, "reset", lambda: None)
    ctx = TorchContext(torch_smollm2, 1024)
    seqs = decode_setup(ctx, torch_smollm2)
    # the prompt's pass failed twice (the cache removed between) and ran plain
    assert not compiled_layers.enabled()
    assert len(calls) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "passes run uncompiled" in err[0] and "working triton" in err[0]
    monkeypatch.setenv(compiled_layers.SWITCH, "0")
    plain = TorchContext(torch_smollm2, 1024)
    want = _decode_rows(plain, decode_setup(plain, torch_smollm2), [216, 2068, 536])
    np.testing.assert_array_equal(_decode_rows(ctx, seqs, [216, 2068, 536]), want)
    assert len(calls) == 2 and capsys.readouterr().err == ""  # said once, not tried again


def test_a_damaged_cache_is_made_anew(tmp_path, monkeypatch):
    """A compile error with a cache in place: the cache is removed and the compile tried once
    more."""
    from torch._dynamo.exc import TorchDynamoException

    cache = tmp_path / "inductor"
    (cache / "fxgraph").mkdir(parents=True)
    (cache / "fxgraph" / "entry").write_bytes(b"\x00truncated")
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(cache))
    monkeypatch.setattr(torch._dynamo, "reset", lambda: None)
    tries = []

    def run():
        tries.append(cache.exists())
        if len(tries) == 1:
            raise TorchDynamoException("failed to load the cached graph")
        return "compiled"

    assert compiled_layers.first_run(run) == "compiled"
    assert tries == [True, False]


def test_out_of_memory_while_compiling_names_gpu_memory(torch_smollm2, monkeypatch):
    from torch._dynamo.exc import TorchDynamoException

    from edgereason.errors import OutOfMemoryError

    def no_room(*args):
        try:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        except torch.OutOfMemoryError as e:
            raise TorchDynamoException("benchmarking a kernel failed") from e

    monkeypatch.setenv(compiled_layers.SWITCH, "1")
    monkeypatch.setattr(compiled_layers, "_off", [])
    monkeypatch.setattr(compiled_layers, "_compiled_block", lambda: no_room)
    ctx = TorchContext(torch_smollm2, 256)
    with pytest.raises(
        OutOfMemoryError,
        match="ran out of memory in a forward pass of 4 tokens; lower --gpu-memory",
    ):
        ctx.forward([DecodeItem(ctx.new_seq(), [1, 2, 3, 4], [(3, 0)])])
    assert (
        compiled_layers.enabled() and ctx.used_tokens == 0
    )  # not a compile failure; the cells went back


def test_the_switch_is_checked(monkeypatch):
    monkeypatch.setenv(compiled_layers.SWITCH, "yes")
    with pytest.raises(ConfigError, match="EDGEREASON_COMPILE='yes': set it to 1"):
        compiled_layers.enabled()
    monkeypatch.delenv(compiled_layers.SWITCH)
    # off by default: a process's compile cost more than its passes gained (H200)
    assert not compiled_layers.enabled()
    monkeypatch.setenv(compiled_layers.SWITCH, "1")
    assert compiled_layers.enabled()


@pytest.mark.skipif(not CUDA, reason="CUDA graphs of compiled kernels need a GPU")
def test_cuda_graphs_record_the_compiled_kernels(smollm2_path, torch_smollm2, monkeypatch):
    """On CUDA: decode and prefill graphs captured compiled are as near the CPU's float32 pass as
    the uncompiled graphs are (both bf16), and the draws recorded in a compiled decode graph are the
    sampler's on its logits."""
    from edgereason.backends.torch.device_draws import draw_rows
    from edgereason.backends.torch.model import load_model
    from edgereason.config import SamplingParams

    model = load_model(str(smollm2_path), "cuda")
    results = {}
    for switch in ("0", "1"):
        monkeypatch.setenv(compiled_layers.SWITCH, switch)
        ctx = TorchContext(model, 2048)
        ctx.prefill_graphs.capture_at = 1
        seqs = decode_setup(ctx, model)
        results[switch] = (
            _decode_rows(ctx, seqs, [216, 2068, 536]),
            _verifier_like_pass(ctx, model),
        )
        # both kinds were captured and replayed
        assert ctx.decode_graphs.graphs and ctx.prefill_graphs.graphs
        params = [SamplingParams(temperature=0.8, seed=s) for s in (1, 2, 3)]
        items = [DecodeItem(s, [30], [(0, i)]) for i, s in enumerate(seqs)]
        _, drawn = ctx.forward_draw(items, [1, 1, 1], params)
        assert [d[0] for d in drawn] == [
            r[0] for r in draw_rows(ctx.decode_graphs.logits[:3], [1, 1, 1], params)
        ]
    monkeypatch.setenv(compiled_layers.SWITCH, "0")  # the reference is the CPU's plain float32 pass
    cpu = TorchContext(torch_smollm2, 2048)
    reference = (
        _decode_rows(cpu, decode_setup(cpu, torch_smollm2), [216, 2068, 536]),
        _verifier_like_pass(cpu, torch_smollm2),
    )
    for compiled, uncompiled, want in zip(results["1"], results["0"], reference):
        # bf16 rounds each path its own way: on an H100 both were 0.45-0.55 from float32 at most,
        # and 0.69 apart
        bf16_error = np.abs(uncompiled - want).max()
        assert np.abs(compiled - want).max() <= 1.5 * bf16_error + 0.1
        agrees = uncompiled.argmax(-1) == want.argmax(-1)
        assert (compiled.argmax(-1) == want.argmax(-1))[agrees].all()
