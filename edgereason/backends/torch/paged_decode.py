"""Decode attention that reads the KV where it lies: each row's one query against the cells its
table names, read by a Triton kernel straight from the layer's cache (paged_decode_kernel.py),
with no gather of cells or tables and no mask, one or two kernels a layer.

The kernel is the custom op `edgereason::paged_decode`, so the compiled layer (compiled_layers.py)
traces it as one opaque call (its fake gives the output's shape) and a CUDA graph records its
launches like any other. The kernel module, and with it Triton, is imported on the op's first call:
the op exists on any install, and only runs where attention_choice.py found that it can."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from edgereason.backends.torch.kv import KVStore, read_cells, write_cells
from edgereason.backends.torch.layer import Attend


@torch.library.custom_op("edgereason::paged_decode", mutates_args=())
def paged_decode(
    q: torch.Tensor,
    data: torch.Tensor,
    tables: torch.Tensor,
    seqs: torch.Tensor,
    positions: torch.Tensor,
) -> torch.Tensor:
    """q [R, H, D], data [cells, 2 KVH, D], tables [sequences, W] int32, seqs and positions [R]
    int64 -> [R, H, D]: row r's query over cells 0..positions[r] of its sequence's table."""
    from edgereason.backends.torch import paged_decode_kernel

    return paged_decode_kernel.paged_decode(q, data, tables, seqs, positions)


@paged_decode.register_fake
def _paged_decode_shape(q, data, tables, seqs, positions):  # noqa: ANN001, ANN202 - as the op's
    return q.new_empty(q.shape)


@dataclass
class PagedDecodeAttention:
    """One layer's attention for a decode pass (one query a row): store the new keys and values,
    then attend each row over its table. Tensors alone, as attention.LayerAttention, so one compiled
    layer serves every layer."""

    data: torch.Tensor  # the layer's cache [cells, 2 KVH, D]
    write: torch.Tensor  # [R] the cell of each row's new token
    tables: torch.Tensor  # [sequences, W] the device tables' first W columns (a view, no copy)
    seqs: torch.Tensor  # [R] each row's sequence (its row of `tables`)
    positions: torch.Tensor  # [R] each row's query position

    def __call__(self, q: torch.Tensor, new_kv: torch.Tensor) -> torch.Tensor:
        """q [R, H, D], new_kv [R, 2 KVH, D] -> [R, H * D]."""
        write_cells(self.data, self.write, new_kv)
        out = paged_decode(q, self.data, self.tables, self.seqs, self.positions)
        return out.view(q.shape[0], -1)

    def mark_dynamic(self) -> None:
        """The sizes that vary between passes and contexts, for the compiled layer: rows, cells and
        the table width."""
        for t in (self.data, self.write, self.seqs, self.positions):
            torch._dynamo.maybe_mark_dynamic(t, 0)
        torch._dynamo.maybe_mark_dynamic(self.tables, 1)


def attend_paged(
    kv: KVStore,
    write: torch.Tensor,
    tables: torch.Tensor,
    seqs: torch.Tensor,
    positions: torch.Tensor,
) -> Attend:
    """The decode pass's attention at each layer (layer.Attend): layer -> its
    PagedDecodeAttention."""
    return lambda layer: PagedDecodeAttention(kv.layers[layer], write, tables, seqs, positions)


def probe(
    device: torch.device, heads: int, kv_heads: int, head_dim: int, dtype: torch.dtype
) -> str:
    """Why the kernel cannot serve this model here ("" where it can): run once on a small case, two
    rows over a shuffled table, against the gathered SDPA, before any graph records it (a Triton
    that fails to compile it, or a kernel that computes wrong on this GPU, must not end a run)."""
    try:
        gen = torch.Generator().manual_seed(0)
        data = torch.randn(600, 2 * kv_heads, head_dim, generator=gen).to(device, dtype)
        tables = torch.randperm(600, generator=gen)[:512].view(2, 256).int().to(device)
        q = torch.randn(2, heads, head_dim, generator=gen).to(device, dtype)
        positions = torch.tensor([0, 200], device=device)
        got = paged_decode(q, data, tables, torch.arange(2, device=device), positions)
        for r, length in enumerate((1, 201)):
            keys, values = read_cells(data, tables[r : r + 1, :length].long(), dtype)
            queries = q[r].view(1, kv_heads, heads // kv_heads, head_dim)
            want = torch.nn.functional.scaled_dot_product_attention(queries, keys, values)
            error = (got[r].view_as(want) - want).abs().max().item()
            if not error <= 0.05:
                return f"its attention is {error:.3g} from the gathered SDPA's"
    except Exception as e:  # noqa: BLE001 - any failure means: attend gathered
        return f"{type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}"
    return ""
