"""The torch backend's KV accounting: exact under any sequence of appends, forks, truncations and
frees."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from edgereason.backends.torch.kv import CellTables, KVFullError

CAPACITY = 64

# an operation: (kind, which live sequence, a count)
OPS = st.lists(
    st.tuples(
        st.sampled_from(["new", "append", "fork", "truncate", "free"]),
        st.integers(0, 7),
        st.integers(0, 12),
    ),
    max_size=60,
)


class Reference:
    """What the accounting must say, kept the obvious way: each appended token is a fresh id, a fork
    copies the parent's list of ids, and the KV in use is the set of ids any live sequence holds."""

    def __init__(self) -> None:
        self.seqs: dict[int, list[int]] = {}
        self.next_token = 0

    def fresh(self, n: int) -> list[int]:
        self.next_token += n
        return list(range(self.next_token - n, self.next_token))

    def used(self) -> int:
        return len({t for ids in self.seqs.values() for t in ids})

    def unique(self, seq: int) -> int:
        others = {t for s, ids in self.seqs.items() if s != seq for t in ids}
        return sum(1 for t in self.seqs[seq] if t not in others)


@settings(max_examples=200, deadline=None)
@given(OPS)
def test_accounting_is_exact_under_random_fork_free_truncate(ops):
    tables, ref = CellTables(CAPACITY, n_seq_max=8), Reference()
    for kind, pick, n in ops:
        live = sorted(ref.seqs)
        seq = live[pick % len(live)] if live else None
        if kind == "new" or seq is None:
            if tables.can_alloc():
                ref.seqs[tables.new_seq()] = []
        elif kind == "append":
            if tables.can_append(n):
                tables.append(seq, n)
                ref.seqs[seq] += ref.fresh(n)
            else:
                assert ref.used() + n > CAPACITY  # refused only when it does not fit
                with pytest.raises(KVFullError):
                    tables.append(seq, n)
        elif kind == "fork":
            if tables.can_alloc():
                ref.seqs[tables.fork(seq)] = list(ref.seqs[seq])
        elif kind == "truncate":
            tables.truncate(seq, n)
            del ref.seqs[seq][n:]
        else:
            tables.free(seq)
            del ref.seqs[seq]
        tables.check_integrity()
        assert tables.used_tokens == ref.used()
        assert tables.live_seqs == len(ref.seqs)
        for s, ids in ref.seqs.items():
            assert tables.seq_len(s) == len(ids)
            assert tables.unique_tokens(s) == ref.unique(s)
        assert tables.can_append(CAPACITY - ref.used()) and not tables.can_append(
            CAPACITY - ref.used() + 1
        )
    for s in list(ref.seqs):
        tables.free(s)
    assert tables.used_tokens == 0
    tables.check_integrity()


def test_a_fork_shares_every_cell_and_appends_take_new_ones():
    tables = CellTables(16)
    parent = tables.new_seq()
    tables.append(parent, 5)
    child = tables.fork(parent)
    assert tables.used_tokens == 5 and tables.table(child) == tables.table(parent)
    new = tables.append(child, 2)
    assert tables.used_tokens == 7 and not set(new) & set(tables.table(parent))
    tables.free(parent)
    # the shared cells stay for the child
    assert tables.used_tokens == 7 and tables.unique_tokens(child) == 7


def test_integrity_check_finds_drifted_counts():
    tables = CellTables(8)
    seq = tables.new_seq()
    tables.append(seq, 3)
    tables._refs[tables.table(seq)[0]] += 1  # a count that no table accounts for
    with pytest.raises(AssertionError, match="reference counts"):
        tables.check_integrity()


def test_append_each_takes_the_cells_one_append_a_sequence_would():
    """A decode pass's batch append: the same cells, in the same order, as one append(seq, 1) per
    sequence, and the positions the sequences had."""
    one_by_one, batched = CellTables(16, 4), CellTables(16, 4)
    for tables in (one_by_one, batched):
        seqs = [tables.new_seq() for _ in range(3)]
        tables.append(seqs[0], 2)
        tables.append(seqs[1], 4)
        tables.free(seqs[0])  # its cells go back to the free list
        seqs[0] = tables.new_seq()
        tables.append(seqs[2], 2)
    expected = [one_by_one.append(seq, 1)[0] for seq in seqs]
    cells, positions = batched.append_each(seqs)
    assert cells.tolist() == expected and positions.tolist() == [0, 4, 2]
    assert [batched.table(s) for s in seqs] == [one_by_one.table(s) for s in seqs]
    batched.check_integrity()


def test_append_each_takes_nothing_where_the_cells_run_short():
    tables = CellTables(4, 8)
    seqs = [tables.new_seq() for _ in range(5)]
    with pytest.raises(KVFullError, match="5 new tokens do not fit: 0/4"):
        tables.append_each(seqs)
    assert tables.used_tokens == 0 and all(tables.seq_len(s) == 0 for s in seqs)
    tables.check_integrity()
