"""The roles over a context, apart from the forward pass: the protocols' KV-memory properties
(ContextKVMemory: a generator's or a verifier's), and a Generator's text, sequence and memory
methods over a model (tokenizer, chat template, trained context) and its context (ContextGenerator;
each backend's generator adds `step`). llama.cpp's KVContext and torch's TorchContext keep one
interface: new_seq, fork, truncate, free, seq_len, unique_tokens, can_append, can_alloc, capacity,
used_tokens, live_seqs, n_seq_max, n_batch, check_integrity, close, `model`, and `decode(items,
on_row)` over DecodeItems (defined here)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from edgereason.protocols import SeqId


class DecodeItem(NamedTuple):
    """One sequence's part of a forward pass: the tokens it appends and the rows that come back."""

    seq: int
    tokens: Sequence[int]
    # (offset into tokens, tag): rows whose next-token logits are wanted
    outputs: Sequence[tuple[int, object]]


class ContextKVMemory:
    """The protocols' KV-memory properties, for a role that owns `self.ctx` (a generator or a
    verifier)."""

    ctx: Any  # the context (see the module doc)

    @property
    def kv_capacity_tokens(self) -> int:
        return self.ctx.capacity

    @property
    def kv_used_tokens(self) -> int:
        return self.ctx.used_tokens

    @property
    def kv_bytes_per_token(self) -> int:
        return self.ctx.model.kv_bytes_per_token


class ContextGenerator(ContextKVMemory):
    model: Any  # tokenize, detokenize, token_piece, apply_chat_template, add_bos, n_ctx_train

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

    def close(self) -> None:
        self.ctx.close()
