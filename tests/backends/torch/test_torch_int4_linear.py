"""x @ W^T through torch's int4 kernels (int4_linear.py) against x @ dequantize(W)^T, on SmolLM2's
real Q4_1 matrices and on Q4_K blocks shaped as the 1.5B's: in float32 on the CPU the two agree to
float32 rounding (about 5e-7), which only the right layout gives; in bf16 (CUDA's only type) they
agree to the rounding of x, the scales and the zeros (about 3e-3); the same codes with their
nibbles swapped, or scales taken for zeros, miss by more than 100%. Where CUDA is present, tinygemm
is held to the same bound."""

from __future__ import annotations

import pytest
import torch
from gguf.constants import GGMLQuantizationType
from gguf.quants import dequantize
from test_torch_int4_weights import SMOLLM2_MATRICES, q4_k_blocks

from edgereason.backends.torch.gguf_weights import Weights
from edgereason.backends.torch.int4_linear import Int4Linear, inner_k_tiles
from edgereason.backends.torch.int4_weights import Int4Weight, int4_weight, q4_k_groups
from edgereason.errors import ModelError

CPU = torch.device("cpu")
CUDA = torch.cuda.is_available()
BOUND = {torch.float32: 2e-6, torch.bfloat16: 1e-2}


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
    weight = int4_weight(weights, name)
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
    weight = int4_weight(Weights(smollm2_path), "blk.0.ffn_gate.weight")  # [1536, 576]
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
    for weight in [int4_weight(weights, n) for n in SMOLLM2_MATRICES] + [q4_k_weight(64, 8960)[0]]:
        linear = Int4Linear(weight, cuda)
        assert linear.dtype == torch.bfloat16
        for rows in (1, 8, 64):
            assert relative_error(linear, weight, rows) < BOUND[torch.bfloat16], rows
        # the wrong packing is far off (0.79 on an H100), the right one within BOUND
        assert relative_error(Int4Linear(swapped_nibbles(weight), cuda), weight, 8) > 0.5
