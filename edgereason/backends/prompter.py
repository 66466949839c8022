"""A generator's prompt rules read off a loaded model alone, no KV cache made: memory-profile counts
the sample problems' prompt tokens with it (protocols.ProfiledGenerator.prompter) on any backend
whose model keeps vocabulary.py's Tokenizer conventions."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from edgereason.backends.vocabulary import Tokenizer


class PromptModel(Tokenizer, Protocol):
    """A loaded model as a prompter reads it: its tokenizer, its file and its trained context."""

    path: Path
    n_ctx_train: int


@dataclass(frozen=True)
class ModelPrompter:
    """What engine.prompt.prompt_ids reads of a generator, from the loaded model. Its KV capacity is
    its trained context, so that only the context is checked there (the sample's KV is not set by
    --kv-budget, which prompt_ids would advise)."""

    model: PromptModel

    @property
    def name(self) -> str:
        return self.model.path.stem

    @property
    def context_length(self) -> int:
        return self.model.n_ctx_train

    @property
    def kv_capacity_tokens(self) -> int:
        return self.model.n_ctx_train

    def tokenize(self, text: str, special: bool = True) -> list[int]:
        return self.model.tokenize(text, add_bos=self.model.add_bos, special=special)

    def apply_chat_template(self, messages: list[dict[str, str]]) -> str:
        return self.model.apply_chat_template(messages, add_assistant=True)
