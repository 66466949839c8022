"""The Generator protocol on llama.cpp: one llama_decode per engine step, sampling next to the
logits.

With device_top_k > 0 the backend cuts each row to its k best tokens inside the forward pass
(device_sampling.py) and the host draws over those k; otherwise the host draws over the whole
row."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from edgereason.backends.context_roles import ContextGenerator, DecodeItem
from edgereason.backends.host_sampling import by_id, sample, sample_rows
from edgereason.backends.llamacpp.device_sampling import Candidates
from edgereason.backends.llamacpp.model import LlamaModel
from edgereason.backends.llamacpp.runtime import SEQ_SLOTS, KVContext
from edgereason.config import SamplingParams
from edgereason.protocols import BatchEntry
from edgereason.util.startup import first_call


class LlamaGenerator(ContextGenerator):
    def __init__(
        self,
        model: LlamaModel,
        kv_tokens: int,
        n_threads: int | None = None,
        n_seq_max: int = SEQ_SLOTS,
        flash_attn: bool = True,
        device_top_k: int = 0,
    ) -> None:
        self.model = model
        self.name = model.path.stem
        self.device_top_k = device_top_k
        self.ctx = KVContext(
            model,
            n_ctx=kv_tokens,
            n_seq_max=n_seq_max,
            n_threads=n_threads,
            flash_attn=flash_attn,
            top_k=device_top_k,
        )
        self.eos_ids = model.eog_ids

    # -- the forward pass --
    @first_call("first_pass")
    def step(
        self,
        batch: Sequence[BatchEntry],
        samples: Sequence[int],
        sampling: SamplingParams | Sequence[SamplingParams],
    ) -> list[list[int]]:
        """sampling: one setting for all entries or one per entry (concurrent requests may
        differ)."""
        params = [sampling] * len(batch) if isinstance(sampling, SamplingParams) else list(sampling)
        out: list[list[int]] = [[] for _ in batch]
        items = [
            DecodeItem(e.seq, e.tokens, [(len(e.tokens) - 1, i)] if samples[i] > 0 else [])
            for i, e in enumerate(batch)
        ]
        rows: list[Candidates] = []
        entries: list[int] = []

        def on_logits(i: object, row: np.ndarray | Candidates) -> None:
            if isinstance(row, Candidates):  # drawn below, all rows of the pass at once
                entries.append(i)  # type: ignore[arg-type]
                rows.append(row)
            # a whole row is valid only here; each row alone (a batch of 152k-wide rows misses the
            # cache)
            else:
                out[i] = sample(row, samples[i], params[i])  # type: ignore[index]

        self.ctx.decode(items, on_logits)
        if rows:
            # each entry draws from its own stream, seeded by the caller: draws do not depend on the
            # batch
            ids, logits = by_id(np.stack([r.ids for r in rows]), np.stack([r.logits for r in rows]))
            draws = sample_rows(
                ids, logits, [samples[i] for i in entries], [params[i] for i in entries]
            )
            for i, tokens in zip(entries, draws):
                out[i] = tokens
        return out
