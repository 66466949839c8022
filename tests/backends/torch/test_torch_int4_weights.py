"""4-bit matrices (int4_weights.py). A GGUF matrix as 4-bit groups: Q4_0, Q4_1 and Q4_K read from
their raw blocks stand for exactly the values gguf-py's dequantizers give (SmolLM2's real Q4_1
matrices, Q4_0 from gguf's quantizer, Q4_K blocks written here as ggml lays them out, and the 0.5B's
real Q4_K where a pull has cached it); any other type is requantized, with its error held to what 4
bits cost.

The product: x @ W^T through torch's int4 kernels (Int4Linear) against x @ dequantize(W)^T, on
SmolLM2's real Q4_1 matrices and on Q4_K blocks shaped as the 1.5B's: in float32 on the CPU the two
agree to float32 rounding (about 5e-7), which only the right layout gives; in bf16 (CUDA's only
type) they agree to the rounding of x, the scales and the zeros (about 3e-3); the same codes with
their nibbles swapped, or scales taken for zeros, miss by more than 100%. Where CUDA is present,
tinygemm is held to the same bound."""

from __future__ import annotations

from pathlib import Path

import gguf
import numpy as np
import pytest
import torch
from gguf.constants import GGMLQuantizationType
from gguf.quants import dequantize, quantize

from edgereason import models
from edgereason.backends.torch.gguf_weights import Weights
from edgereason.backends.torch.int4_weights import (
    GROUP,
    Int4Linear,
    Int4Weight,
    cat_rows,
    inner_k_tiles,
    q4_k_groups,
    requantize,
)
from edgereason.backends.torch.model import unpermute_rope
from edgereason.errors import ModelError

CPU = torch.device("cpu")
CUDA = torch.cuda.is_available()
BOUND = {torch.float32: 2e-6, torch.bfloat16: 1e-2}  # the int4 product against x W^T
QWEN = models.cache_path(models.REGISTRY["qwen2.5-coder-0.5b"])
# one matrix of each shape SmolLM2 has: [576, 576], [192, 576], [576, 1536], [1536, 576]
SMOLLM2_MATRICES = [f"blk.5.{n}.weight" for n in ("attn_q", "attn_k", "ffn_down", "ffn_gate")]


def q4_k_blocks(n_blocks: int, seed: int = 0) -> np.ndarray:
    """Random Q4_K blocks [n, 144]: every byte of the 6-bit scales and mins and of the codes random
    (so every bit of the packing counts), d and dmin in the range a model's weights give."""
    rng = np.random.default_rng(seed)
    blocks = rng.integers(0, 256, (n_blocks, 144), dtype=np.uint8)
    blocks[:, 0:2] = rng.uniform(1e-4, 1e-3, (n_blocks, 1)).astype(np.float16).view(np.uint8)
    blocks[:, 2:4] = rng.uniform(0, 1e-3, (n_blocks, 1)).astype(np.float16).view(np.uint8)
    return blocks


def write_gguf(path: Path, tensors: dict[str, tuple[np.ndarray, GGMLQuantizationType]]) -> Path:
    """A GGUF holding each tensor's raw blocks [rows, bytes of a row] under its type."""
    writer = gguf.GGUFWriter(str(path), "llama")
    for name, (raw, kind) in tensors.items():
        writer.add_tensor(name, raw, raw_dtype=kind)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


@pytest.mark.parametrize("name", SMOLLM2_MATRICES)
def test_q4_1_matrices_stand_for_exactly_the_dequantized_values(smollm2_path, name):
    weights = Weights(smollm2_path)
    got = weights.int4(name)
    assert got.exact and got.codes.dtype == torch.uint8 and int(got.codes.max()) <= 15
    want = weights.load(name, CPU, torch.float32)
    assert got.shape == tuple(want.shape) and got.scales.shape == (
        want.shape[0],
        want.shape[1] // 32,
    )
    torch.testing.assert_close(got.dequantize(), want, rtol=0, atol=0)  # d q + m, bit for bit


def test_q4_k_and_q4_0_blocks_stand_for_the_dequantized_values(tmp_path):
    """Q4_K: d sc q - dmin mn as (q - 8) d sc + (8 d sc - dmin mn), one float32 rounding of the
    zero apart; Q4_0 from gguf's own quantizer."""
    rows, cols = 48, 512
    q4_k = q4_k_blocks(rows * cols // 256).reshape(rows, -1)
    values = np.random.default_rng(1).normal(0, 0.02, (rows, cols)).astype(np.float32)
    q4_0 = quantize(values, GGMLQuantizationType.Q4_0)
    path = write_gguf(
        tmp_path / "k.gguf",
        {
            "k.weight": (q4_k, GGMLQuantizationType.Q4_K),
            "o.weight": (q4_0, GGMLQuantizationType.Q4_0),
        },
    )
    weights = Weights(path)
    for name, raw, kind in (("k.weight", q4_k, "Q4_K"), ("o.weight", q4_0, "Q4_0")):
        got = weights.int4(name)
        want = dequantize(raw, GGMLQuantizationType[kind]).reshape(rows, cols)
        assert got.exact and got.shape == (rows, cols)
        scale = float(np.abs(want).max())
        np.testing.assert_allclose(got.dequantize().numpy(), want, rtol=0, atol=2e-7 * scale)


def test_a_sub_block_read_from_the_wrong_nibbles_is_caught(tmp_path):
    """The check above fails a converter that takes sub-block 2r from the high nibbles: the
    comparison is sharp enough to tell the layout."""
    blocks = q4_k_blocks(8)
    codes, scales, zeros = q4_k_groups(blocks)
    swapped = codes.reshape(-1, 4, 2, 32)[:, :, ::-1].reshape(codes.shape)
    want = dequantize(blocks, GGMLQuantizationType.Q4_K)
    for c, close in ((codes, True), (swapped, False)):
        got = (c.astype(np.float32).reshape(-1, 8, 32) - 8) * scales[..., None] + zeros[..., None]
        assert np.allclose(got.reshape(want.shape), want, rtol=0, atol=1e-6) == close


def test_other_types_are_requantized_at_what_four_bits_cost(smollm2_path):
    """SmolLM2's Q8_0 embedding: not exact, within 10% of the matrix's size (rounding 32 values to
    16 levels of their range costs about 8%)."""
    weights = Weights(smollm2_path)
    got = weights.int4("token_embd.weight")
    want = weights.load("token_embd.weight", CPU, torch.float32)
    assert not got.exact and got.shape == tuple(want.shape) and int(got.codes.max()) <= 15
    error = float((got.dequantize() - want).norm() / want.norm())
    assert 0.02 < error < 0.1


def test_requantizing_keeps_each_group_in_its_range():
    """A group's least and greatest values come back as they were (codes 0 and 15); a group of one
    value comes back as that value."""
    values = np.random.default_rng(2).normal(0, 1, (4, 3 * GROUP)).astype(np.float32)
    values[1, :GROUP] = 0.25
    codes, scales, zeros = requantize(values)
    back = (codes.reshape(4, 3, GROUP) - 8.0) * scales[..., None] + zeros[..., None]
    np.testing.assert_allclose(back.min(axis=2), values.reshape(4, 3, GROUP).min(axis=2), atol=1e-6)
    np.testing.assert_allclose(back.max(axis=2), values.reshape(4, 3, GROUP).max(axis=2), atol=1e-6)
    np.testing.assert_allclose(back[1, 0], 0.25, atol=1e-8)


def test_rows_move_and_stack_with_their_scales(smollm2_path):
    """Q, K and V stacked, the llama rows un-permuted, as the decoder builds its fused matrix."""
    weights = Weights(smollm2_path)
    parts = [weights.int4(f"blk.1.attn_{x}.weight") for x in "qkv"]
    fused = cat_rows([parts[0].with_rows(lambda t: unpermute_rope(t, 9)), *parts[1:]])
    want = [weights.load(f"blk.1.attn_{x}.weight", CPU, torch.float32) for x in "qkv"]
    want[0] = unpermute_rope(want[0], 9)
    assert fused.exact
    torch.testing.assert_close(fused.dequantize(), torch.cat(want), rtol=0, atol=0)


def test_what_cannot_be_held_as_groups_is_one_model_error(smollm2_path):
    weights = Weights(smollm2_path)
    with pytest.raises(ModelError, match=r"output_norm.weight \(576,\) is not a matrix"):
        weights.int4("output_norm.weight")
    with pytest.raises(ModelError, match="has no tensor blk.99.attn_q.weight"):
        weights.int4("blk.99.attn_q.weight")


@pytest.mark.slow
@pytest.mark.skipif(not QWEN.is_file(), reason="qwen2.5-coder-0.5b is not in the model cache")
def test_a_real_q4_k_matrix_and_a_q6_k_one():
    """The 0.5B's Q4_K_M: a Q4_K ffn_down bit for bit; a Q6_K one requantized within 10%."""
    weights = Weights(QWEN)
    for name, exact in (("blk.2.ffn_down.weight", True), ("blk.0.ffn_down.weight", False)):
        got = weights.int4(name)
        want = weights.load(name, CPU, torch.float32)
        error = float((got.dequantize() - want).norm() / want.norm())
        assert got.exact == exact and (error == 0 if exact else error < 0.1), (name, error)


def relative_error(linear: Int4Linear, weight: Int4Weight, rows: int) -> float:
    """|int4 product - x W^T| / |x W^T|, x in the kernel's own precision (its rounding is no
    error of the layout), the reference in float64."""
    x = torch.randn(rows, weight.shape[1], generator=torch.Generator().manual_seed(rows))
    want = x.to(linear.dtype).double() @ weight.dequantize().double().T
    got = linear(x.to(linear.device)).double().cpu()
    return float((got - want).norm() / want.norm())


def swapped_nibbles(w: Int4Weight) -> Int4Weight:
    """The codes of each byte's two values exchanged: what a packing that put value 2j in the low
    nibble would give."""
    codes = w.codes.unflatten(1, (-1, 2)).flip(-1).flatten(1).contiguous()
    return Int4Weight(codes, w.scales, w.zeros, w.exact)


def q4_k_weight(rows: int, cols: int) -> tuple[Int4Weight, torch.Tensor]:
    """Random Q4_K blocks as 4-bit groups, and gguf's dequantization of the same blocks."""
    blocks = q4_k_blocks(rows * cols // 256, seed=rows)
    codes, scales, zeros = (torch.from_numpy(a) for a in q4_k_groups(blocks))
    weight = Int4Weight(
        codes.reshape(rows, cols), scales.reshape(rows, -1), zeros.reshape(rows, -1), True
    )
    values = dequantize(blocks, GGMLQuantizationType.Q4_K).reshape(rows, cols)
    return weight, torch.from_numpy(values)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["float32", "bf16"])
@pytest.mark.parametrize("name", SMOLLM2_MATRICES)
def test_the_int4_product_is_x_times_the_dequantized_matrix(smollm2_path, name, dtype):
    weights = Weights(smollm2_path)
    weight = weights.int4(name)
    torch.testing.assert_close(
        weight.dequantize(), weights.load(name, CPU, torch.float32), rtol=0, atol=0
    )
    linear = Int4Linear(weight, CPU, dtype)
    for rows in (1, 8, 64):
        assert relative_error(linear, weight, rows) < BOUND[dtype], rows
    assert relative_error(Int4Linear(swapped_nibbles(weight), CPU, dtype), weight, 8) > 1.0
    scales_for_zeros = Int4Weight(weight.codes, weight.zeros, weight.scales, True)
    assert relative_error(Int4Linear(scales_for_zeros, CPU, dtype), weight, 8) > 1.0


@pytest.mark.parametrize("shape", [(256, 1536), (64, 8960)], ids=["qkv-like", "ffn_down-like"])
def test_q4_k_blocks_multiply_as_gguf_dequantizes_them(shape):
    weight, values = q4_k_weight(*shape)
    torch.testing.assert_close(weight.dequantize(), values, rtol=0, atol=2e-7)
    for dtype in (torch.float32, torch.bfloat16):
        assert relative_error(Int4Linear(weight, CPU, dtype), weight, 8) < BOUND[dtype], dtype


def test_leading_dimensions_are_kept_and_bytes_counted(smollm2_path):
    weight = Weights(smollm2_path).int4("blk.0.ffn_gate.weight")  # [1536, 576]
    linear = Int4Linear(weight, CPU, torch.bfloat16)
    x = torch.randn(2, 3, 576)
    out = linear(x)
    assert out.shape == (2, 3, 1536) and out.dtype == torch.float32
    torch.testing.assert_close(out[1, 2], linear(x[1, 2:3])[0])
    assert linear.nbytes() == 1536 * 576 // 2 + 1536 * 576 // 32 * 2 * 2  # 0.625 bytes a weight
    assert [inner_k_tiles(k) for k in (576, 896, 1536, 8960)] == [4, 8, 8, 8]


def test_a_matrix_of_rows_the_kernels_cannot_tile_is_one_model_error():
    weight = Int4Weight(
        torch.zeros(24, 64, dtype=torch.uint8), torch.ones(24, 2), torch.ones(24, 2), True
    )
    with pytest.raises(ModelError, match="needs a multiple of 16 rows; this one has 24"):
        Int4Linear(weight, CPU)


@pytest.mark.skipif(not CUDA, reason="tinygemm needs CUDA")
def test_tinygemm_takes_the_same_layout(smollm2_path):
    """CUDA's own packing (value 2j in the high nibble) and tile order, in bf16."""
    cuda = torch.device("cuda")
    weights = Weights(smollm2_path)
    for weight in [weights.int4(n) for n in SMOLLM2_MATRICES] + [q4_k_weight(64, 8960)[0]]:
        linear = Int4Linear(weight, cuda)
        assert linear.dtype == torch.bfloat16
        for rows in (1, 8, 64):
            assert relative_error(linear, weight, rows) < BOUND[torch.bfloat16], rows
        # the wrong packing is far off (0.79 on an H100), the right one within BOUND
        assert relative_error(Int4Linear(swapped_nibbles(weight), cuda), weight, 8) > 0.5
