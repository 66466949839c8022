"""A torch context: the KV cell pool of kv.py and forward passes over it, with the interface of the llama.cpp
backend's KVContext (sequence ids, fork/truncate/free, exact accounting, `decode(items, on_logits)`), so the
llama.cpp verifier's path bookkeeping runs on it unchanged.

A forward pass packs every item's tokens into one flat batch with per-token positions and cells. Attention reads
each sequence's keys and values through its cell table: the queries of the sequences that append one token (decode)
go in one padded group, those of the sequences that append several (prefill) in another, each one masked SDPA call
over the gathered cells. On CUDA a pass of decode tokens alone replays a CUDA graph (graphs.py).

The kernel: torch's SDPA over gathered cells. It needs nothing beyond torch (flash-attn and FlashInfer build
against one torch and CUDA; the GPU machine has torch 2.11 with CUDA 13 and no network to fetch them), it records
into a CUDA graph at fixed shapes, and with pages of one token the gather is the page-table read a paged kernel
does itself. Not yet measured against FlexAttention or FlashInfer: the first CUDA run (2026-12-05, H200) found the
pass bound by its number of kernels, not by attention (docs/results.md, "The torch backend on the H200").
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from edgereason.backends.llamacpp.runtime import DecodeItem
from edgereason.backends.torch.kv import SEQ_SLOTS, CellTables, DeviceTables, KVFullError, KVStore, table_width
from edgereason.backends.torch.model import TorchModel, kv_dtype
from edgereason.errors import OutOfMemoryError

GPU_MEMORY_HINT = "lower --gpu-memory (or --kv-budget) or free GPU memory"


@dataclass
class AttentionGroup:
    """Queries of some sequences, padded to [E, n]: which flat tokens they are, the cells they read, the mask.

    Grouped-query attention without repeating keys: a KV head's G query heads go in as G query rows of that head
    (query t's heads at rows t * G .. t * G + G - 1), so SDPA sees [E, KVH, n * G, D] queries against [E, KVH, L, D]
    keys, and a masked kernel runs as one call."""

    query_rows: torch.Tensor  # [E, n] flat token index of each query (padding: any valid index)
    cells: torch.Tensor  # [E, L] cell ids, in position order (padding: the pad cell)
    bias: torch.Tensor  # [E, 1, n * G, L] added to the scores: 0 where key j is visible (j <= position), -inf else
    tokens: torch.Tensor | None  # [m] the flat tokens this group answers, in padded-layout order; None: all, in order
    padded_at: torch.Tensor | None  # [m] where each of them is in the [E * n] layout


def visibility_bias(visible: torch.Tensor, group: int, dtype: torch.dtype) -> torch.Tensor:
    """visible [E, n, L] bool -> the additive mask [E, 1, n * group, L] of `dtype` (each query row repeated for
    its G query heads)."""
    bias = torch.zeros(visible.shape, dtype=dtype, device=visible.device).masked_fill_(~visible, float("-inf"))
    return bias.repeat_interleave(group, dim=1)[:, None]


def attention_group(
    cells: torch.Tensor,
    queries: Sequence[Sequence[int]],
    positions: Sequence[Sequence[int]],
    group: int,
    dtype: torch.dtype,
) -> AttentionGroup:
    """cells [E, L]: sequence e's cell table after this pass's appends (from DeviceTables); queries[e]: its flat
    token indices; positions[e] their positions. Positions index the table (a table is in position order).
    group: query heads per KV head; dtype: the queries'."""
    n_seq, width = len(queries), max(len(q) for q in queries)
    rows = np.zeros((n_seq, width), dtype=np.int64)
    pos = np.zeros((n_seq, width), dtype=np.int64)  # a padding query sees key 0 only: no all-masked row
    valid = np.zeros((n_seq, width), dtype=bool)
    for e, (q, p) in enumerate(zip(queries, positions)):
        rows[e, : len(q)] = q
        pos[e, : len(p)] = p
        valid[e, : len(q)] = True
    device = cells.device
    at = lambda a: torch.from_numpy(a).to(device)  # noqa: E731
    visible = torch.arange(cells.shape[1], device=device)[None, None, :] <= at(pos)[:, :, None]
    return AttentionGroup(
        query_rows=at(rows),
        cells=cells,
        bias=visibility_bias(visible, group, dtype),
        tokens=at(rows[valid]),
        padded_at=at(np.flatnonzero(valid.ravel())),
    )


# Not cuDNN's attention: it builds an execution plan per shape, and an eager pass's shapes change from pass to pass
# (tables grow a token a step). The memory-efficient kernel takes the additive mask as it is.
SDPA_BACKENDS = [SDPBackend.EFFICIENT_ATTENTION, SDPBackend.FLASH_ATTENTION, SDPBackend.MATH]


def attend_groups(
    kv: KVStore,
    layer: int,
    write_cells: torch.Tensor,
    groups: Sequence[AttentionGroup],
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
) -> torch.Tensor:
    """Store this layer's new keys and values in their cells, then attend: q [T, H, D] -> [T, H * D]."""
    kv.write(layer, write_cells, k.to(kv.k.dtype), v.to(kv.v.dtype))
    n_tok, n_head, head_dim = q.shape
    n_kv = k.shape[1]
    group = n_head // n_kv
    out = None
    for g in groups:
        n_seq, width = g.query_rows.shape
        queries = q.reshape(n_seq, width, n_head, head_dim) if g.tokens is None else q[g.query_rows]  # [E, n, H, D]
        queries = queries.reshape(n_seq, width, n_kv, group, head_dim).transpose(1, 2)
        queries = queries.reshape(n_seq, n_kv, width * group, head_dim)
        keys = kv.k[layer][g.cells].to(q.dtype).transpose(1, 2)  # [E, KVH, L, D]
        values = kv.v[layer][g.cells].to(q.dtype).transpose(1, 2)
        with sdpa_kernel(SDPA_BACKENDS):
            o = F.scaled_dot_product_attention(queries, keys, values, attn_mask=g.bias)  # [E, KVH, n * G, D]
        o = o.reshape(n_seq, n_kv, width, group, head_dim).transpose(1, 2).reshape(n_seq * width, n_head * head_dim)
        if g.tokens is None:
            return o
        if out is None:
            out = q.new_empty(n_tok, n_head * head_dim)
        out[g.tokens] = o[g.padded_at]
    assert out is not None
    return out


class TorchContext:
    """Sequence ids, exact KV accounting and forward passes on one model's weights (see the module doc)."""

    def __init__(
        self,
        model: TorchModel,
        n_ctx: int,
        n_seq_max: int = SEQ_SLOTS,
        n_batch: int = 2048,
        columns: Sequence[int] | None = None,
        graphs: bool = True,
        layers: Sequence[int] = (),
    ) -> None:
        """columns: vocabulary ids whose logits `decode` hands on (the verifier reads a few), else whole rows.
        graphs: replay decode passes as CUDA graphs (on CUDA only; not with layers). layers: each requested row
        goes on with these layers' outputs at its token, layer by layer (a value head's features)."""
        self.model = model
        cfg = model.decoder.config
        self.device = model.device
        self.capacity = n_ctx
        self.n_batch = n_batch
        self.n_seq_max = n_seq_max
        self.tables = CellTables(n_ctx, n_seq_max)
        try:
            self.kv = KVStore(cfg.n_layer, n_ctx, cfg.n_head_kv, cfg.head_dim, self.device, kv_dtype(self.device))
        except torch.OutOfMemoryError:
            raise OutOfMemoryError(
                f"no room for {n_ctx} KV tokens of {model.path.name} on the GPU; {GPU_MEMORY_HINT}"
            ) from None
        self.table_cells = DeviceTables(n_seq_max, n_ctx, self.kv.pad_cell, self.device)
        self.columns = None if columns is None else torch.tensor(list(columns), dtype=torch.long, device=self.device)
        self.layers = list(layers)
        self.top_k = None  # the llama.cpp verifier reads these off a context: no device top-k, no llama.cpp capture
        self.capture = None
        self.graphs = None
        if graphs and not self.layers and self.device.type == "cuda":
            from edgereason.backends.torch.graphs import DecodeGraphs

            self.graphs = DecodeGraphs(self)

    # -- sequences: the accounting of kv.py --
    def can_alloc(self, n: int = 1) -> bool:
        return self.tables.can_alloc(n)

    def can_append(self, n_new_tokens: int) -> bool:
        return self.tables.can_append(n_new_tokens)

    def new_seq(self) -> int:
        return self.tables.new_seq()

    def fork(self, parent: int) -> int:
        child = self.tables.fork(parent)
        self.table_cells.fork(parent, child, self.tables.seq_len(parent))
        return child

    def truncate(self, seq: int, n_tokens: int) -> None:
        self.tables.truncate(seq, n_tokens)

    def free(self, seq: int) -> None:
        self.tables.free(seq)

    def seq_len(self, seq: int) -> int:
        return self.tables.seq_len(seq)

    def unique_tokens(self, seq: int) -> int:
        return self.tables.unique_tokens(seq)

    @property
    def used_tokens(self) -> int:
        return self.tables.used_tokens

    @property
    def live_seqs(self) -> int:
        return self.tables.live_seqs

    def check_integrity(self) -> None:
        """The accounting, and the device's copy of every live table (what attention reads) agrees with it."""
        self.tables.check_integrity()
        for seq in self.tables.live_ids():
            table = self.tables.table(seq)
            assert self.table_cells.cells[seq, : len(table)].tolist() == table, f"seq {seq}: device table drifted"

    # -- forward passes --
    def forward(
        self, items: Sequence[DecodeItem], columns: torch.Tensor | None = None
    ) -> tuple[list[object], torch.Tensor]:
        """Evaluate every item's tokens (n_batch tokens a pass) -> the tags of the requested rows and their
        logits on the device, float32 [R, n_vocab] (or [R, len(columns)]), in request order; then, with `layers`,
        their outputs there ([R, len(columns) + len(layers) * n_embd])."""
        total = sum(len(it.tokens) for it in items)
        if not self.tables.can_append(total):
            raise KVFullError(f"{total} new tokens do not fit: {self.used_tokens}/{self.capacity} KV cells in use")
        flat: list[tuple[int, int, object]] = []  # (seq, token, tag or _NO_ROW)
        for it in items:
            want = dict(it.outputs)
            flat += [(it.seq, tok, want.get(off, _NO_ROW)) for off, tok in enumerate(it.tokens)]
        tags: list[object] = []
        rows: list[torch.Tensor] = []
        for lo in range(0, len(flat), self.n_batch):
            window = flat[lo : lo + self.n_batch]
            wanted = [i for i, (_, _, tag) in enumerate(window) if tag is not _NO_ROW]
            tags += [window[i][2] for i in wanted]
            rows.append(self._pass(window, wanted, columns))
        width = (self.model.n_vocab if columns is None else len(columns)) + len(self.layers) * self.model.n_embd
        return tags, (torch.cat(rows) if rows else torch.empty(0, width, device=self.device))

    def decode(self, items: Sequence[DecodeItem], on_logits: Callable[[object, np.ndarray], None]) -> int:
        """KVContext's interface: on_logits(tag, row) for each requested row, a float32 numpy copy of the logits
        of `columns` (or the whole row), then of the `layers`' outputs."""
        tags, logits = self.forward(items, self.columns)
        for tag, row in zip(tags, logits.cpu().numpy()):
            on_logits(tag, row)
        return sum(len(it.tokens) for it in items)

    def _pass(
        self, window: list[tuple[int, int, object]], wanted: list[int], columns: torch.Tensor | None
    ) -> torch.Tensor:
        """One forward pass over `window` (at most n_batch tokens); the logits of its `wanted` rows. Cells taken
        for the window go back if the pass fails."""
        order: dict[int, list[int]] = {}  # seq -> its tokens' indices in the window, in order
        for i, (seq, _, _) in enumerate(window):
            order.setdefault(seq, []).append(i)
        before = {seq: self.tables.seq_len(seq) for seq in order}
        try:
            cells = np.empty(len(window), dtype=np.int64)
            positions = np.empty(len(window), dtype=np.int64)
            for seq, idx in order.items():
                cells[idx] = self.tables.append(seq, len(idx))
                positions[idx] = np.arange(before[seq], before[seq] + len(idx))
            at = lambda a: torch.as_tensor(np.asarray(a, dtype=np.int64)).to(self.device)  # noqa: E731
            self.table_cells.write(at([seq for seq, _, _ in window]), at(positions), at(cells))
            tokens = [tok for _, tok, _ in window]
            if self.graphs is not None and self.graphs.fits(order, columns):
                return self.graphs.run(order, tokens, positions, cells, wanted)
            return self._eager(order, tokens, positions, cells, wanted, columns)
        except BaseException as e:
            for seq, n in before.items():
                self.tables.truncate(seq, n)
            if isinstance(e, torch.OutOfMemoryError):
                raise OutOfMemoryError(
                    f"the GPU ran out of memory in a forward pass of {len(window)} tokens; {GPU_MEMORY_HINT}"
                ) from None
            raise

    def _eager(
        self,
        order: dict[int, list[int]],
        tokens: list[int],
        positions: np.ndarray,
        cells: np.ndarray,
        wanted: list[int],
        columns: torch.Tensor | None,
    ) -> torch.Tensor:
        device = self.device
        cfg = self.model.decoder.config
        groups = []
        for single in (True, False):  # decode rows in one group, prefill runs in another: little padding
            seqs = [s for s, idx in order.items() if (len(idx) == 1) == single]
            if seqs:
                width = table_width(max(self.tables.seq_len(s) for s in seqs))  # few shapes: as graphs'
                cells_of = self.table_cells.rows(torch.tensor(seqs, device=device), width)
                groups.append(
                    attention_group(
                        cells_of,
                        [order[s] for s in seqs],
                        [positions[order[s]] for s in seqs],
                        cfg.n_head // cfg.n_head_kv,
                        self.model.decoder.dtype,
                    )
                )
        write = torch.from_numpy(cells).to(device)

        def attend(layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
            return attend_groups(self.kv, layer, write, groups, q, k, v)

        rows = torch.tensor(wanted, device=device, dtype=torch.long)
        taps: dict[int, torch.Tensor] = {}

        def tap(layer: int, x: torch.Tensor) -> None:
            if layer in self.layers:
                taps[layer] = x[rows]

        with torch.no_grad():
            hidden = self.model.decoder.hidden(
                torch.tensor(tokens, device=device),
                torch.from_numpy(positions).to(device),
                attend,
                tap if self.layers else None,
            )
            logits = self.model.decoder.logits(hidden[rows], columns)
        return torch.cat([logits, *(taps[il].float() for il in self.layers)], dim=1) if self.layers else logits

    def close(self) -> None:
        self.graphs = None
        self.kv = None  # type: ignore[assignment]


_NO_ROW = object()
