"""The Generator protocol on torch: one forward pass per engine step over the torch context, then sampling on the
device (sampling.py); only the drawn ids come back to the host."""

from __future__ import annotations

from collections.abc import Sequence

from edgereason.backends.context_roles import ContextGenerator
from edgereason.backends.llamacpp.runtime import DecodeItem
from edgereason.backends.torch.kv import SEQ_SLOTS
from edgereason.backends.torch.model import TorchModel
from edgereason.backends.torch.runtime import TorchContext
from edgereason.backends.torch.sampling import draw_rows
from edgereason.config import SamplingParams
from edgereason.protocols import BatchEntry


class TorchGenerator(ContextGenerator):
    def __init__(self, model: TorchModel, kv_tokens: int, n_seq_max: int = SEQ_SLOTS, graphs: bool = True) -> None:
        self.model = model
        self.name = model.name
        self.ctx = TorchContext(model, kv_tokens, n_seq_max=n_seq_max, graphs=graphs)
        self.eos_ids = model.eog_ids

    # -- the forward pass --
    def step(
        self, batch: Sequence[BatchEntry], samples: Sequence[int], sampling: SamplingParams | Sequence[SamplingParams]
    ) -> list[list[int]]:
        """sampling: one setting for all entries or one per entry. Each entry draws from its own seeded stream."""
        params = [sampling] * len(batch) if isinstance(sampling, SamplingParams) else list(sampling)
        items = [
            DecodeItem(e.seq, e.tokens, [(len(e.tokens) - 1, i)] if samples[i] > 0 else []) for i, e in enumerate(batch)
        ]
        tags, logits = self.ctx.forward(items)
        out: list[list[int]] = [[] for _ in batch]
        entries: list[int] = tags  # type: ignore[assignment]
        draws = draw_rows(logits, [samples[i] for i in entries], [params[i] for i in entries])
        for i, tokens in zip(entries, draws):
            out[i] = tokens
        return out
