"""The torch backend's KV cache: a pool of cells in device memory, one cell per token (pages of one
token, as SGLang's token pool), with per-sequence cell tables and reference counts.

Why pages of one token: the engine's budget needs `kv_used_tokens` exact and a fork to cost only the
tokens it appends. With pages of b > 1 tokens a fork that shares a partial page must copy it before
either side appends (up to b - 1 cells more than the tokens appended), and the KV would hold up to b
- 1 empty cells per sequence: the used count would be rounded, or the budget's arithmetic wrong.
With one-token pages a fork copies the parent's cell table (indices, not data), shares every cell,
and each appended token takes exactly one cell. Attention reads a sequence's cells through its
table, as a paged kernel reads pages.

Rules (as backends/llamacpp/runtime.py): ids come from a free list and return to it only on `free`;
a cell is in use while any sequence's table holds it; `used_tokens` is the number of cells in use
and never exceeds `capacity`. One extra cell past `capacity` takes the writes of padding rows (CUDA
graphs run at bucketed row counts); it is never in a table or counted."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from edgereason.backends.torch import SEQ_SLOTS
from edgereason.errors import OutOfMemoryError
from edgereason.util.startup import phase

MIN_TABLE = 256  # the narrowest table width a pass gathers (CUDA graphs are recorded per width)
# what to do where the GPU's memory runs short: the KV cache, a pass or a graph's capture
GPU_MEMORY_HINT = "lower --gpu-memory (or --kv-budget) or free GPU memory"


def table_width(length: int) -> int:
    """The bucketed width of a table of `length` cells: a power of two, at least MIN_TABLE."""
    return max(MIN_TABLE, 1 << (length - 1).bit_length())


class CellTables:
    """Sequence ids, their cell tables and the cells' reference counts: the accounting, no
    tensors."""

    def __init__(self, capacity: int, n_seq_max: int = SEQ_SLOTS) -> None:
        self.capacity = capacity
        self.n_seq_max = n_seq_max
        self._refs = np.zeros(capacity, dtype=np.int32)
        # popped from the end: lowest cells first
        self._free_cells = list(range(capacity - 1, -1, -1))
        self._free_ids = list(range(n_seq_max - 1, -1, -1))
        self._tables: dict[int, list[int]] = {}

    # -- sequence ids (check/act pairs: can_alloc/new_seq, can_append/append) --
    def can_alloc(self, n: int = 1) -> bool:
        return len(self._free_ids) >= n

    def can_append(self, n_new_tokens: int) -> bool:
        return n_new_tokens <= len(self._free_cells)

    def new_seq(self) -> int:
        if not self._free_ids:
            raise OutOfMemoryError(f"all {self.n_seq_max} sequence slots are in use; lower --beams")
        seq = self._free_ids.pop()
        self._tables[seq] = []
        return seq

    def fork(self, parent: int) -> int:
        table = self._tables[parent]
        child = self.new_seq()
        self._tables[child] = list(table)
        if table:
            self._refs[np.asarray(table)] += 1  # a table holds distinct cells: no repeated index
        return child

    def truncate(self, seq: int, n_tokens: int) -> None:
        table = self._tables[seq]
        if n_tokens < len(table):
            self._release(table[n_tokens:])
            del table[n_tokens:]

    def cut_back(self, rows: Mapping[int, Sequence[int]], positions: np.ndarray) -> None:
        """Give back the cells a failed pass took (pass_layout.PassLayout's `order` and
        `positions`): each sequence to the position of its first row."""
        for seq, its_rows in rows.items():
            self.truncate(seq, int(positions[its_rows[0]]))

    def free(self, seq: int) -> None:
        self._release(self._tables.pop(seq))
        self._free_ids.append(seq)

    def append(self, seq: int, n: int) -> list[int]:
        """n fresh cells at the end of seq's table; KVFullError (an OutOfMemoryError) when fewer are
        free."""
        if not self.can_append(n):
            raise KVFullError(
                f"{n} new tokens do not fit: {self.used_tokens}/{self.capacity} KV cells in use"
            )
        if n == 1:  # a decode token: no slices or index arrays
            cell = self._free_cells.pop()
            self._refs[cell] = 1
            self._tables[seq].append(cell)
            return [cell]
        cells = self._free_cells[len(self._free_cells) - n :][::-1]
        del self._free_cells[len(self._free_cells) - n :]
        self._refs[cells] = 1
        self._tables[seq] += cells
        return cells

    def append_each(self, seqs: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
        """One fresh cell at the end of each of `seqs` (distinct sequences: a decode pass), taken in
        one slice of the free list and counted in one array op -> [n] int64 cells and the positions
        they hold. KVFullError when fewer are free, before any is taken."""
        n = len(seqs)
        if not self.can_append(n):
            raise KVFullError(
                f"{n} new tokens do not fit: {self.used_tokens}/{self.capacity} KV cells in use"
            )
        cells = self._free_cells[len(self._free_cells) - n :][::-1]  # as n pops: lowest first
        del self._free_cells[len(self._free_cells) - n :]
        tables = [self._tables[seq] for seq in seqs]
        starts = [len(table) for table in tables]
        for table, cell in zip(tables, cells):
            table.append(cell)
        at = np.array(cells, dtype=np.int64)
        self._refs[at] = 1
        return at, np.array(starts, dtype=np.int64)

    def _release(self, cells: Sequence[int]) -> None:
        if not cells:
            return
        at = np.asarray(cells)
        self._refs[at] -= 1
        self._free_cells += at[self._refs[at] == 0][::-1].tolist()

    # -- reading --
    def table(self, seq: int) -> list[int]:
        return self._tables[seq]

    def seq_len(self, seq: int) -> int:
        return len(self._tables[seq])

    def live_ids(self) -> list[int]:
        return list(self._tables)

    def unique_tokens(self, seq: int) -> int:
        """Cells only this sequence uses: what freeing it gives back."""
        table = self._tables[seq]
        return int((self._refs[np.asarray(table, dtype=np.int64)] == 1).sum()) if table else 0

    @property
    def used_tokens(self) -> int:
        return self.capacity - len(self._free_cells)

    @property
    def live_seqs(self) -> int:
        return len(self._tables)

    def check_integrity(self) -> None:
        """The reference counts and free lists agree with the tables."""
        refs = np.zeros(self.capacity, dtype=np.int32)
        for seq, table in self._tables.items():
            assert len(set(table)) == len(table), f"seq {seq} holds a cell twice"
            if table:
                refs[np.asarray(table)] += 1
        assert np.array_equal(refs, self._refs), "KV cell reference counts drifted"
        free = set(self._free_cells)
        assert len(free) == len(self._free_cells), "a cell is on the free list twice"
        assert free == set(np.flatnonzero(refs == 0).tolist()), (
            "the free cells are not exactly the unreferenced ones"
        )
        assert self.used_tokens <= self.capacity
        assert not set(self._free_ids) & set(self._tables), "a live sequence id is on the free list"


class KVFullError(OutOfMemoryError):
    """No room for a forward pass's tokens in the KV cache (the verifier's halving and the engine
    catch it)."""


class KVStore:
    """Keys and values of every layer for `capacity` cells plus the padding cell, in device memory:
    one tensor a layer, [cells, 2 * n_head_kv, head_dim], a cell's keys (heads 0..KVH-1) beside its
    values, as the fused QKV matmul leaves a token's K and V, so a layer's write is one copy and its
    read one gather. One tensor a layer, not one for all: a compiled pass writes a whole tensor in
    place, where a write into a view of one would be copied (the layer's every cell, each pass)."""

    @phase("kv")
    def __init__(
        self,
        n_layer: int,
        capacity: int,
        n_head_kv: int,
        head_dim: int,
        device: torch.device,
        dtype: torch.dtype,
    ) -> None:
        shape = (capacity + 1, 2 * n_head_kv, head_dim)
        self.layers = [torch.zeros(shape, device=device, dtype=dtype) for _ in range(n_layer)]
        self.n_head_kv = n_head_kv
        self.pad_cell = capacity  # padding rows write here; no table holds it

    def free(self) -> None:
        """Give the layers' device memory back (a closed context; its runners share this store)."""
        self.layers = []

    def write(self, layer: int, cells: torch.Tensor, kv: torch.Tensor) -> None:
        """kv [T, 2 * n_head_kv, head_dim]: token i's keys and values into cell cells[i]."""
        write_cells(self.layers[layer], cells, kv)

    def read(
        self, layer: int, cells: torch.Tensor, dtype: torch.dtype
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """cells [E, L] -> keys, values [E, n_head_kv, L, head_dim] of `dtype` (views of one
        gather)."""
        return read_cells(self.layers[layer], cells, dtype)


def write_cells(data: torch.Tensor, cells: torch.Tensor, kv: torch.Tensor) -> None:
    """One layer's cache data [cells, 2 KVH, D]: kv [T, 2 KVH, D], token i's keys and values, into
    cell cells[i]."""
    data.index_copy_(0, cells, kv.to(data.dtype))


def read_cells(
    data: torch.Tensor, cells: torch.Tensor, dtype: torch.dtype
) -> tuple[torch.Tensor, torch.Tensor]:
    """One layer's cache data, cells [E, L] -> keys, values [E, KVH, L, D] of `dtype` (views of one
    gather)."""
    both = data[cells].to(dtype).transpose(1, 2)  # [E, 2 KVH, L, D]
    half = both.shape[1] // 2
    return both[:, :half], both[:, half:]


class DeviceTables:
    """Every sequence id's cell table mirrored in device memory, [n_seq_max + 1, width] int32, so a
    pass gathers its sequences' tables with one index instead of copying lists from the host; the
    last row is all pad cells (for padding rows). Entries past a sequence's length are stale or the
    pad cell: the attention mask hides them."""

    def __init__(self, n_seq_max: int, capacity: int, pad_cell: int, device: torch.device) -> None:
        self.width = table_width(capacity)  # a sequence holds at most `capacity` cells
        self.cells = torch.full(
            (n_seq_max + 1, self.width), pad_cell, dtype=torch.int32, device=device
        )
        self.pad_row = n_seq_max

    def fork(self, parent: int, child: int, n: int) -> None:
        self.cells[child, :n] = self.cells[parent, :n]

    def write(self, seqs: torch.Tensor, positions: torch.Tensor, cells: torch.Tensor) -> None:
        """Cell cells[i] now holds position positions[i] of sequence seqs[i]."""
        self.cells[seqs, positions] = cells.to(torch.int32)

    def rows(self, seqs: torch.Tensor, width: int) -> torch.Tensor:
        """[len(seqs), width] int64 cell ids."""
        return self.cells[seqs, :width].long()


@dataclass
class KVCache:
    """One context's KV cache, the three parts its passes read: the accounting (CellTables), the
    keys and values (KVStore) and the tables' copy in device memory (DeviceTables)."""

    tables: CellTables
    store: KVStore
    device_tables: DeviceTables

    def fork(self, parent: int) -> int:
        """A new sequence sharing every cell of `parent`, its table copied on the device too."""
        child = self.tables.fork(parent)
        self.device_tables.fork(parent, child, self.tables.seq_len(parent))
        return child

    def check_integrity(self) -> None:
        """The accounting, and the device's copy of every live table (what attention reads) agrees
        with it."""
        self.tables.check_integrity()
        for seq in self.tables.live_ids():
            table = self.tables.table(seq)
            assert self.device_tables.cells[seq, : len(table)].tolist() == table, (
                f"seq {seq}: device table drifted"
            )

    def width(self, seqs: Iterable[int]) -> int:
        """The bucketed width a pass over `seqs` gathers their tables at (the longest table's)."""
        return table_width(max(self.tables.seq_len(seq) for seq in seqs))
