"""A pass's window laid out (pass_layout.py): each sequence's rows take its next cells and
positions in the real CellTables, the wanted rows and draws pass through as given."""

from __future__ import annotations

import numpy as np
import pytest

from edgereason.backends.torch.kv import CellTables, KVFullError
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


def test_a_failed_pass_gives_its_cells_back():
    tables = CellTables(16, 4)
    prefill, decode = tables.new_seq(), tables.new_seq()
    tables.append(decode, 3)
    for window in ([(prefill, 1, None), (prefill, 2, "p"), (decode, 3, "d")], [(decode, 4, "d")]):
        layout = lay_out(window, [], None, tables)
        tables.cut_back(layout.order, layout.positions)
        assert (tables.seq_len(prefill), tables.seq_len(decode), tables.used_tokens) == (0, 3, 3)
        tables.check_integrity()


def test_a_window_that_does_not_fit_takes_nothing():
    tables = CellTables(4, 4)
    a, b = tables.new_seq(), tables.new_seq()
    tables.append(a, 3)
    with pytest.raises(KVFullError, match="2 new tokens do not fit: 3/4"):
        lay_out([(a, 1, None), (b, 2, "b")], [1], None, tables)
    assert (tables.seq_len(a), tables.seq_len(b)) == (3, 0)
    tables.check_integrity()
