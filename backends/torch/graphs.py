"""Decode passes on CUDA replayed as CUDA graphs (the pattern of nano-vllm's `capture_cudagraph`).

A pass whose sequences each append one token runs at a bucketed row count (ROW_BUCKETS) and a bucketed table width
(kv.table_width: powers of two from MIN_TABLE): its rows are padded (token 0 at position 0 of the all-pad table
row, writing the pad cell) and the graph gathers each row's cell table from the context's DeviceTables, whose
entries past a sequence's length the mask hides. A graph is captured on first use of its (rows, width) bucket,
into one memory pool shared by all; the static inputs (token, position, cell and sequence of each row: one [4,
max rows] buffer, one copy a pass) are shared too, and every graph writes its logits into one [max rows, n_vocab]
buffer. Passes with a prefill, more rows than the largest bucket, or logits of a few columns run eagerly.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np
import torch

from edgereason.backends.torch.attention import AttentionGroup, attend_groups, visibility_bias
from edgereason.backends.torch.kv import table_width
from edgereason.backends.torch.model import Attend
from edgereason.backends.torch.runtime import GPU_MEMORY_HINT
from edgereason.errors import OutOfMemoryError

if TYPE_CHECKING:
    from edgereason.backends.torch.runtime import TorchContext

ROW_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128)


def bucket(n: int, sizes: tuple[int, ...]) -> int:
    return next(s for s in sizes if s >= n)


class DecodeGraphs:
    def __init__(self, ctx: TorchContext) -> None:
        self.ctx = ctx
        rows = ROW_BUCKETS[-1]
        self.inputs = torch.zeros(4, rows, dtype=torch.long, device=ctx.device)  # token, position, cell, seq
        self.logits = torch.zeros(rows, ctx.model.n_vocab, dtype=torch.float32, device=ctx.device)
        self.graphs: dict[tuple[int, int], torch.cuda.CUDAGraph] = {}
        self.pool = None

    def fits(self, order: dict[int, list[int]], columns: torch.Tensor | None) -> bool:
        return columns is None and len(order) <= ROW_BUCKETS[-1] and all(len(idx) == 1 for idx in order.values())

    def run(
        self,
        order: dict[int, list[int]],
        tokens: list[int],
        positions: np.ndarray,
        cells: np.ndarray,
        wanted: list[int],
    ) -> torch.Tensor:
        """The logits of the `wanted` rows, [len(wanted), n_vocab] (a copy: the buffer is the next pass's). Row i
        is window token i: each sequence has one token, so `order` lists them in window order."""
        n, rows = len(tokens), bucket(len(tokens), ROW_BUCKETS)
        width = table_width(max(self.ctx.tables.seq_len(seq) for seq in order))
        host = np.zeros((4, rows), dtype=np.int64)
        host[2, n:], host[3, n:] = self.ctx.kv.pad_cell, self.ctx.table_cells.pad_row
        host[0, :n], host[1, :n], host[2, :n], host[3, :n] = tokens, positions, cells, list(order)
        self.inputs[:, :rows].copy_(torch.from_numpy(host))
        graph = self.graphs.get((rows, width)) or self._capture(rows, width)
        graph.replay()
        return self.logits[torch.tensor(wanted, device=self.ctx.device)]

    def _body(self, rows: int, width: int) -> Callable[[], None]:
        """The pass over the static inputs' first `rows` rows: what the graph records."""
        ctx = self.ctx
        tokens, positions, cells, seqs = self.inputs[:, :rows]

        def body() -> None:
            attend = padded_attention(ctx, seqs, positions, cells, rows, 1, width)
            hidden = ctx.model.decoder.hidden(tokens, positions, attend)
            self.logits[:rows].copy_(ctx.model.decoder.logits(hidden))

        return body

    def _capture(self, rows: int, width: int) -> torch.cuda.CUDAGraph:
        graph = capture(self._body(rows, width), self.pool, f"the decode graph of {rows} rows over {width} KV cells")
        if self.pool is None:
            self.pool = graph.pool()
        self.graphs[(rows, width)] = graph
        return graph


def padded_attention(
    ctx: TorchContext,
    seqs: torch.Tensor,
    positions: torch.Tensor,
    cells: torch.Tensor,
    n_seq: int,
    longest: int,
    width: int,
) -> Attend:
    """Attention for a pass laid out padded, as the graphs lay theirs out: n_seq sequences (rows `seqs` of the
    device tables) of `longest` query slots each, row e * longest + t the flat token at `positions` and `cells` of
    that row; each reads its table's first `width` cells. No gather of queries or scatter of outputs."""
    cfg = ctx.model.decoder.config
    visible = torch.arange(width, device=ctx.device)[None, None, :] <= positions.view(n_seq, longest, 1)
    group = AttentionGroup(
        query_rows=torch.arange(n_seq * longest, device=ctx.device).view(n_seq, longest),
        cells=ctx.table_cells.rows(seqs, width),
        bias=visibility_bias(visible, cfg.n_head // cfg.n_head_kv, ctx.model.decoder.dtype),
        tokens=None,
        padded_at=None,
    )

    def attend(layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return attend_groups(ctx.kv, layer, cells, [group], q, k, v)

    return attend


def capture(body: Callable[[], None], pool: object, what: str) -> torch.cuda.CUDAGraph:
    """Warm up once on a side stream (it computes this very pass: the replay after writes the same cells again),
    then record `body` into a graph drawing on memory `pool` (None: a new one)."""
    try:
        with torch.no_grad():
            stream = torch.cuda.Stream()
            stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(stream):
                body()
            torch.cuda.current_stream().wait_stream(stream)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, pool=pool):
                body()
    except torch.OutOfMemoryError:
        raise OutOfMemoryError(f"the GPU ran out of memory capturing {what}; {GPU_MEMORY_HINT}") from None
    return graph
