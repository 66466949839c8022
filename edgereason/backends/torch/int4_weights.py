"""4-bit matrices: a GGUF matrix as 4-bit codes in the form torch's weight-only int4 matmul takes,
and the linear map that multiplies by them (Int4Linear). W = (codes - 8) * scale + zero, one (scale,
zero) for each group of GROUP values along a row.

GROUP is 32: the block of Q4_0 and Q4_1 and the sub-block of Q4_K, so those three convert exactly
from their raw blocks, with no float copy of the matrix on the way:
  Q4_0  w = d (q - 8)          scale = d        zero = 0
  Q4_1  w = d q + m            scale = d        zero = m + 8 d
  Q4_K  w = d sc q - dmin mn   scale = d sc     zero = 8 d sc - dmin mn
(d, m, dmin half floats, sc and mn 6-bit integers: every scale is exact in float32.) Any other type
(Q5_K, Q6_K, Q8_0, the floats; a Q4_K_M file keeps some matrices in Q6_K) is requantized from its
dequantized values, round to nearest between each group's least and greatest value: lossy, so such a
weight says it is not `exact`.

The product, x @ W^T, runs through torch's weight-only int4 matmul: tinygemm on CUDA
(`_weight_int4pack_mm`), its CPU kernel on the CPU (`_weight_int4pack_mm_for_cpu`). Both dequantize
a code as (q - 8) * scale + zero from `scales_and_zeros` [K / group, N, 2] (aten's int4mm.cu and
cpu/int4mm_kernel.cpp); they differ in what they pack from: CUDA takes uint8 [N, K / 2] with each
even column in the high nibble and reorders it into its tensor-core tiles, the CPU takes int32 codes
[N, K]. A row reads K / 2 bytes of codes and K / 8 of bf16 scales and zeros: 0.625 bytes a weight
against bf16's 2."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType

from edgereason.errors import ModelError

GROUP = 32
_Q4_0, _Q4_1, _Q4_K = (GGMLQuantizationType[k] for k in ("Q4_0", "Q4_1", "Q4_K"))
# codes, scales, zeros: uint8 [n, values a block], float32 [n, groups a block] twice
Groups = tuple[np.ndarray, np.ndarray, np.ndarray]


@dataclass
class Int4Weight:
    """W [N, K] = (codes - 8) * scales + zeros, a scale and a zero for each GROUP codes of a row."""

    codes: torch.Tensor  # uint8 [N, K], 0..15
    scales: torch.Tensor  # float32 [N, K / GROUP]
    zeros: torch.Tensor  # float32 [N, K / GROUP]
    exact: bool  # the file's own 4-bit values (False: requantized from a wider type)

    @property
    def shape(self) -> tuple[int, int]:
        return (self.codes.shape[0], self.codes.shape[1])

    def dequantize(self) -> torch.Tensor:
        """W as float32 [N, K]: what the codes stand for."""
        q = (self.codes.float() - 8).unflatten(1, (-1, GROUP))
        return (q * self.scales[..., None] + self.zeros[..., None]).flatten(1)

    def with_rows(self, reorder: Callable[[torch.Tensor], torch.Tensor]) -> Int4Weight:
        """The same matrix with its rows moved by `reorder` (a function of a tensor's rows, as the
        decoder's un-permutation of llama's Q and K rows): codes, scales and zeros move together."""
        return Int4Weight(
            reorder(self.codes), reorder(self.scales), reorder(self.zeros), self.exact
        )


def cat_rows(parts: Sequence[Int4Weight]) -> Int4Weight:
    """Matrices stacked by rows (Q, K and V in one; gate and up), as the decoder fuses them."""
    return Int4Weight(
        torch.cat([p.codes for p in parts]),
        torch.cat([p.scales for p in parts]),
        torch.cat([p.zeros for p in parts]),
        all(p.exact for p in parts),
    )


def _halves(blocks: np.ndarray, at: int) -> np.ndarray:
    """A block's half float at byte `at`, as float32 [n, 1]."""
    return blocks[:, at : at + 2].copy().view(np.float16).astype(np.float32)


def _nibbles(qs: np.ndarray) -> np.ndarray:
    """Q4_0/Q4_1's 16 bytes -> 32 codes: value j in byte j's low nibble, j + 16 in its high."""
    return np.concatenate([qs & 0x0F, qs >> 4], axis=1)


def q4_0_groups(blocks: np.ndarray) -> Groups:
    """blocks [n, 18]: d, then 16 bytes of codes."""
    d = _halves(blocks, 0)
    return _nibbles(blocks[:, 2:]), d, np.zeros_like(d)


def q4_1_groups(blocks: np.ndarray) -> Groups:
    """blocks [n, 20]: d, m, then 16 bytes of codes."""
    d, m = _halves(blocks, 0), _halves(blocks, 2)
    return _nibbles(blocks[:, 4:]), d, m + 8 * d


def q4_k_scales(packed: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Q4_K's 12 bytes -> the 8 sub-blocks' 6-bit scales and mins [n, 8] (ggml's get_scale_min_k4):
    bytes 0-3 and 4-7 hold sub-blocks 0-3's scales and mins in their low 6 bits; sub-blocks 4-7 take
    their low 4 bits from bytes 8-11 and their high 2 from the top of bytes 0-3 (scales) and 4-7
    (mins)."""
    low, mid, high = packed[:, 0:4], packed[:, 4:8], packed[:, 8:12]
    sc = np.concatenate([low & 0x3F, (high & 0x0F) | ((low >> 6) << 4)], axis=1)
    mn = np.concatenate([mid & 0x3F, (high >> 4) | ((mid >> 6) << 4)], axis=1)
    return sc.astype(np.float32), mn.astype(np.float32)


def q4_k_groups(blocks: np.ndarray) -> Groups:
    """blocks [n, 144]: d, dmin, 12 bytes of scales and mins, 128 bytes of codes. The codes come in
    four runs of 32 bytes: run r holds sub-block 2r in its low nibbles, 2r + 1 in its high."""
    d, dmin = _halves(blocks, 0), _halves(blocks, 2)
    sc, mn = q4_k_scales(blocks[:, 4:16])
    runs = blocks[:, 16:].reshape(-1, 4, 1, 32)
    codes = np.concatenate([runs & 0x0F, runs >> 4], axis=2).reshape(-1, 256)
    scales = d * sc
    return codes, scales, 8 * scales - dmin * mn


_EXACT: dict[GGMLQuantizationType, Callable[[np.ndarray], Groups]] = {
    _Q4_0: q4_0_groups,
    _Q4_1: q4_1_groups,
    _Q4_K: q4_k_groups,
}
EXACT_TYPES = frozenset(_EXACT)


def requantize(values: np.ndarray) -> Groups:
    """values [N, K] float32 -> codes, scales, zeros [N, K / GROUP]: each group's range in 15 steps
    from its least value, rounded to the nearest."""
    groups = values.reshape(values.shape[0], -1, GROUP)
    low, high = groups.min(axis=2), groups.max(axis=2)
    scales = np.maximum((high - low) / 15, 1e-10)  # a group of one value: any scale, all codes 0
    codes = np.rint((groups - low[..., None]) / scales[..., None]).clip(0, 15)
    return codes.astype(np.uint8).reshape(values.shape), scales, low + 8 * scales


def int4_weight(kind: GGMLQuantizationType, data: np.ndarray, rows: int, cols: int) -> Int4Weight:
    """A matrix [rows, cols] as 4-bit groups: converted exactly from its raw blocks (`data`, bytes)
    where `kind` is one of EXACT_TYPES, else requantized from its float32 values (`data`, [rows,
    cols])."""
    convert = _EXACT.get(kind)
    if convert is None:
        codes, scales, zeros = requantize(data)
    else:
        codes, scales, zeros = convert(data.reshape(-1, GGML_QUANT_SIZES[kind][1]))
    return Int4Weight(
        torch.from_numpy(np.ascontiguousarray(codes).reshape(rows, cols)),
        torch.from_numpy(np.ascontiguousarray(scales).reshape(rows, cols // GROUP)),
        torch.from_numpy(np.ascontiguousarray(zeros).reshape(rows, cols // GROUP)),
        exact=convert is not None,
    )


_TILE_K = 16  # tinygemm's k-tile; it packs 2, 4 or 8 of them side by side
ROWS = 16  # the CPU's packing takes rows in sixteens (tinygemm's n-tile is 8)


def inner_k_tiles(k: int) -> int:
    """The most k-tiles tinygemm packs together (8 is its fastest load) that divide a row of K; a
    row of 4-bit groups is a multiple of GROUP, two tiles."""
    return next(tiles for tiles in (8, 4, 2) if k % (tiles * _TILE_K) == 0)


def _packed_for_cuda(codes: torch.Tensor, device: torch.device) -> torch.Tensor:
    pairs = (codes[:, ::2] << 4) | codes[:, 1::2]  # value 2j in the high nibble, 2j + 1 the low
    return torch._convert_weight_to_int4pack(pairs.to(device), inner_k_tiles(codes.shape[1]))


def _packed_for_cpu(codes: torch.Tensor) -> torch.Tensor:
    return torch._convert_weight_to_int4pack_for_cpu(codes.int(), inner_k_tiles(codes.shape[1]))


class Int4Linear:
    """A linear map without bias, x [..., K] -> [..., N], through the int4 kernel of x's device.
    CUDA computes in bf16 (tinygemm's only type); the CPU in `dtype`, float32 by default, where the
    product is the dequantized matrix's to float32 rounding (bf16 shows what CUDA's rounding of the
    scales and zeros costs)."""

    def __init__(
        self, weight: Int4Weight, device: torch.device, dtype: torch.dtype = torch.float32
    ) -> None:
        self.out_features, self.in_features = weight.shape
        if self.out_features % ROWS:
            raise ModelError(
                f"an int4 matrix needs a multiple of {ROWS} rows; this one has {self.out_features}"
            )
        self.device = device
        self.dtype = torch.bfloat16 if device.type == "cuda" else dtype
        # [K / GROUP, N, 2]: a group's scales for every row, then the next group's
        pairs = torch.stack([weight.scales.t(), weight.zeros.t()], dim=-1)
        self.scales_and_zeros = pairs.to(device=device, dtype=self.dtype).contiguous()
        if device.type == "cuda":
            self.packed = _packed_for_cuda(weight.codes, device)
        else:
            self.packed = _packed_for_cpu(weight.codes).to(device)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.reshape(-1, self.in_features).to(self.dtype).contiguous()
        if self.device.type == "cuda":
            out = torch._weight_int4pack_mm(rows, self.packed, GROUP, self.scales_and_zeros)
        else:
            out = torch._weight_int4pack_mm_for_cpu(rows, self.packed, GROUP, self.scales_and_zeros)
        return out.reshape(*x.shape[:-1], self.out_features).to(x.dtype)

    def nbytes(self) -> int:
        """What one pass reads: the packed codes and the scales and zeros."""
        return sum(t.numel() * t.element_size() for t in (self.packed, self.scales_and_zeros))
