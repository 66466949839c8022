"""llama.cpp contexts for the engine: a context that manages sequence ids with exact KV accounting
(forks share cells, as llama.cpp's unified KV cache does), over a model from model.py.

The high-level `Llama` class evaluates only sequence 0 and cannot batch beams, so it is not used.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import llama_cpp.llama_cpp as L
import numpy as np

from edgereason.backends.context_roles import DecodeItem
from edgereason.backends.llamacpp.device_sampling import Candidates, TopKSamplers
from edgereason.backends.llamacpp.layer_capture import LayerCapture
from edgereason.backends.llamacpp.model import LlamaModel, physical_cores
from edgereason.errors import ModelError, OutOfMemoryError
from edgereason.util import interrupts
from edgereason.util.startup import phase

# sequences one context runs at once: llama.cpp's most (LLAMA_MAX_SEQ), the beams one search can
# have
SEQ_SLOTS = 256


class KVFullError(OutOfMemoryError):
    """The forward pass found no room in the KV cache (an out-of-memory error: the verifier's
    halving and the engine's handlers catch it)."""


@dataclass
class _Seq:
    cells: list[int]  # the KV cell ids this sequence attends to, in position order


class KVContext:
    """One llama_context with sequence-id management and exact KV accounting.

    Rules: ids come from a free list and return to it only on `free`; a fork shares every cell of
    its parent (llama_memory_seq_cp with a unified cache adds the new id to those cells, it copies
    nothing); a cell is in use while any sequence refers to it. `used_tokens` is the number of cells
    in use."""

    @phase("kv")
    def __init__(
        self,
        model: LlamaModel,
        n_ctx: int,
        n_seq_max: int = SEQ_SLOTS,
        n_batch: int = 2048,
        n_threads: int | None = None,
        flash_attn: bool = True,
        top_k: int = 0,
        capture: LayerCapture | None = None,
    ) -> None:
        params = _context_params(n_ctx, n_batch, n_seq_max, n_threads, flash_attn)
        self.model = model
        # top_k > 0: the backend cuts each requested row to its k best logits in the graph, and
        # decode hands on_logits a Candidates (ids [k], logits [k]) instead of the vocabulary-sized
        # row
        self.top_k = TopKSamplers(min(top_k, model.n_vocab), n_seq_max) if top_k else None
        if self.top_k:
            self.top_k.attach(params)
        # capture: while on_logits runs for a row, capture.current() holds that token's hidden
        # states at its layers
        if capture and self.top_k:
            raise ValueError("a layer capture reads whole rows; it does not run in a top-k context")
        self.capture = capture
        if capture:
            capture.attach(params)
        # llama.cpp logs through a Python callback while it builds the context
        with interrupts.deferred():
            self.ptr = L.llama_init_from_model(model.ptr, params)
        if not self.ptr:
            if self.top_k:
                self.top_k.free()
            raise OutOfMemoryError(
                f"could not create a llama.cpp context of {n_ctx} KV tokens for "
                f"{model.path.name}; lower --kv-budget (or --kv-tokens)"
            )
        self.mem = L.llama_get_memory(self.ptr)
        self.capacity = min(n_ctx, L.llama_n_ctx(self.ptr))
        self.n_batch = L.llama_n_batch(self.ptr)
        self.n_seq_max = L.llama_n_seq_max(self.ptr)
        self._batch = L.llama_batch_init(self.n_batch, 0, 1)
        self._free_ids = list(range(self.n_seq_max - 1, -1, -1))
        self._seqs: dict[int, _Seq] = {}
        self._refs: dict[int, int] = {}
        self._next_cell = 0

    def apply_lora(self, adapter: int) -> None:
        """Every later pass of this context runs the weights with the adapter (from LlamaModel.lora)
        at scale 1."""
        if (
            L.llama_set_adapters_lora(
                self.ptr, (L.llama_adapter_lora_p_ctypes * 1)(adapter), 1, (ctypes.c_float * 1)(1.0)
            )
            != 0
        ):
            raise ModelError(
                f"llama.cpp refused the LoRA adapter on {self.model.path.name}'s context"
            )

    # -- sequence ids (check/act pairs: can_alloc/new_seq, can_append/decode) --
    def can_alloc(self, n: int = 1) -> bool:
        return len(self._free_ids) >= n

    def new_seq(self) -> int:
        if not self._free_ids:
            raise OutOfMemoryError(f"all {self.n_seq_max} sequence slots are in use; lower --beams")
        seq = self._free_ids.pop()
        self._seqs[seq] = _Seq([])
        return seq

    def fork(self, parent: int) -> int:
        child = self.new_seq()
        cells = list(self._seqs[parent].cells)
        self._seqs[child].cells = cells
        for c in cells:
            self._refs[c] += 1
        L.llama_memory_seq_cp(self.mem, parent, child, -1, -1)
        return child

    def truncate(self, seq: int, n_tokens: int) -> None:
        s = self._seqs[seq]
        if n_tokens >= len(s.cells):
            return
        L.llama_memory_seq_rm(self.mem, seq, n_tokens, -1)
        self._unref(s.cells[n_tokens:])
        del s.cells[n_tokens:]

    def free(self, seq: int) -> None:
        s = self._seqs.pop(seq)
        L.llama_memory_seq_rm(self.mem, seq, -1, -1)
        self._unref(s.cells)
        self._free_ids.append(seq)

    def _unref(self, cells: Iterable[int]) -> None:
        for c in cells:
            r = self._refs[c] - 1
            if r:
                self._refs[c] = r
            else:
                del self._refs[c]

    def seq_len(self, seq: int) -> int:
        return len(self._seqs[seq].cells)

    def unique_tokens(self, seq: int) -> int:
        """Cells only this sequence uses: what freeing it gives back."""
        return sum(1 for c in self._seqs[seq].cells if self._refs[c] == 1)

    @property
    def used_tokens(self) -> int:
        return len(self._refs)

    @property
    def live_seqs(self) -> int:
        return len(self._seqs)

    def can_append(self, n_new_tokens: int) -> bool:
        return self.used_tokens + n_new_tokens <= self.capacity

    def check_integrity(self) -> None:
        """Our accounting agrees with llama.cpp: each sequence's last position and the shared cell
        counts."""
        refs: dict[int, int] = {}
        for seq, s in self._seqs.items():
            for c in s.cells:
                refs[c] = refs.get(c, 0) + 1
            pos_max = L.llama_memory_seq_pos_max(self.mem, seq)
            assert pos_max == len(s.cells) - 1, (
                f"seq {seq}: llama.cpp pos_max {pos_max} != {len(s.cells) - 1}"
            )
        assert refs == self._refs, "KV cell reference counts drifted"
        assert self.used_tokens <= self.capacity
        assert not set(self._free_ids) & set(self._seqs), "a live sequence id is on the free list"

    # -- forward pass --
    def decode(
        self,
        items: Sequence[DecodeItem],
        on_logits: Callable[[object, np.ndarray | Candidates], None],
    ) -> int:
        """Evaluate every item's tokens (one llama_decode per n_batch tokens; usually exactly one)
        and call on_logits(tag, row) for each requested row: logits [n_vocab], or Candidates (top_k
        ids and logits, copies) in a top-k context. An array row is only valid inside the
        callback."""
        total = sum(len(it.tokens) for it in items)
        if not self.can_append(total):
            raise KVFullError(
                f"{total} new tokens do not fit: {self.used_tokens}/{self.capacity} KV cells in use"
            )
        flat = self._flatten(items)
        for lo in range(0, len(flat), self.n_batch):
            window = flat[lo : lo + self.n_batch]
            rows = self._fill_batch(window)
            if self.capture:
                self.capture.begin(len(window))
            rc = L.llama_decode(self.ptr, self._batch)
            # a stop signal that landed in llama.cpp's log callback was dropped there
            interrupts.check()
            if rc != 0:
                raise KVFullError(
                    f"llama_decode failed (code {rc}) with {self.used_tokens}/{self.capacity} KV "
                    "cells in use"
                )
            for seq, _tok, _pos, _tag in window:
                cell = self._next_cell
                self._next_cell += 1
                self._seqs[seq].cells.append(cell)
                self._refs[cell] = 1
            self._emit_rows(rows, on_logits)
        return total

    def _flatten(self, items: Sequence[DecodeItem]) -> list[tuple[int, int, int, object]]:
        """decode's tokens as (seq, token, position, tag or _NO_LOGITS), split later by n_batch."""
        flat: list[tuple[int, int, int, object]] = []
        for it in items:
            start = len(self._seqs[it.seq].cells)
            want = dict(it.outputs)
            for off, tok in enumerate(it.tokens):
                flat.append((it.seq, tok, start + off, want.get(off, _NO_LOGITS)))
        return flat

    def _fill_batch(self, window: list[tuple[int, int, int, object]]) -> list[tuple[int, object]]:
        """Write one window into the llama_batch; returns the (batch index, tag) rows wanted."""
        b = self._batch
        rows: list[tuple[int, object]] = []
        for i, (seq, tok, pos, tag) in enumerate(window):
            b.token[i] = tok
            b.pos[i] = pos
            b.n_seq_id[i] = 1
            b.seq_id[i][0] = seq
            wanted = tag is not _NO_LOGITS
            b.logits[i] = wanted
            if wanted:
                rows.append((i, tag))
        b.n_tokens = len(window)
        return rows

    def _emit_rows(
        self,
        rows: list[tuple[int, object]],
        on_logits: Callable[[object, np.ndarray | Candidates], None],
    ) -> None:
        """Hand each wanted row of the last pass to on_logits: top-k candidates or a whole row."""
        if self.top_k and rows:
            ids, logits = self.top_k.read(self.ptr, [i for i, _ in rows])
            for r, (_, tag) in enumerate(rows):
                on_logits(tag, Candidates(ids[r], logits[r]))
            return
        for i, tag in rows:
            if self.capture:
                self.capture.at(i)
            ptr = L.llama_get_logits_ith(self.ptr, i)
            on_logits(tag, np.ctypeslib.as_array(ptr, shape=(self.model.n_vocab,)))

    def close(self) -> None:
        if self.ptr:
            L.llama_batch_free(self._batch)
            L.llama_free(self.ptr)
            self.ptr = None
            if self.top_k:
                self.top_k.free()  # after the context: it used the chains until llama_free


_NO_LOGITS = object()


def _context_params(
    n_ctx: int, n_batch: int, n_seq_max: int, n_threads: int | None, flash_attn: bool
) -> L.llama_context_params:
    """KVContext's llama.cpp context parameters, apart so that __init__ stays short."""
    params = L.llama_context_default_params()
    # llama.cpp pads to 256 cells; the budget is ours
    params.n_ctx = max(256, -(-n_ctx // 256) * 256)
    params.n_batch = n_batch
    params.n_ubatch = min(512, n_batch)
    params.n_seq_max = n_seq_max
    params.kv_unified = True  # one cell pool for all sequences: forks share cells
    threads = n_threads or physical_cores()
    params.n_threads = params.n_threads_batch = threads
    params.no_perf = True
    # A unified cache makes every row attend over all cells in use, every sequence's. Without
    # flash attention that is a dense [n_kv x rows] product per head, several times slower on a
    # CPU once thousands of cells are in use (docs/results.md, "CPUs"). Flash attention skips
    # masked cells. Its price: logits depend slightly (~1e-3) on how tokens are split into
    # ubatches, so `flash_attn=False` is there for bit-exact incremental scoring.
    params.flash_attn_type = (
        L.LLAMA_FLASH_ATTN_TYPE_ENABLED if flash_attn else L.LLAMA_FLASH_ATTN_TYPE_DISABLED
    )
    return params
