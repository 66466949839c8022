"""The decoder's layers with 4-bit matrices (--torch-weights int4). Each group of matrices a layer
multiplies in one kernel (Q, K and V; gate and up; the attention's output; down) is one Int4Linear
where every matrix of it is stored as 4-bit groups of 32 in the GGUF (Q4_0, Q4_1, Q4_K: converted
exactly, int4_weights.py). A group with any other type (a Q4_K_M file keeps attn_v and ffn_down of
half its layers in Q6_K) stays in the decoder's dtype, as the embedding, the head, the norms and the
biases do: int4 costs no accuracy beyond the file's own 4-bit values and the kernel's rounding.

The int4 products compute in bf16 on the CPU too, as tinygemm does on CUDA: the CPU's int4 kernel in
float32 took 4.6 s for 64 rows of one 1.5B matrix (bf16: 0.11 s, float32 dense 0.14 s), and bf16
shows on the CPU the rounding the card has."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from gguf.constants import GGMLQuantizationType

from edgereason.backends.torch.gguf_weights import Weights
from edgereason.backends.torch.int4_weights import EXACT_TYPES, GROUP, ROWS, Int4Linear, cat_rows

# a layer's fields and the GGUF tensors each holds, row after row
GROUPS = {
    "wqkv": ("attn_q", "attn_k", "attn_v"),
    "wo": ("attn_output",),
    "w_gate_up": ("ffn_gate", "ffn_up"),
    "w_down": ("ffn_down",),
}
Orient = Callable[[str, torch.Tensor], torch.Tensor]  # (tensor name, its rows) -> decoder's rows


def group_names(layer: int, field: str) -> list[str]:
    return [f"blk.{layer}.{part}.weight" for part in GROUPS[field]]


def is_int4(weights: Weights, names: Sequence[str]) -> bool:
    """Every matrix of the group 4-bit in the file, in shapes the int4 kernels tile."""
    tensors = [weights.tensors.get(n) for n in names]
    return all(
        t is not None
        and len(t.dims) == 2
        and GGMLQuantizationType(t.kind) in EXACT_TYPES
        and t.dims[0] % GROUP == 0
        and t.dims[1] % ROWS == 0
        for t in tensors
    )


def int4_group(
    weights: Weights, names: Sequence[str], orient: Orient, device: torch.device
) -> Int4Linear:
    """The group's matrices stacked by rows as one Int4Linear (bf16), each in the decoder's row
    order."""
    parts = [weights.int4(n).with_rows(lambda t, n=n: orient(n, t)) for n in names]
    return Int4Linear(cat_rows(parts), device, torch.bfloat16)


def int4_bytes(weights: Weights, dtype_bytes: int) -> int:
    """The bytes the weights take on the device with their 4-bit groups held as Int4Linear (codes
    half a byte, a bf16 scale and zero for each 32) and the rest in `dtype_bytes` a value."""
    int4 = {
        name
        for i in range(weights.config().n_layer)
        for field in GROUPS
        if is_int4(weights, names := group_names(i, field))
        for name in names
    }
    total = 0
    for t in weights.layout.tensors:
        if t.name in int4:
            total += t.n_elements // 2 + t.n_elements // GROUP * 2 * 2
        else:
            total += t.n_elements * dtype_bytes
    return total
