"""The passes no CUDA graph takes (on a CPU, or shapes no graph was captured for): the layers run op
by op, or compiled (compiled_layers.py), over masked attention groups of the gathered cells; and the
read-out of the requested rows' logits (and layer outputs) that every pass ends with. One of
TorchContext's runners (runtime.py), beside the decode and prefill graphs."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from edgereason.backends.torch import compiled_layers
from edgereason.backends.torch.attention import AttentionGroup, attend_groups, attention_group
from edgereason.backends.torch.kv import KVCache, table_width
from edgereason.backends.torch.model import TorchModel
from edgereason.backends.torch.pass_layout import PassLayout


class EagerPass:
    """Passes run as they come, on one model's weights over one context's KV cache. layers: each
    requested row goes on with these layers' outputs at its token."""

    def __init__(self, model: TorchModel, cache: KVCache, layers: Sequence[int]) -> None:
        self.model = model
        self.cache = cache
        self.layers = list(layers)

    def run(self, layout: PassLayout, columns: torch.Tensor | None) -> torch.Tensor:
        """The wanted rows' logits of `columns` (or whole rows), then the layers' outputs there
        (read_out)."""
        device = self.model.device
        groups = [self._group(layout, single) for single in (True, False)]
        attend = attend_groups(
            self.cache.store, torch.from_numpy(layout.cells).to(device), [g for g in groups if g]
        )
        rows = torch.tensor(layout.wanted, device=device, dtype=torch.long)
        taps: dict[int, torch.Tensor] = {}

        def tap(layer: int, x: torch.Tensor) -> None:
            if layer in self.layers:
                taps[layer] = x[rows]

        def run() -> (
            torch.Tensor
        ):  # compiled_layers.enabled asked at each try: a failed compile turns it off
            ids = torch.tensor(layout.tokens, device=device)
            at = torch.from_numpy(layout.positions).to(device)
            return self.model.decoder.hidden(
                ids, at, attend, tap if self.layers else None, compiled_layers.enabled()
            )

        with torch.no_grad():
            hidden = compiled_layers.first_run(run)
        return self.read_out(hidden[rows], [taps[il] for il in self.layers], columns)

    def _group(self, layout: PassLayout, single: bool) -> AttentionGroup | None:
        """The attention group of the sequences that append one token (single) or several: decode
        rows in one, prefill runs in another, so little is padded; None where there are none."""
        order = layout.order
        seqs = [s for s, idx in order.items() if (len(idx) == 1) == single]
        if not seqs:
            return None
        queries = [order[s] for s in seqs]
        # the longest table after the appends (a table's last position is its length - 1)
        if single:  # one index array for all rows, not one a sequence
            positions = layout.positions[[rows[0] for rows in queries]][:, None]
            longest = int(positions.max()) + 1
        else:
            positions = [layout.positions[rows] for rows in queries]
            longest = max(int(p[-1]) for p in positions) + 1
        width = table_width(longest)  # few shapes: as the graphs'
        decoder = self.model.decoder
        return attention_group(
            self.cache.device_tables.rows(torch.tensor(seqs, device=self.model.device), width),
            queries,
            positions,
            decoder.config.n_head // decoder.config.n_head_kv,
            decoder.dtype,
        )

    def read_out(
        self, hidden: torch.Tensor, taps: list[torch.Tensor], columns: torch.Tensor | None
    ) -> torch.Tensor:
        """The requested rows' hidden states [R, n_embd] (and the `layers`' outputs there) -> their
        logits of `columns` (or whole rows), then the layers' outputs: [R, width] float32."""
        with torch.no_grad():
            logits = self.model.decoder.logits(hidden, columns)
        return torch.cat([logits, *(t.float() for t in taps)], dim=1) if self.layers else logits
