"""The Generator protocol on torch: one forward pass per engine step over the torch context, then sampling on the
device (sampling.py); only the drawn ids come back to the host."""

from __future__ import annotations

from collections.abc import Sequence

from edgereason.backends.llamacpp.runtime import DecodeItem
from edgereason.backends.torch.kv import SEQ_SLOTS
from edgereason.backends.torch.model import TorchModel
from edgereason.backends.torch.runtime import TorchContext
from edgereason.backends.torch.sampling import draw_rows
from edgereason.config import SamplingParams
from edgereason.protocols import BatchEntry, SeqId


class TorchGenerator:
    def __init__(self, model: TorchModel, kv_tokens: int, n_seq_max: int = SEQ_SLOTS, graphs: bool = True) -> None:
        self.model = model
        self.name = model.path.stem
        self.ctx = TorchContext(model, kv_tokens, n_seq_max=n_seq_max, graphs=graphs)
        self.eos_ids = model.eog_ids

    # -- KV memory --
    @property
    def kv_capacity_tokens(self) -> int:
        return self.ctx.capacity

    @property
    def kv_used_tokens(self) -> int:
        return self.ctx.used_tokens

    @property
    def kv_bytes_per_token(self) -> int:
        return self.model.kv_bytes_per_token

    # -- text --
    def tokenize(self, text: str, special: bool = True) -> list[int]:
        return self.model.tokenize(text, add_bos=self.model.add_bos, special=special)

    def detokenize(self, ids: Sequence[int]) -> str:
        return self.model.detokenize(ids)

    def token_piece(self, token: int) -> bytes:
        return self.model.token_piece(token)

    def apply_chat_template(self, messages: list[dict[str, str]]) -> str:
        return self.model.apply_chat_template(messages, add_assistant=True)

    # -- sequences --
    def new_seq(self) -> SeqId:
        return self.ctx.new_seq()

    def fork(self, parent: SeqId) -> SeqId:
        return self.ctx.fork(parent)

    def free(self, seq: SeqId) -> None:
        self.ctx.free(seq)

    def truncate(self, seq: SeqId, n_tokens: int) -> None:
        self.ctx.truncate(seq, n_tokens)

    def seq_len(self, seq: SeqId) -> int:
        return self.ctx.seq_len(seq)

    def unique_tokens(self, seq: SeqId) -> int:
        return self.ctx.unique_tokens(seq)

    def can_append(self, n_new_tokens: int) -> bool:
        return self.ctx.can_append(n_new_tokens)

    def free_seq_slots(self) -> int:
        return self.ctx.n_seq_max - self.ctx.live_seqs

    @property
    def max_batch_tokens(self) -> int:
        return self.ctx.n_batch

    @property
    def context_length(self) -> int:
        return self.model.n_ctx_train

    def live_seqs(self) -> int:
        return self.ctx.live_seqs

    def check_integrity(self) -> None:
        self.ctx.check_integrity()

    # -- the forward pass --
    def step(self, batch: Sequence[BatchEntry], samples: Sequence[int],
             sampling: SamplingParams | Sequence[SamplingParams]) -> list[list[int]]:
        """sampling: one setting for all entries or one per entry. Each entry draws from its own seeded stream."""
        params = [sampling] * len(batch) if isinstance(sampling, SamplingParams) else list(sampling)
        items = [DecodeItem(e.seq, e.tokens, [(len(e.tokens) - 1, i)] if samples[i] > 0 else [])
                 for i, e in enumerate(batch)]
        tags, logits = self.ctx.forward(items)
        out: list[list[int]] = [[] for _ in batch]
        entries: list[int] = tags  # type: ignore[assignment]
        draws = draw_rows(logits, [samples[i] for i in entries], [params[i] for i in entries])
        for i, tokens in zip(entries, draws):
            out[i] = tokens
        return out

    def close(self) -> None:
        self.ctx.close()
