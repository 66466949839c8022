"""The paged decode kernel (paged_decode.py, paged_decode_kernel.py) against the gathered SDPA
(attention.py) it replaces in the decode graphs. Without CUDA it runs in Triton's interpreter on CPU
tensors (TRITON_INTERPRET=1, where Triton is installed: it is no dependency); on CUDA, compiled to
the GPU, in bf16 and inside the CUDA graphs."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from test_torch_decode_graphs import EagerGraphs, _decode_rows, decode_setup

from edgereason.backends.torch import attention_choice
from edgereason.backends.torch.attention import AttentionGroup, LayerAttention, visibility_bias
from edgereason.backends.torch.paged_decode import PagedDecodeAttention
from edgereason.backends.torch.runtime import TorchContext

pytest.importorskip("triton")
CUDA = torch.cuda.is_available()


@pytest.fixture()
def kernel():
    """The kernel module: on a GPU compiled, else in Triton's interpreter (tests/conftest.py)."""
    from edgereason.backends.torch import paged_decode_kernel

    return paged_decode_kernel


def beam_cache(heads, kv_heads, dim, lengths, dtype, device, seed=0):
    """A layer's cache and the tables of len(lengths) rows, a beam search's: each row shares its
    first half with row 0 (forked), then owns cells of its own; entries past a row's length are
    stale cells (the mask, or the kernel's length, must hide them). Returns (data, tables, seqs,
    positions, q, new_kv, write)."""
    gen = torch.Generator().manual_seed(seed)
    rows, width = len(lengths), 1 << max(8, (max(lengths) - 1).bit_length())
    cells = rows * width + 1
    data = torch.randn(cells, 2 * kv_heads, dim, generator=gen).to(dtype)
    tables = torch.randperm(cells - 1, generator=gen)[: rows * width].view(rows, width)
    for r, n in enumerate(lengths):
        tables[r, : n // 2] = tables[0, : n // 2]
    tables = torch.cat([tables, torch.full((1, width), cells - 1)]).to(torch.int32)  # a pad row
    positions = torch.tensor(lengths) - 1
    seqs = torch.arange(rows)
    q = torch.randn(rows, heads, dim, generator=gen).to(dtype)
    new_kv = torch.randn(rows, 2 * kv_heads, dim, generator=gen).to(dtype)
    write = tables[seqs, positions].long()  # the new token's cell ends each table
    at = lambda t: t.to(device)  # noqa: E731
    return tuple(map(at, (data, tables, seqs, positions, q, new_kv, write)))


def gathered(data, tables, seqs, positions, q, new_kv, write):
    """The decode graphs' gathered SDPA (cuda_graphs.padded_attention's group) over a copy of
    `data`: [rows, H * D]."""
    width, group = tables.shape[1], q.shape[1] // (data.shape[1] // 2)
    visible = torch.arange(width, device=q.device)[None, None, :] <= positions.view(-1, 1, 1)
    padded = AttentionGroup(
        query_rows=torch.arange(len(seqs), device=q.device)[:, None],
        cells=tables[seqs].long(),
        bias=visibility_bias(visible, group, q.dtype),
        tokens=None,
        padded_at=None,
    )
    return LayerAttention(data.clone(), write, [padded])(q, new_kv)


SHAPES = {"1.5b": (12, 2, 128), "smollm2": (9, 3, 64)}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize("shape", SHAPES, ids=SHAPES)
@pytest.mark.parametrize("splits", [1, 3], ids=["one-split", "three-splits"])
def test_the_paged_kernel_gives_the_gathered_attention(kernel, shape, dtype, splits):
    """Rows of lengths 1 to 2000 with shared prefixes and stale entries past each length: the
    kernel, with one split (no combine) and with three, is the gathered SDPA's attention, to fp32's
    rounding or bf16's."""
    heads, kv_heads, dim = SHAPES[shape]
    data, tables, seqs, positions, q, new_kv, write = beam_cache(
        heads, kv_heads, dim, [1, 2, 65, 700, 2000], dtype, "cpu"
    )
    want = gathered(data, tables, seqs, positions, q, new_kv, write)
    from edgereason.backends.torch.kv import write_cells

    write_cells(data, write, new_kv)
    got = kernel.paged_decode(q[:, :heads], data, tables, seqs, positions, splits=splits)
    tol = 1e-5 if dtype == torch.float32 else 2e-2
    torch.testing.assert_close(got.view(len(seqs), -1), want, atol=tol, rtol=tol)


@pytest.mark.parametrize("fused", ["uncompiled", "compiled"])
def test_decode_graphs_with_the_paged_kernel_give_the_eager_logits(
    torch_smollm2, float32_kv, kernel, monkeypatch, fused
):
    """SmolLM2's decode graph bodies (replayed eagerly: three rows padded to four, one of them
    reading the all-pad table row) attending with the paged kernel, as recorded and with the layer
    compiled around the kernel's op, give the eager pass's logits (the gathered SDPA)."""
    from edgereason.backends.torch import compiled_layers

    monkeypatch.setenv(compiled_layers.SWITCH, "1" if fused == "compiled" else "0")
    ctx = TorchContext(torch_smollm2, 1024)
    seqs = decode_setup(ctx, torch_smollm2)
    lengths = [ctx.seq_len(s) for s in seqs]
    eager = _decode_rows(ctx, seqs, [216, 2068, 536])
    for s, n in zip(seqs, lengths):
        ctx.truncate(s, n)
    monkeypatch.setenv(attention_choice.SWITCH, attention_choice.PAGED)
    ctx.decode_graphs = EagerGraphs(ctx)
    calls = []
    monkeypatch.setattr(
        PagedDecodeAttention, "__call__", _counted(PagedDecodeAttention.__call__, calls)
    )
    replayed = _decode_rows(ctx, seqs, [216, 2068, 536])
    assert ctx.decode_graphs.captured == [(4, 256, False)]
    assert calls, "the decode pass did not attend with the paged kernel"
    np.testing.assert_allclose(replayed, eager, atol=1e-3)
    ctx.check_integrity()


def _counted(call, calls: list):
    def counted(self, q, new_kv):
        calls.append(q.shape[0])
        return call(self, q, new_kv)

    return counted


@pytest.mark.skipif(not CUDA, reason="the kernel compiled for a GPU")
@pytest.mark.parametrize("shape", SHAPES, ids=SHAPES)
def test_cuda_paged_kernel_gives_the_gathered_attention(kernel, shape):
    """On the GPU in bf16, 64 rows of lengths 1 to 2000 (the splits the GPU's size picks, then the
    combine): the gathered SDPA's attention to bf16's rounding."""
    heads, kv_heads, dim = SHAPES[shape]
    lengths = torch.randint(1, 2001, (64,), generator=torch.Generator().manual_seed(1)).tolist()
    args = beam_cache(heads, kv_heads, dim, [1, 2000, *lengths[2:]], torch.bfloat16, "cuda")
    data, tables, seqs, positions, q, new_kv, write = args
    want = gathered(*args)
    paged = PagedDecodeAttention(data, write, tables, seqs, positions)
    assert kernel.split_count(64, kv_heads, tables.shape[1], q.device) > 1
    torch.testing.assert_close(paged(q, new_kv), want, atol=2e-2, rtol=2e-2)


@pytest.mark.skipif(not CUDA, reason="CUDA graphs need a GPU")
def test_cuda_graphs_with_the_paged_kernel_give_the_gathered_logits(
    smollm2_path, torch_smollm2, monkeypatch
):
    """SmolLM2's decode graphs captured with each attention, uncompiled and compiled: the paged
    kernel's logits are as near the CPU's float32 pass as the gathered SDPA's (both bf16)."""
    from edgereason.backends.torch import compiled_layers
    from edgereason.backends.torch.model import load_model

    model = load_model(str(smollm2_path), "cuda")
    monkeypatch.setenv(compiled_layers.SWITCH, "0")
    cpu = TorchContext(torch_smollm2, 2048)
    want = _decode_rows(cpu, decode_setup(cpu, torch_smollm2), [216, 2068, 536])
    for switch in ("0", "1"):
        monkeypatch.setenv(compiled_layers.SWITCH, switch)
        got = {}
        for kind in (attention_choice.GATHERED, attention_choice.PAGED):
            monkeypatch.setenv(attention_choice.SWITCH, kind)
            ctx = TorchContext(model, 2048)
            got[kind] = _decode_rows(ctx, decode_setup(ctx, model), [216, 2068, 536])
            assert ctx.decode_graphs.graphs
        bf16_error = np.abs(got[attention_choice.GATHERED] - want).max()
        assert np.abs(got[attention_choice.PAGED] - want).max() <= 1.5 * bf16_error + 0.1
        agrees = got[attention_choice.GATHERED].argmax(-1) == want.argmax(-1)
        assert (got[attention_choice.PAGED].argmax(-1) == want.argmax(-1))[agrees].all()
