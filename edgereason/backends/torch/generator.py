"""The Generator protocol on torch: one forward pass per engine step over the torch context, with
sampling on the device (device_draws.py; in the decode graph where the pass replays one); only the
drawn ids come back to the host."""

from __future__ import annotations

from collections.abc import Sequence

from edgereason.backends.context_roles import ContextGenerator, DecodeItem
from edgereason.backends.torch.kv import SEQ_SLOTS
from edgereason.backends.torch.model import TorchModel
from edgereason.backends.torch.runtime import TorchContext
from edgereason.config import SamplingParams
from edgereason.protocols import BatchEntry
from edgereason.util.startup import first_call


class TorchGenerator(ContextGenerator):
    def __init__(
        self, model: TorchModel, kv_tokens: int, n_seq_max: int = SEQ_SLOTS, graphs: bool = True
    ) -> None:
        self.model = model
        self.name = model.name
        self.ctx = TorchContext(model, kv_tokens, n_seq_max=n_seq_max, graphs=graphs)
        self.eos_ids = model.eog_ids

    # -- the forward pass --
    @first_call("first_pass")
    def step(
        self,
        batch: Sequence[BatchEntry],
        samples: Sequence[int],
        sampling: SamplingParams | Sequence[SamplingParams],
    ) -> list[list[int]]:
        """sampling: one setting for all entries or one per entry. Each entry draws from its own
        seeded stream."""
        params = [sampling] * len(batch) if isinstance(sampling, SamplingParams) else list(sampling)
        items = [
            DecodeItem(e.seq, e.tokens, [(len(e.tokens) - 1, i)] if samples[i] > 0 else [])
            for i, e in enumerate(batch)
        ]
        # the requested rows, in request order
        wanted = [i for i in range(len(batch)) if samples[i] > 0]
        tags, draws = self.ctx.forward_draw(
            items, [samples[i] for i in wanted], [params[i] for i in wanted]
        )
        out: list[list[int]] = [[] for _ in batch]
        for i, tokens in zip(tags, draws):
            out[i] = tokens  # type: ignore[index]
        return out
