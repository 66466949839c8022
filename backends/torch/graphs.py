"""Decode passes on CUDA replayed as CUDA graphs (the pattern of nano-vllm's `capture_cudagraph`),
each row's first draw recorded in the same graph.

A pass whose sequences each append one token runs at a bucketed row count (ROW_BUCKETS) and a
bucketed table width (kv.table_width: powers of two from MIN_TABLE): its rows are padded (token 0 at
position 0 of the all-pad table row, writing the pad cell) and the graph writes each row's cell into
the context's DeviceTables, then gathers each row's table from them (entries past a sequence's
length the mask hides). After the logits it draws each row's first token by device_draws.py's rule
and streams, so a pass is one copy in (token, position, cell, sequence and the row's sampling
settings: one [7, max rows] int64 buffer), one replay and one copy out (the ids). A row that draws
more than one token draws them eagerly from the logits buffer, which the graph also leaves ([max
rows, n_vocab]). A graph is captured on first use of its (rows, width, nucleus) bucket, into the
process's one graph memory pool (shared_pool). Passes with a prefill, more rows than the largest
bucket, or logits of a few columns run eagerly."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np
import torch

from edgereason.backends.torch import fused
from edgereason.backends.torch.attention import AttentionGroup, attend_groups, visibility_bias
from edgereason.backends.torch.device_draws import draw_rows, draw_tensor, signed
from edgereason.backends.torch.kv import table_width
from edgereason.backends.torch.model import Attend
from edgereason.backends.torch.runtime import GPU_MEMORY_HINT
from edgereason.config import SamplingParams
from edgereason.errors import OutOfMemoryError
from edgereason.util.startup import phase

if TYPE_CHECKING:
    from edgereason.backends.torch.runtime import TorchContext

ROW_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128)


def bucket(n: int, sizes: tuple[int, ...]) -> int:
    return next(s for s in sizes if s >= n)


# what padding rows, and passes that draw nothing, "draw" with
GREEDY = SamplingParams(temperature=0.0)


class DecodeGraphs:
    def __init__(self, ctx: TorchContext) -> None:
        self.ctx = ctx
        rows = ROW_BUCKETS[-1]
        # token, position, cell, sequence, seed, then temperature and top_p (float64 bit patterns)
        # of each row
        self.inputs = torch.zeros(7, rows, dtype=torch.long, device=ctx.device)
        self.logits = torch.zeros(rows, ctx.model.n_vocab, dtype=torch.float32, device=ctx.device)
        self.drawn = torch.zeros(rows, dtype=torch.long, device=ctx.device)  # each row's first draw
        self.graphs: dict[tuple[int, int, bool], torch.cuda.CUDAGraph] = {}

    def fits(self, order: dict[int, list[int]], columns: torch.Tensor | None) -> bool:
        return (
            columns is None
            and len(order) <= ROW_BUCKETS[-1]
            and all(len(idx) == 1 for idx in order.values())
        )

    def run(
        self,
        order: dict[int, list[int]],
        tokens: list[int],
        positions: np.ndarray,
        cells: np.ndarray,
        wanted: list[int],
        draws: list[int] | None = None,
        params: list[SamplingParams] | None = None,
    ) -> torch.Tensor | list[list[int]]:
        """Row i is window token i (each sequence has one token, so `order` lists them in window
        order). Without `draws`: the logits of the `wanted` rows, [len(wanted), n_vocab] (a copy:
        the buffer is the next pass's). With them: wanted row k's draws[k] tokens drawn with
        params[k]."""
        n, rows = len(tokens), bucket(len(tokens), ROW_BUCKETS)
        width = table_width(max(self.ctx.tables.seq_len(seq) for seq in order))
        settings = [GREEDY] * n  # rows that draw nothing: greedy, the cheapest
        if params is not None:
            for k, i in enumerate(wanted):
                settings[i] = params[k]
        host = np.zeros((7, rows), dtype=np.int64)
        host[2, n:], host[3, n:] = self.ctx.kv.pad_cell, self.ctx.table_cells.pad_row
        host[0, :n], host[1, :n], host[2, :n], host[3, :n] = tokens, positions, cells, list(order)
        host[4, :n] = [signed(p.seed) for p in settings]
        host[5:7].view(np.float64)[:, :n] = [
            [p.temperature for p in settings],
            [p.top_p for p in settings],
        ]
        host[5:7].view(np.float64)[:, n:] = [[0.0], [1.0]]  # padding rows: greedy
        self.inputs[:, :rows].copy_(torch.from_numpy(host))
        nucleus = any(p.top_p < 1.0 for p in settings)
        graph = self.graphs.get((rows, width, nucleus)) or self._capture(rows, width, nucleus)
        graph.replay()
        if draws is None:
            return self.logits[torch.tensor(wanted, device=self.ctx.device)]
        first = self.drawn[:n].tolist()  # the one transfer back
        out = [[first[i]] if count == 1 else [] for i, count in zip(wanted, draws)]
        # from the same streams: draw 0 is first[i]
        more = [k for k, count in enumerate(draws) if count > 1]
        if more:
            logits = self.logits[torch.tensor([wanted[k] for k in more], device=self.ctx.device)]
            for k, row in zip(
                more, draw_rows(logits, [draws[k] for k in more], [params[k] for k in more])
            ):
                out[k] = row
        return out

    def _body(self, rows: int, width: int, nucleus: bool) -> Callable[[], None]:
        """The pass over the static inputs' first `rows` rows: what the graph records."""
        ctx = self.ctx
        tokens, positions, cells, seqs, seeds = self.inputs[:5, :rows]
        temps, top_p = self.inputs[5:7, :rows].view(torch.float64)

        def body() -> None:
            ctx.table_cells.write(seqs, positions, cells)
            attend = padded_attention(ctx, seqs, positions, cells, rows, 1, width)
            hidden = ctx.model.decoder.hidden(tokens, positions, attend, fused=fused.enabled())
            self.logits[:rows].copy_(ctx.model.decoder.logits(hidden))
            self.drawn[:rows].copy_(
                draw_tensor(self.logits[:rows], temps, top_p, seeds, 1, nucleus)[:, 0]
            )

        return body

    def _capture(self, rows: int, width: int, nucleus: bool) -> torch.cuda.CUDAGraph:
        what = f"the decode graph of {rows} rows over {width} KV cells"
        graph = capture(self._body(rows, width, nucleus), self.ctx.device, what)
        self.graphs[(rows, width, nucleus)] = graph
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
    """Attention for a pass laid out padded, as the graphs lay theirs out: n_seq sequences (rows
    `seqs` of the device tables) of `longest` query slots each, row e * longest + t the flat token
    at `positions` and `cells` of that row; each reads its table's first `width` cells. No gather of
    queries or scatter of outputs."""
    cfg = ctx.model.decoder.config
    visible = torch.arange(width, device=ctx.device)[None, None, :] <= positions.view(
        n_seq, longest, 1
    )
    group = AttentionGroup(
        query_rows=torch.arange(n_seq * longest, device=ctx.device).view(n_seq, longest),
        cells=ctx.table_cells.rows(seqs, width),
        bias=visibility_bias(visible, cfg.n_head // cfg.n_head_kv, ctx.model.decoder.dtype),
        tokens=None,
        padded_at=None,
    )
    return attend_groups(ctx.kv, cells, [group])


_POOLS: dict[int, tuple[object, torch.cuda.CUDAGraph]] = {}


def shared_pool(device: torch.device) -> object:
    """The memory pool of every graph of this process on `device` (the generator's and the
    verifier's, decode and prefill): graphs replay one at a time, on one thread, and none keeps a
    tensor of its own past its replay (its inputs and outputs are buffers allocated outside it), so
    each reuses what the others used. The pool holds the largest graph's memory, not the sum of
    all."""
    index = device.index if device.index is not None else torch.cuda.current_device()
    if index not in _POOLS:
        pool = torch.cuda.graph_pool_handle()
        # a graph kept for the process holds the pool: were every graph of it freed (a context
        # closed), the pool would go with them and a later capture into its handle fail
        anchor = torch.cuda.CUDAGraph()
        with torch.cuda.graph(anchor, pool=pool):
            torch.zeros(1, device=device)
        _POOLS[index] = (pool, anchor)
    return _POOLS[index][0]


@phase("graphs")
def capture(body: Callable[[], None], device: torch.device, what: str) -> torch.cuda.CUDAGraph:
    """Warm up once on a side stream (it computes this very pass: the replay after writes the same
    cells again; a fused pass compiles there, fused.first_run), then record `body` into a graph
    drawing on the process's shared pool."""
    try:
        with torch.no_grad():
            stream = torch.cuda.Stream()
            stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(stream):
                fused.first_run(body)
            torch.cuda.current_stream().wait_stream(stream)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, pool=shared_pool(device)):
                body()
    except torch.OutOfMemoryError:
        raise OutOfMemoryError(
            f"the GPU ran out of memory capturing {what}; {GPU_MEMORY_HINT}"
        ) from None
    return graph
