"""What every backend's tokenizer keeps to: llama.cpp's conventions, which the roles rely on
(`Tokenizer`: llama_vocab.LlamaVocab reads a GGUF's through llama.cpp, the torch backend's
HFTokenizer a Hugging Face folder's through transformers), and the end-of-turn tokens.

- special=False reads control-token text ("<|im_end|>") as text, and a literal span
  (edgereason.prompts.literal: the problem, a step) is text whatever `special` says: model and user
  text never become control tokens.
- add_bos prepends the BOS token once (never after a chat template that wrote its own).
- A token's piece is its bytes (a byte-level token may hold part of a UTF-8 character); a control
  token's piece is empty, as llama.cpp renders it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol

# the end-of-turn tokens llama.cpp ends generation at, besides a Hugging Face folder's EOS ids
END_OF_TURN = (
    "<|im_end|>",
    "<|eot_id|>",
    "<|eom_id|>",
    "<|endoftext|>",
    "<|end|>",
    "<end_of_turn>",
    "<EOT>",
)


class Tokenizer(Protocol):
    add_bos: bool
    eog_ids: frozenset[int]

    def tokenize(self, text: str, add_bos: bool = False, special: bool = True) -> list[int]: ...
    def token_piece(self, token: int) -> bytes: ...
    def detokenize(self, ids: Iterable[int]) -> str: ...
    def apply_chat_template(
        self,
        messages: Sequence[dict[str, str]],
        add_assistant: bool = True,
    ) -> str: ...
