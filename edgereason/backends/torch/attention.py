"""Attention over the KV cell pool: a pass's queries in padded groups, each group one masked SDPA
call over the cells its sequences' tables name.

The kernel: torch's SDPA over gathered cells. It needs nothing beyond torch (flash-attn and
FlashInfer build against one torch and CUDA; the GPU machine has torch 2.11 with CUDA 13 and no
network to fetch them), it records into a CUDA graph at fixed shapes, and with pages of one token
the gather is the page-table read a paged kernel does itself. Not yet measured against FlexAttention
or FlashInfer: the first CUDA run found the pass bound by its number of kernels, not by attention
(docs/results.md, "The torch backend on the H200"). Decode passes of the CUDA graphs read the cells
in place instead where Triton runs (paged_decode.py, chosen by attention_choice.py); this stays
what prefills, eager passes and installs without Triton run.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import nullcontext
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from edgereason.backends.torch.kv import KVStore, read_cells, write_cells
from edgereason.backends.torch.layer import Attend


@dataclass
class AttentionGroup:
    """Queries of some sequences, padded to [E, n]: which flat tokens they are, the cells they read,
    the mask.

    Grouped-query attention without repeating keys: a KV head's G query heads go in as G query rows
    of that head (query t's heads at rows t * G .. t * G + G - 1), so SDPA sees [E, KVH, n * G, D]
    queries against [E, KVH, L, D] keys, and a masked kernel runs as one call."""

    query_rows: torch.Tensor  # [E, n] flat token index of each query (padding: any valid index)
    cells: torch.Tensor  # [E, L] cell ids, in position order (padding: the pad cell)
    # [E, 1, n * G, L] added to the scores: 0 where key j is visible (j <= position), -inf else
    bias: torch.Tensor
    # [m] the flat tokens this group answers, in padded-layout order; None: all, in order
    tokens: torch.Tensor | None
    padded_at: torch.Tensor | None  # [m] where each of them is in the [E * n] layout


def visibility_bias(visible: torch.Tensor, group: int, dtype: torch.dtype) -> torch.Tensor:
    """visible [E, n, L] bool -> the additive mask [E, 1, n * group, L] of `dtype` (each query row
    repeated for its G query heads)."""
    bias = torch.zeros(visible.shape, dtype=dtype, device=visible.device).masked_fill_(
        ~visible, float("-inf")
    )
    return bias.repeat_interleave(group, dim=1)[:, None]


def attention_group(
    cells: torch.Tensor,
    queries: Sequence[Sequence[int]],
    positions: Sequence[Sequence[int]],
    group: int,
    dtype: torch.dtype,
) -> AttentionGroup:
    """cells [E, L]: sequence e's cell table after this pass's appends (from DeviceTables);
    queries[e]: its flat token indices; positions[e] their positions. Positions index the table (a
    table is in position order). group: query heads per KV head; dtype: the queries'."""
    n_seq, width = len(queries), max(len(q) for q in queries)
    rows = np.zeros((n_seq, width), dtype=np.int64)
    # a padding query sees key 0 only: no all-masked row
    pos = np.zeros((n_seq, width), dtype=np.int64)
    valid = np.zeros((n_seq, width), dtype=bool)
    for e, (q, p) in enumerate(zip(queries, positions)):
        rows[e, : len(q)] = q
        pos[e, : len(p)] = p
        valid[e, : len(q)] = True
    device = cells.device
    at = lambda a: torch.from_numpy(a).to(device)  # noqa: E731
    visible = torch.arange(cells.shape[1], device=device)[None, None, :] <= at(pos)[:, :, None]
    return AttentionGroup(
        query_rows=at(rows),
        cells=cells,
        bias=visibility_bias(visible, group, dtype),
        tokens=at(rows[valid]),
        padded_at=at(np.flatnonzero(valid.ravel())),
    )


# Not cuDNN's attention: it builds an execution plan per shape, and an eager pass's shapes change
# from pass to pass (tables grow a token a step). The memory-efficient kernel takes the additive
# mask as it is.
SDPA_BACKENDS = [SDPBackend.EFFICIENT_ATTENTION, SDPBackend.FLASH_ATTENTION, SDPBackend.MATH]


@dataclass
class LayerAttention:
    """One layer's attention over the KV cells for one pass: store the pass's new keys and values,
    then attend each group. A value of tensors alone (no layer index, no store), so the compiled
    decoder layer (compiled_layers.py) is traced once and serves every layer."""

    data: torch.Tensor  # the layer's cache [cells, 2 KVH, D]
    write: torch.Tensor  # [T] the cell of each new token
    groups: Sequence[AttentionGroup]

    def __call__(self, q: torch.Tensor, new_kv: torch.Tensor) -> torch.Tensor:
        """q [T, H, D], new_kv [T, 2 KVH, D] -> [T, H * D]."""
        write_cells(self.data, self.write, new_kv)
        n_tok, n_head, head_dim = q.shape
        n_kv = new_kv.shape[1] // 2
        group = n_head // n_kv
        out = None
        for g in self.groups:
            n_seq, width = g.query_rows.shape
            padded = (
                q.reshape(n_seq, width, n_head, head_dim) if g.tokens is None else q[g.query_rows]
            )
            queries = padded.reshape(n_seq, width, n_kv, group, head_dim).transpose(1, 2)
            queries = queries.reshape(n_seq, n_kv, width * group, head_dim)  # [E, KVH, n * G, D]
            keys, values = read_cells(self.data, g.cells, q.dtype)  # [E, KVH, L, D]
            # compiled, the context is entered around the compiled layer (compiled_layers.py):
            # inside, it would keep the layer's graph out of AOTAutograd's cache
            with nullcontext() if torch.compiler.is_compiling() else sdpa_kernel(SDPA_BACKENDS):
                # [E, KVH, n * G, D]
                o = F.scaled_dot_product_attention(queries, keys, values, attn_mask=g.bias)
            o = o.reshape(n_seq, n_kv, width, group, head_dim).transpose(1, 2)
            o = o.reshape(n_seq * width, n_head * head_dim)
            if g.tokens is None:
                return o
            if out is None:
                out = q.new_empty(n_tok, n_head * head_dim)
            out[g.tokens] = o[g.padded_at]
        assert out is not None
        return out

    def mark_dynamic(self) -> None:
        """The sizes that vary between passes and contexts, for the compiled layer: tokens,
        sequences, query slots, table width and cells."""
        torch._dynamo.maybe_mark_dynamic(self.data, 0)
        torch._dynamo.maybe_mark_dynamic(self.write, 0)
        for g in self.groups:
            torch._dynamo.maybe_mark_dynamic(g.query_rows, (0, 1))
            torch._dynamo.maybe_mark_dynamic(g.cells, (0, 1))
            torch._dynamo.maybe_mark_dynamic(g.bias, (0, 2, 3))
            for t in (g.tokens, g.padded_at):
                if t is not None:
                    torch._dynamo.maybe_mark_dynamic(t, 0)


def attend_groups(kv: KVStore, write: torch.Tensor, groups: Sequence[AttentionGroup]) -> Attend:
    """The pass's attention at each layer (layer.Attend): layer -> its LayerAttention over `kv`."""
    return lambda layer: LayerAttention(kv.layers[layer], write, groups)
