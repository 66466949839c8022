"""A pass's window laid out (pass_layout.py): each sequence's rows take its next cells and
positions in the real CellTables, the wanted rows and draws pass through as given."""

from __future__ import annotations

import numpy as np

from edgereason.backends.torch.kv import CellTables
from edgereason.backends.torch.pass_layout import Draws, PassLayout, lay_out
from edgereason.config import SamplingParams


def laid_out(order: dict[int, list[int]]) -> PassLayout:
    """A layout of these rows alone, at cell and position 0: what a runner's `fits` reads."""
    n = sum(len(rows) for rows in order.values())
    zeros = np.zeros(n, dtype=np.int64)
    return PassLayout(order, [0] * n, zeros, zeros, [], None)


def test_each_sequence_takes_its_next_cells_and_positions():
    tables = CellTables(16, 4)
    prefill, decode = tables.new_seq(), tables.new_seq()
    tables.append(prefill, 2)
    tables.append(decode, 5)
    draws = Draws([2], [SamplingParams(temperature=0.5, seed=3)])
    window = [(prefill, 11, None), (prefill, 12, None), (decode, 13, "d"), (prefill, 14, "p")]
    layout = lay_out(window, [2, 3], draws, tables)
    assert layout.order == {prefill: [0, 1, 3], decode: [2]} and layout.longest == 3
    assert layout.tokens == [11, 12, 13, 14] and layout.wanted == [2, 3] and layout.draws is draws
    assert layout.positions.tolist() == [2, 3, 5, 4]
    assert tables.table(prefill)[2:] == layout.cells[[0, 1, 3]].tolist()
    assert tables.table(decode)[5:] == [layout.cells[2]]
    assert layout.row_seqs().tolist() == [prefill, prefill, decode, prefill]
    tables.check_integrity()


def test_decode_tokens_alone_are_one_row_each():
    tables = CellTables(8, 4)
    seqs = [tables.new_seq() for _ in range(3)]
    layout = lay_out([(s, 7, s) for s in seqs], [0, 1, 2], None, tables)
    assert layout.longest == 1 and layout.positions.tolist() == [0, 0, 0]
    assert sorted(layout.cells.tolist()) == [0, 1, 2] and tables.used_tokens == 3
