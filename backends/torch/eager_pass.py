"""The passes no CUDA graph takes (on a CPU, or shapes no graph was captured for): the layers run
op by op, or compiled (fused.py), over masked attention groups of the gathered cells; and the
read-out of the requested rows' logits (and layer outputs) that every pass ends with. A part of
TorchContext (runtime.py), kept apart from its sequence accounting and batching."""

from __future__ import annotations

import numpy as np
import torch

from edgereason.backends.torch import fused
from edgereason.backends.torch.attention import AttentionGroup, attend_groups, attention_group
from edgereason.backends.torch.kv import table_width


class EagerPasses:
    """TorchContext's eager pass and read-out; they read its model, KV store, tables and layers."""

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
        groups = [self._group(order, positions, single) for single in (True, False)]
        attend = attend_groups(
            self.kv, torch.from_numpy(cells).to(device), [g for g in groups if g]
        )
        rows = torch.tensor(wanted, device=device, dtype=torch.long)
        taps: dict[int, torch.Tensor] = {}

        def tap(layer: int, x: torch.Tensor) -> None:
            if layer in self.layers:
                taps[layer] = x[rows]

        def run() -> torch.Tensor:  # fused.enabled asked at each try: a failed compile turns it off
            ids, at = torch.tensor(tokens, device=device), torch.from_numpy(positions).to(device)
            return self.model.decoder.hidden(
                ids, at, attend, tap if self.layers else None, fused.enabled()
            )

        with torch.no_grad():
            hidden = fused.first_run(run)
        return self._read_out(hidden[rows], [taps[il] for il in self.layers], columns)

    def _group(
        self, order: dict[int, list[int]], positions: np.ndarray, single: bool
    ) -> AttentionGroup | None:
        """The attention group of the sequences that append one token (single) or several: decode
        rows in one, prefill runs in another, so little is padded; None where there are none."""
        seqs = [s for s, idx in order.items() if (len(idx) == 1) == single]
        if not seqs:
            return None
        width = table_width(max(self.tables.seq_len(s) for s in seqs))  # few shapes: as graphs'
        cfg = self.model.decoder.config
        return attention_group(
            self.table_cells.rows(torch.tensor(seqs, device=self.device), width),
            [order[s] for s in seqs],
            [positions[order[s]] for s in seqs],
            cfg.n_head // cfg.n_head_kv,
            self.model.decoder.dtype,
        )

    def _read_out(
        self, hidden: torch.Tensor, taps: list[torch.Tensor], columns: torch.Tensor | None
    ) -> torch.Tensor:
        """The requested rows' hidden states [R, n_embd] (and the `layers`' outputs there) -> their
        logits of `columns` (or whole rows), then the layers' outputs: [R, width] float32."""
        with torch.no_grad():
            logits = self.model.decoder.logits(hidden, columns)
        return torch.cat([logits, *(t.float() for t in taps)], dim=1) if self.layers else logits
