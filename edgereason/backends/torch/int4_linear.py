"""x @ W^T with W held as 4-bit codes (int4_weights.py) through torch's weight-only int4 matmul:
tinygemm on CUDA (`_weight_int4pack_mm`), its CPU kernel on the CPU
(`_weight_int4pack_mm_for_cpu`). Both dequantize a code as (q - 8) * scale + zero from
`scales_and_zeros` [K / group, N, 2] (aten's int4mm.cu and cpu/int4mm_kernel.cpp); they differ in
what they pack from: CUDA takes uint8 [N, K / 2] with each even column in the high nibble and
reorders it into its tensor-core tiles, the CPU takes int32 codes [N, K]. A row reads K / 2 bytes
of codes and K / 8 of bf16 scales and zeros: 0.625 bytes a weight against bf16's 2."""

from __future__ import annotations

import torch

from edgereason.backends.torch.int4_weights import GROUP, Int4Weight
from edgereason.errors import ModelError

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
