"""The contexts' interface and the roles over it. `Context` is what llama.cpp's KVContext and
torch's TorchContext both keep: sequence ids (new_seq, fork, truncate, free), exact KV accounting
and one forward pass over DecodeItems (`decode`); `ContextModel` what the roles read off the model
under it. Over them, apart from the forward pass: the protocols' KV-memory properties
(ContextKVMemory: a generator's or a verifier's), and a Generator's text, sequence and memory
methods (ContextGenerator; each backend's generator adds `step`). path_verifier.py's bookkeeping
runs on the same interface."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple, Protocol, runtime_checkable

import numpy as np

from edgereason.backends.vocabulary import Tokenizer
from edgereason.protocols import SeqId


class DecodeItem(NamedTuple):
    """One sequence's part of a forward pass: the tokens it appends and the rows that come back."""

    seq: int
    tokens: Sequence[int]
    # (offset into tokens, tag): rows whose next-token logits are wanted
    outputs: Sequence[tuple[int, object]]


# (tag, row): a requested row's logits (and what the context hands on after them), valid only
# inside the call
OnRow = Callable[[object, np.ndarray], None]


@runtime_checkable
class ContextModel(Tokenizer, Protocol):
    """A context's model as the roles read it: its tokenizer (vocabulary.py's conventions), its
    trained context and the bytes a token takes in its KV cache."""

    n_ctx_train: int
    kv_bytes_per_token: int


@runtime_checkable
class Context(Protocol):
    """One model's KV context: sequence ids handed out up to `n_seq_max` at once, `capacity` KV
    cells counted exactly (a fork shares its parent's cells; each appended token takes one), and
    forward passes of at most `n_batch` tokens."""

    model: ContextModel
    capacity: int
    n_seq_max: int
    n_batch: int

    @property
    def used_tokens(self) -> int: ...
    @property
    def live_seqs(self) -> int: ...
    def can_alloc(self, n: int = 1) -> bool: ...
    def can_append(self, n_new_tokens: int) -> bool: ...
    def new_seq(self) -> SeqId: ...
    def fork(self, parent: SeqId) -> SeqId: ...
    def truncate(self, seq: SeqId, n_tokens: int) -> None: ...
    def free(self, seq: SeqId) -> None: ...
    def seq_len(self, seq: SeqId) -> int: ...
    def unique_tokens(self, seq: SeqId) -> int: ...
    def decode(self, items: Sequence[DecodeItem], on_row: OnRow) -> int:
        """Evaluate every item's tokens, on_row(tag, row) for each requested row; returns the
        tokens evaluated."""
        ...

    def check_integrity(self) -> None: ...
    def close(self) -> None: ...


class ContextKVMemory:
    """The protocols' KV-memory properties, for a role that owns `self.ctx` (a generator or a
    verifier)."""

    ctx: Context

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
    model: ContextModel

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
