"""A torch context: the KV cell pool of kv.py and forward passes over it, keeping the contexts'
interface (context_roles.Context: sequence ids, fork/truncate/free, exact accounting,
`decode(items, on_row)`), so the verifiers' path bookkeeping (path_verifier.py) runs on it
unchanged.

A forward pass packs every item's tokens into windows of n_batch tokens; each window is laid out
(pass_layout.py: its rows take their sequences' next cells and positions) and run by the first of
the context's runners that takes it: on CUDA a pass of decode tokens alone replays a decode graph
(decode_graphs.py; the generator's draws recorded in it), one that appends several tokens to its
sequences (a prefill, a PRM call) a prefill graph (prefill_graphs.py); any other runs eagerly
(eager_pass.py)."""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterator, Sequence
from itertools import repeat

import torch

from edgereason.backends.context_roles import DecodeItem, OnRow
from edgereason.backends.torch.decode_graphs import DecodeGraphs
from edgereason.backends.torch.device_draws import draw_rows
from edgereason.backends.torch.eager_pass import EagerPass
from edgereason.backends.torch.kv import (
    GPU_MEMORY_HINT,
    SEQ_SLOTS,
    CellTables,
    DeviceTables,
    KVCache,
    KVFullError,
    KVStore,
)
from edgereason.backends.torch.model import TorchModel, kv_dtype
from edgereason.backends.torch.pass_layout import Draws, PassLayout, lay_out
from edgereason.backends.torch.prefill_graphs import PrefillGraphs
from edgereason.config import SamplingParams
from edgereason.errors import OutOfMemoryError


class TorchContext:
    """Sequence ids, exact KV accounting and forward passes on one model's weights (see the module
    doc)."""

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
        """columns: vocabulary ids whose logits `decode` hands on (the verifier reads a few), else
        whole rows. graphs: replay passes as CUDA graphs (on CUDA only; decode graphs for whole rows
        only). layers: each requested row goes on with these layers' outputs at its token, layer by
        layer (a value head's features)."""
        self.model = model
        self.device = model.device
        self.capacity = n_ctx
        self.n_batch = n_batch
        self.n_seq_max = n_seq_max
        self.cache = _open_cache(model, n_ctx, n_seq_max)
        self.columns = (
            None
            if columns is None
            else torch.tensor(list(columns), dtype=torch.long, device=self.device)
        )
        self.layers = list(layers)
        self.eager = EagerPass(model, self.cache, self.layers)
        self.decode_graphs = None
        self.prefill_graphs = None
        if graphs and self.device.type == "cuda":
            whole_rows = not self.layers and columns is None
            self.decode_graphs = DecodeGraphs(model, self.cache) if whole_rows else None
            self.prefill_graphs = PrefillGraphs(model, self.cache, self.layers)

    # -- sequences: the accounting of kv.py --
    def can_alloc(self, n: int = 1) -> bool:
        return self.cache.tables.can_alloc(n)

    def can_append(self, n_new_tokens: int) -> bool:
        return self.cache.tables.can_append(n_new_tokens)

    def new_seq(self) -> int:
        return self.cache.tables.new_seq()

    def fork(self, parent: int) -> int:
        return self.cache.fork(parent)

    def truncate(self, seq: int, n_tokens: int) -> None:
        self.cache.tables.truncate(seq, n_tokens)

    def free(self, seq: int) -> None:
        self.cache.tables.free(seq)

    def seq_len(self, seq: int) -> int:
        return self.cache.tables.seq_len(seq)

    def unique_tokens(self, seq: int) -> int:
        return self.cache.tables.unique_tokens(seq)

    @property
    def used_tokens(self) -> int:
        return self.cache.tables.used_tokens

    @property
    def live_seqs(self) -> int:
        return self.cache.tables.live_seqs

    def check_integrity(self) -> None:
        self.cache.check_integrity()

    # -- forward passes --
    def forward(
        self, items: Sequence[DecodeItem], columns: torch.Tensor | None = None
    ) -> tuple[list[object], torch.Tensor]:
        """Evaluate every item's tokens (n_batch tokens a pass) -> the tags of the requested rows
        and their logits on the device, float32 [R, n_vocab] (or [R, len(columns)]), in request
        order; then, with `layers`, their outputs there ([R, len(columns) + len(layers) *
        n_embd])."""
        tags, rows = [], []
        for window, wanted in self._windows(items):
            tags += [window[i][2] for i in wanted]
            rows.append(self._pass(window, wanted, columns))
        width = (self.model.n_vocab if columns is None else len(columns)) + len(
            self.layers
        ) * self.model.n_embd
        return tags, (torch.cat(rows) if rows else torch.empty(0, width, device=self.device))

    def forward_draw(
        self, items: Sequence[DecodeItem], draws: Sequence[int], params: Sequence[SamplingParams]
    ) -> tuple[list[object], list[list[int]]]:
        """Evaluate every item's tokens -> the tags of the requested rows and, for the k-th of them
        (request order), draws[k] tokens drawn on the device with params[k] (device_draws.py); only
        the ids come back. A pass the decode graphs take draws each row's first token in the
        graph."""
        tags: list[object] = []
        drawn: list[list[int]] = []
        for window, wanted in self._windows(items):
            at = slice(len(tags), len(tags) + len(wanted))
            tags += [window[i][2] for i in wanted]
            drawn += self._pass(window, wanted, None, Draws(list(draws[at]), list(params[at])))
        return tags, drawn

    def _windows(
        self, items: Sequence[DecodeItem]
    ) -> Iterator[tuple[list[tuple[int, int, object]], list[int]]]:
        """The items' tokens as (seq, token, tag or _NO_ROW), n_batch a window, with the requested
        rows' indices."""
        total = sum(len(it.tokens) for it in items)
        if not self.cache.tables.can_append(total):
            raise KVFullError(
                f"{total} new tokens do not fit: {self.used_tokens}/{self.capacity} KV cells in use"
            )
        flat: list[tuple[int, int, object]] = []
        tagged: list[int] = []  # the flat indices of the requested rows
        for it in items:
            at = len(flat)
            if len(it.tokens) == 1:  # a decode token, most items: no zip, no dict
                flat.append((it.seq, it.tokens[0], it.outputs[-1][1] if it.outputs else _NO_ROW))
                tagged += [at] if it.outputs else []
                continue
            flat += zip(repeat(it.seq), it.tokens, repeat(_NO_ROW))
            for off, tag in dict(it.outputs).items():  # one row an offset, its last tag
                flat[at + off] = (it.seq, it.tokens[off], tag)
                tagged.append(at + off)
        tagged.sort()
        for lo in range(0, len(flat), self.n_batch):
            hi = lo + self.n_batch
            yield (
                flat[lo:hi],
                [i - lo for i in tagged[bisect_left(tagged, lo) : bisect_left(tagged, hi)]],
            )

    def decode(self, items: Sequence[DecodeItem], on_row: OnRow) -> int:
        """The contexts' interface: on_row(tag, row) for each requested row, a float32 numpy copy
        of the logits of `columns` (or the whole row), then of the `layers`' outputs."""
        tags, logits = self.forward(items, self.columns)
        for tag, row in zip(tags, logits.cpu().numpy()):
            on_row(tag, row)
        return sum(len(it.tokens) for it in items)

    def _pass(
        self,
        window: list[tuple[int, int, object]],
        wanted: list[int],
        columns: torch.Tensor | None,
        draws: Draws | None = None,
    ) -> torch.Tensor | list[list[int]]:
        """One forward pass over `window` (at most n_batch tokens): the logits of its `wanted` rows
        or, given `draws`, their drawn ids. Cells taken for the window go back if the pass
        fails."""
        layout = lay_out(window, wanted, draws, self.cache.tables)  # takes nothing where it fails
        try:
            return self._run(layout, columns)
        except BaseException as e:
            self.cache.tables.cut_back(layout.order, layout.positions)
            if isinstance(e, torch.OutOfMemoryError):
                raise OutOfMemoryError(
                    f"the GPU ran out of memory in a forward pass of {len(window)} tokens; "
                    f"{GPU_MEMORY_HINT}"
                ) from None
            raise

    def _run(
        self, layout: PassLayout, columns: torch.Tensor | None
    ) -> torch.Tensor | list[list[int]]:
        """The pass by the first runner that takes it: the decode graphs (they write the device
        tables themselves), the prefill graphs, else the eager pass; the draws from its logits."""
        if self.decode_graphs is not None and self.decode_graphs.fits(layout, columns):
            return self.decode_graphs.run(layout)
        at = lambda a: torch.from_numpy(a).to(self.device)  # noqa: E731
        self.cache.device_tables.write(
            at(layout.row_seqs()), at(layout.positions), at(layout.cells)
        )
        logits = None
        if self.prefill_graphs is not None and self.prefill_graphs.fits(layout):
            replayed = self.prefill_graphs.run(layout)
            if replayed is not None:
                logits = self.eager.read_out(*replayed, columns)
        if logits is None:
            logits = self.eager.run(layout, columns)
        draws = layout.draws
        return logits if draws is None else draw_rows(logits, draws.counts, draws.params)

    def close(self) -> None:
        self.decode_graphs = None
        self.cache.store.free()


_NO_ROW = object()


def _open_cache(model: TorchModel, n_ctx: int, n_seq_max: int) -> KVCache:
    """The KV cache of n_ctx cells and n_seq_max sequences on the model's device; one
    OutOfMemoryError line where it does not fit."""
    cfg, device = model.decoder.config, model.device
    try:
        store = KVStore(cfg.n_layer, n_ctx, cfg.n_head_kv, cfg.head_dim, device, kv_dtype(device))
    except torch.OutOfMemoryError:
        raise OutOfMemoryError(
            f"no room for {n_ctx} KV tokens of {model.path.name} on the GPU; {GPU_MEMORY_HINT}"
        ) from None
    tables = DeviceTables(n_seq_max, n_ctx, store.pad_cell, device)
    return KVCache(CellTables(n_ctx, n_seq_max), store, tables)
