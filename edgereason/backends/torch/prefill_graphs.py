"""Passes that append several tokens to each sequence (a prompt's prefill, every PRM call) replayed
as CUDA graphs.

Eager, such a pass costs Python and a launch for each of its ~1,800 kernels: many times what the
decode graph of the same model costs (docs/results.md, "The torch backend on the H200"). Here the
window's sequences are laid out padded, E sequences of n query slots (token t of sequence e is
row e * n + t), bucketed: E in ROW_BUCKETS, n in powers of two from MIN_QUERIES, the tables' width
as the decode graphs'. A padding slot is token 0 at position 0 writing the pad cell; a padding
sequence reads the all-pad table row. The graph leaves every row's final hidden state (and the
`layers`' outputs, for a value head) in static buffers; the few rows a pass wants are read out after
the replay, with the logits of their columns (eager: one matmul). A shape is captured the second
time it comes (a capture costs about two eager passes; a one-off prompt is not worth one). Windows
of more than MAX_ROWS padded rows, and passes whose capture fails for a reason other than memory
(said once), run eagerly.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence

import numpy as np
import torch

from edgereason.backends.torch import compiled_layers
from edgereason.backends.torch.cuda_graphs import ROW_BUCKETS, bucket, capture, padded_attention
from edgereason.backends.torch.kv import KVCache
from edgereason.backends.torch.model import TorchModel
from edgereason.backends.torch.pass_layout import PassLayout
from edgereason.errors import OutOfMemoryError

MIN_QUERIES = 16
MAX_ROWS = 4096  # padded rows a graph holds: bounds its buffers (MLP activations: rows x 2 n_ff)
CAPTURE_AT = 2  # the pass of a shape that is captured (a capture costs about two eager passes)
QUERY_BUCKETS = tuple(MIN_QUERIES << i for i in range(int(np.log2(MAX_ROWS // MIN_QUERIES)) + 1))


class PrefillGraphs:
    """The prefill passes of one model's weights over one context's KV cache (see the module doc).
    layers: the layers whose outputs the graphs also leave (a value head's)."""

    def __init__(self, model: TorchModel, cache: KVCache, layers: Sequence[int]) -> None:
        self.model = model
        self.cache = cache
        self.layers = list(layers)
        device, dtype = model.device, model.decoder.dtype
        # token, position, cell
        self.inputs = torch.zeros(3, MAX_ROWS, dtype=torch.long, device=device)
        self.seq_rows = torch.zeros(ROW_BUCKETS[-1], dtype=torch.long, device=device)
        self.hidden = torch.zeros(MAX_ROWS, model.n_embd, dtype=dtype, device=device)
        self.taps = torch.zeros(len(layers), MAX_ROWS, model.n_embd, dtype=dtype, device=device)
        self.graphs: dict[tuple[int, int, int], torch.cuda.CUDAGraph] = {}
        self.seen: dict[tuple[int, int, int], int] = {}  # passes of each shape not yet captured
        self.capture_at = CAPTURE_AT
        self.broken = False

    def fits(self, layout: PassLayout) -> bool:
        if self.broken or len(layout.order) > ROW_BUCKETS[-1]:
            return False
        longest = layout.longest
        if longest == 1 or longest > QUERY_BUCKETS[-1]:
            return False
        return bucket(len(layout.order), ROW_BUCKETS) * bucket(longest, QUERY_BUCKETS) <= MAX_ROWS

    def run(self, layout: PassLayout) -> tuple[torch.Tensor, list[torch.Tensor]] | None:
        """The final hidden states of the wanted rows [len(wanted), n_embd] and each layer's
        outputs there (copies); None where the graph could not be captured (the caller runs the
        pass eagerly)."""
        order = layout.order
        n_seq, longest = bucket(len(order), ROW_BUCKETS), bucket(layout.longest, QUERY_BUCKETS)
        width = self.cache.width(order)
        host = np.zeros((3, n_seq * longest), dtype=np.int64)
        host[2] = self.cache.store.pad_cell
        slot = np.empty(len(layout.tokens), dtype=np.int64)  # the pass's row -> padded row
        for e, idx in enumerate(order.values()):
            slot[idx] = e * longest + np.arange(len(idx))
        host[0, slot], host[1, slot], host[2, slot] = layout.tokens, layout.positions, layout.cells
        seqs = np.full(n_seq, self.cache.device_tables.pad_row, dtype=np.int64)
        seqs[: len(order)] = list(order)
        self.inputs[:, : n_seq * longest].copy_(torch.from_numpy(host))
        self.seq_rows[:n_seq].copy_(torch.from_numpy(seqs))
        key = (n_seq, longest, width)
        graph = self.graphs.get(key)
        if graph is None:
            self.seen[key] = self.seen.get(key, 0) + 1
            # a shape seen once may not come back: not worth a capture yet
            if self.seen[key] < self.capture_at:
                return None
            graph = self._capture(*key)
            if graph is None:
                return None
        graph.replay()
        rows = torch.from_numpy(slot[layout.wanted]).to(self.model.device)
        return self.hidden[rows], [tap[rows] for tap in self.taps]

    def _body(self, n_seq: int, longest: int, width: int) -> Callable[[], None]:
        """The pass over the static inputs' first n_seq * longest rows: what the graph records."""
        n_rows = n_seq * longest
        tokens, positions, cells = self.inputs[:, :n_rows]
        seqs = self.seq_rows[:n_seq]

        def tap(layer: int, x: torch.Tensor) -> None:
            if layer in self.layers:
                self.taps[self.layers.index(layer), :n_rows].copy_(x)

        def body() -> None:
            attend = padded_attention(
                self.model, self.cache, seqs, positions, cells, longest, width
            )
            on_layer = tap if self.layers else None
            hidden = self.model.decoder.hidden(
                tokens, positions, attend, on_layer, compiled_layers.enabled()
            )
            self.hidden[:n_rows].copy_(hidden)

        return body

    def _capture(self, n_seq: int, longest: int, width: int) -> torch.cuda.CUDAGraph | None:
        what = f"the prefill graph of {n_seq} sequences of {longest} tokens over {width} KV cells"
        try:
            graph = capture(self._body(n_seq, longest, width), self.model.device, what)
        except OutOfMemoryError:
            raise
        # a kernel that cannot be recorded: this context's prefills run eagerly
        except RuntimeError as e:
            print(
                f"edgereason: prefills run without CUDA graphs ({what} failed: {e})",
                file=sys.stderr,
            )
            self.broken = True
            return None
        self.graphs[(n_seq, longest, width)] = graph
        return graph
