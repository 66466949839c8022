"""One forward pass laid out for the runner that computes it (eager_pass.py, decode_graphs.py,
prefill_graphs.py): which rows each sequence appends, the rows' tokens, positions and KV cells, the
rows whose output comes back and what they draw. Row i is token i of the pass's window."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from edgereason.backends.torch.kv import CellTables, KVFullError
from edgereason.config import SamplingParams


@dataclass(frozen=True)
class Draws:
    """What the wanted rows draw on the device: wanted row k draws counts[k] tokens with
    params[k]."""

    counts: list[int]
    params: list[SamplingParams]


@dataclass(frozen=True)
class PassLayout:
    order: dict[int, list[int]]  # sequence -> the rows it appends, in order
    tokens: list[int]
    positions: np.ndarray  # [T] int64: each row's position in its sequence
    cells: np.ndarray  # [T] int64: the KV cell each row writes
    wanted: list[int]  # the rows whose output comes back, in request order
    draws: Draws | None  # None: the wanted rows' logits come back

    @cached_property  # every runner's `fits` asks
    def longest(self) -> int:
        """The most rows one sequence appends (1: decode tokens alone)."""
        return max(len(rows) for rows in self.order.values())

    def row_seqs(self) -> np.ndarray:
        """[T] int64: each row's sequence."""
        if len(self.order) == len(self.tokens):  # a row each: row i is the i-th sequence
            return np.fromiter(self.order, dtype=np.int64, count=len(self.order))
        seqs = np.empty(len(self.tokens), dtype=np.int64)
        for seq, rows in self.order.items():
            seqs[rows] = seq
        return seqs


def lay_out(
    window: Sequence[tuple[int, int, object]],
    wanted: list[int],
    draws: Draws | None,
    tables: CellTables,
) -> PassLayout:
    """A window's (sequence, token, tag) rows laid out, each appended to its sequence in `tables`
    (the caller cuts them back where the pass fails: CellTables.cut_back). KVFullError, nothing
    taken, where the window does not fit."""
    if not tables.can_append(len(window)):
        raise KVFullError(
            f"{len(window)} new tokens do not fit: {tables.used_tokens}/{tables.capacity} KV cells "
            "in use"
        )
    tokens = [tok for _, tok, _ in window]
    single = {seq: [i] for i, (seq, _, _) in enumerate(window)}
    if len(single) == len(window):  # decode tokens alone, most of a search's passes: no row loops
        cells, positions = tables.append_each(list(single))
        return PassLayout(single, tokens, positions, cells, wanted, draws)
    order: dict[int, list[int]] = {}
    for i, (seq, _, _) in enumerate(window):
        order.setdefault(seq, []).append(i)
    cells = np.empty(len(window), dtype=np.int64)
    positions = np.empty(len(window), dtype=np.int64)
    for seq, rows in order.items():
        start = tables.seq_len(seq)
        cells[rows] = tables.append(seq, len(rows))
        positions[rows] = np.arange(start, start + len(rows))
    return PassLayout(order, tokens, positions, cells, wanted, draws)
