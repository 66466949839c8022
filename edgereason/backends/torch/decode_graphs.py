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
process's one graph memory pool (cuda_graphs.shared_pool). Passes with a prefill, more rows than the
largest bucket, or logits of a few columns run eagerly."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from edgereason.backends.torch import compiled_layers
from edgereason.backends.torch.cuda_graphs import ROW_BUCKETS, bucket, capture, padded_attention
from edgereason.backends.torch.device_draws import draw_rows, draw_tensor, signed
from edgereason.backends.torch.kv import KVCache
from edgereason.backends.torch.model import TorchModel
from edgereason.backends.torch.pass_layout import Draws, PassLayout
from edgereason.config import SamplingParams

# what padding rows, and passes that draw nothing, "draw" with
GREEDY = SamplingParams(temperature=0.0)


class DecodeGraphs:
    """The decode passes of one model's weights over one context's KV cache (see the module doc)."""

    def __init__(self, model: TorchModel, cache: KVCache) -> None:
        self.model = model
        self.cache = cache
        rows, device = ROW_BUCKETS[-1], model.device
        # token, position, cell, sequence, seed, then temperature and top_p (float64 bit patterns)
        # of each row
        self.inputs = torch.zeros(7, rows, dtype=torch.long, device=device)
        self.logits = torch.zeros(rows, model.n_vocab, dtype=torch.float32, device=device)
        self.drawn = torch.zeros(rows, dtype=torch.long, device=device)  # each row's first draw
        self.graphs: dict[tuple[int, int, bool], torch.cuda.CUDAGraph] = {}

    def fits(self, layout: PassLayout, columns: torch.Tensor | None) -> bool:
        return columns is None and len(layout.order) <= ROW_BUCKETS[-1] and layout.longest == 1

    def run(self, layout: PassLayout) -> torch.Tensor | list[list[int]]:
        """Row i is the pass's token i (each sequence has one token, so `order` lists them in row
        order). Without draws: the logits of the wanted rows, [len(wanted), n_vocab] (a copy: the
        buffer is the next pass's). With them: wanted row k's counts[k] tokens drawn with
        params[k]."""
        n, rows = len(layout.tokens), bucket(len(layout.tokens), ROW_BUCKETS)
        width = self.cache.width(layout.order)
        settings = [GREEDY] * n  # rows that draw nothing: greedy, the cheapest
        if layout.draws is not None:
            for k, i in enumerate(layout.wanted):
                settings[i] = layout.draws.params[k]
        self.inputs[:, :rows].copy_(torch.from_numpy(self._host_inputs(layout, rows, settings)))
        nucleus = any(p.top_p < 1.0 for p in settings)
        graph = self.graphs.get((rows, width, nucleus)) or self._capture(rows, width, nucleus)
        graph.replay()
        if layout.draws is None:
            return self.logits[torch.tensor(layout.wanted, device=self.model.device)]
        return self._drawn(layout, layout.draws)

    def _host_inputs(
        self, layout: PassLayout, rows: int, settings: list[SamplingParams]
    ) -> np.ndarray:
        """The [7, rows] int64 that `inputs` takes: each row's token, position, cell, sequence,
        seed, temperature and top_p; padding rows (past the pass's) greedy at the pad cell of the
        all-pad table row."""
        n = len(layout.tokens)
        host = np.zeros((7, rows), dtype=np.int64)
        host[2, n:], host[3, n:] = self.cache.store.pad_cell, self.cache.device_tables.pad_row
        host[0, :n], host[1, :n] = layout.tokens, layout.positions
        host[2, :n], host[3, :n] = layout.cells, list(layout.order)
        host[4, :n] = [signed(p.seed) for p in settings]
        host[5:7].view(np.float64)[:, :n] = [
            [p.temperature for p in settings],
            [p.top_p for p in settings],
        ]
        host[5:7].view(np.float64)[:, n:] = [[0.0], [1.0]]  # padding rows: greedy
        return host

    def _drawn(self, layout: PassLayout, draws: Draws) -> list[list[int]]:
        """Wanted row k's counts[k] tokens: the first each row drew in the graph, the rest drawn
        eagerly from the logits the graph left, from the same streams (draw 0 is the graph's)."""
        wanted = layout.wanted
        first = self.drawn[: len(layout.tokens)].tolist()  # the one transfer back
        out = [[first[i]] if count == 1 else [] for i, count in zip(wanted, draws.counts)]
        more = [k for k, count in enumerate(draws.counts) if count > 1]
        if more:
            rows = torch.tensor([wanted[k] for k in more], device=self.model.device)
            counts, params = [draws.counts[k] for k in more], [draws.params[k] for k in more]
            for k, row in zip(more, draw_rows(self.logits[rows], counts, params)):
                out[k] = row
        return out

    def _body(self, rows: int, width: int, nucleus: bool) -> Callable[[], None]:
        """The pass over the static inputs' first `rows` rows: what the graph records."""
        decoder = self.model.decoder
        tokens, positions, cells, seqs, seeds = self.inputs[:5, :rows]
        temps, top_p = self.inputs[5:7, :rows].view(torch.float64)

        def body() -> None:
            self.cache.device_tables.write(seqs, positions, cells)
            attend = padded_attention(self.model, self.cache, seqs, positions, cells, 1, width)
            hidden = decoder.hidden(tokens, positions, attend, compiled=compiled_layers.enabled())
            self.logits[:rows].copy_(decoder.logits(hidden))
            self.drawn[:rows].copy_(
                draw_tensor(self.logits[:rows], temps, top_p, seeds, 1, nucleus)[:, 0]
            )

        return body

    def _capture(self, rows: int, width: int, nucleus: bool) -> torch.cuda.CUDAGraph:
        what = f"the decode graph of {rows} rows over {width} KV cells"
        graph = capture(self._body(rows, width, nucleus), self.model.device, what)
        self.graphs[(rows, width, nucleus)] = graph
        return graph
