"""Decode passes on CUDA replayed as CUDA graphs (the pattern of nano-vllm's `capture_cudagraph`).

A pass whose sequences each append one token runs at a bucketed row count (ROW_BUCKETS) and a bucketed table width
(powers of two from MIN_TABLE): its rows are padded (token 0 at position 0, writing the pad cell, reading it) and
its cell tables padded with the pad cell, which the mask hides. A graph is captured on first use of its (rows,
width) bucket, into one memory pool shared by all; static inputs are shared too (slices of the largest), and every
graph writes its logits into one [max rows, n_vocab] buffer. Passes with a prefill, more rows than the largest
bucket, or logits of a few columns run eagerly.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

import numpy as np
import torch

from edgereason.backends.torch.runtime import GPU_MEMORY_HINT, AttentionGroup, attend_groups
from edgereason.errors import OutOfMemoryError

if TYPE_CHECKING:
    from edgereason.backends.torch.runtime import TorchContext

ROW_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128)
MIN_TABLE = 256


def bucket(n: int, sizes: tuple[int, ...]) -> int:
    return next(s for s in sizes if s >= n)


def table_bucket(length: int) -> int:
    return max(MIN_TABLE, 1 << (length - 1).bit_length())


class DecodeGraphs:
    def __init__(self, ctx: "TorchContext") -> None:
        self.ctx = ctx
        device, rows = ctx.device, ROW_BUCKETS[-1]
        self.tokens = torch.zeros(rows, dtype=torch.long, device=device)
        self.positions = torch.zeros(rows, dtype=torch.long, device=device)
        self.cells = torch.full((rows,), ctx.kv.pad_cell, dtype=torch.long, device=device)
        self.logits = torch.zeros(rows, ctx.model.n_vocab, dtype=torch.float32, device=device)
        self.tables: dict[int, torch.Tensor] = {}  # width -> [max rows, width] cell tables
        self.graphs: dict[tuple[int, int], torch.cuda.CUDAGraph] = {}
        self.pool = None

    def fits(self, order: dict[int, list[int]], columns: torch.Tensor | None) -> bool:
        return columns is None and len(order) <= ROW_BUCKETS[-1] and all(len(idx) == 1 for idx in order.values())

    def run(self, order: dict[int, list[int]], tokens: list[int], positions: np.ndarray, cells: np.ndarray,
            wanted: list[int]) -> torch.Tensor:
        """The logits of the `wanted` rows, [len(wanted), n_vocab] (a copy: the buffer is the next pass's)."""
        n = len(tokens)
        rows = bucket(n, ROW_BUCKETS)
        width = table_bucket(max(len(self.ctx.tables.table(seq)) for seq in order))
        table = np.full((rows, width), self.ctx.kv.pad_cell, dtype=np.int64)
        for seq, (i,) in order.items():
            t = self.ctx.tables.table(seq)
            table[i, :len(t)] = t
        pad = self.ctx.kv.pad_cell
        self._fill(self.tokens, tokens, rows, 0)
        self._fill(self.positions, positions, rows, 0)
        self._fill(self.cells, cells, rows, pad)
        self._table(width)[:rows].copy_(torch.from_numpy(table), non_blocking=True)
        graph = self.graphs.get((rows, width)) or self._capture(rows, width)
        graph.replay()
        return self.logits[torch.tensor(wanted, device=self.ctx.device)]

    def _fill(self, buffer: torch.Tensor, values, rows: int, pad: int) -> None:
        n = len(values)
        buffer[:n].copy_(torch.as_tensor(np.asarray(values, dtype=np.int64)), non_blocking=True)
        buffer[n:rows].fill_(pad)

    def _table(self, width: int) -> torch.Tensor:
        if width not in self.tables:
            self.tables[width] = torch.full((ROW_BUCKETS[-1], width), self.ctx.kv.pad_cell, dtype=torch.long,
                                            device=self.ctx.device)
        return self.tables[width]

    def _body(self, rows: int, width: int) -> Callable[[], None]:
        """The pass over the static buffers' first `rows` rows: what the graph records."""
        ctx, table = self.ctx, self._table(width)[:rows]
        tokens, positions, cells = self.tokens[:rows], self.positions[:rows], self.cells[:rows]

        def body() -> None:
            every = torch.arange(rows, device=ctx.device)
            mask = torch.arange(width, device=ctx.device)[None, None, :] <= positions[:, None, None]
            group = AttentionGroup(query_rows=every[:, None], cells=table, mask=mask[:, None], tokens=every,
                                   padded_at=every)

            def attend(layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
                return attend_groups(ctx.kv, layer, cells, [group], q, k, v)

            hidden = ctx.model.decoder.hidden(tokens, positions, attend)
            self.logits[:rows].copy_(ctx.model.decoder.logits(hidden))

        return body

    def _capture(self, rows: int, width: int) -> torch.cuda.CUDAGraph:
        """Warm up once on a side stream (it computes this very pass: the replay after writes the same cells
        again), then record."""
        body = self._body(rows, width)
        try:
            with torch.no_grad():
                stream = torch.cuda.Stream()
                stream.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(stream):
                    body()
                torch.cuda.current_stream().wait_stream(stream)
                graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(graph, pool=self.pool):
                    body()
        except torch.OutOfMemoryError:
            raise OutOfMemoryError(f"the GPU ran out of memory capturing the decode graph of {rows} rows over "
                                   f"{width} KV cells; {GPU_MEMORY_HINT}") from None
        if self.pool is None:
            self.pool = graph.pool()
        self.graphs[(rows, width)] = graph
        return graph
